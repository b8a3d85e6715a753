package import Counting
@preconcurrency import Dispatch
import Formatting
import Foundation
@preconcurrency import Glibc
import Household
import SensorInput
package import Shields
import StepDetection
import StepHistoryStore
import Synchronization
import SystemFiles
import UnlockPolicy

/// The live pipeline: input → detector → policy → shields, with the control socket.
package final class Daemon {
    private let system: DaemonSystem
    private let clock: any DaemonClock
    private var configuration: DaemonConfiguration
    private let configPath: String
    private let log: Logger
    private var engine: PolicyEngine
    private var stateStore: FilePolicyStateStore
    private var shields: ShieldSet
    /// Why each store's shield is failing now (from an apply, a remove or a recheck).
    /// Shield failures per store, by shield and source ("exec:change", "exec:recheck"): a
    /// recheck that finds nothing wrong clears only what a recheck found.
    private var failures: [String: [String: String]] = [:]
    /// The shields' queues (set up once the shields are made).
    private var workers: ShieldWorkers!

    /// A store's shield failures in one line; nil when there are none.
    private func shieldFailure(_ store: String) -> String? {
        guard let entries = failures[store], !entries.isEmpty else { return nil }
        return entries.keys.sorted().compactMap { entries[$0] }.joined(separator: "; ")
    }
    private let wake = WakeUp()
    private let input = InputStatistics()
    private var inputState = "starting"
    private var lastZone: String
    private let inbox = Inbox()
    /// Each configured executable's resolved path, for the launch guard's `check` (resolved
    /// here, from the administrator's configuration, never from what a client sends).
    private var resolvedExecutables: [String: String] = [:]
    /// When each user last got the shield screen of each store ("uid:store"), on the boot clock.
    private var lastShieldScreen: [String: Duration] = [:]
    /// The step history (steps.json): fed by the input task, read for status and history.
    private let ledger: StepLedger
    /// Desktop notices: the shield screen and the notices around an unlock.
    private var notices: DesktopNotices
    /// The household over MQTT, when configured (and libmosquitto could be opened).
    private var household: HouseholdLink?

    package init(
        configuration: DaemonConfiguration, configPath: String, log: Logger, system: DaemonSystem = .machine,
        version: String = "unknown"
    ) throws {
        self.system = system
        clock = system.clock
        self.configuration = configuration
        self.configPath = configPath
        self.log = log
        do {
            try FileManager.default.createDirectory(
                atPath: configuration.stateDirectory, withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700])
        } catch {
            throw ConfigurationFileError(
                path: configuration.stateDirectory,
                message: "cannot create the state directory: \(error.localizedDescription)")
        }
        // Writes a stop or a crash cut off before their rename left only their temporary files.
        let leftovers = DurableFile.removeLeftovers(in: configuration.stateDirectory)
        if !leftovers.isEmpty {
            log.notice(
                "removed the temporary files of writes that never finished: \(leftovers.joined(separator: ", "))"
            )
        }
        stateStore = FilePolicyStateStore(path: configuration.stateDirectory + "/state.json")
        let loaded = stateStore.load()
        if case .failure(let error) = loaded { log.error("\(error); starting locked") }
        lastZone = clock.zoneIdentifier()
        engine = PolicyEngine(configuration: configuration.policy, restoring: loaded, systemZone: lastZone)
        let clock = clock
        ledger = StepLedger(
            path: configuration.stateDirectory + "/steps.json",
            clock: .policy(configuration.policy, systemZone: lastZone),
            saveInterval: Self.historySaveInterval,
            monotonic: { clock.bootTime() }, warn: { log.warning($0) })
        notices = system.notices(configuration.notifications, log)
        let inbox = inbox
        shields = system.shields(configuration, log) { inbox.post(.shieldsChanged) }
        // A denied launch shows the shield screen on the desktop of the user who tried.
        for case let exec as ExecDenyShield in shields.shields {
            exec.onDenied = { inbox.post(.execDenied($0)) }
            exec.onWarning = { [log] in log.warning($0) }
            exec.onNotice = { [log] in log.notice($0) }
        }
        workers = ShieldWorkers(shields) { inbox.post(.shieldOutcome($0)) }
        resolveExecutables()
        updateBrowserPolicies()
        if let mqtt = configuration.mqtt {
            // Enforcement never depends on the broker: without the library the gate runs on
            // and says why there is no MQTT.
            do {
                var stepSource: String?
                if case .mqtt(let prefix) = configuration.input { stepSource = prefix }
                household = try HouseholdLink(
                    mqtt, stores: configuration.policy.stores.map(\.name), version: version,
                    stateDirectory: configuration.stateDirectory, stepSource: stepSource, log: log,
                    inbox: inbox)
            } catch {
                log.error("mqtt: \(error); running without MQTT")
            }
        }
    }

    /// The user ids in the admin group: its listed members and the users whose primary group it
    /// is.
    private static func adminMembers(_ group: String?) -> [UInt32] {
        guard let group, let entry = getgrnam(group) else { return [] }
        let gid = entry.pointee.gr_gid
        var names: [String] = []
        var member = entry.pointee.gr_mem
        while let pointer = member?.pointee {
            names.append(String(cString: pointer))
            member = member?.advanced(by: 1)
        }
        var ids = Set(names.compactMap { getpwnam($0)?.pointee.pw_uid })
        setpwent()
        while let user = getpwent() {
            if user.pointee.pw_gid == gid { ids.insert(user.pointee.pw_uid) }
        }
        endpwent()
        return ids.sorted()
    }

    /// Browsers' managed policies keep DNS over HTTPS off while any store has domains (their own
    /// resolver would skip the hosts file and dnsmasq); removed when none has.
    private func updateBrowserPolicies() {
        guard system.isMachine, configuration.domains != nil, configuration.browserPolicies else { return }
        let policies = BrowserPolicies(root: configuration.browserPolicyRoot)
        let wanted = configuration.policy.stores.contains { !$0.selection.domains.isEmpty }
        let problems = wanted ? policies.install() : policies.remove()
        for problem in problems { log.warning("browser policies: \(problem)") }
        if wanted && problems.isEmpty {
            let browsers = policies.installedBrowsers()
            log.info(
                browsers.isEmpty
                    ? "browser policies: no browser with a DNS over HTTPS of its own is installed"
                    : "browser policies: DNS over HTTPS kept off in \(browsers.joined(separator: ", "))")
        }
    }

    /// Builds the shields the configuration asks for; one that cannot start is logged, and the
    /// targets it would have enforced then fail (so the policy fails closed and says why).
    package static func machineShields(
        _ c: DaemonConfiguration, log: Logger, onChange: @escaping @Sendable () -> Void
    ) -> ShieldSet {
        var list: [any Shield] = []
        if c.execShield {
            do {
                let adminGroup = c.adminGroup.flatMap { getgrnam($0)?.pointee.gr_gid }
                let (perStore, fallback) = (c.running, c.runningDefault)
                let passed = SystemdDescriptors.take()
                for (name, fd) in passed where name != SystemdDescriptors.execShield { close(fd) }
                let inherited = passed[SystemdDescriptors.execShield]
                let shield = try ExecDenyShield(
                    applicationDirectories: c.applicationDirectories
                        ?? ExecDenyShield.standardApplicationDirectories,
                    privilegedGroup: adminGroup, runningAction: { perStore[$0] ?? fallback },
                    gracePeriod: .milliseconds(Int64(c.graceSeconds * 1000)),
                    confinement: c.confinementCgroup, adopting: inherited)
                if let problem = shield.confinementProblem {
                    log.warning(
                        "exec shield: programs started during an unlock cannot be kept in a cgroup (\(problem)); at relock only what the scan of /proc finds is ended"
                    )
                }
                if inherited != nil {
                    log.notice("exec shield: took over the previous instance's marks from systemd's store")
                }
                shield.onChange = onChange
                list.append(shield)
            } catch {
                log.error("\(error)")
            }
        }
        if let systemctl = c.systemctl {
            do {
                list.append(
                    try SystemdShield(
                        memoryPath: c.stateDirectory + "/systemd-units.json", systemctl: systemctl))
            } catch {
                log.error("\(error)")
            }
        }
        if let domains = c.domains {
            list.append(
                DomainShield(path: domains.path, format: domains.format, reloadCommand: domains.reload))
        }
        if let nft = c.nftables {
            let users: NftablesShield.Users
            if let names = nft.users {
                users = .only(names.compactMap { getpwnam($0)?.pointee.pw_uid })
            } else {
                users = .ordinaryExcept(Self.adminMembers(c.adminGroup))
            }
            let lookup = DNSLookup(servers: nft.nameservers)
            list.append(
                NftablesShield(
                    nft: nft.nft, users: users, resolvers: nft.resolvers,
                    lookup: { lookup.addresses(of: $0) },
                    refreshInterval: .milliseconds(Int64(nft.refreshSeconds * 1000)),
                    warn: { log.warning($0) }))
        }
        if !c.hooks.isEmpty { list.append(HookShield(hooks: c.hooks)) }
        return ShieldSet(list)
    }

    /// The longest a counted step waits for `steps.json` (what a SIGKILL or a power cut can lose).
    package static let historySaveInterval = Duration.seconds(10)

    /// Stops or reloads the running loop as SIGTERM and SIGHUP would: for tests and anything
    /// that runs a daemon without signals (``DaemonSystem/isMachine`` false).
    package var handle: DaemonHandle { DaemonHandle(inbox: inbox) }

    /// Runs until SIGTERM or SIGINT; saves the state on the way out.
    package func run() async throws {
        // No write of the daemon's (a client that hung up, a hook's pipe) may kill it: writes
        // to a closed peer fail with EPIPE instead. Children get default dispositions back.
        if system.isMachine {
            signal(SIGPIPE, SIG_IGN)
            raiseDescriptorLimit()
        }
        let server = try system.control(configuration)
        let inbox = inbox
        server.start { request in inbox.post(.request(request)) }
        defer { server.stop() }
        let signals = system.isMachine ? watchSignals([SIGTERM, SIGINT, SIGHUP], inbox) : []
        defer { for source in signals { source.cancel() } }

        // What is in force already (after a restart), then a first tick.
        let (inForce, errors) = shields.inForce()
        for error in errors { log.warning("reading back: \(error)") }
        for store in configuration.policy.stores {
            perform(
                engine.handle(
                    .shieldReport(store: store.name, .applied(inForce[store.name] ?? .empty)),
                    at: clock.now()))
        }
        perform(engine.handle(.tick, at: clock.now()))
        household?.start(snapshot(clock.now()))
        defer { household?.stop() }
        // The shields are decided: the exec shield answers (an adopted group's queued opens
        // too), and its group goes to systemd's store, so a restart or a crash leaves the marks
        // in place (opens wait for the next instance instead of going through).
        let log = log
        workers.afterQueuedOnExecShield { exec in
            exec.startAnswering()
            if notifySystemd(
                "FDSTORE=1\nFDNAME=\(SystemdDescriptors.execShield)", descriptors: [exec.groupDescriptor])
            {
                log.info("exec shield: fanotify group kept in systemd's file descriptor store")
            }
        }
        let timer = Task { [wake, savesDue, clock] in await Daemon.runTimer(wake, savesDue, clock, inbox) }
        defer { timer.cancel() }
        let inputTask = startInput()
        defer { inputTask.cancel() }
        // Ready once the first applies are done; the loop serves status meanwhile.
        workers.whenDone { notifySystemd("READY=1\nSTATUS=enforcing") }
        log.notice(
            "started: \(configuration.policy.stores.count) stores, control socket \(configuration.controlSocket)"
        )

        for await _ in inbox.rings {
            // Files written in batches, first: a turn after their deadline writes them.
            saveWhatIsDue()
            let events = inbox.take()
            for (index, event) in events.enumerated() {
                switch event {
                case .steps(let count):
                    household?.counted(count, at: clock.bootTime())
                    perform(engine.handle(.steps(count), at: clock.now()))
                case .tick:
                    let zone = clock.zoneIdentifier()
                    if zone != lastZone {
                        lastZone = zone
                        ledger.clock = .policy(configuration.policy, systemZone: zone)
                        perform(engine.handle(.zoneChanged(zone), at: clock.now()))
                    }
                    resolveExecutables()
                    recheckShields()
                    perform(engine.handle(.tick, at: clock.now()))
                case .shieldsChanged:
                    recheckShields()
                case .savesDue:
                    break  // written at the start of the turn
                case .shieldOutcome(let outcome):
                    handle(outcome)
                case .request(let request):
                    answer(request)
                case .execDenied(let denial):
                    showShieldScreen(denial)
                case .signal(SIGHUP):
                    let result = reload()
                    if let error = result { log.error("reload: \(error); keeping the old configuration") }
                case .signal:
                    log.notice("stopping: saving state")
                    await stopCounting(inputTask, later: events[(index + 1)...])
                    do {
                        try stateStore.save(engine.state)
                    } catch {
                        log.error("cannot save the state on exit: \(error)")
                    }
                    notifySystemd("STOPPING=1")
                    if !workers.drain(timeout: .seconds(5)) {
                        log.warning("a shield was still busy when the daemon stopped")
                    }
                    if configuration.execShield, let cgroup = configuration.confinementCgroup {
                        ExecDenyShield.removeEmptyCgroups(cgroup)
                    }
                    inbox.finish()
                    return
                case .inputEnded(let reason):
                    inputState = reason.map { "failed: \($0)" } ?? "ended"
                    if let reason {
                        log.error("input: \(reason)")
                    } else {
                        log.notice("input ended; still enforcing")
                    }
                case .household(let event):
                    switch household?.handle(event, at: clock.bootTime()) {
                    case .request(let request)?:
                        // A command from the broker is answered like one from the control socket.
                        answer(request)
                    case .steps(let count)?:
                        // Steps another host counted: into the history and to the gates.
                        remoteSteps?.add(steps: count)
                        if let remoteSteps { input.record(remoteSteps) }
                        perform(engine.handle(.steps(count), at: clock.now()))
                    case nil: break
                    }
                }
            }
            // What changed, to the household (only what differs is sent).
            household?.check(at: clock.bootTime())
            household?.update(snapshot(clock.now()))
            savesDue.set([ledger.saveDue, household?.saveDue].compactMap { $0 }.min())
        }
    }

    /// The counter of steps over MQTT (input `{"mqtt": …}`): its ledger is the one every input
    /// counts with.
    private var remoteSteps: StepCounter?

    /// When the next file written in batches is due (the timer wakes the loop for it).
    private let savesDue = WakeUp()

    /// Writes the files the daemon writes in batches (``SaveDeadline``: `steps.json`,
    /// `step-sessions.json`) whose deadline has come. Every other file is written when it
    /// changes.
    private func saveWhatIsDue() {
        do { try ledger.saveIfDue() } catch { log.warning("\(error)") }
        household?.saveIfDue(at: clock.bootTime())
    }

    /// The first part of a stop: the input stops (so nothing is counted after the history is
    /// written), the steps it counted and the loop has not taken yet (`later` in this batch, and
    /// any posted since) go to the gates and the household, and the history is written in full.
    /// The step sessions are written when the household link stops.
    private func stopCounting(_ inputTask: Task<Void, Never>, later: ArraySlice<DaemonEvent>) async {
        inputTask.cancel()
        await inputTask.value
        var late = inbox.takeSteps()
        for case .steps(let count) in later { late += count }
        if late > 0 {
            household?.counted(late, at: clock.bootTime())
            perform(engine.handle(.steps(late), at: clock.now()))
        }
        do { try ledger.save() } catch { log.error("\(error)") }
    }

    /// Raises the soft descriptor limit to the hard one, so bursts of clients, hooks and
    /// shields do not run out (the control socket bounds its own share anyway).
    private func raiseDescriptorLimit() {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else {
            return
        }
        limit.rlim_cur = min(limit.rlim_max, 65_536)
        if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) != 0 {
            log.warning("cannot raise the descriptor limit: \(String(cString: strerror(errno)))")
        }
    }

    // MARK: Effects

    /// Carries out effects in order. A failed persist stops the batch and tells the engine, whose
    /// answer (locked again) is carried out instead. A failed shield does not stop the batch:
    /// every other store's effects still run, and the failures are reported after it.
    /// Carries out a batch of the engine's effects on this machine, by the rules every
    /// environment shares (``PolicyDriver``): a failed save or timer supersedes the batch, a
    /// failing shield does not hold up the others and is reported after it.
    private func perform(_ effects: [PolicyEffect]) {
        var environment = SystemEnvironment(daemon: self)
        PolicyDriver.perform(
            effects, in: &environment,
            handle: { self.engine.handle($0, at: clock.now()) },
            until: { store in
                self.engine.status(at: clock.now()).stores.first { $0.name == store }?.unlockedUntil
            })
    }

    /// The system side of the effects: the state file, the wake-up timer, the journal and the
    /// desktop, and the shields.
    private struct SystemEnvironment: PolicyEnvironment {
        package let daemon: Daemon

        package func persist(_ state: PolicyState) -> String? {
            do {
                try daemon.stateStore.save(state)
                return nil
            } catch {
                daemon.log.error("cannot save the state: \(error)")
                return error.description
            }
        }

        package func armWakeUp(at date: Date, monotonic: Duration) -> String? {
            daemon.wake.arm(monotonic)
            return nil
        }

        package func notify(_ notice: PolicyNotice) {
            daemon.log.log(
                notice.kind == .failClosed || notice.kind == .shieldFailed ? .warning : .notice,
                notice.description)
            daemon.notifyDesktop(notice)
        }

        package func apply(store: String, selection: Selection, owners: [String], until: Date?) -> String? {
            daemon.workers.run(
                .apply, selection,
                context: ShieldContext(store: store, selection: selection, owners: owners, until: until))
        }

        package func remove(store: String, selection: Selection) -> String? {
            daemon.workers.run(.remove, selection, context: ShieldContext(store: store, selection: selection))
        }

        package func gaveUp() {
            daemon.log.error("the policy kept failing; giving up on this batch until the next tick")
        }
    }

    /// A shield finished an operation: keep its failure (or clear it) and tell the engine about a
    /// failure, which keeps the store locked, retries and says why.
    private func handle(_ outcome: ShieldOutcome) {
        let key = "\(outcome.shield):\(outcome.action == .recheck ? "recheck" : "change")"
        let before = failures[outcome.store]?[key]
        failures[outcome.store, default: [:]][key] = outcome.error
        if failures[outcome.store]?.isEmpty == true { failures[outcome.store] = nil }
        guard let message = outcome.error else {
            if outcome.action != .recheck {
                log.debug("\(outcome.store): \(outcome.shield) shield: \(outcome.action.rawValue) done")
            }
            if before != nil { log.notice("\(outcome.store): \(outcome.shield) shield in force again") }
            return
        }
        if before != message {
            log.error(
                "\(outcome.store): \(outcome.shield) shield: cannot \(outcome.action.rawValue): \(message)")
        }
        perform(engine.handle(.shieldReport(store: outcome.store, .failed(message)), at: clock.now()))
    }

    /// Checks that every store's shields are still in force (a replaced program is marked again
    /// there), on the shields' own queues; problems come back as outcomes.
    private func recheckShields() {
        workers.recheck(stores: configuration.policy.stores.map(\.name))
    }

    private func notifyDesktop(_ notice: PolicyNotice) {
        var running: RunningProgramAction?
        if notice.kind == .relockWarning, configuration.execShield, let name = notice.store,
            let store = configuration.policy.store(named: name),
            !store.selection.executables.isEmpty || !store.selection.desktopCategories.isEmpty
        {
            running = configuration.running[name] ?? configuration.runningDefault
        }
        notices.policy(
            notice, zone: configuration.policy.timeZone ?? lastZone, now: clock.now().wall, running: running)
    }

    /// The shield screen for a denied launch, on the desktop of the user who tried (queued:
    /// nothing here waits on their bus), and a line in the journal.
    private func showShieldScreen(_ denial: ExecDenial) {
        // A launcher retrying in a loop gets one screen per interval: decided here, before any
        // work (a loop of denied launches must cost the daemon next to nothing).
        let now = clock.bootTime()
        let interval = Duration.milliseconds(Int64(configuration.notifications.minimumIntervalSeconds * 1000))
        let due = denial.stores.filter { store in
            let key = "\(denial.uid.map(String.init) ?? "?"):\(store)"
            if let last = lastShieldScreen[key], now - last < interval { return false }
            lastShieldScreen[key] = now
            return true
        }
        if lastShieldScreen.count > 4096 {
            lastShieldScreen = lastShieldScreen.filter { now - $0.value < interval }
        }
        guard !due.isEmpty else { return }
        let status = engine.status(at: clock.now())
        for store in due {
            let s = status.stores.first { $0.name == store }
            let sent = notices.denied(
                denial, store: store, message: configuration.messages[store],
                stepsToGo: s?.nextGoal.map { max(0, $0 - (s?.steps ?? 0)) }, note: s?.note)
            if sent {
                log.notice(
                    "\(store): launch of \(denial.path) denied to uid \(denial.uid.map(String.init) ?? "?") "
                        + "(pid \(denial.pid)); shield screen sent")
            }
        }
    }

    // MARK: Control requests

    /// Answers one request (decoded and bounded by ``ControlCommand``). Nothing here blocks
    /// or touches the file system on a client's behalf.
    private func answer(_ request: ControlRequest) {
        let now = clock.now()
        func refuse(_ message: String) {
            request.respond(ControlReply.refusal(message))
        }
        if request.command.changesPolicy && !request.isAdmin {
            return refuse(
                "permission denied: only root"
                    + (configuration.adminGroup.map { " or members of \($0)" } ?? "")
                    + " may change the policy")
        }
        switch request.command {
        case .ping:
            request.respond(ControlCoding.line(ControlReply(ok: true)))
        case .status:
            request.respond(statusJSON(now))
        case .history(let days):
            request.respond(ledger.historyJSON(days: days, goal: historyGoal(configuration.policy)))
        case .check(let executable, let resolved):
            request.respond(checkJSON(executable, resolved: resolved, now))
        case .reload:
            if let error = reload() {
                refuse("\(error); the old configuration stays in force")
            } else {
                workers.whenDone(timeout: .seconds(5)) {
                    request.respond(ControlCoding.line(ControlReply(ok: true)))
                }
            }
        case .lock, .skip, .emergency:
            guard let command = request.command.policyCommand(by: request.origin) else { return }
            let effects = engine.handle(.command(command), at: now)
            perform(effects)
            let notices = effects.compactMap { effect -> String? in
                if case .notify(let notice) = effect { return notice.description }
                return nil
            }
            let refused = effects.contains {
                if case .notify(let notice) = $0 { return notice.kind == .refused }
                return false
            }
            // Answered once the shields have done what the command asked (at most 5 s: a slow
            // hook does not hold the answer), so `stepgate lock` returns with the lock in force.
            let reply = ControlCoding.line(ControlReply(ok: !refused, events: notices))
            workers.whenDone(timeout: .seconds(5)) { request.respond(reply) }
        }
    }

    /// Re-reads the configuration file; on error returns it and keeps the old one.
    private func reload() -> String? {
        let fresh: DaemonConfiguration
        do {
            fresh = try DaemonConfiguration.load(path: configPath)
        } catch {
            return "\(error)"
        }
        if fresh.input != configuration.input || fresh.controlSocket != configuration.controlSocket
            || fresh.stateDirectory != configuration.stateDirectory
        {
            log.warning("reload: input, control socket and state directory changes take effect on restart")
        }
        if fresh.mqtt != configuration.mqtt {
            log.warning("reload: changes to 'mqtt' take effect on restart (systemctl restart stepgate)")
        }
        if fresh.shieldSettings != configuration.shieldSettings {
            log.warning(
                "reload: changes to 'shields' and 'adminGroup' (running programs, grace period, files, hooks) "
                    + "take effect on restart (systemctl restart stepgate)")
        }
        configuration.policy = fresh.policy
        configuration.messages = fresh.messages
        if fresh.notifications != configuration.notifications {
            configuration.notifications = fresh.notifications
            notices = system.notices(fresh.notifications, log)
        }
        ledger.clock = .policy(fresh.policy, systemZone: lastZone)
        resolveExecutables()
        updateBrowserPolicies()
        perform(engine.handle(.command(.reload(fresh.policy)), at: clock.now()))
        log.notice("configuration reloaded")
        return nil
    }

    private func statusJSON(_ now: Instant) -> String { ControlCoding.line(statusReply(now)) }

    /// What a selection names, one entry per kind; a folder or a pattern of programs with what it
    /// matches now (`/usr/games/ (3 programs now)`).
    static func describe(_ selection: Selection) -> [String] {
        var parts: [String] = []
        if !selection.executables.isEmpty {
            let programs = selection.executables.map { entry -> String in
                guard !ProgramEntry(entry).isProgram else { return entry }
                let count = ProgramEntry.check(entry).matches.count
                return "\(entry) (\(count) program\(count == 1 ? "" : "s") now)"
            }
            parts.append("programs " + programs.joined(separator: ", "))
        }
        let named: [(String, [String])] = [
            ("desktop categories", selection.desktopCategories), ("units", selection.systemdUnits),
            ("domains", selection.domains), ("hooks", selection.hooks),
        ]
        for (kind, list) in named where !list.isEmpty {
            parts.append("\(kind) " + list.joined(separator: ", "))
        }
        return parts
    }

    /// The gate's state for the household: what `status` says, in MQTT's terms.
    private func snapshot(_ now: Instant) -> GateSnapshot {
        let reply = statusReply(now)
        return GateSnapshot(
            stepsToday: reply.stepsToday, input: reply.input,
            stores: reply.stores.map {
                GateSnapshot.Store(
                    name: $0.name, shielded: $0.shielded, unlockedUntil: $0.unlockedUntil, owners: $0.owners,
                    steps: $0.steps, nextGoal: $0.nextGoal, stepsToGo: $0.stepsToGo, health: $0.shieldHealth)
            }, problems: reply.problems)
    }

    private func statusReply(_ now: Instant) -> StatusReply {
        let status = engine.status(at: now)
        let formatter = ISO8601DateFormatter()
        let stores = status.stores.map { s in
            StatusReply.Store(
                name: s.name, shielded: s.shielded, owners: s.owners,
                unlockedUntil: s.unlockedUntil.map(formatter.string(from:)),
                emergencyUntil: s.emergencyUntil.map(formatter.string(from:)), steps: s.steps,
                nextGoal: s.nextGoal, goalIsDaily: s.goalIsDaily ? true : nil,
                stepsToGo: s.nextGoal.map { max(0, $0 - s.steps) },
                unlocksToday: s.unlocksToday, dailyUnlockCap: s.dailyUnlockCap, note: s.note,
                shieldHealth: shieldFailure(s.name) ?? "ok",
                selects: configuration.policy.store(named: s.name).map { Self.describe($0.selection) })
        }
        let counts = input.counts.withLock { $0 }
        // Only kinds some store selects: a machine without the exec shield is not worth a word
        // when no store names a program.
        let used = configuration.policy.stores.reduce(into: Set<Target.Kind>()) { kinds, store in
            kinds.formUnion(store.selection.targets.map(\.kind))
        }
        let missing = shields.unenforcedKinds.intersection(used).map(\.rawValue).sorted()
        let nextChange = status.nextChange.map(formatter.string(from:))
        return StatusReply(
            ok: true, input: inputState, samples: counts.samples, stepsSinceStart: counts.steps,
            stepsToday: counts.today, lastDays: ledger.lastDays(), stores: stores,
            emergencyRemaining: status.emergencyRemaining,
            problems: status.problems + (household?.problems ?? []),
            nextChange: nextChange, unenforcedKinds: missing.isEmpty ? nil : missing,
            mqtt: household?.statusLine, inputProblem: input.problem(formatter: formatter))
    }

    /// Resolves the configured executables (symlinks followed, names looked up on `PATH`).
    private func resolveExecutables() {
        var resolved: [String: String] = [:]
        for store in configuration.policy.stores {
            for candidate in store.selection.executables {
                let path = candidate.contains("/") ? candidate : CommandRunner().resolve(candidate)
                guard let path, let real = realpath(path, nil) else { continue }
                resolved[candidate] = String(cString: real)
                free(real)
            }
        }
        resolvedExecutables = resolved
    }

    /// Whether launching `executable` is shielded now, with the shield screen to show. The
    /// client sends the path it would start and, optionally, that path resolved; both are only
    /// compared as text.
    private func checkJSON(_ executable: String, resolved: String?, _ now: Instant) -> String {
        let name = executable.split(separator: "/").last.map(String.init) ?? executable
        let status = engine.status(at: now)
        for store in configuration.policy.stores {
            let matches = store.selection.executables.contains { candidate in
                if candidate == executable || candidate == name { return true }
                guard let real = resolvedExecutables[candidate] else { return false }
                return real == executable || real == resolved
            }
            guard matches, let s = status.stores.first(where: { $0.name == store.name }), s.shielded else {
                continue
            }
            let message = configuration.messages[store.name]
            return ControlCoding.line(
                CheckReply(
                    shielded: true, store: store.name, title: message?.title ?? "\(store.name) is shielded",
                    subtitle: message?.subtitle ?? "Walk to unlock it.",
                    stepsToGo: s.nextGoal.map { max(0, $0 - s.steps) },
                    unlockedUntil: s.unlockedUntil.map(ISO8601DateFormatter().string(from:))))
        }
        return ControlCoding.line(CheckReply(shielded: false))
    }

    // MARK: Producers

    /// Delivers a tick when the armed wake-up is due, and at least once a minute; wakes the
    /// loop when a file written in batches is due.
    private static func runTimer(_ wake: WakeUp, _ saves: WakeUp, _ clock: any DaemonClock, _ inbox: Inbox)
        async
    {
        var lastTick = clock.bootTime()
        while !Task.isCancelled {
            // Sleep to the wake-up if it is close, so a relock lands on time; else poll 4 times a
            // second (a newly armed, earlier wake-up is noticed within that).
            var pause = Duration.milliseconds(250)
            for due in [wake.due, saves.due].compactMap({ $0 }) {
                pause = max(.zero, min(pause, due - clock.bootTime()))
            }
            try? await clock.sleep(for: pause)
            let now = clock.bootTime()
            if wake.takeIfDue(now) || now - lastTick >= .seconds(60) {
                lastTick = now
                inbox.post(.tick)
            }
            if saves.takeIfDue(now) { inbox.post(.savesDue) }
        }
    }

    private func startInput() -> Task<Void, Never> {
        let (inbox, statistics, log) = (inbox, input, log)
        let (detector, input, open) = (configuration.detector, configuration.input, system.source)
        // Steps go into the history (steps.json), a replay's too. An accelerometer is opened
        // again every 5 s while it fails; a replay is read once.
        let ledger = ledger
        let again: Bool
        switch input {
        case .replay(let path, _):
            inputState = "replaying \(path)"
            again = false
        case .device(let name, let uri, let rate):
            inputState = "IIO \(name ?? "accelerometer")\(uri.map { " at \($0)" } ?? "") at \(rate) Hz"
            again = true
        case .mqtt(let prefix):
            // The steps come through the MQTT link (``HouseholdLink``), in the loop.
            let counter = StepCounter(configuration: detector, ledger: ledger)
            statistics.record(counter)
            remoteSteps = counter
            inputState =
                household == nil
                ? "failed: steps from \(prefix) need MQTT, which is not running"
                : "steps from \(prefix) over MQTT"
            return Task {}
        }
        let clock = clock
        return Task.detached {
            await Daemon.count(
                from: { try open(input, log) }, input: input, again: again, detector: detector,
                ledger: ledger,
                statistics: statistics, clock: clock, log: log, inbox)
        }
    }

    /// Counts steps from the input until cancelled (or, for a replay, until it ends), posting
    /// them to the loop. With `again`, a source that fails to open or ends is opened again
    /// every 5 s (the sensor may appear later; udev also starts the service on hotplug).
    private static func count(
        from open: () throws -> any SampleSource, input: DaemonConfiguration.Input, again: Bool,
        detector: DetectorConfiguration, ledger: StepLedger?, statistics: InputStatistics,
        clock: any DaemonClock, log: Logger, _ inbox: Inbox
    ) async {
        var counter = StepCounter(configuration: detector, ledger: ledger)
        statistics.record(counter)
        var reported: String?
        /// What `status` says while the input cannot be read: since the first failure of a kind.
        func failed(_ kind: String, _ message: String) {
            let since = ISO8601DateFormatter().string(from: clock.now().wall)
            let action = again ? "retrying every 5 s" : "not retried"
            statistics.reading.withLock {
                let same = $0.problem?.kind == kind
                $0 = (
                    InputProblem(
                        kind: kind, message: message, since: same ? $0.problem!.since : since, action: action),
                    nil
                )
            }
        }
        while !Task.isCancelled {
            do {
                let source = try open()
                statistics.reading.withLock { $0 = (nil, source) }
                reported = nil
                log.notice("reading \(source.name)")
                counter.restart(input: source.input)
                try await countSteps(from: source, into: &counter, log: log) {
                    _, events, counter in
                    // Counted before the steps are posted: `status` never shows fewer steps today
                    // than a gate has been given.
                    if !events.isEmpty || counter.samples & 63 == 0 { statistics.record(counter) }
                    if !events.isEmpty { inbox.post(.steps(events.count)) }
                    return true
                }
                statistics.record(counter)
                guard again else {
                    statistics.reading.withLock { $0.source = nil }
                    return inbox.post(.inputEnded(nil))
                }
                if !Task.isCancelled {
                    failed("failed", "the accelerometer stream ended")
                    inbox.post(.inputEnded("the accelerometer stream ended"))
                }
            } catch is CancellationError {
                return
            } catch {
                statistics.record(counter)
                failed(problemKind(error, input: input), "\(error)")
                guard again else { return inbox.post(.inputEnded("\(error)")) }
                let message = "\(error)"
                if message != reported {
                    log.error("input: \(message); retrying every 5 s")
                    reported = message
                }
            }
            try? await Task.sleep(for: .seconds(5))
        }
    }
}

