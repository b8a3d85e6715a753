import CLinux
import Foundation

/// Holds gated users' processes still while the reaper looks for what runs a shielded program.
///
/// A scan of `/proc` lists process ids first and reads each one later. A program that forks and
/// lets its parent exit every few milliseconds (each generation a new id, reparented to init)
/// is never where the scan looks, however often it looks. Held still, it is: a frozen process
/// cannot run, fork or exit.
///
/// The freezer of cgroup v2 does it without a trace: the user's slice (systemd's
/// `user-UID.slice`, which holds every login session and the user's own service manager, and
/// which the user cannot leave), or, without one, the process's own cgroup. A frozen process's
/// parent sees nothing (no `SIGCHLD`, no job-control stop), and `SIGKILL` still ends it. Never
/// the root cgroup, nor the daemon's own cgroup or one of its ancestors.
///
/// A process in no cgroup that can be frozen (no cgroup v2, or one cgroup for the whole
/// machine) can only be held by stopping every process of its user at once: one `kill(-1,
/// SIGSTOP)` sent as that user reaches a process being forked and its new child too. It reaches
/// every process whose real or saved user id is the user's (root's after `setresuid(0, U, U)`
/// too), and all of those go on after. The user's interactive shells see a foreground job stop
/// and take the terminal back (the job goes on in the background), so this is done only where a
/// program has been seen forking away (``RunningProcess/signal(_:)`` found it gone). The ancestors of theirs that stopped themselves meanwhile (root's `runuser`, `su`
/// or `sudo` pass their child's job-control stop on to their own parent, and a chain of them on
/// up) are continued with them.
struct Freezer {
    /// A process to hold: its ids and the cgroup (v2) it is in.
    struct Member: Hashable {
        var process: RunningProcess
        var uid: UInt32
        var gid: UInt32
    }

    /// Where cgroup v2 is mounted (`/sys/fs/cgroup`, or `/sys/fs/cgroup/unified` on a hybrid
    /// system); `nil` when it is not.
    static let mount: String? = {
        guard let text = ProcFile.read("/proc/self/mountinfo", limit: RunningProcess.mountsLimit) else {
            return nil
        }
        // `id parent major:minor root point options… - type source options`
        for line in text.bytes.split(separator: UInt8(ascii: "\n")) {
            let fields = line.split(separator: UInt8(ascii: " "))
            guard let dash = fields.firstIndex(where: { $0.elementsEqual([UInt8(ascii: "-")]) }),
                dash + 1 < fields.count, fields[dash + 1].elementsEqual(Array("cgroup2".utf8)),
                fields.count > 4
            else { continue }
            return String(decoding: fields[4], as: UTF8.self)
        }
        return nil
    }()

    /// The daemon's own cgroup: never frozen, nor any ancestor of it.
    static let own: String? = cgroup(of: getpid())

    /// The cgroup v2 path of `pid` (`/user.slice/user-1000.slice/session-2.scope`): the `0::`
    /// line of `/proc/PID/cgroup`.
    static func cgroup(of pid: Int32) -> String? {
        guard let text = ProcFile.read("/proc/\(pid)/cgroup", limit: 65_536) else { return nil }
        for line in text.bytes.split(separator: UInt8(ascii: "\n")) where line.starts(with: Array("0::".utf8))
        {
            let path = String(decoding: line.dropFirst(3), as: UTF8.self)
            // A cgroup removed while the process was in it reads `… (deleted)`.
            return path.hasSuffix(" (deleted)") ? nil : path
        }
        return nil
    }

    /// The cgroup to freeze for a process of `uid` in cgroup `path`: the ancestor named
    /// `user-UID.slice` if there is one, else `path`. `nil` for the root cgroup and for the
    /// daemon's own cgroup or an ancestor of it.
    static func target(path: String, uid: UInt32, own: String? = Freezer.own) -> String? {
        let parts = path.split(separator: "/")
        var chosen = path
        if let slice = parts.firstIndex(of: Substring("user-\(uid).slice")) {
            chosen = "/" + parts[...slice].joined(separator: "/")
        }
        guard chosen != "/", !chosen.isEmpty else { return nil }
        if let own, own == chosen || own.hasPrefix(chosen.hasSuffix("/") ? chosen : chosen + "/") {
            return nil
        }
        return chosen
    }

