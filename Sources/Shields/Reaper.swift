import Foundation
import Synchronization

/// Ends (or stops) what runs a shielded program, on a thread of its own: marking files, the
/// exec shield's real work, never waits on it, however many processes and descriptors a gated
/// user makes it look at.
///
/// Each round reads only gated users' processes (root's and the admin group's are skipped by
/// their credentials first): their memory maps and command lines every round (a program run
/// directly or through the dynamic loader, a script named to an interpreter), and their open
/// descriptors within a time budget per round, resuming where the last round stopped (a
/// descriptor held from an unlock). A process is acted on as soon as a pass has found it.
/// Rounds run when the shield asks (a relock, a recheck) and at least every second while
/// anything is shielded.
///
/// Besides, each store carries the gated processes that opened one of its files while it was
/// unlocked (the exec shield records them): a script read by an interpreter through any name
/// (`python3 -m game`, a link of the user's own, standard input) leaves no trace in the
/// interpreter's maps or command line. Those still running, and their descendants, are acted on
/// like the others. And with a ``Confinement``, the cgroups those openers were moved into are
/// acted on as a whole: everything in a group of a shielded store is sent SIGTERM, and killed
/// at once when the grace period is over (frozen in `stop` mode, thawed when none of its stores
/// is shielded any more). That is done by a thread of its own, at the relock and every 250 ms,
/// which reads only the cgroups: however slow a gated user makes the rounds (processes with
/// enormous maps or command lines), what was started from an unlocked store's files is ended on
/// time.
final class Reaper: Sendable {
    struct Store: Sendable {
        var name: String
        var files: Set<ExecDenyShield.FileID>
        /// The files' paths (a process mapping a file replaced under one of them counts too).
        var paths: Set<String>
        var action: RunningProgramAction
        /// When the store was shielded: the start of its programs' grace period.
        var since: ContinuousClock.Instant
        /// Gated processes that opened one of the files while the store was unlocked.
        var openers: Set<RunningProcess> = []
        /// Whether the stop of its programs has been made with the gated users held still
        /// (once per relock, see ``Freezer``).
        var held = false
        /// Users one of whose processes running a program was gone before a signal reached it.
        var forkingAway: Set<UInt32> = []
    }

    private struct State {
        var stores: [String: Store] = [:]
        /// Processes sent SIGTERM (each once).
        var terminating: Set<RunningProcess> = []
        /// Where the descriptor scan goes on in the next round.
        var cursor = 0
        /// Files no longer shielded whose stopped processes go on at the next round.
        var resume: Set<ExecDenyShield.FileID> = []
        /// Openers (and their descendants) of stores no longer shielded, to go on if stopped.
        var resumeOpeners: Set<RunningProcess> = []
    }

    private let state = Mutex(State())
    private let wakeUp = DispatchSemaphore(value: 0)
    private let confinementWakeUp = DispatchSemaphore(value: 0)
    /// Rounds longer than this are logged (once per minute at most).
    private let slowRound: Duration = .seconds(2)
    private let lastSlowRoundReport = Mutex<ContinuousClock.Instant?>(nil)
    /// Where a slow round is reported.
    let log: @Sendable (String) -> Void
    /// Where a round that stopped every process of a user is reported (once per minute at most).
    let notice: @Sendable (String) -> Void
    private let lastStopAllReport = Mutex<ContinuousClock.Instant?>(nil)
    private let stopped = Atomic<Bool>(false)
    private let privilegedGroup: UInt32?
    private let grace: Duration
    /// How long one round may read descriptors.
    private let descriptorBudget: Duration
    /// The cgroups openers of unlocked stores' files were kept in.
    private let confinement: Confinement?

    init(
        privilegedGroup: UInt32?, grace: Duration, confinement: Confinement? = nil,
        descriptorBudget: Duration = .milliseconds(200), log: @escaping @Sendable (String) -> Void = { _ in },
        notice: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.privilegedGroup = privilegedGroup
        self.confinement = confinement
        self.grace = grace
        self.descriptorBudget = descriptorBudget
        self.log = log
        self.notice = notice
        if getuid() == 0 { Freezer.thawLeftovers() }
        let thread = Thread { [self] in self.run() }
        thread.name = "stepgate-reaper"
        thread.start()
        if let confinement {
            let confining = Thread { [self] in self.runConfinement(confinement) }
            confining.name = "stepgate-confine"
            confining.start()
        }
    }

