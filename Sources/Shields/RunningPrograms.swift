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

/// A running process, told apart from a later process with the same id by its start time.
struct RunningProcess: Hashable, Sendable {
    var pid: Int32
    /// Field 22 of `/proc/PID/stat`, in clock ticks since boot.
    var startTime: UInt64
    /// The one-letter state (`R`, `S`, `T` for stopped, …).
    var state: Character

    /// Every process that runs one of `files` (compared by device and inode): mapped into its
    /// memory (its executable, or a program started through the dynamic loader, whose
    /// executable is the loader) and, with `deep`, held open (a descriptor kept from an unlock,
    /// from which the bytes could be copied and run). `include` picks the processes worth
    /// looking at (by their credentials) before their mappings and descriptors are read;
    /// `found` hears of each match as soon as it is made.
    ///
    /// Nothing here touches the files a process uses: `maps` and `fdinfo` are read from `/proc`
    /// (no `stat` through `/proc/PID/exe` or `/proc/PID/fd`), so a process holding a file on a
    /// hung file system (a FUSE mount that never answers) cannot stall the scan.
    ///
    /// `paths` are the shielded files' paths: a process still mapping a file that was replaced
    /// under one of them (`PATH (deleted)` in its maps: an upgrade that landed while it ran)
    /// runs the shielded program too, though its old inode is no longer marked.
    static func running(
        _ files: Set<ExecDenyShield.FileID>, paths: Set<String> = [], deep: Bool = false,
        include: (Int32) -> Bool = { _ in true }, found report: (RunningProcess) -> Void = { _ in }
    ) -> [RunningProcess] {
        guard !files.isEmpty, let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc")
        else {
            return []
        }
        let inodes = Set(files.map(\.inode))
        let mounts = deep ? mountIDs(of: Set(files.map(\.device))) : []
        let replaced = Set(paths.map { $0 + " (deleted)" })
        var found: [RunningProcess] = []
        for entry in entries {
            guard let pid = Int32(entry), pid > 1, pid != getpid(), include(pid) else { continue }
            let matches =
                maps(pid, files, inodes, replaced) || (deep && heldInode(pid, inodes, mounts) != nil)
            guard matches, let process = RunningProcess(pid: pid) else { continue }
            report(process)  // at once: the caller may stop it before the scan goes on
            found.append(process)
        }
        return found
    }

    /// Whether `/proc/PID/maps` maps one of `files` (`address perms offset major:minor inode path`)
    /// or a file replaced under a path in `replaced` (given with its ` (deleted)` suffix).
    private static func maps(
        _ pid: Int32, _ files: Set<ExecDenyShield.FileID>, _ inodes: Set<UInt64>, _ replaced: Set<String>
    ) -> Bool {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/maps", encoding: .utf8) else {
            return false
        }
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: true)
            guard fields.count >= 5, let inode = UInt64(fields[4]), inode != 0 else { continue }
            if fields.count == 6, !replaced.isEmpty,
                replaced.contains(fields[5].trimmingCharacters(in: .whitespaces))
            {
                return true
            }
            guard inodes.contains(inode) else { continue }
            let numbers = fields[3].split(separator: ":")
            guard numbers.count == 2, let major = UInt64(numbers[0], radix: 16),
                let minor = UInt64(numbers[1], radix: 16)
            else { continue }
            if files.contains(.init(device: makeDevice(major, minor), inode: inode)) { return true }
        }
        return false
    }

    /// glibc's `makedev`.
    static func makeDevice(_ major: UInt64, _ minor: UInt64) -> UInt64 {
        ((major & 0xFFF) << 8) | (minor & 0xFF) | ((minor & ~0xFF) << 12) | ((major & ~0xFFF) << 32)
    }

    /// The ids of the mounts (this process's view) of the devices `devices`.
    static func mountIDs(of devices: Set<UInt64>) -> Set<Int> {
        guard let text = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8) else {
            return []
        }
        var result: Set<Int> = []
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ", maxSplits: 3)
            guard fields.count >= 3, let id = Int(fields[0]) else { continue }
            let numbers = fields[2].split(separator: ":")
            guard numbers.count == 2, let major = UInt64(numbers[0]), let minor = UInt64(numbers[1]) else {
                continue
            }
            if devices.contains(makeDevice(major, minor)) { result.insert(id) }
        }
        return result
    }

    /// The inode of one of the files that the process holds open, by the inode and mount in
    /// `/proc/PID/fdinfo` (at most 65,536 descriptors are read); `nil` when it holds none.
    /// `inodes` and `mounts` (``mountIDs(of:)``) are worked out once by the caller.
    static func heldInode(_ pid: Int32, _ inodes: Set<UInt64>, _ mounts: Set<Int>) -> UInt64? {
        guard let descriptors = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fdinfo")
        else {
            return nil
        }
        for descriptor in descriptors.prefix(65_536) {
            guard let text = try? String(contentsOfFile: "/proc/\(pid)/fdinfo/\(descriptor)", encoding: .utf8)
            else { continue }
            var inode: UInt64?
            var mount: Int?
            for line in text.split(separator: "\n") {
                if line.hasPrefix("ino:") {
                    inode = UInt64(line.dropFirst(4).trimmingCharacters(in: .whitespaces))
                }
                if line.hasPrefix("mnt_id:") {
                    mount = Int(line.dropFirst(7).trimmingCharacters(in: .whitespaces))
                }
            }
            if let inode, inodes.contains(inode), let mount, mounts.contains(mount) { return inode }
        }
        return nil
    }

    /// Reads `/proc/PID/stat`; `nil` when the process is gone.
    init?(pid: Int32) {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return nil }
        self.init(pid: pid, stat: text)
    }

    /// Parses a `/proc/PID/stat` line: `pid (comm) state ppid …`; comm may hold spaces and ')'.
    init?(pid: Int32, stat text: String) {
        guard let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        // fields[0] is the state (field 3); the start time is field 22, so fields[19].
        guard fields.count > 19, let state = fields[0].first, let start = UInt64(fields[19]) else {
            return nil
        }
        self.pid = pid
        self.startTime = start
        self.state = state
    }

    /// Whether `pid` is still this process.
    var isAlive: Bool { RunningProcess(pid: pid)?.startTime == startTime }

    func signal(_ number: Int32) {
        if isAlive { kill(pid, number) }
    }
}
