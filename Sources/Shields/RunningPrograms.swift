import CLinux
import Foundation

/// What happens, when a store is shielded, to its programs that are already running.
public enum RunningProgramAction: String, Sendable, CaseIterable {
    /// SIGTERM, then SIGKILL after a grace period (the default).
    case terminate
    /// SIGSTOP; SIGCONT when the store unlocks again. The gated user owns the process and can
    /// send SIGCONT, so every recheck (each tick) stops it again.
    case stop
    /// Nothing: a program started during an unlock runs on.
    case leave
}

/// Reads `/proc` files as bytes, to their end. Foundation's `String(contentsOfFile:)` reads a
/// file whose size is 0 (every `/proc` file) with one `read` of a page, and gives up on bytes
/// that are not UTF-8; `/proc` text holds whatever bytes a user put in a file or program name.
enum ProcFile {
    /// The bytes of `path` up to its end or `limit`; `complete` is false when the file goes on
    /// past `limit`. `nil` when it cannot be opened or read (the process is gone).
    static func read(_ path: String, limit: Int) -> (bytes: [UInt8], complete: Bool)? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: min(limit + 1, 65_536))
        while bytes.count <= limit {
            let wanted = min(chunk.count, limit + 1 - bytes.count)
            let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress!, wanted) }
            if count < 0 && errno == EINTR { continue }
            if count < 0 { return nil }
            if count == 0 { return (bytes, true) }
            bytes.append(contentsOf: chunk[0..<count])
        }
        return (Array(bytes[0..<limit]), false)
    }

    /// The target of the link `path` (`/proc/PID/cwd`, `/proc/PID/ns/mnt`) as bytes; `nil` when
    /// it cannot be read. Reading a `/proc` link does not touch the file system it leads to.
    static func link(_ path: String) -> [UInt8]? {
        var buffer = [UInt8](repeating: 0, count: 4097)
        let count = buffer.withUnsafeMutableBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { readlink(path, $0.baseAddress!, $0.count) }
        }
        guard count >= 0, count < buffer.count else { return nil }
        return Array(buffer[0..<count])
    }

    /// The entries of a `/proc` folder that are numbers (process, thread or descriptor ids).
    static func numbers(in path: String) -> [Int32]? {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: path) else { return nil }
        return names.compactMap(Int32.init)
    }

    /// The unsigned number (in `radix`) that is all of `bytes`.
    static func number(_ bytes: ArraySlice<UInt8>, radix: UInt64 = 10) -> UInt64? {
        guard !bytes.isEmpty, bytes.count <= 20 else { return nil }
        var value: UInt64 = 0
        for byte in bytes {
            let digit: UInt64
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt64(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt64(byte - UInt8(ascii: "a") + 10)
            default: return nil
            }
            guard digit < radix else { return nil }
            let (times, overflow) = value.multipliedReportingOverflow(by: radix)
            guard !overflow else { return nil }
            value = times + digit
        }
        return value
    }
}

/// A running process, told apart from a later process with the same id by its start time.
struct RunningProcess: Hashable, Sendable {
    var pid: Int32
    /// Field 22 of `/proc/PID/stat`, in clock ticks since boot.
    var startTime: UInt64
    /// The one-letter state (`R`, `S`, `T` for stopped, …); a live thread's when the first thread
    /// has ended (`Z`) and others run on. Not part of the identity: the same process is equal to
    /// itself whatever it is doing.
    var state: Character

    static func == (a: Self, b: Self) -> Bool { a.pid == b.pid && a.startTime == b.startTime }

    /// The process's command name (`/proc/PID/comm`), control characters shown as `?`; `?` when
    /// it has ended.
    var commandName: String {
        guard let file = fopen("/proc/\(pid)/comm", "r") else { return "?" }
        defer { fclose(file) }
        var buffer = [CChar](repeating: 0, count: 64)
        guard fgets(&buffer, Int32(buffer.count), file) != nil else { return "?" }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return String(
            name.dropLast(name.hasSuffix("\n") ? 1 : 0).map { $0.isASCII && $0.asciiValue! < 32 ? "?" : $0 })
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(pid)
        hasher.combine(startTime)
    }

