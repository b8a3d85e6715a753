@preconcurrency import Dispatch
import Foundation
@preconcurrency import Glibc
import SensorInput
import Shields
import StepDetection
import Synchronization
import UnlockPolicy

/// Something the daemon's loop reacts to. Producers (input, timer, control socket, signals)
/// run concurrently; the loop handles one event at a time, so the engine, the shields and the
/// state file are only ever touched from one place.
enum DaemonEvent: Sendable {
    /// Steps confirmed by the detector since the last event, and the running total.
    case steps(Int, total: Int)
    /// Time to deliver a `.tick` (a wake-up is due, or a minute passed).
    case tick
    case request(ControlRequest)
    /// A signal: SIGTERM/SIGINT stop, SIGHUP reloads.
    case signal(Int32)
    /// The input ended (a replay reached its end) or failed; the daemon keeps enforcing.
    case inputEnded(String?)
}

/// The next wake-up, shared between the loop (which arms it) and the timer task.
final class WakeUp: Sendable {
    private let at = Mutex<Duration?>(nil)
    func arm(_ monotonic: Duration) { at.withLock { $0 = monotonic } }
    var due: Duration? { at.withLock { $0 } }
    func clear() { at.withLock { $0 = nil } }
}

/// Live statistics from the input task, for `status`.
final class InputStatistics: Sendable {
    /// Samples read and steps counted since start, and today's steps (from the ledger).
    let counts = Mutex<(samples: Int, steps: Int, today: Int)>((0, 0, 0))
}

/// The live pipeline: input → detector → policy → shields, with the control socket.
final class Daemon {
    private var configuration: DaemonConfiguration
    private let configPath: String
    private let log: Logger
    private var engine: PolicyEngine
    private var stateStore: FilePolicyStateStore
    private var shields: ShieldSet
    private var shieldFailures: [String: String] = [:]
    private let wake = WakeUp()
    private let input = InputStatistics()
    private var inputState = "starting"
    private var lastZone: String
    private let events: AsyncStream<DaemonEvent>
    private let continuation: AsyncStream<DaemonEvent>.Continuation

