internal import CLinux
import Foundation
import Glibc

/// The parts of a freedesktop `.desktop` file the exec shield needs.
struct DesktopEntry: Equatable {
    var categories: Set<String>
    /// The `Exec=` command line, split into arguments as the Desktop Entry Specification
    /// says (double quotes, backslash escapes); empty when there is none.
    var arguments: [String]
    /// The `Exec=` command lines of the entry's actions (`[Desktop Action NAME]` groups, which a
    /// launcher offers in the entry's menu).
    var actionArguments: [[String]] = []

    /// The largest `.desktop` file read. Real ones are a few kilobytes (translations included);
    /// anything larger is refused, so a huge (or sparse) file cannot stall the daemon.
    static let maximumSize = 64 * 1024

    init?(_ text: String) {
        var inEntry = false
        var inAction = false
        var seenEntry = false
        var categories: Set<String> = []
        var exec: String?
        var actions: [String] = []
        // Lines end in LF or CRLF.
        for line in text.split(whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
            let trimmed = line.trimmingCharacters(in: .whitespacesAndNewlines)
            if trimmed.hasPrefix("[") {
                inEntry = trimmed == "[Desktop Entry]"
                inAction = trimmed.hasPrefix("[Desktop Action ")
                seenEntry = seenEntry || inEntry
                continue
            }
            guard inEntry || inAction, let equals = trimmed.firstIndex(of: "=") else { continue }
            let key = trimmed[..<equals].trimmingCharacters(in: .whitespaces)
            let value = Self.unescape(
                trimmed[trimmed.index(after: equals)...].trimmingCharacters(in: .whitespaces))
            switch (key, inEntry) {
            case ("Categories", true):
                categories = Set(value.split(separator: ";").map(String.init))
            case ("Exec", true):
                exec = value
            case ("Exec", false):
                actions.append(value)
            default: break
            }
        }
        guard seenEntry else { return nil }
        self.categories = categories
        self.arguments = exec.map(Self.split) ?? []
        self.actionArguments = actions.map(Self.split)
    }

    /// The string escapes of every value: `\s`, `\n`, `\t`, `\r` and `\\`.
    static func unescape(_ value: String) -> String {
        guard value.contains("\\") else { return value }
        var result = ""
        var escaping = false
        for character in value {
            if escaping {
                switch character {
                case "s": result.append(" ")
                case "n": result.append("\n")
                case "t": result.append("\t")
                case "r": result.append("\r")
                case "\\": result.append("\\")
                default:
                    result.append("\\")
                    result.append(character)  // kept for the Exec quoting
                }
                escaping = false
            } else if character == "\\" {
                escaping = true
            } else {
                result.append(character)
            }
        }
        if escaping { result.append("\\") }
        return result
    }

    /// Splits an `Exec=` value into arguments: spaces separate, double quotes group, and inside
    /// quotes a backslash escapes `"`, `` ` ``, `$` and `\`.
    static func split(_ command: String) -> [String] {
        var arguments: [String] = []
        var current = ""
        var hasCurrent = false
        var quoted = false
        var escaping = false
        for character in command {
            if escaping {
                current.append(character)
                escaping = false
            } else if quoted {
                switch character {
                case "\\": escaping = true
                case "\"": quoted = false
                default: current.append(character)
                }
            } else if character == " " || character == "\t" {
                if hasCurrent { arguments.append(current) }
                current = ""
                hasCurrent = false
            } else if character == "\"" {
                quoted = true
                hasCurrent = true
            } else {
                current.append(character)
                hasCurrent = true
            }
        }
        if hasCurrent { arguments.append(current) }
        return arguments
    }

    /// What launching the entry runs, as far as the exec shield can shield it.
    enum Program: Equatable {
        /// A file: the program itself, or the script an interpreter is given.
        case file(String)
        /// The entry runs something that must not be shielded for everyone (a shell command
        /// line, a sandbox launcher); the reason says what.
        case unshieldable(String)
        /// `Exec=` is missing or empty.
        case none
    }

    /// Wrappers that run the rest of their command line: skipped, with their options.
    static let wrappers: Set<String> = [
        "env", "nice", "ionice", "nohup", "gamemoderun", "prime-run", "primusrun", "optirun",
        "mangohud", "setsid", "stdbuf", "time",
    ]
    /// Interpreters: the script they are given is shielded (opening it is denied), never the
    /// interpreter, which everything else needs.
    static let interpreters: Set<String> = [
        "sh", "bash", "dash", "zsh", "ksh", "mksh", "fish", "csh", "tcsh", "busybox", "python",
        "python2", "python3", "perl", "ruby", "node", "nodejs", "lua", "php", "tclsh", "wish", "java",
        "mono", "wine", "wine64",
    ]
    /// Launchers whose target the shield cannot see; shielding them would block every program
    /// they start, for every user.
    static let launchers: Set<String> = [
        "flatpak", "flatpak-spawn", "snap", "xdg-open", "gio", "gtk-launch", "kioclient", "kioclient5",
        "systemd-run", "sudo", "su", "pkexec", "doas", "runuser", "setpriv", "firejail", "bwrap",
        "distrobox", "toolbox", "dbus-launch", "dbus-send", "gdbus",
    ]