    /// How much of a process's memory map (`/proc/PID/maps`) is read: 16 MiB, some 200,000
    /// mappings, three times the kernel's default limit (`vm.max_map_count`, 65,530). A process
    /// with a longer map counts as running a shielded program (only a process made for it has
    /// one; reading on would let it slow every round).
    static let mapsLimit = 16 << 20
    /// How much of a mount namespace's `mountinfo` is read (16 MiB, some 100,000 mounts): a
    /// descriptor of a shielded file's inode on a mount past it counts as held.
    static let mountsLimit = 16 << 20
    /// How much of a command line is read: all of it (the kernel allows at most 6 MiB of
    /// arguments and environment).
    static let commandLineLimit = 8 << 20
    /// How much of a map and of a command line the first pass of a scan reads (a desktop
    /// program's map is some 50-300 KiB); a process with more is looked at after all the
    /// others, so that processes made to be slow to read cannot hold up finding a plain one.
    static let quickMapsLimit = 256 << 10
    static let quickCommandLineLimit = 256 << 10

    /// Every process that runs one of `files` (compared by device and inode): mapped into its
    /// memory (its executable, or a program started through the dynamic loader, whose
    /// executable is the loader), named on its command line by one of `paths` (a script handed
    /// to an interpreter, which may have closed it: `python3 /opt/game/main.py`) and, with
    /// `deep`, held open (a descriptor kept from an unlock, from which the bytes could be copied
    /// and run). `include` picks the processes worth looking at (by their credentials) before
    /// their mappings and descriptors are read; `found` hears of each match as soon as it is
    /// made.
    ///
    /// Nothing here touches the files a process uses: `maps`, `cmdline`, `fdinfo` and
    /// `mountinfo` are read from `/proc`, and the links `cwd`, `root` and `ns/mnt` are read, not
    /// followed (no `stat` through `/proc/PID/exe`, `/proc/PID/fd` or a path on a command line),
    /// so a process using a file on a hung file system (a FUSE mount that never answers) cannot
    /// stall the scan.
    ///
    /// `paths` are the shielded files' paths: a process still mapping a file that was replaced
    /// under one of them (`PATH (deleted)` in its maps: an upgrade that landed while it ran)
    /// runs the shielded program too, though its old inode is no longer marked.
    static func running(
        _ files: Set<ExecDenyShield.FileID>, paths: Set<String> = [], deep: Bool = false,
        include: (Int32) -> Bool = { _ in true }, found report: (RunningProcess) -> Void = { _ in }
    ) -> [RunningProcess] {
        guard !files.isEmpty, let pids = ProcFile.numbers(in: "/proc") else { return [] }
        let shielded = ShieldedFiles(files, paths: paths)
        var descriptors = DescriptorScan(files)
        var found: [RunningProcess] = []
        // Processes with a long map or command line, looked at after all the others.
        var long: [Int32] = []
        // Newest first: a short-lived process is the likelier to be found still there.
        for pid in pids.sorted(by: >) {
            guard pid > 1, pid != getpid(), include(pid) else { continue }
            guard let mapped = shielded.mapped(by: pid, limit: RunningProcess.quickMapsLimit),
                let named = mapped
                    ? false : shielded.named(by: pid, limit: RunningProcess.quickCommandLineLimit)
            else {
                long.append(pid)
                continue
            }
            guard mapped || named || shielded.executes(pid) || (deep && descriptors.held(by: pid) != nil),
                let process = RunningProcess(pid: pid)
            else { continue }
            report(process)  // at once: the caller may stop it before the scan goes on
            found.append(process)
        }
        for pid in long {
            let matches =
                shielded.mappedLong(by: pid) || shielded.named(by: pid) == true || shielded.executes(pid)
                || (deep && descriptors.held(by: pid) != nil)
            guard matches, let process = RunningProcess(pid: pid) else { continue }
            report(process)
            found.append(process)
        }
        return found
    }

