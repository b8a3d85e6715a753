internal import CLinux
import Foundation
import Synchronization
public import UnlockPolicy

/// Denies executing selected programs with the kernel's fanotify permission events
/// (`FAN_OPEN_EXEC_PERM`), while their store is shielded.
///
/// Only the selected programs' inodes are marked — not mounts or filesystems — so unrelated
/// programs generate no events at all and cost nothing, and a bug here can only ever delay
/// the shielded programs. A dedicated thread answers every permission event at once: deny
/// when the file's (device, inode) is shielded, allow otherwise. If StepGate dies, the kernel
/// closes the fanotify group and allows everything.
///
/// Programs are matched by their resolved path (symlinks followed; a bare name is looked up on
/// `PATH`), and desktop categories through the `.desktop` files' `Exec=` lines. Every
/// ``refresh()`` (call it on each reconcile) re-resolves and re-marks, so an upgraded binary (a
/// new inode) is shielded again. A copy of the program elsewhere is a different file and is not
/// caught: for your own habits that is a promise to yourself; for a child's account, mount the
/// user-writable filesystems `noexec`.
///
/// Needs `CAP_SYS_ADMIN` (root) and a kernel with `CONFIG_FANOTIFY_ACCESS_PERMISSIONS`.
public final class ExecDenyShield: Shield {
    public let name = "exec"
    public let kinds: Set<Target.Kind> = [.executable, .desktopCategory]

    private let group: Int32
    private let searchPath: String
    private let applicationDirectories: [String]
    /// Shielded targets per store, and the files they resolved to.
    private var targets: [String: Set<Target>] = [:]
    /// Marked files and the path each was marked through.
    private var marked: [FileID: String] = [:]
    /// What the responder thread denies; shared with it.
    private let denied: Denied
    private var responder: Thread?

    struct FileID: Hashable, Sendable {
        var device: UInt64
        var inode: UInt64
    }

    final class Denied: Sendable {
        let files = Mutex<[FileID: String]>([:])
        let counters = Mutex<(allowed: Int, denied: Int)>((0, 0))
        let stopped = Atomic<Bool>(false)
    }

    /// Opens a fanotify group and starts the responder thread.
    ///
    /// - Parameters:
    ///   - searchPath: `PATH` for resolving program names.
    ///   - applicationDirectories: Where `.desktop` files are looked for.
    public init(
        searchPath: String =
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/games:/usr/local/games",
        applicationDirectories: [String] = [
            "/usr/share/applications", "/usr/local/share/applications",
            "/var/lib/flatpak/exports/share/applications",
        ]
    ) throws(ShieldError) {
        self.searchPath = searchPath
        self.applicationDirectories = applicationDirectories
        let fd = fanotify_init(
            UInt32(FAN_CLASS_CONTENT | FAN_CLOEXEC | FAN_NONBLOCK), UInt32(O_RDONLY | O_CLOEXEC))
        guard fd >= 0 else {
            let code = errno
            switch code {
            case EPERM:
                throw ShieldError(
                    shield: "exec", message: "fanotify needs root (CAP_SYS_ADMIN); run the daemon as root")
            case EINVAL, ENOSYS:
                throw ShieldError(
                    shield: "exec",
                    message:
                        "this kernel does not offer fanotify permission events (CONFIG_FANOTIFY_ACCESS_PERMISSIONS)"
                )
            default:
                throw ShieldError(
                    shield: "exec", message: "fanotify_init: \(String(cString: strerror(code)))")
            }
        }
        group = fd
        denied = Denied()
        let thread = Thread { [group, denied] in
            ExecDenyShield.respond(group: group, denied: denied)
        }
        thread.name = "stepgate-exec-deny"
        thread.start()
        responder = thread
    }

    deinit {
        denied.stopped.store(true, ordering: .relaxed)
        // The responder polls with a short timeout and closes nothing; wait for it briefly.
        var waited = 0
        while responder?.isFinished == false && waited < 100 {
            usleep(5000)
            waited += 1
        }
        close(group)  // the kernel allows every pending event of a closed group
    }

    /// Permission events answered so far: allowed and denied.
    public var answered: (allowed: Int, denied: Int) { denied.counters.withLock { $0 } }

    public func apply(_ selection: [Target], context: ShieldContext) throws(ShieldError) {
        var storeTargets = targets[context.store] ?? []
        storeTargets.formUnion(selection)
        targets[context.store] = storeTargets
        try refresh()
    }

    public func remove(_ selection: [Target], context: ShieldContext) throws(ShieldError) {
        targets[context.store]?.subtract(selection)
        if targets[context.store]?.isEmpty == true { targets[context.store] = nil }
        try refresh()
    }

    public func inForce() throws(ShieldError) -> [String: Set<Target>] {
        let files = denied.files.withLock { $0 }
        var result: [String: Set<Target>] = [:]
        for (store, set) in targets {
            // In force when the target resolves to files, and every one is marked and denied.
            for target in set {
                let ids = ((try? resolve(target)) ?? []).map { fileID($0) }
                if !ids.isEmpty
                    && ids.allSatisfy({ $0.map { files[$0] != nil && marked[$0] != nil } ?? false })
                {
                    result[store, default: []].insert(target)
                }
            }
        }
        return result
    }