    /// What launching the entry or one of its actions runs.
    var programs: [Program] {
        ([arguments] + actionArguments).map(Self.program(of:)).filter { $0 != .none }
    }

    /// The program launching this entry runs, after wrappers; for an interpreter, its script.
    var program: Program { Self.program(of: arguments) }

    static func program(of arguments: [String]) -> Program {
        var words = arguments[...]
        while let first = words.first {
            let name = Self.baseName(first)
            if Self.wrappers.contains(name) {
                words.removeFirst()
                // Options, `VAR=value` settings and numbers (`nice -n 5`) until the command.
                while let next = words.first,
                    next.hasPrefix("-") || next.contains("=") || Double(next) != nil
                {
                    words.removeFirst()
                }
                continue
            }
            if Self.launchers.contains(name) {
                return .unshieldable("runs through \(name), which starts programs the shield cannot see")
            }
            if Self.interpreters.contains(name) || name.hasPrefix("python") || name.hasPrefix("perl")
                || name.hasPrefix("ruby") || name.hasPrefix("lua")
            {
                words.removeFirst()
                var script: String?
                while let next = words.first {
                    if next == "-c" || next == "-e" || next == "--command" {
                        return .unshieldable("runs a \(name) command line")
                    }
                    if next.hasPrefix("-") {
                        words.removeFirst()
                        continue
                    }
                    script = next
                    break
                }
                guard let script, script.hasPrefix("/") else {
                    return .unshieldable("runs \(name) without a script given by its full path")
                }
                return .file(script)
            }
            // A field code (%U) or an empty command is no program.
            return first.hasPrefix("%") ? .none : .file(first)
        }
        return .none
    }

    static func baseName(_ path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return path }
        return String(path[path.index(after: slash)...])
    }
}

/// Reads the `.desktop` files of application folders, boundedly, and remembers what they said
/// until they change.
struct DesktopEntryReader {
    /// The most `.desktop` files read from one folder.
    static let maximumEntriesPerFolder = 10_000

    private struct Key: Equatable {
        var device: UInt64, inode: UInt64, size: Int64, modified: Int64, changed: Int64
    }
    private var cache: [String: (key: Key, entry: Result<DesktopEntry?, Refusal>)] = [:]

    struct Refusal: Error, Equatable {
        var reason: String
    }

    /// The entries of `folders` (in order, files sorted by name); files that cannot be used
    /// come with a reason. A missing folder is skipped.
    mutating func entries(in folders: [String]) -> [(path: String, entry: Result<DesktopEntry, Refusal>)] {
        var result: [(String, Result<DesktopEntry, Refusal>)] = []
        var seen: Set<String> = []
        for folder in folders.flatMap({ Self.withSubfolders($0) }) {
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else { continue }
            let desktop = names.filter { $0.hasSuffix(".desktop") }.sorted()
            if desktop.count > Self.maximumEntriesPerFolder {
                result.append(
                    (
                        folder,
                        .failure(
                            Refusal(
                                reason:
                                    "\(desktop.count) desktop entries; only the first \(Self.maximumEntriesPerFolder) were read"
                            ))
                    ))
            }
            for name in desktop.prefix(Self.maximumEntriesPerFolder) {
                let path = "\(folder)/\(name)"
                seen.insert(path)
                switch read(path) {
                case .success(let entry?): result.append((path, .success(entry)))
                case .success(nil): continue
                case .failure(let refusal): result.append((path, .failure(refusal)))
                }
            }
        }
        cache = cache.filter { seen.contains($0.key) }
        return result
    }

    /// `folder` and the folders under it (entries in subfolders are valid desktop entries, with
    /// ids like `vendor-game.desktop`), at most three levels deep and 256 folders, not following
    /// links to folders.
    static func withSubfolders(_ folder: String) -> [String] {
        var result: [String] = []
        var pending: [(String, Int)] = [(folder, 0)]
        while let (current, depth) = pending.popLast(), result.count < 256 {
            result.append(current)
            guard depth < 3, let names = try? FileManager.default.contentsOfDirectory(atPath: current) else {
                continue
            }
            for name in names.sorted().reversed() {
                var info = stat()
                let path = "\(current)/\(name)"
                if lstat(path, &info) == 0 && info.st_mode & mode_t(Glibc.S_IFMT) == mode_t(Glibc.S_IFDIR) {
                    pending.append((path, depth + 1))
                }
            }
        }
        return result
    }