    /// `processes` that still run, and every process descended from one of them (by parent
    /// process id, read from `/proc/PID/stat` now: a child that its parent has left, reparented
    /// to init, is no longer found).
    static func withDescendants(_ processes: Set<RunningProcess>) -> [RunningProcess] {
        // Read again: the state recorded with a process is the state it had then.
        let roots = Set(
            processes.compactMap { process in
                RunningProcess(pid: process.pid).flatMap { $0.startTime == process.startTime ? $0 : nil }
            })
        guard !roots.isEmpty, let pids = ProcFile.numbers(in: "/proc") else { return Array(roots) }
        var children: [Int32: [RunningProcess]] = [:]
        for pid in pids where pid > 1 && pid != getpid() {
            guard let stat = ProcFile.read("/proc/\(pid)/stat", limit: 4096),
                let process = RunningProcess(pid: pid, stat: stat.bytes),
                let parent = Self.parent(stat.bytes)
            else { continue }
            children[parent, default: []].append(process)
        }
        var found = Set(roots)
        var queue = Array(roots)
        while let next = queue.popLast() {
            for child in children[next.pid] ?? [] where found.insert(child).inserted {
                // A child starts after its parent; an older one holds a reused id.
                if child.startTime >= next.startTime { queue.append(child) } else { found.remove(child) }
            }
        }
        return Array(found)
    }

    /// The parent process id of a `stat` line (field 4).
    static func parent(_ bytes: [UInt8]) -> Int32? {
        guard let close = bytes.lastIndex(of: UInt8(ascii: ")")) else { return nil }
        let fields = bytes[(close + 1)...].split(separator: UInt8(ascii: " "))
        guard fields.count > 1, let value = ProcFile.number(fields[1]), value <= Int32.max else { return nil }
        return Int32(value)
    }

    /// The `/proc` folder of a live thread of `pid` other than its first, for when the first has
    /// ended (a zombie whose `maps` and `fd` are empty while the program runs on in the others);
    /// `nil` when none lives (among the first eight).
    static func liveTask(_ pid: Int32) -> String? {
        guard let threads = ProcFile.numbers(in: "/proc/\(pid)/task") else { return nil }
        // Every thread is looked at: a tracer can keep any number of exited threads as zombies
        // in front of the one still running.
        for thread in threads where thread != pid {
            let folder = "/proc/\(pid)/task/\(thread)"
            if let stat = ProcFile.read(folder + "/stat", limit: 4096), let state = Self.state(stat.bytes),
                state != "Z", state != "X"
            {
                return folder
            }
        }
        return nil
    }

    /// glibc's `makedev`.
    static func makeDevice(_ major: UInt64, _ minor: UInt64) -> UInt64 {
        ((major & 0xFFF) << 8) | (minor & 0xFF) | ((minor & ~0xFF) << 12) | ((major & ~0xFFF) << 32)
    }

    /// Reads `/proc/PID/stat`; `nil` when the process is gone.
    init?(pid: Int32) {
        guard let stat = ProcFile.read("/proc/\(pid)/stat", limit: 4096) else { return nil }
        self.init(pid: pid, stat: stat.bytes)
        if state == "Z", let folder = Self.liveTask(pid),
            let thread = ProcFile.read(folder + "/stat", limit: 4096), let live = Self.state(thread.bytes)
        {
            state = live
        }
    }

    /// Parses a `/proc/PID/stat` line: `pid (comm) state ppid …`; comm may hold spaces, ')'
    /// and bytes that are not UTF-8.
    init?(pid: Int32, stat bytes: [UInt8]) {
        guard let close = bytes.lastIndex(of: UInt8(ascii: ")")) else { return nil }
        let fields = bytes[(close + 1)...].split(separator: UInt8(ascii: " "))
        // fields[0] is the state (field 3); the start time is field 22, so fields[19].
        guard fields.count > 19, fields[0].count == 1, let letter = fields[0].first,
            let start = ProcFile.number(fields[19])
        else { return nil }
        self.pid = pid
        self.startTime = start
        self.state = Character(Unicode.Scalar(letter))
    }

    init?(pid: Int32, stat text: String) { self.init(pid: pid, stat: Array(text.utf8)) }

