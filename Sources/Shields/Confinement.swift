import CLinux
import Foundation
import Synchronization

/// Keeps what a gated user starts from an unlocked store's files in a cgroup of StepGate's, so
/// that at relock all of it is ended, wherever it has forked to and whatever it shows of itself.
///
/// While a store is unlocked, opening or executing one of its files waits for the exec
/// shield's answer (a fanotify permission event, allowed). Before the answer, a gated opener is
/// moved into the store's cgroup below ``root`` (`/sys/fs/cgroup/stepgate/store-games`),
/// together with every process that shares its memory or its descriptor table. What it starts
/// is born there, and no gated process can leave: moving a process needs write access to the
/// cgroups on both sides and to their common ancestor, and these are root's (in a user
/// namespace too: root there is not root of these files). At relock the cgroup is ended as a
/// whole (``kill(_:)``), or frozen in `stop` mode: a program that copies its code to anonymous
/// memory, renames itself, runs through a mount of its own or forks away every few milliseconds
/// is ended all the same.
///
/// A process that opened files of two stores is in the cgroup of both (`store-games+social`),
/// ended when either is shielded. Groups outlive the daemon (a restarted daemon finds them by
/// their names) and are removed once empty.
final class Confinement: Sendable {
    /// The cgroup below the cgroup v2 mount (`/stepgate`).
    let path: String
    /// Its folder (`/sys/fs/cgroup/stepgate`).
    let root: String
    /// Serialises making, moving into and removing groups.
    private let lock = Mutex(())

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// Whether `path` can name a confinement cgroup: absolute, of folders named with letters,
    /// digits, `-`, `_` and `.` (not `.` or `..`), not the root cgroup.
    static func isValidPath(_ path: String) -> Bool {
        guard path.hasPrefix("/"), path.utf8.count <= 200 else { return false }
        let parts = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        return !parts.isEmpty
            && parts.allSatisfy { part in
                !part.isEmpty && part != "." && part != ".."
                    && part.unicodeScalars.allSatisfy {
                        ($0.isASCII && CharacterSet.alphanumerics.contains($0))
                            || "-_.".unicodeScalars.contains($0)
                    }
            }
    }

    /// Makes (or finds) the cgroup `path` below the cgroup v2 mount.
    ///
    /// - Throws: Where there is no cgroup v2, the folder cannot be made, or it is not root's.
    init(path: String, mount: String? = Freezer.mount) throws(Failure) {
        guard Self.isValidPath(path) else { throw Failure(description: "\(path): not a valid cgroup path") }
        guard let mount else {
            throw Failure(description: "no cgroup v2 file system is mounted")
        }
        self.path = path
        root = mount + path
        var made = mount
        for part in path.split(separator: "/") {
            made += "/" + part
            if mkdir(made, 0o755) != 0 && errno != EEXIST {
                throw Failure(
                    description: "\(made): cannot make the cgroup: \(String(cString: strerror(errno)))")
            }
        }
        // Not a folder a user made (a delegated subtree): only root may move processes out.
        var info = stat()
        guard lstat(root, &info) == 0, info.st_mode & S_IFMT == S_IFDIR, info.st_uid == 0,
            info.st_mode & 0o022 == 0, access(root + "/cgroup.procs", F_OK) == 0
        else {
            throw Failure(description: "\(root): not a cgroup of root's that only root may change")
        }
    }

    /// The name of the group of `stores`.
    static func groupName(_ stores: Set<String>) -> String {
        "store-" + stores.sorted().joined(separator: "+")
    }

    /// The stores a group named `name` stands for; `nil` for any other name.
    static func stores(inGroupNamed name: Substring) -> Set<String>? {
        guard name.hasPrefix("store-") else { return nil }
        let stores = name.dropFirst(6).split(separator: "+").map(String.init)
        return stores.isEmpty ? nil : Set(stores)
    }

