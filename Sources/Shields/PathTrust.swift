internal import CLinux
import Foundation

/// A path resolved as the kernel resolves it, noting which users could make it lead elsewhere.
///
/// The exec shield marks the file a configured path leads to. When a non-root user controls a
/// folder or a symbolic link on the way, that user decides what the path leads to, so the file
/// is only shielded if that user owns it: otherwise a gated user could point a shielded name at
/// any file on the system (`sudo`, the dynamic loader) and have the root daemon deny it to
/// everyone.
struct TrustedPath: Equatable {
    /// The resolved path, without symbolic links.
    var path: String
    var device: UInt64
    var inode: UInt64
    /// The file's owner.
    var owner: UInt32
    /// Non-root users who own a folder or link on the way; `nil` in the set stands for "anyone"
    /// (a folder others may write that is not sticky).
    var controllers: Set<UInt32?>

    /// Why a resolved file may not be shielded; `nil` when it may. `extra` are controllers of
    /// where the path came from (a `.desktop` file, say).
    func refusal(extra: Set<UInt32?> = []) -> String? {
        let all = controllers.union(extra)
        if all.isEmpty { return nil }
        if all.contains(nil) {
            return "\(path): a folder on the way may be changed by any user; not shielded"
        }
        let users = Set(all.compactMap { $0 })
        if users == [owner] && owner != 0 { return nil }
        let names = users.sorted().map { "uid \($0)" }.joined(separator: ", ")
        return
            "\(path): the way to it is controlled by \(names) but the file belongs to uid \(owner); not shielded"
    }

    /// Why a path does not resolve to a file.
    struct Failure: Error {
        var reason: String
        /// Nothing is there (as opposed to something unusable).
        var missing = false
    }

    /// Resolves `path` (absolute) component by component, following at most 40 links.
    static func resolve(_ path: String) -> Result<TrustedPath, Failure> {
        guard path.hasPrefix("/") else { return .failure(Failure(reason: "\(path): not an absolute path")) }
        var pending = path.split(separator: "/").map(String.init)
        var resolved: [String] = []
        var controllers: Set<UInt32?> = []
        var links = 0
        /// Notes who controls the folder `resolved` now names.
        func noteFolder(_ info: stat) {
            if info.st_uid != 0 { controllers.insert(info.st_uid) }
            let writable = info.st_mode & 0o022 != 0
            let sticky = info.st_mode & mode_t(Glibc.S_ISVTX) != 0
            if writable && !sticky { controllers.insert(nil) }
        }
        var root = stat()
        guard lstat("/", &root) == 0 else { return .failure(Failure(reason: "/: cannot stat")) }
        noteFolder(root)
        while !pending.isEmpty {
            let name = pending.removeFirst()
            if name.isEmpty || name == "." { continue }
            if name == ".." {
                _ = resolved.popLast()
                continue
            }
            let current = "/" + (resolved + [name]).joined(separator: "/")
            var info = stat()
            guard lstat(current, &info) == 0 else {
                let code = errno
                return .failure(
                    Failure(reason: "\(current): \(String(cString: strerror(code)))", missing: code == ENOENT)
                )
            }
            switch info.st_mode & mode_t(Glibc.S_IFMT) {
            case mode_t(Glibc.S_IFLNK):
                links += 1
                guard links <= 40 else {
                    return .failure(Failure(reason: "\(path): too many symbolic links"))
                }
                if info.st_uid != 0 { controllers.insert(info.st_uid) }
                var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
                let length = readlink(current, &buffer, buffer.count - 1)
                guard length >= 0 else {
                    return .failure(Failure(reason: "\(current): cannot read the link"))
                }
                let target = String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
                if target.hasPrefix("/") { resolved = [] }
                pending = target.split(separator: "/").map(String.init) + pending
            case mode_t(Glibc.S_IFDIR):
                resolved.append(name)
                noteFolder(info)
            default:
                guard pending.isEmpty else {
                    return .failure(Failure(reason: "\(current): not a folder", missing: true))
                }
                resolved.append(name)
                return .success(
                    TrustedPath(
                        path: "/" + resolved.joined(separator: "/"), device: UInt64(info.st_dev),
                        inode: UInt64(info.st_ino), owner: info.st_uid, controllers: controllers))
            }
        }
        return .failure(Failure(reason: "\(path): a folder, not a program"))
    }

    /// Who controls the file at `path` itself and the way to it (for a `.desktop` file: its owner
    /// decides what it names).
    static func controllers(ofFile path: String) -> Set<UInt32?> {
        switch resolve(path) {
        case .success(let file): file.controllers.union(file.owner == 0 ? [] : [file.owner])
        case .failure: [nil]
        }
    }
}