    /// The state letter of a `stat` line.
    private static func state(_ bytes: [UInt8]) -> Character? {
        guard let close = bytes.lastIndex(of: UInt8(ascii: ")")), close + 2 < bytes.count else { return nil }
        return Character(Unicode.Scalar(bytes[close + 2]))
    }

    /// Whether `pid` is still this process.
    var isAlive: Bool { RunningProcess(pid: pid)?.startTime == startTime }

    /// Sends signal `number` if `pid` is still this process; whether it was.
    @discardableResult
    func signal(_ number: Int32) -> Bool {
        isAlive && kill(pid, number) == 0
    }

    /// The processes whose parent is this one now (`/proc/PID/task/*/children`; a child its
    /// parent has left is no longer one).
    var children: [RunningProcess] {
        guard let threads = ProcFile.numbers(in: "/proc/\(pid)/task") else { return [] }
        var found: [RunningProcess] = []
        for thread in threads {
            guard let text = ProcFile.read("/proc/\(pid)/task/\(thread)/children", limit: 1 << 20) else {
                continue
            }
            for word in text.bytes.split(separator: UInt8(ascii: " ")) {
                guard let value = ProcFile.number(word), value <= Int32.max,
                    let child = RunningProcess(pid: Int32(value)), child.startTime >= startTime
                else { continue }
                found.append(child)
            }
        }
        return found
    }
}

/// The shielded files as a scan compares them: by device and inode in memory maps, by path
/// (bytes) for a replaced file's ` (deleted)` mapping and on command lines.
struct ShieldedFiles {
    let files: Set<ExecDenyShield.FileID>
    let inodes: Set<UInt64>
    /// `PATH (deleted)` for each path.
    let replaced: Set<[UInt8]>
    /// The paths, normalised (see ``normalised(_:)``).
    let paths: Set<[UInt8]>
    /// Their last components: a command line entry ending otherwise is not looked at further.
    let names: Set<[UInt8]>
    /// The names' lengths, to pass over most arguments without comparing.
    let nameLengths: Set<Int>
    private let nameList: [[UInt8]]
    /// Distinct arguments ending in a shielded file's name that one command line may have
    /// before the process counts as naming the program: an interpreter names its script once,
    /// a shell glob or a file manager a few times; thousands are a command line made to slow
    /// the scan.
    static let maximumNamingArguments = 256

    init(_ files: Set<ExecDenyShield.FileID>, paths: Set<String>) {
        self.files = files
        inodes = Set(files.map(\.inode))
        replaced = Set(paths.map { Array(($0 + " (deleted)").utf8) })
        let normal = Set(paths.compactMap { Self.normalised(Array($0.utf8)) })
        self.paths = normal
        names = Set(normal.map { Array($0.split(separator: UInt8(ascii: "/")).last ?? []) })
        nameLengths = Set(names.map(\.count))
        nameList = Array(names)
    }

    /// Whether `/proc/PID/maps` maps one of the files (`address perms offset major:minor inode
    /// path`) or a file replaced under one of the paths, read up to `limit`. `nil` when the map
    /// goes on past `limit` below ``RunningProcess/mapsLimit`` (see ``mappedLong(by:)``); a map
    /// longer than that counts as a match. When the first thread has ended, a live thread's map
    /// is read.
    func mapped(by pid: Int32, limit: Int = RunningProcess.mapsLimit) -> Bool? {
        guard var maps = ProcFile.read("/proc/\(pid)/maps", limit: limit) else {
            return false
        }
        if maps.bytes.isEmpty, let folder = RunningProcess.liveTask(pid),
            let live = ProcFile.read(folder + "/maps", limit: limit)
        {
            maps = live
        }
        guard maps.complete else { return limit < RunningProcess.mapsLimit ? nil : true }
        return Self.maps(maps.bytes, mention: files, inodes, replaced)
    }

