internal import CLinux
import Glibc

/// inotify watches of the folders above some folders, each for the names in it that lead down to
/// one of them (``FolderGuard/ancestors(of:)``): a watched folder arrives anew when any folder
/// on its path is made, moved in or swapped in. Shared by the folder guard and the exec shield's
/// folder watcher, each with an inotify instance of its own.
struct AncestorWatches {
    /// Per watch descriptor: the folder watched and the names in it that count.
    private var entries: [Int32: (path: String, names: Set<String>)] = [:]

    /// Watches exactly the folders of `wanted` (a folder and the names in it that count) on the
    /// inotify instance `fd`. `others`: descriptors the instance gives its other watches (inotify
    /// gives one path one descriptor): never taken for an ancestor's, never removed here; the
    /// caller leaves out of `wanted` any folder it watches itself.
    mutating func update(_ wanted: [String: Set<String>], fd: Int32, others: Set<Int32> = []) {
        for (descriptor, entry) in entries where wanted[entry.path] == nil || others.contains(descriptor) {
            if !others.contains(descriptor) { inotify_rm_watch(fd, descriptor) }
            entries[descriptor] = nil
        }
        for (folder, names) in wanted {
            let descriptor = inotify_add_watch(fd, folder, UInt32(IN_CREATE | IN_MOVED_TO | IN_ONLYDIR))
            guard descriptor >= 0 else { continue }
            // A moved or remade folder gets a new descriptor: the old one's watch goes.
            for (other, entry) in entries where entry.path == folder && other != descriptor {
                inotify_rm_watch(fd, other)
                entries[other] = nil
            }
            entries[descriptor] = (folder, names)
        }
    }

    /// Whether `descriptor` is one of these watches.
    func contains(_ descriptor: Int32) -> Bool { entries[descriptor] != nil }

    /// Whether an event of `descriptor` named `name` counts: a name on a watched folder's path.
    func counts(_ descriptor: Int32, name: String?) -> Bool {
        guard let name else { return false }
        return entries[descriptor]?.names.contains(name) ?? false
    }

    /// Forgets a watch the kernel dropped (`IN_IGNORED`).
    mutating func forget(_ descriptor: Int32) { entries[descriptor] = nil }

    /// Calls `body` with each event in `bytes` (what one `read` of an inotify instance gave):
    /// its watch descriptor, its mask and its name (nil when it has none).
    static func forEachEvent(
        in bytes: UnsafeRawBufferPointer,
        _ body: (_ descriptor: Int32, _ mask: UInt32, _ name: String?) -> Void
    ) {
        // struct inotify_event { int wd; uint32_t mask, cookie, len; char name[]; }
        var offset = 0
        while offset + 16 <= bytes.count {
            let descriptor = bytes.loadUnaligned(fromByteOffset: offset, as: Int32.self)
            let mask = bytes.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)
            let length = Int(bytes.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
            var name: String?
            if length > 0, offset + 16 + length <= bytes.count {
                let field = bytes[(offset + 16)..<(offset + 16 + length)]
                name = String(decoding: field.prefix { $0 != 0 }, as: UTF8.self)
            }
            body(descriptor, mask, name)
            offset += 16 + length
        }
    }
}
