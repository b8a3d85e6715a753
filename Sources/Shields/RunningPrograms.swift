internal import CLinux
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

    /// Every process whose executable is one of `files` (compared by device and inode).
    static func running(_ files: Set<ExecDenyShield.FileID>) -> [RunningProcess] {
        guard !files.isEmpty, let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc")
        else {
            return []
        }
        var found: [RunningProcess] = []
        for entry in entries {
            guard let pid = Int32(entry), pid > 1, pid != getpid() else { continue }
            var info = stat()
            guard stat("/proc/\(pid)/exe", &info) == 0,
                files.contains(.init(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))),
                let process = RunningProcess(pid: pid)
            else { continue }
            found.append(process)
        }
        return found
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