    /// The stores whose group `pid` is in; `nil` when it is in none of these groups (or gone).
    func stores(of pid: Int32) -> Set<String>? {
        guard let cgroup = Freezer.cgroup(of: pid), cgroup.hasPrefix(path + "/") else { return nil }
        let rest = cgroup.dropFirst(path.count + 1)
        return Self.stores(inGroupNamed: rest.split(separator: "/").first ?? "")
    }

    /// Moves `pid` into the group of `stores` and those it is in already; with `sharers`, then
    /// every process sharing its memory or descriptor table (`kcmp`) too. Nothing to do when
    /// it is gone.
    ///
    /// `sharers` is for a plain open (the loader, an interpreter, `mmap`): what the opener loads
    /// lands in memory other processes may share. An exec needs none: the program runs in a
    /// fresh memory and descriptor table (and the vfork parent that shares the old ones until
    /// then must not be moved). Sharers are looked for in passes over `/proc` until one finds
    /// nothing to move and sees no process end between listing it and comparing it (a chain of
    /// processes sharing the memory, each cloning the next and ending, is never where a pass
    /// looks); when no pass is clean, the open is refused.
    ///
    /// - Throws: When it could not be moved, or its sharers could not be told.
    func confine(_ pid: Int32, into stores: Set<String>, sharers: Bool) throws(Failure) {
        try lock.withLock { _ throws(Failure) in
            // Read through a live thread: a process whose first thread has ended shows that
            // thread's cgroup (the root) and has no memory of its own to compare.
            guard let live = liveThread(of: pid), let cgroup = Freezer.cgroup(of: live) else { return }
            var all = stores
            if cgroup.hasPrefix(path + "/"),
                let already = Self.stores(inGroupNamed: cgroup.dropFirst(path.count + 1))
            {
                all.formUnion(already)
            }
            let name = Self.groupName(all)
            guard name.utf8.count <= 255 else {
                throw Failure(description: "the cgroup name for stores \(all.sorted()) is too long")
            }
            let group = root + "/" + name
            let inside = path + "/" + name
            if cgroup != inside {
                if mkdir(group, 0o755) != 0 && errno != EEXIST {
                    throw Failure(
                        description: "\(group): cannot make the cgroup: \(String(cString: strerror(errno)))")
                }
                guard try move(pid, to: group) else { return }
            }
            guard sharers else { return }
            guard let opener = RunningProcess(pid: pid),
                let uid = ProcessCredentials(pid: pid)?.uids.first
            else { return }
            // A process that has ended (a zombie) compares as sharing nothing: one seen ending
            // since the last pass makes this pass unclean; a zombie left lying about does not
            // make every pass so.
            var zombies: Set<Int32> = []
            for _ in 0..<32 {
                var moved = 0
                var ended = 0
                var zombiesNow: Set<Int32> = []
                for other in ProcFile.numbers(in: "/proc") ?? [] where other != pid && other > 1 {
                    switch stepgate_shares_memory_or_files(live, other) {
                    case 1:
                        guard let there = Freezer.cgroup(of: other) else {
                            ended += 1
                            continue
                        }
                        if there != inside {
                            if try move(other, to: group) { moved += 1 } else { ended += 1 }
                        }
                    case -2: ended += 1
                    default:
                        guard let process = RunningProcess(pid: other) else {
                            ended += 1
                            continue
                        }
                        // Only one that could have shared the memory: the opener's user's,
                        // started since the opener was.
                        if process.state == "Z" || process.state == "X",
                            process.startTime >= opener.startTime,
                            ProcessCredentials(pid: other)?.uids.first ?? uid == uid
                        {
                            zombiesNow.insert(other)
                            if !zombies.contains(other) { ended += 1 }
                        }
                    }
                }
                zombies = zombiesNow
                if moved == 0 && ended == 0 { return }
            }
            throw Failure(
                description:
                    "processes kept ending while those sharing the opener's memory were looked for (pid \(pid))"
            )
        }
    }

