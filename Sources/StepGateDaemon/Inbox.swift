import Counting
import Foundation
@preconcurrency import Glibc
import Household
import SensorInput
import Shields
import Synchronization

/// Something the daemon's loop reacts to. Producers (input, timer, control socket, signals,
/// shield watchers) run concurrently; the loop handles one event at a time, so the engine, the
/// shields and the state file are only ever touched from one place.
enum DaemonEvent: Sendable {
    /// Steps confirmed by the detector since the last event.
    case steps(Int)
    /// Time to deliver a `.tick` (a wake-up is due, or a minute passed).
    case tick
    /// A file written in batches is due (the loop writes it at the start of its turn).
    case savesDue
    case request(ControlRequest)
    /// A signal: SIGTERM/SIGINT stop, SIGHUP reloads.
    case signal(Int32)
    /// The input ended (a replay reached its end) or failed; the daemon keeps enforcing.
    case inputEnded(String?)
    /// Something a shield enforces changed on disk (a program was replaced): recheck now.
    case shieldsChanged
    /// A shield finished an operation (see ``ShieldWorkers``).
    case shieldOutcome(ShieldOutcome)
    /// The exec shield denied a launch (for the shield screen on the user's desktop).
    case execDenied(ExecDenial)
    /// The MQTT connection came up or went down, or a message arrived.
    case household(MQTTClient.Event)
}

/// The loop's inbox. Nothing the gate needs can be dropped: steps add up, ticks, signals and
/// shield changes latch, and requests are bounded where they are accepted (``ControlLimits``:
/// one request per connection). The doorbell only wakes the loop, so it may coalesce.
final class Inbox: Sendable {
    private struct Pending {
        var steps = 0
        var tick = false
        var savesDue = false
        var stop: Int32?
        var reload = false
        var shieldsChanged = false
        var inputEnded: String??
        var requests: [ControlRequest] = []
        /// Bounded by the daemon's own operations (a few per shield and store per tick).
        var outcomes: [ShieldOutcome] = []
        /// Denied launches waiting for their notice; at most 32 (the rest are dropped: a notice
        /// per user and store is rate-limited anyway, and a flood must not grow the inbox).
        var denials: [ExecDenial] = []
        /// The MQTT connection's changes and messages from the broker, in the order they came
        /// (a connection's retained messages belong before the next connection's event): at most
        /// 64 messages between two turns of the loop (a flood from the broker must not grow the
        /// inbox; the rest are dropped, and a command among them is not answered); connection
        /// events are never dropped (one per attempt, at most one a second).
        var household: [MQTTClient.Event] = []
    }
    private let pending = Mutex(Pending())
    private let doorbell: AsyncStream<Void>.Continuation
    /// Rings whenever something was posted.
    let rings: AsyncStream<Void>

    init() {
        (rings, doorbell) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    func post(_ event: DaemonEvent) {
        pending.withLock { p in
            switch event {
            case .steps(let count): p.steps += count
            case .tick: p.tick = true
            case .savesDue: p.savesDue = true
            case .request(let request): p.requests.append(request)
            case .signal(SIGHUP): p.reload = true
            case .signal(let number): p.stop = p.stop ?? number
            case .inputEnded(let reason): p.inputEnded = .some(reason)
            case .shieldsChanged: p.shieldsChanged = true
            case .shieldOutcome(let outcome): p.outcomes.append(outcome)
            case .execDenied(let denial): if p.denials.count < 32 { p.denials.append(denial) }
            case .household(let event):
                if case .message = event,
                    p.household.count(where: { if case .message = $0 { true } else { false } }) >= 64
                {
                    break
                }
                p.household.append(event)
            }
        }
        doorbell.yield()
    }

    /// Everything posted since the last call, most urgent first: stop, reload, shield outcomes
    /// and changes, ticks, steps, the input's end, then requests in arrival order.
    func take() -> [DaemonEvent] {
        pending.withLock { p in
            var events: [DaemonEvent] = []
            if let number = p.stop { events.append(.signal(number)) }
            if p.reload { events.append(.signal(SIGHUP)) }
            events += p.outcomes.map { .shieldOutcome($0) }
            if p.shieldsChanged { events.append(.shieldsChanged) }
            if p.tick { events.append(.tick) }
            if p.savesDue { events.append(.savesDue) }
            if p.steps > 0 { events.append(.steps(p.steps)) }
            if case .some(let reason) = p.inputEnded { events.append(.inputEnded(reason)) }
            events += p.requests.map { .request($0) }
            events += p.denials.map { .execDenied($0) }
            events += p.household.map { .household($0) }
            let stop = p.stop
            p = Pending()
            p.stop = stop  // a stop stays latched
            return events
        }
    }

    /// Takes only the steps posted and not taken yet (at a stop, once the input has stopped).
    func takeSteps() -> Int {
        pending.withLock { p in
            defer { p.steps = 0 }
            return p.steps
        }
    }

    func finish() { doorbell.finish() }
}

/// The next wake-up, shared between the loop (which arms it) and the timer task.
final class WakeUp: Sendable {
    private let at = Mutex<Duration?>(nil)
    func arm(_ monotonic: Duration) { at.withLock { $0 = monotonic } }
    /// Arms the wake-up at `monotonic`, or clears it.
    func set(_ monotonic: Duration?) { at.withLock { $0 = monotonic } }
    var due: Duration? { at.withLock { $0 } }
    /// Clears the wake-up if it is due at `now`, in one step (an earlier read and a later clear
    /// could lose a wake-up armed between them); true when it was due.
    func takeIfDue(_ now: Duration) -> Bool {
        at.withLock { at in
            guard let due = at, due <= now else { return false }
            at = nil
            return true
        }
    }
}

/// Live statistics from the input task, for `status`.
final class InputStatistics: Sendable {
    /// Samples read and steps counted since start, and today's steps (from the ledger).
    let counts = Mutex<(samples: Int, steps: Int, today: Int)>((0, 0, 0))
    /// Why the input cannot be opened (set by the input task), and the source being read (which
    /// may be interrupted: a device lost and reconnecting).
    let reading = Mutex<(problem: InputProblem?, source: (any SampleSource)?)>((nil, nil))

    /// The input's problem now: opening it failed, or the source read is interrupted.
    func problem(formatter: ISO8601DateFormatter) -> InputProblem? {
        let (problem, source) = reading.withLock { $0 }
        if let problem { return problem }
        guard let lost = source?.interruption else { return nil }
        return InputProblem(
            kind: "device-lost", message: lost.reason,
            since: formatter.string(from: Date(timeIntervalSince1970: lost.since)), action: "reconnecting")
    }

    func record(_ counter: StepCounter) {
        counts.withLock { $0 = (counter.samples, counter.steps, counter.today) }
    }
}