    /// ``mapped(by:limit:)`` for a long map, without its text where the kernel can do that
    /// (`PROCMAP_QUERY`, Linux 6.11): each file-backed mapping's device and inode, and a path
    /// only once per file, and only while a path was replaced. A process made to slow the scan
    /// (thousands of mappings of a file with a 4,000-character path) costs microseconds a
    /// mapping instead of the time to write out its whole map. Elsewhere the text is read, up
    /// to ``RunningProcess/mapsLimit``.
    func mappedLong(by pid: Int32) -> Bool {
        let fd = open("/proc/\(pid)/maps", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address: UInt64 = 0
        var seen: Set<ExecDenyShield.FileID> = []
        var name = [CChar](repeating: 0, count: 4_200)
        var count = 0
        while true {
            var major: UInt32 = 0
            var minor: UInt32 = 0
            var inode: UInt64 = 0
            let result = stepgate_next_file_mapping(fd, &address, &major, &minor, &inode, nil, 0)
            if result == ENOENT { return false }
            if result == ENOTTY || result == EINVAL || result == EOPNOTSUPP {
                return mapped(by: pid) ?? true
            }
            guard result == 0 else { return false }  // gone
            let file = ExecDenyShield.FileID(
                device: RunningProcess.makeDevice(UInt64(major), UInt64(minor)), inode: inode)
            if files.contains(file) { return true }
            if !replaced.isEmpty, seen.insert(file).inserted {
                var at = address - 1
                let named = name.withUnsafeMutableBufferPointer { buffer in
                    stepgate_next_file_mapping(
                        fd, &at, &major, &minor, &inode, buffer.baseAddress, UInt32(buffer.count))
                }
                if named == 0 {
                    let path = name.withUnsafeBufferPointer { buffer in
                        Array(UnsafeRawBufferPointer(buffer).prefix { $0 != 0 })
                    }
                    if replaced.contains(path) { return true }
                }
            }
            count += 1
            // The kernel allows 65,530 mappings by default (`vm.max_map_count`).
            if count > 1_000_000 { return true }
        }
    }

    static func maps(
        _ bytes: [UInt8], mention files: Set<ExecDenyShield.FileID>, _ inodes: Set<UInt64>,
        _ replaced: Set<[UInt8]>
    ) -> Bool {
        bytes.withUnsafeBufferPointer { text in
            let space = UInt8(ascii: " ")
            var lineStart = 0
            while lineStart < text.count {
                var lineEnd = lineStart
                while lineEnd < text.count, text[lineEnd] != UInt8(ascii: "\n") { lineEnd += 1 }
                defer { lineStart = lineEnd + 1 }
                // Five fields, each ended by one space, then spaces up to the path (which may
                // hold spaces of its own).
                var ends: [Int] = []
                ends.reserveCapacity(5)
                var index = lineStart
                while ends.count < 5, index < lineEnd {
                    if text[index] == space { ends.append(index) }
                    index += 1
                }
                if ends.count == 4 && index == lineEnd { ends.append(lineEnd) }
                guard ends.count == 5 else { continue }
                var inode: UInt64 = 0
                var valid = ends[4] > ends[3] + 1
                for byte in text[(ends[3] + 1)..<ends[4]] {
                    guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9"), inode < UInt64.max / 10 - 10
                    else {
                        valid = false
                        break
                    }
                    inode = inode * 10 + UInt64(byte - UInt8(ascii: "0"))
                }
                guard valid, inode != 0 else { continue }
                if !replaced.isEmpty, text[lineEnd - 1] == UInt8(ascii: ")") {
                    var pathStart = ends[4] + 1
                    while pathStart < lineEnd, text[pathStart] == space { pathStart += 1 }
                    if pathStart < lineEnd, replaced.contains(Array(text[pathStart..<lineEnd])) {
                        return true
                    }
                }
                guard inodes.contains(inode) else { continue }
                let device = bytes[(ends[2] + 1)..<ends[3]].split(separator: UInt8(ascii: ":"))
                guard device.count == 2, let major = ProcFile.number(device[0], radix: 16),
                    let minor = ProcFile.number(device[1], radix: 16)
                else { continue }
                if files.contains(.init(device: RunningProcess.makeDevice(major, minor), inode: inode)) {
                    return true
                }
            }
            return false
        }
    }

    /// Whether the process runs one of the files (`/proc/PID/exe`): compared by device and inode
    /// from the kernel's cached attributes (no file system is asked), or, for a file replaced
    /// since, by the link's text (`PATH (deleted)`). A program that copies its own mappings to
    /// anonymous memory, so that its map names no file, still has the file as its executable.
    func executes(_ pid: Int32) -> Bool {
        var major: UInt32 = 0
        var minor: UInt32 = 0
        var inode: UInt64 = 0
        if inodes.isEmpty == false, stepgate_exe_identity(pid, &major, &minor, &inode) == 0,
            inodes.contains(inode),
            files.contains(
                .init(device: RunningProcess.makeDevice(UInt64(major), UInt64(minor)), inode: inode))
        {
            return true
        }
        guard !replaced.isEmpty, let link = ProcFile.link("/proc/\(pid)/exe") else { return false }
        return replaced.contains(link)
    }

    /// Whether an argument on the process's command line (`/proc/PID/cmdline`) names one of the
    /// paths: a script an interpreter runs, held open or not. A relative argument is taken
    /// from the process's working folder, an absolute one from its root (both read as links,
    /// never followed). Compared as text, `.`, `..` and repeated slashes folded: the file system
    /// is not asked, so a name reaching the file through a link of the user's own is not
    /// matched here.
    ///
    /// `nil` when the command line goes on past `limit` (below the whole of it).
    func named(by pid: Int32, limit: Int = RunningProcess.commandLineLimit) -> Bool? {
        guard !paths.isEmpty else { return false }
        // Reading a command line reads the process's memory where it lies. execve puts it on
        // the stack; only PR_SET_MM_MAP moves it, and into a file's mapping on a file system
        // that never answers (the user's own FUSE mount) the read would wait for ever. Such a
        // command line is not read and counts as naming the program.
        switch Self.commandLineInFile(pid) {
        case true?: return true
        case nil: return false  // gone
        case false?: break
        }
        guard let line = ProcFile.read("/proc/\(pid)/cmdline", limit: limit) else { return false }
        if !line.complete && limit < RunningProcess.commandLineLimit { return nil }
        // Read when first needed: most arguments end in no shielded file's name.
        var links: [String: [UInt8]] = [:]
        func link(_ name: String) -> [UInt8]? {
            if let known = links[name] { return known }
            let target = ProcFile.link("/proc/\(pid)/\(name)") ?? []
            links[name] = target
            return target.first == UInt8(ascii: "/") ? target : nil
        }
        let slash = UInt8(ascii: "/")
        let bytes = line.bytes
        // One pass over the bytes, nothing made per argument: only an argument whose last
        // component has a shielded file's name (by length first) is looked at further, each
        // distinct one once. A command line forged (PR_SET_MM) to hold enormous numbers of
        // them would otherwise make every round slow; past ``maximumNamingArguments`` distinct
        // ones, the process counts as naming the program.
        var checked: Set<ArraySlice<UInt8>> = []
        var candidates: [Range<Int>] = []
        var overflowed = false
        bytes.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return }
            var start = 0
            var previous: Range<Int>?
            while start < buffer.count {
                let end: Int
                if let found = memchr(base + start, 0, buffer.count - start) {
                    end = UnsafeRawPointer(base).distance(to: UnsafeRawPointer(found))
                } else {
                    end = buffer.count
                }
                defer { start = end + 1 }
                // The last component: back from the end to a slash.
                var nameStart = end
                while nameStart > start && base[nameStart - 1] != slash { nameStart -= 1 }
                let length = end - nameStart
                guard nameLengths.contains(length),
                    nameList.contains(where: { name in
                        name.count == length && memcmp(name, base + nameStart, length) == 0
                    })
                else { continue }
                // The same argument again (a forged line repeats one) is not looked at again.
                if let previous, previous.count == end - start,
                    memcmp(base + previous.lowerBound, base + start, end - start) == 0
                {
                    continue
                }
                previous = start..<end
                candidates.append(start..<end)
                if candidates.count > 4 * Self.maximumNamingArguments {
                    overflowed = true
                    break
                }
            }
        }
        if overflowed { return true }
        for range in candidates {
            let argument = bytes[range]
            guard checked.insert(argument).inserted else { continue }
            if checked.count > Self.maximumNamingArguments { return true }
            var full: [UInt8]
            if argument.first == slash {
                guard let root = link("root") else { continue }
                full = root == [slash] ? [] : root
            } else {
                guard let cwd = link("cwd") else { continue }
                full = cwd
            }
            full.append(slash)
            full.append(contentsOf: argument)
            if let normal = Self.normalised(full), paths.contains(normal) { return true }
        }
        return false
    }

    /// Where the process's command line is (`arg_start` and `arg_end`, fields 48 and 49 of
    /// `/proc/PID/stat`); nil when it is gone.
    static func argumentRange(_ pid: Int32) -> (start: UInt64, end: UInt64)? {
        guard let stat = ProcFile.read("/proc/\(pid)/stat", limit: 4096)?.bytes,
            let close = stat.lastIndex(of: UInt8(ascii: ")")), close + 2 < stat.count
        else { return nil }
        // The first field after the name is field 3.
        let fields = stat[(close + 2)...].split(separator: UInt8(ascii: " "))
        guard fields.count > 46, let start = ProcFile.number(fields[45]),
            let end = ProcFile.number(fields[46])
        else { return nil }
        return (start, end)
    }

    /// Whether any of the command line lies in a file-backed mapping (asked with PROCMAP_QUERY,
    /// or from the text of `maps` on a kernel without it); nil when the process is gone.
    static func commandLineInFile(_ pid: Int32) -> Bool? {
        guard let (start, end) = argumentRange(pid) else { return nil }
        guard end > start else { return false }
        let fd = open("/proc/\(pid)/maps", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        let result = stepgate_file_backed_between(fd, start, end)
        if result >= 0 { return result == 1 }
        guard -result == ENOTTY || -result == EINVAL || -result == EOPNOTSUPP else { return nil }
        guard let maps = ProcFile.read("/proc/\(pid)/maps", limit: RunningProcess.mapsLimit) else {
            return nil
        }
        // "start-end perms offset major:minor inode path": a line over the range with an inode.
        for line in maps.bytes.split(separator: UInt8(ascii: "\n")) {
            let parts = line.split(
                separator: UInt8(ascii: " "), maxSplits: 5, omittingEmptySubsequences: true)
            guard parts.count >= 5 else { continue }
            let range = parts[0].split(separator: UInt8(ascii: "-"))
            guard range.count == 2, let low = ProcFile.number(range[0], radix: 16),
                let high = ProcFile.number(range[1], radix: 16), low < end, high > start
            else { continue }
            if ProcFile.number(parts[4]) != 0 { return true }
        }
        return !maps.complete
    }

    /// An absolute path with `.`, `..` and empty components folded away (`/a/./b//../c` is
    /// `/a/c`); `nil` for a relative one.
    static func normalised(_ path: [UInt8]) -> [UInt8]? {
        let slash = UInt8(ascii: "/")
        guard path.first == slash else { return nil }
        var parts: [ArraySlice<UInt8>] = []
        for part in path.split(separator: slash) {
            if part.elementsEqual([UInt8(ascii: ".")]) { continue }
            if part.elementsEqual([UInt8(ascii: "."), UInt8(ascii: ".")]) {
                _ = parts.popLast()
                continue
            }
            parts.append(part)
        }
        var result: [UInt8] = []
        for part in parts {
            result.append(slash)
            result.append(contentsOf: part)
        }
        return result.isEmpty ? [slash] : result
    }
}

