internal import CLinux
import Foundation
import Synchronization
public import UnlockPolicy

/// Denies running selected programs with the kernel's fanotify permission events, while their
/// store is shielded.
///
/// Two events are answered for each shielded file: executing it (`FAN_OPEN_EXEC_PERM`) is
/// denied to everyone, and opening it at all (`FAN_OPEN_PERM`) is denied to every process
/// that is not wholly root (real, effective, saved and file-system user ids 0) and not in the
/// admin group. So a gated user cannot run the program through the dynamic loader
/// (`ld.so PROGRAM`), an interpreter (`sh script`), a copy, or `memfd_create` + `fexecve` of
/// its bytes: each of those has to open the file first. Root and the admin group can still
/// read it, so package managers upgrade it as usual.
///
/// Only the selected programs' inodes are marked — not mounts or filesystems — so unrelated
/// programs generate no events at all and cost nothing, and a bug here can only ever delay
/// the shielded programs. Dedicated threads (``responderCount``, at a raised priority, so a
/// user flooding the machine with opens or busy processes does not starve them) answer every
/// permission event at once. The group's queue is unlimited: a full queue would make the kernel
/// let an open through unanswered, and a user can block as many opens as they have tasks. If
/// StepGate dies, the kernel closes the fanotify group and allows everything.
///
/// While a store is unlocked, opening or executing its files is allowed, and every gated
/// process that does is remembered and, with a ``Confinement`` (cgroup v2), moved into the
/// store's cgroup before the answer: when the store is shielded again, the cgroup is ended as a
/// whole, and the openers still running and their descendants count as running its programs
/// (see ``Reaper``). That is how a script read by an interpreter through a name of the user's
/// own (`python3 -m game`, a link, standard input) is found at relock (its interpreter's maps
/// and command line do not show it), and a game that hides what it runs and forks away from
/// its opener is ended all the same. Without a confinement the files carry notification marks
/// (`FAN_OPEN`, `FAN_OPEN_EXEC`: nothing waits for an answer) and only the openers are
/// remembered.
///
/// Programs are matched by their resolved path (symlinks followed; a bare name is looked up on
/// `PATH`), and desktop categories through the `.desktop` files' `Exec=` lines. Every
/// ``refresh()`` re-resolves and re-marks, so a replaced or upgraded binary (a new inode) is
/// shielded again; the folders of shielded programs are watched (inotify), and `onChange` is
/// called when something in them changes, so the owner can refresh at once.
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
    /// Targets of stores that were shielded and are not now, per store: their files' openers
    /// are remembered.
    private var watchedTargets: [String: Set<Target>] = [:]
    /// Files carrying notification marks (see ``watchMarks``) and the path each was marked
    /// through.
    private var watchMarked: [FileID: String] = [:]
    /// What the responder thread denies; shared with it.
    private let denied: Denied
    private var responders: [Thread] = []
    /// How many threads answer permission events. A shielded file opened by many tasks at once
    /// (a flood meant to delay root's or an admin's open) is answered this many at a time.
    static let responderCount = 3
    /// Watches the folders of shielded files; see ``onChange``.
    private let watcher: FolderWatcher?
    /// Refuses gated opens of files in the folders of shielded files until they are judged
    /// (see ``FolderGuard``); `nil` where its group cannot be made.
    private let folderGuard: FolderGuard?
    /// The files each shielded store stands for, from the last recheck.
    private var storeFiles: [String: Set<FileID>] = [:]
    /// The paths each shielded store's files were found under, from the last recheck.
    private var storePaths: [String: Set<String>] = [:]
    /// Per store and target, every file it has been shielded through (kept while the target is
    /// shielded, so moving or renaming the file does not free it).
    private var stickyFiles: [String: [Target: Set<FileID>]] = [:]
    /// A descriptor (`O_PATH`) of each sticky file, held while it is sticky: a file removed by an
    /// upgrade stays allocated, so its inode number cannot go to an unrelated new file (which
    /// would then count as the shielded program, and whoever ran it be ended).
    private var stickyHandles: [FileID: Int32] = [:]
    /// What happens to a store's running programs when it is shielded.
    private let runningAction: @Sendable (String) -> RunningProgramAction
    /// Between SIGTERM and SIGKILL.
    private let gracePeriod: Duration
    /// Ends what runs a shielded program, off the shield's own path (see ``Reaper``).
    private let reaper: Reaper
    /// Reads the application folders' `.desktop` files, remembering them until they change.
    private var desktopReader = DesktopEntryReader()
    /// Where what gated users start from unlocked stores' files is kept.
    private let confinement: Confinement?
    /// Why programs started during an unlock are not kept in a cgroup (no cgroup v2, …);
    /// `nil` when they are, or when no confinement was asked for.
    public let confinementProblem: String?
    /// The events marked on the files of stores that are not shielded now.
    private let watchMask: UInt64

    /// An exec of a watched file by a process.
    /// An exec allowed, by the process (its id and start time: a process id used again by
    /// another process is not the same twin) and the file.
    struct ExecTwin: Hashable, Sendable {
        var pid: Int32
        var startTime: UInt64
        var file: FileID
    }

    struct FileID: Hashable, Sendable {
        var device: UInt64
        var inode: UInt64
    }

    final class Denied: Sendable {
        let files = Mutex<[FileID: String]>([:])
        let counters = Mutex<(allowed: Int, denied: Int, overflows: Int)>((0, 0, 0))
        /// Queue overflows already reported by a recheck.
        let reportedOverflows = Atomic<Int>(0)
        let stopped = Atomic<Bool>(false)
        /// How many responders run in the real-time class.
        let realtime = Atomic<Int>(0)
        /// Whether permission events are answered yet: an adopted group's queued events wait
        /// (the openers blocked) until the new owner has decided what is shielded.
        let answering = Atomic<Bool>(true)
        /// The group whose members may open shielded files (besides root).
        let privilegedGroup: UInt32?
        /// The stores that shield each denied file, and who is told of a denied launch.
        let stores = Mutex<[FileID: [String]]>([:])
        let onDenied = Mutex<Callback<ExecDenial>?>(nil)
        /// Who is told of the shield's warnings (a scan of running programs that took long).
        let onWarning = Mutex<Callback<String>?>(nil)
        /// Who is told of the shield's notices (every process of a user stopped for a scan).
        let onNotice = Mutex<Callback<String>?>(nil)
        /// Files of unlocked stores whose gated openers are remembered (and confined), with
        /// the stores whose files they are.
        let watched = Mutex<[FileID: Set<String>]>([:])
        /// Where gated openers of watched files are moved before their open is allowed.
        let confinement: Confinement?
        /// Execs of watched files allowed, whose plain open (the kernel's second event for an
        /// exec) has not come yet.
        let execTwins = Mutex<Set<ExecTwin>>([])
        /// Why an opener could not be confined (its open was refused), per store, until a
        /// recheck reports it.
        let confinementFailures = Mutex<[String: String]>([:])
        /// Gated processes that opened a watched file, per file, until its store is shielded.
        let openers = Mutex<Openers>(Openers())

        struct Openers {
            var byFile: [FileID: Set<RunningProcess>] = [:]
            var count = 0
            /// The count after the last pruning of ended processes.
            var pruned = 0

            mutating func insert(_ process: RunningProcess, for file: FileID) {
                guard byFile[file, default: []].insert(process).inserted else { return }
                count += 1
                // Bounded by the processes alive: ended ones are dropped whenever the count has
                // doubled since the last pruning.
                if count > 2 * pruned + 1024 {
                    byFile = byFile.mapValues { $0.filter(\.isAlive) }.filter { !$0.value.isEmpty }
                    count = byFile.values.reduce(0) { $0 + $1.count }
                    pruned = count
                }
            }

            /// Takes the openers of `files` out.
            mutating func take(_ files: Set<FileID>) -> Set<RunningProcess> {
                var taken: Set<RunningProcess> = []
                for file in files {
                    if let set = byFile.removeValue(forKey: file) {
                        taken.formUnion(set)
                        count -= set.count
                    }
                }
                return taken
            }
        }

        init(privilegedGroup: UInt32?, confinement: Confinement?) {
            self.privilegedGroup = privilegedGroup
            self.confinement = confinement
        }
    }

    /// Called (on the watcher's thread) when a folder holding a shielded file changes: a file
    /// was created, moved in, replaced or removed there. Refresh from your own loop.
    public var onChange: (@Sendable () -> Void)? {
        get {
            guard let box = watcher?.onChange.withLock({ $0 }) else { return nil }
            return { box.call(()) }
        }
        set {
            let box: Callback<Void>? = newValue.map { call in Callback { (_: Void) in call() } }
            watcher?.onChange.withLock { $0 = box }
        }
    }

    /// Where the shield's warnings go (a scan of running programs that took long).
    public var onWarning: (@Sendable (String) -> Void)? {
        get { denied.onWarning.withLock { $0 }?.call }
        set {
            let box: Callback<String>? = newValue.map { Callback($0) }
            denied.onWarning.withLock { $0 = box }
        }
    }

    /// Where the shield's notices go (every process of a gated user stopped for a scan, where no
    /// cgroup could be frozen; at most one a minute).
    public var onNotice: (@Sendable (String) -> Void)? {
        get { denied.onNotice.withLock { $0 }?.call }
        set {
            let box: Callback<String>? = newValue.map { Callback($0) }
            denied.onNotice.withLock { $0 = box }
        }
    }

    /// Called on the responder's thread, after the answer was written, for every launch denied
    /// (an exec, not a plain open). It must not block: post it to your own loop.
    public var onDenied: (@Sendable (ExecDenial) -> Void)? {
        get { denialCallback }
        set {
            let box: Callback<ExecDenial>? = newValue.map { Callback($0) }
            denied.onDenied.withLock { $0 = box }
        }
    }

    /// What the responder reads for each denied launch (see ``onDenied``).
    var denialCallback: (@Sendable (ExecDenial) -> Void)? { denied.onDenied.withLock { $0 }?.call }

    /// Where `.desktop` files are looked for by default.
    public static let standardApplicationDirectories = [
        "/usr/share/applications", "/usr/local/share/applications",
        "/var/lib/flatpak/exports/share/applications",
    ]

    /// Whether `path` can name the confinement cgroup (see ``init(searchPath:applicationDirectories:privilegedGroup:runningAction:gracePeriod:confinement:adopting:)``).
    public static func isValidCgroupPath(_ path: String) -> Bool { Confinement.isValidPath(path) }

    /// Removes the confinement cgroups below `path` that nothing is in, and `path` itself when
    /// that leaves it empty (a daemon stopping; groups with processes stay for the next one).
    public static func removeEmptyCgroups(_ path: String) {
        guard getuid() == 0, let mount = Freezer.mount, Confinement.isValidPath(path),
            access(mount + path, F_OK) == 0, let confinement = try? Confinement(path: path)
        else { return }
        confinement.removeEmpty()
        rmdir(confinement.root)
    }

    /// The events marked on every shielded file.
    static let marks = UInt64(FAN_OPEN_EXEC_PERM) | UInt64(FAN_OPEN_PERM)
    /// The events marked on the files of stores that are not shielded now, without a
    /// confinement: notifications, which nothing waits for. With one, the permission events of
    /// ``marks``: each opener is confined before its open is allowed.
    static let watchMarks = UInt64(FAN_OPEN) | UInt64(FAN_OPEN_EXEC)

    /// Opens a fanotify group and starts the responder thread.
    ///
    /// - Parameters:
    ///   - searchPath: `PATH` for resolving program names.
    ///   - applicationDirectories: Where `.desktop` files are looked for.
    ///   - privilegedGroup: The admin group's id: its members (and root) may still open the
    ///     shielded files, though not execute them.
    ///   - runningAction: Per store, what happens to its programs already running when it is
    ///     shielded (and at every recheck while it is).
    ///   - gracePeriod: How long a terminated program has between SIGTERM and SIGKILL.
    ///   - confinement: The cgroup (v2, below its mount: `/stepgate`) that what gated users
    ///     start from an unlocked store's files is kept in (see ``Confinement``); `nil` for none.
    ///     Where it cannot be made, the shield works without it and says why in
    ///     ``confinementProblem``.
    public init(
        searchPath: String =
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/games:/usr/local/games",
        applicationDirectories: [String] = standardApplicationDirectories,
        privilegedGroup: UInt32? = nil,
        runningAction: @escaping @Sendable (String) -> RunningProgramAction = { _ in .terminate },
        gracePeriod: Duration = .seconds(10),
        confinement confinementPath: String? = nil,
        adopting inherited: Int32? = nil
    ) throws(ShieldError) {
        var confinement: Confinement?
        var problem: String?
        if let confinementPath {
            do {
                confinement = try Confinement(path: confinementPath)
            } catch {
                problem = error.description
            }
        }
        self.confinement = confinement
        confinementProblem = problem
        watchMask = confinement == nil ? Self.watchMarks : Self.marks
        self.runningAction = runningAction
        self.gracePeriod = gracePeriod
        self.searchPath = searchPath
        self.applicationDirectories = applicationDirectories
        if let inherited {
            // The group a previous instance left in systemd's file descriptor store: its marks
            // held through the restart, and opens of the files waited for an answer.
            guard Self.isFanotifyGroup(inherited) else {
                throw ShieldError(
                    shield: "exec", message: "descriptor \(inherited) handed over is not a fanotify group")
            }
            _ = fcntl(inherited, F_SETFD, FD_CLOEXEC)
            _ = fcntl(inherited, F_SETFL, fcntl(inherited, F_GETFL) | O_NONBLOCK)
            group = inherited
            denied = Denied(privilegedGroup: privilegedGroup, confinement: confinement)
            reaper = Reaper(
                privilegedGroup: privilegedGroup, grace: gracePeriod, confinement: confinement,
                log: { [denied] in denied.onWarning.withLock { $0 }?.call($0) },
                notice: { [denied] in denied.onNotice.withLock { $0 }?.call($0) })
            denied.answering.store(false, ordering: .relaxed)
            watcher = FolderWatcher()
            folderGuard = FolderGuard(privilegedGroup: privilegedGroup)
            responders = Self.startResponders(group: group, denied: denied)
            return
        }
        // FAN_UNLIMITED_QUEUE: with the default limit (16,384 events) a user who blocks that many
        // opens at once makes the kernel allow the next ones unanswered.
        let fd = fanotify_init(
            UInt32(FAN_CLASS_CONTENT | FAN_CLOEXEC | FAN_NONBLOCK | FAN_UNLIMITED_QUEUE),
            UInt32(O_RDONLY | O_CLOEXEC))
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
        denied = Denied(privilegedGroup: privilegedGroup, confinement: confinement)
        reaper = Reaper(
            privilegedGroup: privilegedGroup, grace: gracePeriod, confinement: confinement,
            log: { [denied] in denied.onWarning.withLock { $0 }?.call($0) },
            notice: { [denied] in denied.onNotice.withLock { $0 }?.call($0) })
        watcher = FolderWatcher()
        folderGuard = FolderGuard(privilegedGroup: privilegedGroup)
        responders = Self.startResponders(group: group, denied: denied)
    }

    private static func startResponders(group: Int32, denied: Denied) -> [Thread] {
        (0..<responderCount).map { index in
            let thread = Thread { ExecDenyShield.respond(group: group, denied: denied) }
            thread.name = "stepgate-exec-deny-\(index)"
            thread.start()
            return thread
        }
    }

    deinit {
        denied.stopped.store(true, ordering: .relaxed)
        // The responders poll with a short timeout and close nothing; wait for them briefly.
        var waited = 0
        while responders.contains(where: { !$0.isFinished }) && waited < 100 {
            usleep(5000)
            waited += 1
        }
        for fd in stickyHandles.values { close(fd) }
        close(group)  // the kernel allows every pending event of a closed group
        folderGuard?.stop()
        watcher?.stop()
        reaper.stop()
        // Groups with processes in them stay for the next instance, and so does their parent.
        if let confinement {
            confinement.removeEmpty()
            rmdir(confinement.root)
        }
    }

    /// The fanotify group's descriptor, to hand to systemd's file descriptor store so the marks
    /// outlive a restart of the daemon.
    public var groupDescriptor: Int32 { group }

    /// Whether this shield took over a group handed over by a previous instance and still holds
    /// its queued events.
    public var isHoldingEvents: Bool { !denied.answering.load(ordering: .relaxed) }

    /// Starts answering permission events (a no-op unless the group was adopted): call once the
    /// first ``apply(_:context:)`` or ``recheck()`` has decided what is shielded. Marks the
    /// previous instance left on files no longer shielded are then simply allowed.
    public func startAnswering() { denied.answering.store(true, ordering: .relaxed) }

    /// Stops answering until ``startAnswering()``: opens of shielded files wait in the queue (for
    /// tests of what a full queue does).
    func holdEvents() { denied.answering.store(false, ordering: .relaxed) }

    static func isFanotifyGroup(_ fd: Int32) -> Bool {
        var buffer = [CChar](repeating: 0, count: 64)
        let length = readlink("/proc/self/fd/\(fd)", &buffer, buffer.count - 1)
        guard length > 0 else { return false }
        return String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            == "anon_inode:[fanotify]"
    }

    /// How many of the responder threads run in the real-time class (all of them as root).
    public var realtimeResponders: Int { denied.realtime.load(ordering: .relaxed) }

    /// Permission events answered so far: allowed and denied.
    public var answered: (allowed: Int, denied: Int) { denied.counters.withLock { ($0.allowed, $0.denied) } }

    public func apply(_ selection: [Target], context: ShieldContext) throws(ShieldError) {
        var storeTargets = targets[context.store] ?? []
        storeTargets.formUnion(selection)
        targets[context.store] = storeTargets
        watchedTargets[context.store]?.subtract(selection)
        if watchedTargets[context.store]?.isEmpty == true { watchedTargets[context.store] = nil }
        defer { actOnRunningPrograms() }
        try refresh()
    }

    public func remove(_ selection: [Target], context: ShieldContext) throws(ShieldError) {
        let before = storeFiles[context.store] ?? []
        targets[context.store]?.subtract(selection)
        if targets[context.store]?.isEmpty == true { targets[context.store] = nil }
        watchedTargets[context.store, default: []].formUnion(selection)
        defer {
            // Programs stopped while shielded go on, unless another store still shields them
            // (the reaper does it, after it has stopped acting for this store).
            let stillShielded = denied.files.withLock { Set($0.keys) }
            actOnRunningPrograms(resume: before.subtracting(stillShielded))
        }
        try refresh()
    }

    /// Hands the shielded stores' files and actions to the reaper, which ends (or stops) what
    /// runs them on a thread of its own; marking never waits on it.
    private func actOnRunningPrograms(resume: Set<FileID> = []) {
        var stores: [String: (files: Set<FileID>, paths: Set<String>, action: RunningProgramAction)] = [:]
        var openers: [String: Set<RunningProcess>] = [:]
        denied.openers.withLock { recorded in
            for (store, files) in storeFiles.sorted(by: { $0.key < $1.key }) {
                stores[store] = (files, storePaths[store] ?? [], runningAction(store))
                // Who opened the files while they were not shielded (the first store to take a
                // file's openers acts on them).
                let taken = recorded.take(files)
                if !taken.isEmpty { openers[store] = taken }
            }
        }
        reaper.update(stores, openers: openers, resume: resume)
    }

    /// What one ``stopAndKill(kill:_:)`` found.
    struct Sweep {
        /// Found running, and not stopped already (a process stopped by an earlier round is
        /// found again in `stop` mode).
        var running: [RunningProcess] = []
        /// Found, but gone before the stop reached it: a program forking away (or one that
        /// ended just then).
        var vanished: [RunningProcess] = []
        /// Every process stopped (and, with `kill`, killed).
        var stopped: Set<RunningProcess> = []
    }

    /// Stops every process `find` reports, the moment it is found (a stopped process cannot
    /// fork), and its children (a stopped parent cannot leave them to init), and then kills it
    /// unless `kill` is false; in sweeps until three in a row find nothing new.
    @discardableResult
    static func stopAndKill(kill: Bool = true, _ find: (_ found: (RunningProcess) -> Void) -> Void) -> Sweep {
        var stopped: Set<RunningProcess> = []
        var sweep = Sweep()
        var quiet = 0
        // Root's `runuser` above a killed process would stay stopped for good (see
        // Freezer.AncestorWatch).
        var watch = Freezer.AncestorWatch()
        defer { if kill { watch.continueStopped(excluding: stopped) } }
        // A work list, not recursion: a chain of tens of thousands of processes (pid_max is 4
        // million on many systems) must not overflow the reaper's stack.
        func stop(_ found: RunningProcess) {
            var pending = [found]
            var stoppedHere: [RunningProcess] = []
            if kill { watch.record(above: found) }
            while let process = pending.popLast() {
                guard stopped.insert(process).inserted else { continue }
                if process.signal(SIGSTOP) {
                    if process.state != "T" { sweep.running.append(process) }
                    stoppedHere.append(process)
                    pending += process.children
                } else if process.pid == found.pid {
                    sweep.vanished.append(process)
                }
            }
            // Their children are held: they may go.
            if kill { for process in stoppedHere { process.signal(SIGKILL) } }
        }
        for _ in 0..<50 where quiet < 3 {
            let before = stopped.count
            find { stop($0) }
            quiet = stopped.count == before ? quiet + 1 : 0
        }
        sweep.stopped = stopped
        return sweep
    }

    public func inForce() throws(ShieldError) -> [String: Set<Target>] {
        let files = denied.files.withLock { $0 }
        var result: [String: Set<Target>] = [:]
        for (store, set) in targets {
            // In force when the target resolves to files, and every one is marked and denied.
            for target in set {
                let (found, problems) = resolve(target)
                let ids = found.map { FileID(device: $0.device, inode: $0.inode) }
                // A folder with no program in it yet is in force once its folder is guarded.
                let emptyFolder = target.kind == .executable && ProgramEntry(target.value).isFolder
                if (!ids.isEmpty || emptyFolder) && problems.isEmpty
                    && ids.allSatisfy({ files[$0] != nil && marked[$0] != nil })
                {
                    result[store, default: []].insert(target)
                }
            }
        }
        return result
    }

    /// Re-resolves every shielded target, marks the files, and unmarks those no longer shielded.
    ///
    /// - Throws: Every problem, for every store, in one error.
    public func refresh() throws(ShieldError) {
        let problems = remark()
        if !problems.isEmpty {
            let text = Set(problems.values.map(\.message)).sorted().joined(separator: "; ")
            throw ShieldError(shield: name, message: text)
        }
    }

    /// Re-resolves and re-marks every shielded target (see ``refresh()``); returns the problems
    /// per store (empty when every shielded file is marked).
    public func recheck() -> [String: ShieldError] {
        var problems = remark()
        actOnRunningPrograms()
        let failures = denied.confinementFailures.withLock { failures in
            defer { failures = [:] }
            return failures
        }
        for (store, message) in failures where problems[store] == nil {
            problems[store] = ShieldError(
                shield: name, message: "a program started during the unlock was refused: \(message)")
        }
        let overflows = denied.counters.withLock { $0.overflows }
        if overflows > denied.reportedOverflows.exchange(overflows, ordering: .relaxed) {
            for store in targets.keys where problems[store] == nil {
                problems[store] = ShieldError(
                    shield: name,
                    message: "the kernel's fanotify queue overflowed: opens may have gone through unanswered")
            }
        }
        return problems
    }

    private func remark() -> [String: ShieldError] {
        var targetFiles: [Target: [TrustedPath]] = [:]
        var problemsByTarget: [Target: [String]] = [:]
        // Programs named by path first: nothing read from the application folders can delay them.
        let all = targets.values.reduce(into: Set<Target>(), { $0.formUnion($1) })
        // The folders whose new files wait for a judgement (see FolderGuard), the names a
        // shielded file has there, and the shielded Python modules.
        var guarded = FolderGuard.Plan()
        for target in all.filter({ $0.kind != .desktopCategory }).sorted()
            + all.filter({ $0.kind == .desktopCategory }).sorted()
        {
            let (files, problems) = resolve(target)
            if target.kind == .executable {
                switch ProgramEntry(target.value) {
                case .program(let name): if let path = candidatePath(name) { guarded.add(path) }
                case .folder, .pattern: guarded.folders.formUnion(ProgramEntry(target.value).expand().folders)
                }
            }
            for file in files { guarded.add(file.path) }
            var all = problems
            if files.isEmpty && problems.isEmpty && target.kind == .executable
                && ProgramEntry(target.value).isProgram
            {
                all.append("\(target.value): not found")
            }
            for file in files {
                let id = FileID(device: file.device, inode: file.inode)
                // Marked again on every recheck (adding a mark that is there is a no-op): a
                // replaced file can reuse the inode number of one marked before, whose mark died
                // with it, so "marked once" proves nothing.
                if fanotify_mark(group, UInt32(FAN_MARK_ADD), Self.marks, AT_FDCWD, file.path) != 0 {
                    all.append("\(file.path): fanotify_mark: \(String(cString: strerror(errno)))")
                    continue
                }
                marked[id] = file.path
                targetFiles[target, default: []].append(file)
            }
            if !all.isEmpty { problemsByTarget[target] = all }
        }
        // A file once shielded for a target stays denied while the target is shielded, wherever
        // it is moved or renamed to: only the daemon lets it go.
        var sticky: [String: [Target: Set<FileID>]] = [:]
        for (store, set) in targets {
            for target in set {
                var ids = stickyFiles[store]?[target] ?? []
                for file in targetFiles[target] ?? [] {
                    ids.insert(FileID(device: file.device, inode: file.inode))
                }
                sticky[store, default: [:]][target] = ids
            }
        }
        stickyFiles = sticky
        holdStickyFiles(targetFiles.values.flatMap { $0 })
        var wanted: [FileID: String] = [:]
        for ids in sticky.values.flatMap(\.values) {
            for id in ids { wanted[id] = marked[id] ?? "" }
        }
        denied.files.withLock { $0 = wanted }
        var owners: [FileID: Set<String>] = [:]
        for (store, byTarget) in sticky {
            for ids in byTarget.values { for id in ids { owners[id, default: []].insert(store) } }
        }
        denied.stores.withLock { $0 = owners.mapValues { $0.sorted() } }
        if let folderGuard {
            guarded.makeCacheFolders()
            folderGuard.guardFolders(guarded, shielded: wanted)
        }
        // Files of unlocked stores are watched first: one that was shielded until now is never
        // left unmarked in between (an opener then would not be confined).
        rewatch(wanted: wanted)
        // Unmark what is no longer shielded, through its path if that still leads to the same
        // file (otherwise the mark is harmless: the file is allowed, and the mark dies with it).
        // A watched file keeps the permission events its watch is made of.
        for (id, path) in marked where wanted[id] == nil {
            if fileID(path) == id, watchMarked[id] == nil || watchMask != Self.marks {
                _ = fanotify_mark(group, UInt32(FAN_MARK_REMOVE), Self.marks, AT_FDCWD, path)
            }
            marked[id] = nil
        }
        // The folders of shielded files (and a Python module's `__pycache__`) are watched, so a
        // file replaced or a cache written there is shielded at once; and a desktop entry added
        // or changed is noticed at once, not at the next tick.
        var folders = guarded.folders
        if all.contains(where: { $0.kind == .desktopCategory }) {
            for directory in applicationDirectories {
                folders.formUnion(DesktopEntryReader.withSubfolders(directory))
            }
        }
        watcher?.watch(folders)
        storeFiles = sticky.mapValues { $0.values.reduce(into: Set()) { $0.formUnion($1) } }
        storePaths = targets.mapValues { set in Set(set.flatMap { targetFiles[$0]?.map(\.path) ?? [] }) }
        var result: [String: ShieldError] = [:]
        for (store, set) in targets {
            let messages = set.sorted().flatMap { problemsByTarget[$0] ?? [] }
            if !messages.isEmpty {
                result[store] = ShieldError(shield: name, message: messages.joined(separator: "; "))
            }
        }
        return result
    }

    /// Holds a descriptor of every sticky file found now (through `files`, as just resolved),
    /// and lets go of those no longer sticky.
    private func holdStickyFiles(_ files: [TrustedPath]) {
        let wanted = stickyFiles.values.reduce(into: Set<FileID>()) { all, byTarget in
            for ids in byTarget.values { all.formUnion(ids) }
        }
        for file in files {
            let id = FileID(device: file.device, inode: file.inode)
            guard wanted.contains(id), stickyHandles[id] == nil else { continue }
            let fd = open(file.path, stepgate_O_PATH | O_CLOEXEC | O_NOFOLLOW)
            guard fd >= 0 else { continue }
            var info = stat()
            if fstat(fd, &info) == 0, UInt64(info.st_dev) == id.device, UInt64(info.st_ino) == id.inode {
                stickyHandles[id] = fd
            } else {
                close(fd)
            }
        }
        for (id, fd) in stickyHandles where !wanted.contains(id) {
            close(fd)
            stickyHandles[id] = nil
        }
    }

    /// Marks the files of unlocked stores' targets (those not shielded by another store) for
    /// notifications, and unmarks those no longer watched; forgets the openers of files that
    /// are neither watched nor shielded.
    private func rewatch(wanted: [FileID: String]) {
        var watch: [FileID: String] = [:]
        var stores: [FileID: Set<String>] = [:]
        for (store, targets) in watchedTargets.sorted(by: { $0.key < $1.key }) {
            for target in targets.sorted() {
                for file in resolve(target).files {
                    let id = FileID(device: file.device, inode: file.inode)
                    guard wanted[id] == nil else { continue }
                    if watch[id] == nil {
                        guard fanotify_mark(group, UInt32(FAN_MARK_ADD), watchMask, AT_FDCWD, file.path) == 0
                        else { continue }
                        watch[id] = file.path
                    }
                    stores[id, default: []].insert(store)
                }
            }
        }
        for (id, path) in watchMarked where watch[id] == nil {
            // A file shielded now keeps its marks when they are the watch's events.
            if fileID(path) == id, wanted[id] == nil || watchMask != Self.marks {
                _ = fanotify_mark(group, UInt32(FAN_MARK_REMOVE), watchMask, AT_FDCWD, path)
            }
        }
        watchMarked = watch
        let watched = Set(watch.keys)
        denied.watched.withLock { $0 = stores }
        denied.openers.withLock { openers in
            let gone = Set(openers.byFile.keys).subtracting(watched).subtracting(wanted.keys)
            _ = openers.take(gone)
        }
    }

    /// The files a target stands for, each with who controls the way to it (see
    /// ``TrustedPath``), and the problems met on the way.
    func resolve(_ target: Target) -> (files: [TrustedPath], problems: [String]) {
        switch target.kind {
        case .executable:
            let entry = ProgramEntry(target.value)
            guard !entry.isProgram else { return resolveProgram(target.value, extra: []) }
            // A folder or a pattern: each program it matches now, as if named on its own.
            let (programs, _, problem) = entry.expand()
            var files: [TrustedPath] = []
            var problems = problem.map { [$0] } ?? []
            for program in programs {
                let (found, refused) = resolveProgram(program, extra: [])
                files += found
                problems += refused
            }
            return (files, problems)
        case .desktopCategory:
            return desktopPrograms(category: target.value)
        default:
            return ([], [])
        }
    }

    /// A program by path or by name on `PATH`, checked with ``TrustedPath``; while shielded,
    /// also the staging names a package manager unpacks an upgrade under
    /// (`PATH.dpkg-new`, `PATH.dpkg-tmp`), so the new version cannot be copied before it lands;
    /// and for a Python module (`NAME.py`), its compiled caches (see ``bytecodeCaches(of:)``),
    /// beside the configured path and beside the file it leads to.
    private func resolveProgram(_ name: String, extra: Set<UInt32?>) -> (
        files: [TrustedPath], problems: [String]
    ) {
        guard let candidate = candidatePath(name) else { return ([], []) }
        var files: [TrustedPath] = []
        var problems: [String] = []
        var source: TrustedPath?
        let folder = candidate.lastIndex(of: "/").map { String(candidate[...$0]) } ?? ""
        let companions = Self.companionNames(of: String(candidate.dropFirst(folder.count))).map {
            folder + $0
        }
        for (index, path) in ([candidate] + companions).enumerated() {
            // A companion is a file of its own: a link under its name is not followed.
            var info = stat()
            if index > 0, lstat(path, &info) != 0 || info.st_mode & S_IFMT != S_IFREG { continue }
            switch TrustedPath.resolve(path) {
            case .success(let file):
                if index == 0, let reason = EssentialPrograms.reason(configured: name, resolved: file.path) {
                    problems.append("\(file.path): \(reason); not shielded")
                } else if let refusal = file.refusal(extra: extra) {
                    problems.append(refusal)
                } else {
                    files.append(file)
                    if index == 0 { source = file }
                }
            case .failure(let failure):
                if index == 0 && !failure.missing { problems.append(failure.reason) }
            }
        }
        // A Python module's compiled caches run it as its source does (Python only stats the
        // source and reads a cache that matches): they are shielded with it.
        if let source {
            var seen = Set(files.map { FileID(device: $0.device, inode: $0.inode) })
            // Python writes its caches as plain files: a link under a cache's name is not one of
            // them (it leads elsewhere, and that file is judged on its own), and a cache a gated
            // user controls is their own copy. Neither is shielded, and neither is a problem
            // (reported at every check, it would only make noise of a user's planted links).
            for path in Self.bytecodeCaches(of: [candidate, source.path]) {
                var info = stat()
                guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG,
                    case .success(let file) = TrustedPath.resolve(path), file.refusal(extra: extra) == nil,
                    seen.insert(FileID(device: file.device, inode: file.inode)).inserted
                else { continue }
                files.append(file)
            }
        }
        return (files, problems)
    }

    /// The names a file named `name` takes beside it while it is upgraded, edited or backed up,
    /// shielded with it (each holds the program, a version of it, or its text): a package
    /// manager's staging names (`NAME.dpkg-new`, `NAME.dpkg-tmp`), the temporary and backup
    /// names of a hand upgrade (`NAME.new`, `NAME.tmp`, `NAME.old`, `NAME.bak`, `NAME.orig`,
    /// `NAME~`, as `cp -b` and `install -b` make), and an editor's swap and auto-save files
    /// (Vim's `.NAME.swp` down to `.NAME.swa`, Emacs's `#NAME#`).
    /// What upgrades, backups and editors append to a file's name: dpkg's and ucf's files beside
    /// a conffile or program being replaced, the common backup suffixes, `cp --backup`'s `~` and
    /// numbered `.~N~`, and rotated copies `.N` (numbered ones up to 9).
    static let companionSuffixes: [String] =
        [
            ".dpkg-new", ".dpkg-tmp", ".dpkg-old", ".dpkg-dist", ".dpkg-bak", ".ucf-new", ".ucf-old",
            ".ucf-dist", ".new", ".tmp", ".old", ".bak", ".backup", ".save", ".prev", ".orig", "~",
        ] + (1...9).map { ".~\($0)~" } + (1...9).map { ".\($0)" }

    static func companionNames(of name: String) -> [String] {
        guard !name.isEmpty else { return [] }
        return Self.companionSuffixes.map { name + $0 } + "abcdefghijklmnop".map { ".\(name).sw\($0)" }
            + ["#\(name)#"]
    }

    /// The path a program target names: itself when absolute, else the first executable file of
    /// that name on the search path.
    private func candidatePath(_ name: String) -> String? {
        if name.hasPrefix("/") { return name }
        for directory in searchPath.split(separator: ":") {
            let path = "\(directory)/\(name)"
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        return nil
    }

    /// The compiled caches Python reads in place of the module source files `sources`
    /// (`NAME.py`): `__pycache__/NAME.TAG.pyc` and `__pycache__/NAME.TAG.opt-N.pyc` beside each
    /// (any interpreter's tag and optimisation level, as `py_compile` and Debian's `py3compile`
    /// write them), and the legacy `NAME.pyc` and `NAME.pyo` beside it. Paths that exist now;
    /// none for a file not named `*.py`.
    static func bytecodeCaches(of sources: [String]) -> Set<String> {
        var caches: Set<String> = []
        for source in sources where source.hasSuffix(".py") {
            guard let slash = source.lastIndex(of: "/") else { continue }
            let folder = String(source[..<slash])
            let name = String(source[source.index(after: slash)...].dropLast(3))
            guard !name.isEmpty else { continue }
            for legacy in [name + ".pyc", name + ".pyo"] {
                let path = folder + "/" + legacy
                if access(path, F_OK) == 0 { caches.insert(path) }
            }
            let cacheFolder = folder + "/__pycache__"
            for entry in (try? FileManager.default.contentsOfDirectory(atPath: cacheFolder)) ?? []
            where isBytecodeCache(entry, of: name) {
                caches.insert(cacheFolder + "/" + entry)
            }
        }
        return caches
    }

    /// Whether `entry` of a `__pycache__` folder is a cache of module `name`: `NAME.TAG.pyc` or
    /// `NAME.TAG.opt-N.pyc`, where the tag (`cpython-311`, `pypy39`) has no dot (so the cache
    /// of a module `NAME.other` is not one).
    static func isBytecodeCache(_ entry: String, of name: String) -> Bool {
        guard entry.hasPrefix(name + "."), entry.hasSuffix(".pyc"), entry.count > name.count + 5 else {
            return false
        }
        let middle = entry.dropFirst(name.count + 1).dropLast(4)
        let parts = middle.split(separator: ".", omittingEmptySubsequences: false)
        guard let tag = parts.first, !tag.isEmpty else { return false }
        switch parts.count {
        case 1: return true
        case 2: return parts[1].hasPrefix("opt-") && parts[1].count > 4
        default: return false
        }
    }

    /// Programs of the `.desktop` entries in a category. An entry that a non-root user can
    /// change only names programs that user owns. Entries that cannot be read, or that run
    /// something the shield must not deny to everyone (a shell command line, a sandbox
    /// launcher), are problems: their programs are not shielded.
    private func desktopPrograms(category: String) -> (files: [TrustedPath], problems: [String]) {
        var files: [TrustedPath] = []
        var problems: [String] = []
        for (path, read) in desktopReader.entries(in: applicationDirectories) {
            switch read {
            case .failure(let refusal):
                problems.append("\(path): \(refusal.reason)")
            case .success(let entry):
                guard entry.categories.contains(category) else { continue }
                for program in entry.programs {
                    switch program {
                    case .none:
                        continue
                    case .unshieldable(let reason):
                        problems.append(
                            "\(path): \(reason); not shielded (name its program as an executable target)")
                    case .file(let program):
                        let found = resolveProgram(program, extra: TrustedPath.controllers(ofFile: path))
                        files += found.files
                        problems += found.problems.map { "\(path): \($0)" }
                    }
                }
            }
        }
        return (files, problems)
    }

    private func fileID(_ path: String) -> FileID? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return FileID(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
    }

    /// The responder loop: answer every permission event, deny shielded files.
    private static func respond(group: Int32, denied: Denied) {
        // Above the gated users' processes, so a flood of busy or blocked openers does not hold
        // up the answers root's and the admins' opens wait for: the real-time round-robin class
        // at its lowest priority (these threads only run when an event waits, and each event is
        // work some opener caused), or nice -10 where that is not allowed. At nice -10, 17,500
        // of a user's processes opening the file in a loop kept a root open waiting 38 s.
        if stepgate_set_thread_realtime(1) != 0 { _ = stepgate_set_thread_nice(-10) }
        denied.realtime.add(stepgate_thread_policy() == SCHED_RR ? 1 : 0, ordering: .relaxed)
        let size = 4096
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 8)
        defer { buffer.deallocate() }
        var poller = pollfd(fd: group, events: Int16(POLLIN), revents: 0)
        while !denied.stopped.load(ordering: .relaxed) {
            guard denied.answering.load(ordering: .relaxed) else {
                usleep(10_000)
                continue
            }
            let ready = poll(&poller, 1, 100)
            if ready <= 0 { continue }
            let length = read(group, buffer, size)
            if length <= 0 { continue }
            var offset = 0
            let header = MemoryLayout<fanotify_event_metadata>.size
            while offset + header <= length {
                let event = buffer.load(fromByteOffset: offset, as: fanotify_event_metadata.self)
                if event.event_len < UInt32(header) { break }
                if event.fd < 0 && event.mask & UInt64(FAN_Q_OVERFLOW) != 0 {
                    // Cannot happen with an unlimited queue; if it does, say so (see recheck).
                    denied.counters.withLock { $0.overflows += 1 }
                }
                let permission =
                    event.mask
                    & (UInt64(FAN_OPEN_PERM) | UInt64(FAN_OPEN_EXEC_PERM) | UInt64(FAN_ACCESS_PERM)) != 0
                if event.fd >= 0 && !permission {
                    // A watched file opened: remember a gated opener.
                    var info = stat()
                    if fstat(event.fd, &info) == 0 {
                        let id = FileID(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
                        if denied.watched.withLock({ $0[id] != nil })
                            || denied.files.withLock({ $0[id] != nil }),
                            ProcessCredentials(pid: event.pid)?.isPrivileged(group: denied.privilegedGroup)
                                == false,
                            let process = RunningProcess(pid: event.pid)
                        {
                            denied.openers.withLock { $0.insert(process, for: id) }
                        }
                    }
                    close(event.fd)
                } else if event.fd >= 0 {
                    var verdict = UInt32(FAN_ALLOW)
                    var info = stat()
                    if fstat(event.fd, &info) == 0 {
                        let id = FileID(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
                        if denied.files.withLock({ $0[id] != nil }) {
                            // Executing is denied to everyone; opening to all but root and the
                            // admin group (decided by the opener's credentials, read now).
                            if event.mask & UInt64(FAN_OPEN_EXEC_PERM) != 0 {
                                verdict = UInt32(FAN_DENY)
                            } else if event.mask & UInt64(FAN_OPEN_PERM) != 0 {
                                let opener = ProcessCredentials(pid: event.pid)
                                if opener?.isPrivileged(group: denied.privilegedGroup) != true {
                                    verdict = UInt32(FAN_DENY)
                                }
                            }
                        } else if let stores = denied.watched.withLock({ $0[id] }),
                            ProcessCredentials(pid: event.pid)?.isPrivileged(group: denied.privilegedGroup)
                                != true
                        {
                            // A file of an unlocked store, opened by a gated process (or one
                            // already gone): remembered, and kept in the stores' cgroup before
                            // it may go on. Where that fails, refused: locked when in doubt.
                            let process = RunningProcess(pid: event.pid)
                            if let process {
                                denied.openers.withLock { $0.insert(process, for: id) }
                            }
                            if let confinement = denied.confinement {
                                // An exec opens the file twice: for the exec, then plainly.
                                // Its plain twin needs no search for sharers either.
                                let twin = process.map {
                                    ExecTwin(pid: $0.pid, startTime: $0.startTime, file: id)
                                }
                                let isExec = event.mask & UInt64(FAN_OPEN_EXEC_PERM) != 0
                                let sharers = denied.execTwins.withLock { twins -> Bool in
                                    // An opener already gone is searched for (and not found).
                                    guard let twin else { return true }
                                    guard isExec else { return twins.remove(twin) == nil }
                                    // One whose opener died before its twin is forgotten in
                                    // time (its twin would only search for nothing).
                                    if twins.count >= 4096 { twins.removeAll() }
                                    twins.insert(twin)
                                    return false
                                }
                                do {
                                    try confinement.confine(event.pid, into: stores, sharers: sharers)
                                } catch {
                                    verdict = UInt32(FAN_DENY)
                                    denied.confinementFailures.withLock {
                                        for store in stores { $0[store] = error.description }
                                    }
                                }
                            }
                        }
                    } else {
                        verdict = UInt32(FAN_DENY)  // cannot tell which file: fail closed
                    }
                    var response = fanotify_response(fd: event.fd, response: verdict)
                    _ = withUnsafeBytes(of: &response) { write(group, $0.baseAddress, $0.count) }
                    close(event.fd)
                    denied.counters.withLock {
                        if verdict == UInt32(FAN_DENY) { $0.denied += 1 } else { $0.allowed += 1 }
                    }
                    // Who tried, read after the answer (the launch never waits for it).
                    if verdict == UInt32(FAN_DENY), event.mask & UInt64(FAN_OPEN_EXEC_PERM) != 0,
                        let report = denied.onDenied.withLock({ $0 })?.call
                    {
                        let id = FileID(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
                        let opener = ProcessCredentials(pid: event.pid)
                        report(
                            ExecDenial(
                                pid: event.pid, uid: opener?.uids.first, gid: opener?.gids.first,
                                path: denied.files.withLock { $0[id] } ?? "",
                                stores: denied.stores.withLock { $0[id] } ?? []))
                    }
                }
                offset += Int(event.event_len)
            }
        }
    }
}

@available(*, unavailable) extension ExecDenyShield: Sendable {}

/// A launch the exec shield denied: the process that tried, its real user and group (from
/// `/proc/PID/status` right after the answer; `nil` when it was already gone), the file and
/// the stores that shield it.
public struct ExecDenial: Sendable, Hashable {
    public var pid: Int32
    public var uid: UInt32?
    public var gid: UInt32?
    public var path: String
    public var stores: [String]
}

/// A process's user and group ids, from `/proc/PID/status`.
struct ProcessCredentials: Equatable {
    /// Real, effective, saved and file-system user ids.
    var uids: [UInt32]
    /// Real, effective, saved and file-system group ids.
    var gids: [UInt32]
    /// Supplementary groups.
    var groups: [UInt32]

    /// Reads the credentials of process `pid`; `nil` when it is gone or cannot be read.
    init?(pid: Int32) {
        guard pid > 0 else { return nil }
        let fd = open("/proc/\(pid)/status", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 8192)
        var count = 0
        while count < bytes.count {
            let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + count, $0.count - count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            count += n
        }
        self.init(status: String(decoding: bytes[0..<count], as: UTF8.self))
    }

    /// Parses the text of a `/proc/PID/status` file.
    init?(status text: String) {
        var uids: [UInt32]?
        var gids: [UInt32]?
        var groups: [UInt32] = []
        for line in text.split(separator: "\n") {
            func numbers() -> [UInt32]? {
                let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst()
                let values = words.compactMap { UInt32($0) }
                return values.count == words.count ? values : nil
            }
            if line.hasPrefix("Uid:") {
                uids = numbers()
            } else if line.hasPrefix("Gid:") {
                gids = numbers()
            } else if line.hasPrefix("Groups:") {
                groups = numbers() ?? []
            }
        }
        guard let uids, uids.count == 4, let gids, gids.count == 4 else { return nil }
        self.uids = uids
        self.gids = gids
        self.groups = groups
    }

    /// Wholly root (every user id 0), or a member of `group`.
    func isPrivileged(group: UInt32?) -> Bool {
        if uids.allSatisfy({ $0 == 0 }) { return true }
        guard let group else { return false }
        return gids.contains(group) || groups.contains(group)
    }
}

/// Watches folders with inotify on a thread of its own and calls `onChange` when an entry in
/// one of them is created, moved in or out, replaced, deleted or has its attributes changed, or
/// when one of the folders is made again (the folders above it are watched for the names on
/// its path).
final class FolderWatcher: Sendable {
    let onChange = Mutex<Callback<Void>?>(nil)
    private let fd: Int32
    /// Per watched folder: its watch and the folder it was when watched (a folder moved aside
    /// keeps its watch; the path's new folder needs one of its own).
    private let watches = Mutex<[String: (descriptor: Int32, id: ExecDenyShield.FileID)]>([:])
    /// Watches of the folders above the watched ones: the names in each that lead to one.
    private let parents = Mutex(AncestorWatches())
    private let stopped = Atomic<Bool>(false)

    init?() {
        fd = inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK))
        guard fd >= 0 else { return nil }
        let thread = Thread { [self] in run() }
        thread.name = "stepgate-exec-watch"
        thread.start()
    }

    /// Watches exactly `folders` (adding and removing watches as needed), and the folders above
    /// them for the names on their paths.
    func watch(_ folders: Set<String>) {
        let mask = UInt32(
            IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_ATTRIB | IN_CLOSE_WRITE | IN_DELETE_SELF
                | IN_MOVE_SELF)
        watches.withLock { current in
            for (folder, watch) in current where !folders.contains(folder) {
                inotify_rm_watch(fd, watch.descriptor)
                current[folder] = nil
            }
            for folder in folders {
                var info = stat()
                guard stat(folder, &info) == 0 else { continue }
                let id = ExecDenyShield.FileID(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
                if let watch = current[folder] {
                    if watch.id == id { continue }
                    inotify_rm_watch(fd, watch.descriptor)
                    current[folder] = nil
                }
                let descriptor = inotify_add_watch(fd, folder, mask)
                if descriptor >= 0 { current[folder] = (descriptor, id) }
            }
        }
        // A parent that is itself a watched folder needs no watch of its own: its folder watch
        // reports every entry (and inotify gives one path one descriptor, whose mask a second
        // watch would replace).
        let wantedParents = FolderGuard.ancestors(of: folders).filter { !folders.contains($0.key) }
        let folderDescriptors = Set(watches.withLock { $0.values.map(\.descriptor) })
        parents.withLock { $0.update(wantedParents, fd: fd, others: folderDescriptors) }
    }

    func stop() {
        stopped.store(true, ordering: .relaxed)
    }

    private func run() {
        var buffer = [UInt8](repeating: 0, count: 8192)
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        while !stopped.load(ordering: .relaxed) {
            guard poll(&poller, 1, 100) > 0 else { continue }
            var changed = false
            while true {
                let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n <= 0 { break }
                buffer.withUnsafeBytes { bytes in
                    AncestorWatches.forEachEvent(in: UnsafeRawBufferPointer(rebasing: bytes[..<n])) {
                        descriptor, mask, name in
                        let isFolder = watches.withLock { $0.values.contains { $0.descriptor == descriptor } }
                        if !isFolder, parents.withLock({ $0.contains(descriptor) }) {
                            // A parent's event counts only for a name on a watched folder's path.
                            if parents.withLock({ $0.counts(descriptor, name: name) }) { changed = true }
                            if mask & UInt32(IN_IGNORED) != 0 { parents.withLock { $0.forget(descriptor) } }
                        } else {
                            changed = true
                            if mask & UInt32(IN_IGNORED) != 0 {
                                watches.withLock { current in
                                    current = current.filter { $0.value.descriptor != descriptor }
                                }
                            }
                        }
                    }
                }
            }
            if changed {
                // Deleted or moved folders lose their watch; the next refresh watches them again.
                if let callback = onChange.withLock({ $0 }) { callback.call(()) }
            }
        }
        close(fd)
    }
}

/// A callback held by reference. A function value kept in a lock and read back through its
/// `inout` access is re-wrapped (reabstracted) on every read; read once per event, it grew until
/// calling it overflowed the stack (a loop of denied launches crashed the daemon). A class
/// reference is read back as it is.
final class Callback<Argument>: Sendable {
    let call: @Sendable (Argument) -> Void
    init(_ call: @escaping @Sendable (Argument) -> Void) { self.call = call }
}