@available(*, unavailable) extension Daemon: Sendable {}

/// What kind of input problem an error is, for `status`: `no-device`, `no-permission`,
/// `missing-file` (a replay's recording) or `failed`.
func problemKind(_ error: any Error, input: DaemonConfiguration.Input) -> String {
    if let error = error as? IIOError {
        if error.isPermissionDenied { return "no-permission" }
        return [ENOENT, ENODEV, ENXIO].contains(error.code) ? "no-device" : "failed"
    }
    if case .replay(let path, _) = input, let error = error as? RecordingError, error.kind == .cannotOpen {
        if access(path, F_OK) != 0 && errno == ENOENT { return "missing-file" }
        if access(path, R_OK) != 0 && (errno == EACCES || errno == EPERM) { return "no-permission" }
    }
    return "failed"
}

/// Reaches a running ``Daemon``'s loop from another task.
package struct DaemonHandle: Sendable {
    fileprivate let inbox: Inbox
    /// Stops the loop as SIGTERM does: the state is saved and ``Daemon/run()`` returns.
    package func stop() { inbox.post(.signal(SIGTERM)) }
    /// Re-reads the configuration file as SIGHUP does.
    package func reload() { inbox.post(.signal(SIGHUP)) }
}

/// Signal sources that feed the loop; the signals' default actions are disabled.
private func watchSignals(_ numbers: [Int32], _ inbox: Inbox) -> [any DispatchSourceSignal] {
    numbers.map { number in
        signal(number, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
        source.setEventHandler { inbox.post(.signal(number)) }
        source.resume()
        return source
    }
}