/// Finds descriptors of shielded files in processes' descriptor tables. `/proc/PID/fdinfo`
/// gives a descriptor's inode and mount id; the mount id leads to the device through the
/// mount table of the process's own mount namespace (a process in a namespace of its own,
/// `unshare -Urm`, sees the same file through mounts of other ids), read only when an inode
/// matches and once per namespace. A matching inode on a mount that no table shows (a mount
/// detached with `umount -l`, or a table past ``RunningProcess/mountsLimit``) counts as held.
///
/// What it cannot see: a descriptor that is in no process's table (sent over a Unix socket and
/// not yet received), or one opened through another file system's view of the file (an overlay
/// mount), whose inode is not the shielded file's.
struct DescriptorScan {
    let files: Set<ExecDenyShield.FileID>
    let inodes: Set<UInt64>
    /// Per mount namespace (the target of `/proc/PID/ns/mnt`): mount id to device.
    private var namespaces: [[UInt8]: [UInt64: UInt64]] = [:]
    /// Namespaces whose table was read again in this scan.
    private var reread: Set<[UInt8]> = []

    init(_ files: Set<ExecDenyShield.FileID>) {
        self.files = files
        inodes = Set(files.map(\.inode))
    }

    /// One of the files that the process holds open (at most 65,536 descriptors are read);
    /// `nil` when it holds none. When the first thread has ended, a live thread's table is read.
    mutating func held(by pid: Int32) -> ExecDenyShield.FileID? {
        var folder = "/proc/\(pid)"
        guard var descriptors = ProcFile.numbers(in: folder + "/fdinfo") else { return nil }
        if descriptors.isEmpty, let live = RunningProcess.liveTask(pid),
            let theirs = ProcFile.numbers(in: live + "/fdinfo")
        {
            folder = live
            descriptors = theirs
        }
        for descriptor in descriptors.prefix(65_536) {
            // The fields wanted come first (`pos`, `flags`, `mnt_id`, `ino`).
            guard let info = ProcFile.read(folder + "/fdinfo/\(descriptor)", limit: 4096) else { continue }
            var inode: UInt64?
            var mount: UInt64?
            for line in info.bytes.split(separator: UInt8(ascii: "\n")) {
                if line.starts(with: Array("ino:".utf8)) {
                    inode = ProcFile.number(Self.value(line.dropFirst(4)))
                } else if line.starts(with: Array("mnt_id:".utf8)) {
                    mount = ProcFile.number(Self.value(line.dropFirst(7)))
                }
            }
            guard let inode, inodes.contains(inode), let mount else { continue }
            if let device = device(of: mount, pid: pid) {
                if files.contains(.init(device: device, inode: inode)) {
                    return .init(device: device, inode: inode)
                }
            } else if let file = files.first(where: { $0.inode == inode }) {
                return file  // on a mount no table shows: held, to be safe
            }
        }
        return nil
    }