    /// The shielded stores now (their files and actions), and files whose stopped processes go
    /// on; starts a round.
    /// `openers` are added to what the store had (a store keeps its openers while it is
    /// shielded); a store left out is no longer shielded, and its stopped openers go on.
    func update(
        _ stores: [String: (
            files: Set<ExecDenyShield.FileID>, paths: Set<String>, action: RunningProgramAction
        )],
        openers: [String: Set<RunningProcess>] = [:],
        resume: Set<ExecDenyShield.FileID> = []
    ) {
        let now = ContinuousClock.now
        state.withLock { state in
            var next: [String: Store] = [:]
            for (name, store) in stores {
                let before = state.stores[name]
                next[name] = Store(
                    name: name, files: store.files, paths: store.paths, action: store.action,
                    since: before?.since ?? now,
                    openers: (before?.openers ?? []).union(openers[name] ?? []),
                    held: before?.held ?? false, forkingAway: before?.forkingAway ?? [])
            }
            for (name, store) in state.stores where next[name] == nil {
                state.resumeOpeners.formUnion(store.openers)
            }
            state.stores = next
            state.resume.formUnion(resume)
        }
        confinementWakeUp.signal()
        wakeUp.signal()
    }

    func stop() {
        stopped.store(true, ordering: .relaxed)
        wakeUp.signal()
        confinementWakeUp.signal()
    }

    /// Runs one round now, on the caller's thread (for tests).
    func roundNow() {
        if let confinement { actOnConfined(confinement, stores: state.withLock { $0.stores }) }
        round()
    }

    private func run() {
        while !stopped.load(ordering: .relaxed) {
            _ = wakeUp.wait(timeout: .now() + 1)
            if stopped.load(ordering: .relaxed) { return }
            let started = ContinuousClock.now
            round()
            let took = ContinuousClock.now - started
            if took > slowRound {
                let report = lastSlowRoundReport.withLock { last in
                    guard last.map({ started - $0 >= .seconds(60) }) ?? true else { return false }
                    last = started
                    return true
                }
                if report {
                    log(
                        "exec shield: a scan of running programs took \(Double(took.components.seconds) + Double(took.components.attoseconds) / 1e18) s (programs started during an unlock are still ended on time by their cgroup)"
                    )
                }
            }
        }
    }

    /// Logs what a store's relock did to programs found running: each process once, when it is
    /// paused (`stop`) or sent its end (`terminate`).
    private func log(_ processes: [RunningProcess], store: String, _ action: RunningProgramAction) {
        guard !processes.isEmpty, action != .leave else { return }
        let listed = processes.prefix(8).map { "\($0.pid) (\($0.commandName))" }.joined(separator: ", ")
        notice(
            "exec shield: \(store) shielded again: \(action == .stop ? "paused" : "ended") "
                + "\(processes.count) running program\(processes.count == 1 ? "" : "s"): pid \(listed)"
                + (processes.count > 8 ? ", …" : ""))
    }

    /// Logs a round's stops of every process of a user (see ``Freezer``), once per minute at most.
    private func reportStopAll(_ users: [UInt32: Int]) {
        let now = ContinuousClock.now
        let report = lastStopAllReport.withLock { last in
            guard last.map({ now - $0 >= .seconds(60) }) ?? true else { return false }
            last = now
            return true
        }
        guard report else { return }
        let text = users.sorted { $0.key < $1.key }.map { uid, ancestors in
            "uid \(uid)"
                + (ancestors > 0
                    ? " (\(ancestors) stopped ancestor process(es) of another user continued)" : "")
        }
        notice(
            "exec shield: a shielded program was seen forking away and no cgroup could be frozen: every process of \(text.joined(separator: ", ")) was stopped for a scan and went on"
        )
    }

    /// Acts on the confinement groups at every change and every 250 ms: the relock's SIGTERM at
    /// once, `cgroup.kill` within 250 ms of the grace period's end.
    private func runConfinement(_ confinement: Confinement) {
        while !stopped.load(ordering: .relaxed) {
            _ = confinementWakeUp.wait(timeout: .now() + .milliseconds(250))
            if stopped.load(ordering: .relaxed) { return }
            actOnConfined(confinement, stores: state.withLock { $0.stores })
        }
    }