    /// Runs `body` with `members` held still: their cgroups frozen where that can be done, and
    /// of the rest, those of the users `stopping` stopped (every process of theirs). Waits up to
    /// `settle` for the freeze to take. A cgroup is frozen only when it is the user's slice or
    /// every process in it is gated (not root's, not `privilegedGroup`'s). `body` returns the processes it stopped itself: they
    /// stay stopped when the users' other processes go on. Returns which members were not held.
    ///
    /// `stoppedAll` hears of every user whose processes were all stopped, once they go on, with
    /// the stopped ancestors of theirs that were continued (see
    /// ``ancestorsToContinue(of:in:stoppedBefore:kept:continued:)``).
    @discardableResult
    static func holding(
        _ members: [Member], stopping: Set<UInt32>, privilegedGroup: UInt32? = nil,
        settle: Duration = .milliseconds(200), keeping body: () -> Set<RunningProcess>,
        stoppedAll: (_ uid: UInt32, _ ancestorsContinued: [RunningProcess]) -> Void = { _, _ in }
    ) -> [Member] {
        var groups: Set<String> = []
        var loose: [Member] = []
        if let mount {
            // A process forked since the members were listed is not among them: its
            // credentials tell.
            let known = Set(members.map(\.process.pid))
            let gated = { (pid: Int32) in
                known.contains(pid)
                    || ProcessCredentials(pid: pid).map { !$0.isPrivileged(group: privilegedGroup) } ?? true
            }
            var safe: [String: Bool] = [:]
            for member in members {
                guard let path = cgroup(of: member.process.pid),
                    let target = target(path: path, uid: member.uid)
                else {
                    loose.append(member)
                    continue
                }
                // The user's own slice, or a cgroup holding only gated processes: another
                // user's or root's process is never frozen with them.
                let ok =
                    safe[target]
                    ?? (target.hasSuffix("/user-\(member.uid).slice") || onlyHolds(gated, mount + target))
                safe[target] = ok
                if ok { groups.insert(mount + target) } else { loose.append(member) }
            }
        } else {
            loose = members
        }
        var frozen: [String] = []
        // One frozen already (by root, or by systemd around a suspend) holds its processes
        // still as it is, and is left as it was found.
        let freezing = groups.sorted().filter { !isFrozenByRequest($0) }
        if !freezing.isEmpty { _ = writeLedger(freezing) }
        for group in freezing where write("1", to: group + "/cgroup.freeze") {
            frozen.append(group)
        }
        defer {
            for group in frozen.reversed() { _ = write("0", to: group + "/cgroup.freeze") }
            if !freezing.isEmpty { unlink(ledger) }
        }
        // Users stopped, every process that was stopped before (system-wide, so that an
        // ancestor at any depth is known too: they stay so), and what the body stopped on
        // purpose (it stays so, and so do the ancestors it stopped).
        var stopped: [UInt32] = []
        var stoppedBefore: Set<RunningProcess> = []
        var kept: Set<RunningProcess> = []
        var users: [UInt32: UInt32] = [:]
        for member in loose where member.uid != 0 && stopping.contains(member.uid) {
            users[member.uid] = member.gid
        }
        if !users.isEmpty {
            stoppedBefore = Set(table().values.lazy.map(\.process).filter { $0.state == "T" })
        }
        for (uid, gid) in users.sorted(by: { $0.key < $1.key })
        where stepgate_signal_every_process_of(uid, gid, SIGSTOP) == 0 {
            stopped.append(uid)
        }
        defer {
            for uid in stopped {
                // Exactly what the stop reached: root's processes with the user's saved id too.
                for process in processes(reachedBy: [uid])
                where process.state == "T" && !stoppedBefore.contains(process) && !kept.contains(process) {
                    process.signal(SIGCONT)
                }
                // A `runuser`, `su` or `sudo` of root's stops itself when its child stops (it
                // passes the job-control stop on to its own parent) and waits for a SIGCONT
                // that only it would get: it is continued too, and sends its child one; and so
                // is its parent if that stopped itself in turn, on up. Looked at again every
                // 20 ms, up to five times, until a look finds none: one may still have been on
                // its way to stopping itself.
                var continued: [RunningProcess] = []
                for pass in 0..<5 {
                    if pass > 0 { usleep(20_000) }
                    let reached = processes(reachedBy: [uid])
                    let found = ancestorsToContinue(
                        of: reached, in: table(), stoppedBefore: stoppedBefore, kept: kept,
                        continued: Set(continued))
                    var any = false
                    for ancestor in found where ancestor.signal(SIGCONT) {
                        any = true
                        if !continued.contains(ancestor) { continued.append(ancestor) }
                    }
                    if pass > 0 && !any { break }
                }
                stoppedAll(uid, continued)
            }
        }
        let deadline = ContinuousClock.now + settle
        for group in frozen {
            while !isFrozen(group), ContinuousClock.now < deadline { usleep(2_000) }
        }
        if !stopped.isEmpty {
            let users = Set(stopped)
            while ContinuousClock.now < deadline,
                processes(reachedBy: users).contains(where: { $0.state == "R" })
            {
                usleep(2_000)
            }
        }
        kept = body()
        let stoppedUsers = Set(stopped)
        return loose.filter { !stoppedUsers.contains($0.uid) }
    }