    private static func value(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        bytes.drop(while: { $0 == 9 || $0 == 32 })
    }

    /// The device of mount `mount` in the mount namespace of `pid`; read again once when the
    /// table read earlier in the scan does not have it (a mount made since).
    private mutating func device(of mount: UInt64, pid: Int32) -> UInt64? {
        let namespace = ProcFile.link("/proc/\(pid)/ns/mnt") ?? Array("pid \(pid)".utf8)
        if let table = namespaces[namespace] {
            if let device = table[mount] { return device }
            guard reread.insert(namespace).inserted else { return nil }
        }
        guard let table = Self.mounts(pid) else { return nil }
        namespaces[namespace] = table
        return table[mount]
    }

    /// Mount id to device, from `/proc/PID/mountinfo` (`id parent major:minor root point …`),
    /// up to ``RunningProcess/mountsLimit``.
    static func mounts(_ pid: Int32) -> [UInt64: UInt64]? {
        guard let text = ProcFile.read("/proc/\(pid)/mountinfo", limit: RunningProcess.mountsLimit) else {
            return nil
        }
        var devices: [UInt64: UInt64] = [:]
        for line in text.bytes.split(separator: UInt8(ascii: "\n")) {
            let fields = line.split(separator: UInt8(ascii: " "), maxSplits: 3)
            guard fields.count >= 3, let id = ProcFile.number(fields[0]) else { continue }
            let numbers = fields[2].split(separator: UInt8(ascii: ":"))
            guard numbers.count == 2, let major = ProcFile.number(numbers[0]),
                let minor = ProcFile.number(numbers[1])
            else { continue }
            devices[id] = RunningProcess.makeDevice(major, minor)
        }
        return devices
    }
}