    /// Re-resolves every shielded target, marks the files, and unmarks those no longer shielded.
    public func refresh() throws(ShieldError) {
        var wanted: [FileID: String] = [:]
        var problems: [String] = []
        for target in targets.values.reduce(into: Set(), { $0.formUnion($1) }).sorted() {
            do {
                let paths = try resolve(target)
                if paths.isEmpty && target.kind == .executable {
                    problems.append("\(target.value): not found")
                }
                for path in paths {
                    guard let id = fileID(path) else {
                        problems.append("\(path): cannot stat")
                        continue
                    }
                    if marked[id] == nil {
                        let result = fanotify_mark(
                            group, UInt32(FAN_MARK_ADD), UInt64(FAN_OPEN_EXEC_PERM), AT_FDCWD, path)
                        if result != 0 {
                            problems.append("\(path): fanotify_mark: \(String(cString: strerror(errno)))")
                            continue
                        }
                        marked[id] = path
                    }
                    wanted[id] = path
                }
            } catch {
                problems.append(error.message)
            }
        }
        denied.files.withLock { $0 = wanted }
        // Unmark what is no longer shielded, through its path if that still leads to the same
        // file (otherwise the mark is harmless: the file is allowed, and the mark dies with it).
        for (id, path) in marked where wanted[id] == nil {
            if fileID(path) == id {
                _ = fanotify_mark(group, UInt32(FAN_MARK_REMOVE), UInt64(FAN_OPEN_EXEC_PERM), AT_FDCWD, path)
            }
            marked[id] = nil
        }
        if !problems.isEmpty {
            throw ShieldError(shield: name, message: problems.joined(separator: "; "))
        }
    }

    /// The files a target stands for.
    func resolve(_ target: Target) throws(ShieldError) -> [String] {
        switch target.kind {
        case .executable:
            return resolveProgram(target.value).map { [$0] } ?? []
        case .desktopCategory:
            return desktopPrograms(category: target.value)
        default:
            return []
        }
    }

    private func resolveProgram(_ name: String) -> String? {
        var candidate: String?
        if name.hasPrefix("/") {
            candidate = name
        } else {
            for directory in searchPath.split(separator: ":") {
                let path = "\(directory)/\(name)"
                if FileManager.default.isExecutableFile(atPath: path) {
                    candidate = path
                    break
                }
            }
        }
        guard let candidate, let real = realpath(candidate, nil) else { return nil }
        defer { free(real) }
        return String(cString: real)
    }

    /// Programs of the `.desktop` entries in a category.
    private func desktopPrograms(category: String) -> [String] {
        var programs: Set<String> = []
        for directory in applicationDirectories {
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else {
                continue
            }
            for file in names where file.hasSuffix(".desktop") {
                guard let text = try? String(contentsOfFile: "\(directory)/\(file)", encoding: .utf8) else {
                    continue
                }
                guard let entry = DesktopEntry(text), entry.categories.contains(category),
                    let exec = entry.program
                else { continue }
                if let path = resolveProgram(exec) { programs.insert(path) }
            }
        }
        return programs.sorted()
    }

    private func fileID(_ path: String) -> FileID? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return FileID(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
    }

    /// The responder loop: answer every permission event, deny shielded files.
    private static func respond(group: Int32, denied: Denied) {
        let size = 4096
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 8)
        defer { buffer.deallocate() }
        var poller = pollfd(fd: group, events: Int16(POLLIN), revents: 0)
        while !denied.stopped.load(ordering: .relaxed) {
            let ready = poll(&poller, 1, 100)
            if ready <= 0 { continue }
            let length = read(group, buffer, size)
            if length <= 0 { continue }
            var offset = 0
            let header = MemoryLayout<fanotify_event_metadata>.size
            while offset + header <= length {
                let event = buffer.load(fromByteOffset: offset, as: fanotify_event_metadata.self)
                if event.event_len < UInt32(header) { break }
                if event.fd >= 0 {
                    var verdict = UInt32(FAN_ALLOW)
                    if event.mask & UInt64(FAN_OPEN_EXEC_PERM) != 0 {
                        var info = stat()
                        if fstat(event.fd, &info) == 0 {
                            let id = FileID(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
                            if denied.files.withLock({ $0[id] != nil }) { verdict = UInt32(FAN_DENY) }
                        }
                    }
                    var response = fanotify_response(fd: event.fd, response: verdict)
                    _ = withUnsafeBytes(of: &response) { write(group, $0.baseAddress, $0.count) }
                    close(event.fd)
                    denied.counters.withLock {
                        if verdict == UInt32(FAN_DENY) { $0.denied += 1 } else { $0.allowed += 1 }
                    }
                }
                offset += Int(event.event_len)
            }
        }
    }
}

@available(*, unavailable) extension ExecDenyShield: Sendable {}

/// The parts of a freedesktop `.desktop` file the exec shield needs.
struct DesktopEntry {
    var categories: Set<String>
    /// The program of `Exec=`: the first word, after any `env VAR=value` prefix.
    var program: String?

    init?(_ text: String) {
        var inEntry = false
        var categories: Set<String> = []
        var program: String?
        for line in text.split(separator: "\n") {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("[") {
                inEntry = trimmed == "[Desktop Entry]"
                continue
            }
            guard inEntry else { continue }
            if trimmed.hasPrefix("Categories=") {
                categories = Set(
                    trimmed.dropFirst("Categories=".count).split(separator: ";").map(String.init))
            } else if trimmed.hasPrefix("Exec=") {
                var words = trimmed.dropFirst("Exec=".count).split(separator: " ").map {
                    String($0).trimmingCharacters(in: CharacterSet(charactersIn: "\"'"))
                }
                if words.first == "env" {
                    words.removeFirst()
                    while let first = words.first, first.contains("=") { words.removeFirst() }
                }
                program = words.first
            }
        }
        guard inEntry || !categories.isEmpty || program != nil else { return nil }
        self.categories = categories
        self.program = program
    }
}