    private func round() {
        let (stores, resume, resumeOpeners) = state.withLock { state in
            defer {
                state.resume = []
                state.resumeOpeners = []
            }
            return (state.stores, state.resume, state.resumeOpeners)
        }
        if !resume.isEmpty {
            for process in RunningProcess.running(resume) where process.state == "T" {
                process.signal(SIGCONT)
            }
        }
        if !resumeOpeners.isEmpty {
            for process in RunningProcess.withDescendants(resumeOpeners) where process.state == "T" {
                process.signal(SIGCONT)
            }
        }
        guard !stores.isEmpty else { return }
        // Users all of whose processes were stopped in this round (no cgroup of theirs could be
        // frozen), and how many stopped ancestors of theirs were continued: one line per round.
        var stoppedAll: [UInt32: Int] = [:]
        let noteStopAll = { (uid: UInt32, ancestors: [RunningProcess]) in
            stoppedAll[uid, default: 0] += ancestors.count
        }
        defer { if !stoppedAll.isEmpty { reportStopAll(stoppedAll) } }
        let group = privilegedGroup
        // The ids of each gated process seen in this round.
        var users: [Int32: (uid: UInt32, gid: UInt32)] = [:]
        let gated = { (pid: Int32) -> Bool in
            guard let credentials = ProcessCredentials(pid: pid), !credentials.isPrivileged(group: group)
            else {
                return false
            }
            users[pid] = (credentials.uids.first ?? 0, credentials.gids.first ?? 0)
            return true
        }
        let now = ContinuousClock.now
        // Whether the store is still shielded as it was when the round began: one unlocked
        // meanwhile is not acted for (a game started right after an unlock is not ended by the
        // round that was under way).
        let current = { (store: Store) in self.state.withLock { $0.stores[store.name]?.since == store.since }
        }
        for (_, store) in stores.sorted(by: { $0.key < $1.key }) where store.action != .leave {
            guard current(store) else { continue }
            let overdue = now - store.since >= grace
            // Maps: cheap, every round. In `stop` mode, and past the grace period in
            // `terminate` mode, every process found is stopped at once with its children,
            // in sweeps until nothing new runs (a stopped process cannot fork), then killed.
            if store.action == .stop || overdue {
                let kill = store.action == .terminate
                let sweep = {
                    ExecDenyShield.stopAndKill(kill: kill) { found in
                        _ = RunningProcess.running(store.files, paths: store.paths, include: gated) {
                            process in
                            if current(store) { found(process) }
                        }
                    }
                }
                var result = ExecDenyShield.Sweep()
                if !store.held {
                    // The first time, with the gated users held still: a program forking away
                    // is where the scan looks for it.
                    state.withLock { $0.stores[store.name]?.held = true }
                    // What it stops stays stopped (`stop` mode) when the users go on.
                    Freezer.holding(
                        gatedMembers(), stopping: store.forkingAway, privilegedGroup: privilegedGroup,
                        keeping: {
                            result = sweep()
                            return result.stopped
                        }, stoppedAll: noteStopAll)
                } else {
                    result = sweep()
                }
                log(result.running, store: store.name, store.action)
                // Found gone before the stop reached it, or (past that first time) found running
                // though it could not have been started since: forking away. Its users are held
                // again, stopped outright where no cgroup can be frozen.
                let escaped = result.vanished + (store.held && kill ? result.running : [])
                let uids = Set(escaped.compactMap { users[$0.pid]?.uid })
                if !uids.isEmpty, current(store) {
                    state.withLock { $0.stores[store.name]?.forkingAway.formUnion(uids) }
                    Freezer.holding(
                        gatedMembers().filter { uids.contains($0.uid) }, stopping: uids,
                        privilegedGroup: privilegedGroup, keeping: { sweep().stopped },
                        stoppedAll: noteStopAll)
                }
            } else {
                // Each as soon as it is found.
                var gone: [RunningProcess] = []
                _ = RunningProcess.running(store.files, paths: store.paths, include: gated) { process in
                    if current(store) { gone += act(on: [process], store.action, store: store.name) }
                }
                let uids = Set(gone.compactMap { users[$0.pid]?.uid })
                if !uids.isEmpty { state.withLock { $0.stores[store.name]?.forkingAway.formUnion(uids) } }
            }
            // What read a file during the unlock, and what it has started since.
            let ended = store.openers.filter { !$0.isAlive }
            if !ended.isEmpty {
                state.withLock { $0.stores[store.name]?.openers.subtract(ended) }
            }
            if ended.count < store.openers.count {
                let processes = RunningProcess.withDescendants(store.openers.subtracting(ended)).filter {
                    gated($0.pid)
                }
                guard current(store) else { continue }
                if overdue && store.action == .terminate {
                    Freezer.AncestorWatch.stopAndKill(processes)
                    log(processes, store: store.name, .terminate)
                } else {
                    act(on: processes, store.action, store: store.name)
                }
            }
        }
        // Descriptors: within the budget, from where the last round stopped.
        let acting = stores.values.filter { $0.action != .leave }
        let files = acting.reduce(into: Set<ExecDenyShield.FileID>()) { $0.formUnion($1.files) }
        guard !files.isEmpty else { return }
        var descriptors = DescriptorScan(files)
        let pids = (ProcFile.numbers(in: "/proc") ?? []).sorted()
        let start = state.withLock { $0.cursor }
        let deadline = ContinuousClock.now + descriptorBudget
        var index = start < pids.count ? start : 0
        var scanned = 0
        while scanned < pids.count, ContinuousClock.now < deadline {
            let pid = pids[index]
            index = (index + 1) % pids.count
            scanned += 1
            guard pid > 1, pid != getpid(), gated(pid),
                let file = descriptors.held(by: pid),
                let store = acting.first(where: { $0.files.contains(file) }),
                let process = RunningProcess(pid: pid), current(store)
            else { continue }
            // The store whose file it holds decides: past its grace period, stopped and killed.
            if store.action == .terminate && now - store.since >= grace {
                Freezer.AncestorWatch.stopAndKill([process])
                log([process], store: store.name, .terminate)
            } else {
                act(on: [process], store.action, store: store.name)
            }
        }
        state.withLock { $0.cursor = index }
    }