    init(configuration: DaemonConfiguration, configPath: String, log: Logger) throws {
        self.configuration = configuration
        self.configPath = configPath
        self.log = log
        (events, continuation) = AsyncStream.makeStream(
            of: DaemonEvent.self, bufferingPolicy: .bufferingNewest(4096))
        do {
            try FileManager.default.createDirectory(
                atPath: configuration.stateDirectory, withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700])
        } catch {
            throw ConfigurationFileError(
                path: configuration.stateDirectory,
                message: "cannot create the state directory: \(error.localizedDescription)")
        }
        stateStore = FilePolicyStateStore(path: configuration.stateDirectory + "/state.json")
        let loaded = stateStore.load()
        if case .failure(let error) = loaded { log.error("\(error); starting locked") }
        lastZone = SystemClock.zoneIdentifier()
        engine = PolicyEngine(configuration: configuration.policy, restoring: loaded, systemZone: lastZone)
        shields = ShieldSet([])
        shields = makeShields(configuration)
    }

    /// Builds the shields the configuration asks for; one that cannot start is logged, and the
    /// targets it would have enforced then fail (so the policy fails closed and says why).
    private func makeShields(_ c: DaemonConfiguration) -> ShieldSet {
        var list: [any Shield] = []
        if c.execShield {
            do {
                if let directories = c.applicationDirectories {
                    list.append(try ExecDenyShield(applicationDirectories: directories))
                } else {
                    list.append(try ExecDenyShield())
                }
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
        if !c.hooks.isEmpty { list.append(HookShield(hooks: c.hooks)) }
        return ShieldSet(list)
    }

    /// Runs until SIGTERM or SIGINT; saves the state on the way out.
    func run() async throws {
        let server = try ControlServer(
            path: configuration.controlSocket, adminGroup: configuration.adminGroup)
        let continuation = continuation
        server.start { request in continuation.yield(.request(request)) }
        defer { server.stop() }
        let signals = watchSignals([SIGTERM, SIGINT, SIGHUP], continuation)
        defer { for source in signals { source.cancel() } }

        // What is in force already (after a restart), then a first tick.
        let (inForce, errors) = shields.inForce()
        for error in errors { log.warning("reading back: \(error)") }
        for store in configuration.policy.stores {
            perform(
                engine.handle(
                    .shieldReport(store: store.name, .applied(inForce[store.name] ?? .empty)),
                    at: SystemClock.now()))
        }
        perform(engine.handle(.tick, at: SystemClock.now()))

        let timer = Task { [wake, continuation] in await Daemon.runTimer(wake, continuation) }
        defer { timer.cancel() }
        let inputTask = startInput()
        defer { inputTask.cancel() }
        notifySystemd("READY=1\nSTATUS=enforcing")
        log.notice(
            "started: \(configuration.policy.stores.count) stores, control socket \(configuration.controlSocket)"
        )

        for await event in events {
            switch event {
            case .steps(let count, _):
                perform(engine.handle(.steps(count), at: SystemClock.now()))
            case .tick:
                let zone = SystemClock.zoneIdentifier()
                if zone != lastZone {
                    lastZone = zone
                    perform(engine.handle(.zoneChanged(zone), at: SystemClock.now()))
                }
                perform(engine.handle(.tick, at: SystemClock.now()))
            case .request(let request):
                answer(request)
            case .signal(SIGHUP):
                let result = reload()
                if let error = result { log.error("reload: \(error); keeping the old configuration") }
            case .signal:
                log.notice("stopping: saving state")
                do {
                    try stateStore.save(engine.state)
                } catch {
                    log.error("cannot save the state on exit: \(error)")
                }
                notifySystemd("STOPPING=1")
                return
            case .inputEnded(let reason):
                inputState = reason.map { "failed: \($0)" } ?? "ended"
                if let reason {
                    log.error("input: \(reason)")
                } else {
                    log.notice("input ended; still enforcing")
                }
            }
        }
    }

    // MARK: Effects

    /// Carries out effects in order. A failed persist stops the batch and tells the engine, whose
    /// answer (locked again) is carried out instead; a failed shield is reported the same way.
    private func perform(_ effects: [PolicyEffect], depth: Int = 0) {
        guard depth < 8 else {
            log.error("the policy kept failing; giving up on this batch until the next tick")
            return
        }
        for effect in effects {
            let now = SystemClock.now()
            switch effect {
            case .persist(let state):
                do {
                    try stateStore.save(state)
                } catch {
                    log.error("cannot save the state: \(error)")
                    perform(
                        engine.handle(.effectFailed(.persist(error.description)), at: now), depth: depth + 1)
                    return
                }
            case .wakeUp(_, let monotonic):
                wake.arm(monotonic)
            case .notify(let notice):
                log.log(
                    notice.kind == .failClosed || notice.kind == .shieldFailed ? .warning : .notice,
                    notice.description)
                notifyDesktop(notice)
            case .apply(let store, let selection, let owners):
                let until = engine.status(at: now).stores.first { $0.name == store }?.unlockedUntil
                let errors = shields.apply(
                    selection,
                    context: ShieldContext(store: store, selection: selection, owners: owners, until: until))
                if report(errors, store: store, action: "apply", now: now, depth: depth) { return }
            case .remove(let store, let selection):
                let errors = shields.remove(
                    selection, context: ShieldContext(store: store, selection: selection))
                if report(errors, store: store, action: "remove", now: now, depth: depth) { return }
            }
        }
    }

    /// Records shield failures and tells the engine; true when the batch must stop.
    private func report(_ errors: [ShieldError], store: String, action: String, now: Instant, depth: Int)
        -> Bool
    {
        guard !errors.isEmpty else {
            shieldFailures[store] = nil
            return false
        }
        let message = errors.map(\.description).joined(separator: "; ")
        shieldFailures[store] = message
        log.error("\(store): cannot \(action): \(message)")
        perform(engine.handle(.shieldReport(store: store, .failed(message)), at: now), depth: depth + 1)
        return true
    }

    private func notifyDesktop(_ notice: PolicyNotice) {
        guard ProcessInfo.processInfo.environment["DBUS_SESSION_BUS_ADDRESS"] != nil,
            let notifySend = CommandRunner().resolve("notify-send")
        else { return }
        let text = notice.description
        DispatchQueue.global().async {
            _ = try? CommandRunner().run([notifySend, "StepGate", text], timeout: 5, shield: "notify")
        }
    }

    // MARK: Control requests

    private func answer(_ request: ControlRequest) {
        let now = SystemClock.now()
        let who = "uid \(request.peer.uid)"
        func denied() {
            request.respond(
                #"{"ok":false,"error":"permission denied: only root"#
                    + (configuration.adminGroup.map { " or members of \($0)" } ?? "")
                    + #" may change the policy"}"#)
        }
        func reply(_ effects: [PolicyEffect]) {
            perform(effects)
            let notices = effects.compactMap { effect -> String? in
                if case .notify(let notice) = effect { return JSONLine.quoted(notice.description) }
                return nil
            }
            let refused = effects.contains {
                if case .notify(let notice) = $0 { return notice.kind == .refused }
                return false
            }
            request.respond("{\"ok\":\(!refused),\"events\":[\(notices.joined(separator: ","))]}")
        }
        switch request.command {
        case "ping":
            request.respond(#"{"ok":true}"#)
        case "status":
            request.respond(statusJSON(now))
        case "check":
            request.respond(checkJSON(request.fields["executable"] ?? "", now))
        case "lock":
            guard request.isAdmin else { return denied() }
            guard let store = request.fields["store"],
                let minutes = request.fields["minutes"].flatMap(Double.init), minutes > 0
            else {
                return request.respond(#"{"ok":false,"error":"lock needs \"store\" and \"minutes\" > 0"}"#)
            }
            reply(
                engine.handle(
                    .command(.lock(store: store, duration: .seconds(minutes * 60), by: who)), at: now))
        case "skip":
            guard request.isAdmin else { return denied() }
            guard let schedule = request.fields["schedule"] else {
                return request.respond(#"{"ok":false,"error":"skip needs \"schedule\""}"#)
            }
            reply(
                engine.handle(
                    .command(.skip(schedule: schedule, occurrence: request.fields["occurrence"])), at: now))
        case "emergency":
            guard request.isAdmin else { return denied() }
            guard let store = request.fields["store"] else {
                return request.respond(#"{"ok":false,"error":"emergency needs \"store\""}"#)
            }
            reply(engine.handle(.command(.emergencyUnlock(store: store, by: who)), at: now))
        case "reload":
            guard request.isAdmin else { return denied() }
            if let error = reload() {
                request.respond(
                    "{\"ok\":false,\"error\":\(JSONLine.quoted("\(error); the old configuration stays in force"))}"
                )
            } else {
                request.respond(#"{"ok":true}"#)
            }
        default:
            request.respond(
                "{\"ok\":false,\"error\":\(JSONLine.quoted("unknown command '\(request.command)'"))}")
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
        configuration.policy = fresh.policy
        configuration.messages = fresh.messages
        perform(engine.handle(.command(.reload(fresh.policy)), at: SystemClock.now()))
        log.notice("configuration reloaded")
        return nil
    }

    private func statusJSON(_ now: Instant) -> String {
        let status = engine.status(at: now)
        let formatter = ISO8601DateFormatter()
        var stores: [String] = []
        for s in status.stores {
            var line = JSONLine()
            line.add("name", s.name)
            line.add("shielded", s.shielded)
            line.addRaw("owners", "[" + s.owners.map(JSONLine.quoted).joined(separator: ",") + "]")
            if let until = s.unlockedUntil { line.add("unlockedUntil", formatter.string(from: until)) }
            if let until = s.emergencyUntil { line.add("emergencyUntil", formatter.string(from: until)) }
            line.add("steps", s.steps)
            if let goal = s.nextGoal {
                line.add("nextGoal", goal)
                line.add("stepsToGo", max(0, goal - s.steps))
            }
            line.add("unlocksToday", s.unlocksToday)
            if let cap = s.dailyUnlockCap { line.add("dailyUnlockCap", cap) }
            if let note = s.note { line.add("note", note) }
            line.add("shieldHealth", shieldFailures[s.name] ?? "ok")
            stores.append(line.string)
        }
        let counts = input.counts.withLock { $0 }
        var line = JSONLine()
        line.add("ok", true)
        line.add("input", inputState)
        line.add("samples", counts.samples)
        line.add("stepsSinceStart", counts.steps)
        line.add("stepsToday", counts.today)
        line.addRaw("stores", "[" + stores.joined(separator: ",") + "]")
        line.add("emergencyRemaining", status.emergencyRemaining)
        line.addRaw("problems", "[" + status.problems.map(JSONLine.quoted).joined(separator: ",") + "]")
        if let due = wake.due {
            let seconds = Double((due - now.monotonic).components.seconds)
            line.add("nextChange", formatter.string(from: now.wall.addingTimeInterval(max(0, seconds))))
        }
        let missing = shields.unenforcedKinds.map(\.rawValue).sorted()
        if !missing.isEmpty {
            line.addRaw("unenforcedKinds", "[" + missing.map(JSONLine.quoted).joined(separator: ",") + "]")
        }
        return line.string
    }

    /// Whether launching `executable` is shielded now, with the shield screen to show.
    private func checkJSON(_ executable: String, _ now: Instant) -> String {
        let resolved = realpath(executable, nil).map { p -> String in
            defer { free(p) }
            return String(cString: p)
        }
        let status = engine.status(at: now)
        for store in configuration.policy.stores {
            let matches = store.selection.executables.contains { candidate in
                if candidate == executable || candidate == (executable as NSString).lastPathComponent {
                    return true
                }
                guard let resolved, let real = realpath(candidate, nil) else { return false }
                defer { free(real) }
                return String(cString: real) == resolved
            }
            guard matches, let s = status.stores.first(where: { $0.name == store.name }), s.shielded else {
                continue
            }
            let message = configuration.messages[store.name]
            var line = JSONLine()
            line.add("ok", true)
            line.add("shielded", true)
            line.add("store", store.name)
            line.add("title", message?.title ?? "\(store.name) is shielded")
            line.add("subtitle", message?.subtitle ?? "Walk to unlock it.")
            if let goal = s.nextGoal { line.add("stepsToGo", max(0, goal - s.steps)) }
            if let until = s.unlockedUntil {
                line.add("unlockedUntil", ISO8601DateFormatter().string(from: until))
            }
            return line.string
        }
        return #"{"ok":true,"shielded":false}"#
    }

    // MARK: Producers

    /// Delivers a tick when the armed wake-up is due, and at least once a minute.
    private static func runTimer(_ wake: WakeUp, _ continuation: AsyncStream<DaemonEvent>.Continuation) async
    {
        var lastTick = SystemClock.bootTime()
        while !Task.isCancelled {
            // Sleep to the wake-up if it is close, so a relock lands on time; else poll 4 times a
            // second (a newly armed, earlier wake-up is noticed within that).
            var pause = Duration.milliseconds(250)
            if let due = wake.due { pause = max(.zero, min(pause, due - SystemClock.bootTime())) }
            try? await Task.sleep(for: pause)
            let now = SystemClock.bootTime()
            if let due = wake.due, now >= due {
                wake.clear()
                lastTick = now
                continuation.yield(.tick)
            } else if now - lastTick >= .seconds(60) {
                lastTick = now
                continuation.yield(.tick)
            }
        }
    }

    private func startInput() -> Task<Void, Never> {
        let continuation = continuation
        let detectorConfiguration = configuration.detector
        let statistics = input
        switch configuration.input {
        case .replay(let path, let speed):
            inputState = "replaying \(path)"
            return Task.detached {
                do {
                    try await Daemon.replay(
                        path: path, speed: speed, detector: detectorConfiguration, statistics: statistics,
                        continuation)
                    continuation.yield(.inputEnded(nil))
                } catch is CancellationError {
                } catch {
                    continuation.yield(.inputEnded("\(error)"))
                }
            }
        case .device(let name, let uri, let rate):
            inputState = "IIO \(name ?? "accelerometer")\(uri.map { " at \($0)" } ?? "") at \(rate) Hz"
            let ledgerPath = configuration.stateDirectory + "/steps.json"
            let log = log
            return Task.detached {
                await Daemon.live(
                    device: name, uri: uri, rate: rate, detector: detectorConfiguration,
                    ledgerPath: ledgerPath,
                    statistics: statistics, log: log, continuation)
            }
        }
    }

    /// Reads an IIO accelerometer until cancelled. Opening it is retried every 5 s (the sensor
    /// may appear later; udev also starts the service on hotplug); once capturing, the source
    /// reconnects by itself. Today's steps are kept in a ledger so a restart continues the day.
    private static func live(
        device: String?, uri: String?, rate: Double, detector configuration: DetectorConfiguration,
        ledgerPath: String, statistics: InputStatistics, log: Logger,
        _ continuation: AsyncStream<DaemonEvent>.Continuation
    ) async {
        var ledger = StepLedger(path: ledgerPath, warn: { log.warning($0) })
        statistics.counts.withLock { $0.today = ledger.steps }
        var reported: String?
        while !Task.isCancelled {
            do {
                let source = try IIOAccelerometer(
                    configuration: .init(uri: uri, device: device, rate: rate, log: { log.warning($0) }))
                reported = nil
                log.notice("reading \(source.name)")
                var detector = StepDetector(configuration: configuration)
                var samples = 0
                var lastSave = ContinuousClock.now
                for try await sample in source.samples() {
                    let before = detector.count
                    detector.process(sample) { _ in }
                    samples += 1
                    let new = detector.count - before
                    if new > 0 {
                        ledger.add(new)
                        continuation.yield(.steps(new, total: detector.count))
                    }
                    if samples & 63 == 0 || new > 0 {
                        statistics.counts.withLock { $0 = (samples, detector.count, ledger.steps) }
                    }
                    if new > 0 && ContinuousClock.now - lastSave > .seconds(10) {
                        do { try ledger.save() } catch { log.warning("\(error)") }
                        lastSave = .now
                    }
                }
                try? ledger.save()
                continuation.yield(.inputEnded("the accelerometer stream ended"))
            } catch is CancellationError {
                try? ledger.save()
                return
            } catch {
                let message = "\(error)"
                if message != reported {
                    log.error("input: \(message); retrying every 5 s")
                    reported = message
                }
            }
            try? await Task.sleep(for: .seconds(5))
        }
        try? ledger.save()
    }

    /// Replays a recording paced to the wall clock (`speed` times real time).
    private static func replay(
        path: String, speed: Double, detector configuration: DetectorConfiguration,
        statistics: InputStatistics,
        _ continuation: AsyncStream<DaemonEvent>.Continuation
    ) async throws {
        var reader = try RecordingReader(path: path)
        var detector = StepDetector(configuration: configuration)
        let start = ContinuousClock.now
        var first: Int64?
        var pending = 0
        var samples = 0
        while let sample = try reader.next() {
            try Task.checkCancellation()
            let origin = first ?? sample.timestamp
            first = origin
            let due = start + .nanoseconds(Int64(Double(sample.timestamp &- origin) / speed))
            if due > ContinuousClock.now + .milliseconds(20) {
                if pending > 0 {
                    continuation.yield(.steps(pending, total: detector.count))
                    pending = 0
                }
                try await Task.sleep(until: due, clock: .continuous)
            }
            let before = detector.count
            detector.process(sample) { _ in }
            pending += detector.count - before
            samples += 1
            if samples & 255 == 0 {
                statistics.counts.withLock { $0 = (samples, detector.count, detector.count) }
            }
        }
        if pending > 0 { continuation.yield(.steps(pending, total: detector.count)) }
        statistics.counts.withLock { $0 = (samples, detector.count, detector.count) }
    }
}

@available(*, unavailable) extension Daemon: Sendable {}

/// Signal sources that feed the loop; the signals' default actions are disabled.
private func watchSignals(_ numbers: [Int32], _ continuation: AsyncStream<DaemonEvent>.Continuation)
    -> [any DispatchSourceSignal]
{
    numbers.map { number in
        signal(number, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
        source.setEventHandler { continuation.yield(.signal(number)) }
        source.resume()
        return source
    }
}