    /// One file: `nil` when it is not a desktop entry at all.
    private mutating func read(_ path: String) -> Result<DesktopEntry?, Refusal> {
        // A path-only descriptor first (links followed, nothing opened): a FIFO or a device
        // (say `/dev/watchdog`, behind a link a user made) is never opened for reading.
        let handle = open(path, stepgate_O_PATH | O_CLOEXEC)
        guard handle >= 0 else {
            let code = errno
            return code == ENOENT ? .success(nil) : .failure(Refusal(reason: String(cString: strerror(code))))
        }
        defer { close(handle) }
        var info = stat()
        guard fstat(handle, &info) == 0 else { return .failure(Refusal(reason: "cannot stat")) }
        guard info.st_mode & mode_t(Glibc.S_IFMT) == mode_t(Glibc.S_IFREG) else { return .success(nil) }
        // The same inode, now for reading.
        let fd = open("/proc/self/fd/\(handle)", O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return .failure(Refusal(reason: String(cString: strerror(errno)))) }
        return readOpen(fd, path: path)
    }

    private mutating func readOpen(_ fd: Int32, path: String) -> Result<DesktopEntry?, Refusal> {
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { return .failure(Refusal(reason: "cannot stat")) }
        guard info.st_mode & mode_t(Glibc.S_IFMT) == mode_t(Glibc.S_IFREG) else { return .success(nil) }
        let key = Key(
            device: UInt64(info.st_dev), inode: UInt64(info.st_ino), size: Int64(info.st_size),
            modified: Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec),
            changed: Int64(info.st_ctim.tv_sec) * 1_000_000_000 + Int64(info.st_ctim.tv_nsec))
        if let cached = cache[path], cached.key == key {
            return cached.entry.map { $0 }
        }
        let entry: Result<DesktopEntry?, Refusal>
        if info.st_size > Int64(DesktopEntry.maximumSize) {
            entry = .failure(
                Refusal(
                    reason:
                        "\(info.st_size) bytes, larger than the \(DesktopEntry.maximumSize / 1024) KiB a desktop entry may have; not read"
                ))
        } else {
            var bytes = [UInt8](repeating: 0, count: DesktopEntry.maximumSize + 1)
            var count = 0
            while count < bytes.count {
                let n = bytes.withUnsafeMutableBytes {
                    Glibc.read(fd, $0.baseAddress! + count, $0.count - count)
                }
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                count += n
            }
            if count > DesktopEntry.maximumSize {
                entry = .failure(
                    Refusal(reason: "grew past \(DesktopEntry.maximumSize / 1024) KiB while read"))
            } else {
                entry = .success(DesktopEntry(String(decoding: bytes[..<count], as: UTF8.self)))
            }
        }
        cache[path] = (key, entry)
        return entry
    }
}

/// Programs the exec shield refuses to deny: denying execution is for everyone, root and the
/// daemon's own hooks included, so shielding a shell, the dynamic loader, an interpreter or a
/// launcher would break the machine rather than gate a game.
enum EssentialPrograms {
    /// Why the program at `resolved` (configured as `configured`) must not be shielded; `nil`
    /// when it may be.
    static func reason(configured: String, resolved: String, shells: Set<String> = systemShells)
        -> String?
    {
        for path in [configured, resolved] {
            let name = DesktopEntry.baseName(path)
            if name.hasPrefix("ld-linux") || (name.hasPrefix("ld-") && name.contains(".so"))
                || name == "ld.so"
            {
                return "the dynamic loader runs every program"
            }
            if shells.contains(path) || DesktopEntry.interpreters.contains(name) {
                return "\(name) is a shell or interpreter that other programs need"
            }
            if DesktopEntry.launchers.contains(name) || DesktopEntry.wrappers.contains(name) {
                return "\(name) starts other programs"
            }
        }
        return nil
    }

    /// The system's shells, read once (every recheck asks, for every program).
    static let systemShells = loginShells()

    /// The shells listed in `/etc/shells`, with their resolved paths.
    static func loginShells() -> Set<String> {
        guard let text = try? String(contentsOfFile: "/etc/shells", encoding: .utf8) else { return [] }
        var result: Set<String> = []
        for line in text.split(separator: "\n") {
            let path = line.trimmingCharacters(in: .whitespaces)
            guard path.hasPrefix("/") else { continue }
            result.insert(path)
            if let real = realpath(path, nil) {
                result.insert(String(cString: real))
                free(real)
            }
        }
        return result
    }
}