    /// Acts on each confinement group for the shielded stores among its own: ended (SIGTERM to
    /// each process, then `cgroup.kill` once a terminating store's grace period is over), frozen
    /// (`stop`), or thawed when none of them is shielded; empty groups are removed.
    private func actOnConfined(_ confinement: Confinement, stores: [String: Store]) {
        let now = ContinuousClock.now
        for group in confinement.groups() {
            let acting = group.stores.compactMap { stores[$0] }.filter { store in
                store.action != .leave && state.withLock { $0.stores[store.name]?.since == store.since }
            }
            if acting.contains(where: { $0.action == .terminate }) {
                if acting.contains(where: { $0.action == .terminate && now - $0.since >= grace }) {
                    confinement.kill(group)
                } else {
                    confinement.freeze(group, false)  // to handle SIGTERM
                    act(
                        on: confinement.processes(in: group), .terminate,
                        store: acting.map(\.name).sorted().joined(separator: ", "))
                }
            } else {
                confinement.freeze(group, acting.contains { $0.action == .stop })
            }
        }
        confinement.removeEmpty()
    }

    /// Acts on `processes` for `action`; returns those gone before the signal reached them.
    @discardableResult
    private func act(on processes: [RunningProcess], _ action: RunningProgramAction, store: String)
        -> [RunningProcess]
    {
        var warned: [RunningProcess] = []
        var gone: [RunningProcess] = []
        var paused: [RunningProcess] = []
        defer {
            log(paused, store: store, .stop)
            log(warned, store: store, .terminate)
        }
        for process in processes {
            switch action {
            case .stop:
                if process.state != "T" {
                    if process.signal(SIGSTOP) { paused.append(process) } else { gone.append(process) }
                }
            case .terminate:
                if state.withLock({ $0.terminating.insert(process).inserted }) {
                    if !process.signal(SIGTERM) { gone.append(process) }
                    process.signal(SIGCONT)  // a stopped process must run to handle SIGTERM
                    warned.append(process)
                }
            case .leave: break
            }
        }
        state.withLock { $0.terminating = $0.terminating.filter(\.isAlive) }
        guard !warned.isEmpty else { return gone }
        let (seconds, attoseconds) = grace.components
        DispatchQueue.global().asyncAfter(deadline: .now() + Double(seconds) + Double(attoseconds) / 1e18) {
            [warned] in
            for process in warned { process.signal(SIGKILL) }
        }
        return gone
    }

    /// Every gated process now, with its ids.
    private func gatedMembers() -> [Freezer.Member] {
        (ProcFile.numbers(in: "/proc") ?? []).compactMap { pid in
            guard pid > 1, pid != getpid(), let credentials = ProcessCredentials(pid: pid),
                !credentials.isPrivileged(group: privilegedGroup), let process = RunningProcess(pid: pid)
            else { return nil }
            return Freezer.Member(
                process: process, uid: credentials.uids.first ?? 0, gid: credentials.gids.first ?? 0)
        }
    }
}