    /// A thread of `pid` that has not ended.
    private func liveThread(of pid: Int32) -> Int32? {
        for thread in (ProcFile.numbers(in: "/proc/\(pid)/task") ?? []).sorted() {
            guard let stat = ProcFile.read("/proc/\(pid)/task/\(thread)/stat", limit: 4096),
                let close = stat.bytes.lastIndex(of: UInt8(ascii: ")")), close + 2 < stat.bytes.count
            else { continue }
            if stat.bytes[close + 2] != UInt8(ascii: "Z") && stat.bytes[close + 2] != UInt8(ascii: "X") {
                return thread
            }
        }
        return nil
    }

    /// Writes `pid` to the group's `cgroup.procs`; whether it was moved (`false`: it is gone).
    private func move(_ pid: Int32, to group: String) throws(Failure) -> Bool {
        let fd = open(group + "/cgroup.procs", O_WRONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else {
            throw Failure(description: "\(group)/cgroup.procs: \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        let text = Array("\(pid)".utf8)
        if text.withUnsafeBytes({ Glibc.write(fd, $0.baseAddress!, $0.count) }) == text.count { return true }
        let code = errno
        if code == ESRCH { return false }
        throw Failure(
            description: "cannot move process \(pid) to \(group): \(String(cString: strerror(code)))")
    }

    /// A group: its folder and the stores it stands for.
    struct Group: Hashable {
        var folder: String
        var stores: Set<String>
    }

    /// Every group there is now.
    func groups() -> [Group] {
        ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).sorted().compactMap { name in
            Self.stores(inGroupNamed: Substring(name)).map { Group(folder: root + "/" + name, stores: $0) }
        }
    }

    /// The processes in `group` now.
    func processes(in group: Group) -> [RunningProcess] {
        guard let text = ProcFile.read(group.folder + "/cgroup.procs", limit: 1 << 24) else { return [] }
        return text.bytes.split(separator: UInt8(ascii: "\n")).compactMap { word in
            ProcFile.number(word).flatMap { $0 <= Int32.max ? RunningProcess(pid: Int32($0)) : nil }
        }
    }

    /// Kills every process in `group` at once (`cgroup.kill`, Linux 5.14; before that, the group
    /// is frozen and each process killed).
    func kill(_ group: Group) {
        if write("1", to: group.folder + "/cgroup.kill") { return }
        let wasFrozen = Freezer.isFrozenByRequest(group.folder)
        _ = write("1", to: group.folder + "/cgroup.freeze")
        for _ in 0..<100 where !Freezer.isFrozen(group.folder) { usleep(2_000) }
        for process in processes(in: group) { process.signal(SIGKILL) }
        if !wasFrozen { _ = write("0", to: group.folder + "/cgroup.freeze") }
    }

    /// Freezes (or thaws) `group`, when it is not so already. A thawed group's processes are
    /// sent SIGCONT: a stop sent to one while it was frozen (the scan of `stop` mode finds it
    /// too) would otherwise hold it when it goes on.
    func freeze(_ group: Group, _ frozen: Bool) {
        guard Freezer.isFrozenByRequest(group.folder) != frozen else { return }
        _ = write(frozen ? "1" : "0", to: group.folder + "/cgroup.freeze")
        if !frozen { for process in processes(in: group) { process.signal(SIGCONT) } }
    }

    /// Removes the groups nothing is in; not now when an opener is being moved (the reaper
    /// never waits on a flood of openers: the next round removes them).
    func removeEmpty() {
        _ = lock.withLockIfAvailable { _ in
            for group in groups() {
                guard let text = ProcFile.read(group.folder + "/cgroup.events", limit: 4096),
                    text.bytes.split(separator: UInt8(ascii: "\n")).contains(where: {
                        $0.elementsEqual(Array("populated 0".utf8))
                    })
                else { continue }
                rmdir(group.folder)
            }
        }
    }

    private func write(_ text: String, to path: String) -> Bool {
        let fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        let bytes = Array(text.utf8)
        return bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress!, $0.count) } == bytes.count
    }
}