    /// Where the cgroups being frozen are written down while they are, so that a daemon that
    /// died holding them thaws them when it starts again (``thawLeftovers()``).
    static let ledger = "/run/stepgate-frozen-cgroups"

    /// Thaws the cgroups a daemon that died while holding them left frozen.
    static func thawLeftovers() {
        guard let mount, let text = ProcFile.read(ledger, limit: 1 << 20) else { return }
        for line in text.bytes.split(separator: UInt8(ascii: "\n")) {
            let group = String(decoding: line, as: UTF8.self)
            guard group.hasPrefix(mount + "/"), !group.contains("/../") else { continue }
            _ = write("0", to: group + "/cgroup.freeze")
        }
        unlink(ledger)
    }

    /// Writes the ledger (mode 0600, never through a link); whether it was written.
    private static func writeLedger(_ groups: [String]) -> Bool {
        let fd = open(ledger, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        let bytes = Array(groups.map { $0 + "\n" }.joined().utf8)
        return bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress!, $0.count) } == bytes.count
    }

    /// Every process but init and the daemon, by id, as `/proc/PID/stat` shows it now: its
    /// identity and state, and its parent's id.
    typealias Table = [Int32: (process: RunningProcess, parent: Int32)]

    static func table() -> Table {
        var table: Table = [:]
        for pid in ProcFile.numbers(in: "/proc") ?? [] where pid > 1 && pid != getpid() {
            guard let stat = ProcFile.read("/proc/\(pid)/stat", limit: 4096),
                var process = RunningProcess(pid: pid, stat: stat.bytes),
                let parent = RunningProcess.parent(stat.bytes)
            else { continue }
            // A first thread that has ended: the state of a live one.
            if process.state == "Z", let live = RunningProcess(pid: pid), live == process {
                process.state = live.state
            }
            table[pid] = (process, parent)
        }
        return table
    }

    /// Which stopped ancestors of `reached` (the processes the stop-all reached, listed now;
    /// `table` is every process now) to continue once those went on. Walking up from each: every
    /// ancestor stopped now (or `continued` by an earlier look, which may have gone on since)
    /// that the stop-all did not reach, up to the first one that is running, was stopped before
    /// the stop-all, is init or the daemon. None that is above a process that stays stopped on
    /// purpose (`kept`) on such a walk: its stop is then the job's, as it would be without
    /// StepGate.
    static func ancestorsToContinue(
        of reached: [RunningProcess], in table: Table, stoppedBefore: Set<RunningProcess>,
        kept: Set<RunningProcess>, continued: Set<RunningProcess> = []
    ) -> [RunningProcess] {
        let theirs = Set(reached)
        func walk(from start: RunningProcess) -> [RunningProcess] {
            var chain: [RunningProcess] = []
            var child = start
            while let entry = table[child.pid], entry.process == child, entry.parent > 1,
                entry.parent != getpid(),
                let parent = table[entry.parent]?.process,
                // A parent starts before its child; a younger one holds a reused id.
                parent.startTime <= child.startTime, !theirs.contains(parent),
                !stoppedBefore.contains(parent), parent.state == "T" || continued.contains(parent),
                !chain.contains(parent)
            {
                chain.append(parent)
                child = parent
            }
            return chain
        }
        let held = Set(kept.flatMap(walk))
        var found: Set<RunningProcess> = []
        for process in reached {
            found.formUnion(walk(from: process).prefix { !held.contains($0) })
        }
        return found.filter { $0.state == "T" }.sorted { $0.pid < $1.pid }
    }

    /// The ancestors of processes about to be stopped and killed, and whether each was stopped
    /// then. Root's `runuser`, `su` or `sudo` above a gated process stops itself when its child
    /// stops (it passes the job-control stop on to its own parent) and waits for a SIGCONT that
    /// only the child would have got; once the child is killed nothing would ever send one.
    /// ``continueStopped(excluding:)`` continues the ancestors that stopped meanwhile.
    struct AncestorWatch {
        private(set) var ancestors: [RunningProcess: Bool] = [:]

        /// Stops every one of `processes` (so none can fork), kills them, and continues the
        /// ancestors that stopped meanwhile.
        static func stopAndKill(_ processes: [RunningProcess]) {
            var watch = AncestorWatch()
            for process in processes { watch.record(above: process) }
            for process in processes { process.signal(SIGSTOP) }
            for process in processes { process.signal(SIGKILL) }
            watch.continueStopped(excluding: Set(processes))
        }

        /// Records the ancestors of `process` (up to 64, never init or the daemon).
        mutating func record(above process: RunningProcess) {
            var child = process
            var depth = 0
            while depth < 64, let stat = ProcFile.read("/proc/\(child.pid)/stat", limit: 4096),
                RunningProcess(pid: child.pid, stat: stat.bytes) == child,
                let id = RunningProcess.parent(stat.bytes), id > 1, id != getpid(),
                let parent = RunningProcess(pid: id), parent.startTime <= child.startTime,
                ancestors[parent] == nil
            {
                ancestors[parent] = parent.state == "T"
                child = parent
                depth += 1
            }
        }

        /// Continues every recorded ancestor that was not stopped when recorded, is stopped now
        /// and is not among `excluding` (what was stopped on purpose); looked at up to five
        /// times, 20 ms apart, until a look finds none (one may still be on its way to stopping
        /// itself). Returns those continued.
        @discardableResult
        func continueStopped(excluding: Set<RunningProcess>) -> [RunningProcess] {
            let candidates = ancestors.filter { !$0.value && !excluding.contains($0.key) }.keys
            guard !candidates.isEmpty else { return [] }
            var continued: [RunningProcess] = []
            for pass in 0..<5 {
                usleep(20_000)
                var any = false
                for ancestor in candidates.sorted(by: { $0.pid < $1.pid }) {
                    guard let now = RunningProcess(pid: ancestor.pid), now == ancestor, now.state == "T",
                        now.signal(SIGCONT)
                    else { continue }
                    any = true
                    if !continued.contains(now) { continued.append(now) }
                }
                if pass > 0 && !any { break }
            }
            return continued
        }
    }

    /// The processes whose real user id is `uid`.
    static func processes(of uid: UInt32) -> [RunningProcess] { processes(of: [uid]) }

    static func processes(of uids: Set<UInt32>) -> [RunningProcess] {
        (ProcFile.numbers(in: "/proc") ?? []).compactMap { pid in
            guard pid > 1, pid != getpid(), let credentials = ProcessCredentials(pid: pid),
                let uid = credentials.uids.first, uids.contains(uid)
            else { return nil }
            return RunningProcess(pid: pid)
        }
    }

    /// The processes that a signal sent with one of `uids` as effective user id reaches (the
    /// kernel's `kill_ok_by_cred`, the sender's real user id being no one's): those whose real
    /// or saved user id is one of them. Root's process that took a user's id as its effective
    /// and saved one (`setresuid(0, U, U)`), or as its saved one only, is among them.
    static func processes(reachedBy uids: Set<UInt32>) -> [RunningProcess] {
        (ProcFile.numbers(in: "/proc") ?? []).compactMap { pid in
            guard pid > 1, pid != getpid(), let ids = ProcessCredentials(pid: pid)?.uids, ids.count > 2,
                uids.contains(ids[0]) || uids.contains(ids[2])
            else { return nil }
            return RunningProcess(pid: pid)
        }
    }

    /// Whether every process in `group` and the cgroups below it is `gated` (one gone counts as
    /// gated).
    static func onlyHolds(_ gated: (Int32) -> Bool, _ group: String) -> Bool {
        guard let text = ProcFile.read(group + "/cgroup.procs", limit: 1 << 22), text.complete else {
            return false
        }
        for word in text.bytes.split(separator: UInt8(ascii: "\n")) {
            guard let pid = ProcFile.number(word), pid <= Int32.max, gated(Int32(pid)) else { return false }
        }
        // Child cgroups are the folders (every control file is a plain file).
        for child in (try? FileManager.default.contentsOfDirectory(atPath: group)) ?? [] {
            var isFolder: ObjCBool = false
            let path = group + "/" + child
            if FileManager.default.fileExists(atPath: path, isDirectory: &isFolder), isFolder.boolValue,
                !onlyHolds(gated, path)
            {
                return false
            }
        }
        return true
    }

    /// Whether `group` was asked to be frozen (`cgroup.freeze` reads 1).
    static func isFrozenByRequest(_ group: String) -> Bool {
        guard let text = ProcFile.read(group + "/cgroup.freeze", limit: 16) else { return false }
        return text.bytes.first == UInt8(ascii: "1")
    }

    /// Whether `cgroup.events` of `group` says it is frozen.
    static func isFrozen(_ group: String) -> Bool {
        guard let text = ProcFile.read(group + "/cgroup.events", limit: 4096) else { return true }
        return text.bytes.split(separator: UInt8(ascii: "\n")).contains {
            $0.elementsEqual(Array("frozen 1".utf8))
        }
    }

    private static func write(_ text: String, to path: String) -> Bool {
        let fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        let bytes = Array(text.utf8)
        return bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress!, $0.count) } == bytes.count
    }
}
