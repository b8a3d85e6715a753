public import Foundation
import TypedJSON

/// One effect the simulator carried out, with the simulated time it happened.
public struct PolicyRecord: Sendable, Hashable {
    /// Real (script) time of the effect.
    public var at: Date
    /// The machine's wall clock at that moment (differs from `at` after a clock change).
    public var wall: Date
    /// The effect.
    public var effect: PolicyEffect
    /// Why carrying it out failed, if it did.
    public var failure: String?

    /// The record as one compact JSON line (see `docs/policy.md`, "Scenario output").
    public var jsonLine: String { jsonObject.serialized() }

    /// The record as one line of text: the time, then what happened
    /// (`2026-11-29T18:01:10Z  owner-removed games [gate] until …: walked 100 steps …`).
    public var textLine: String {
        var text = formatISO8601(millisFromDate(at)) + "  "
        switch effect {
        case .persist: text += "state saved"
        case .wakeUp(let date, _): text += "wake-up at \(formatISO8601(millisFromDate(date)))"
        case .notify(let notice): text += notice.description
        case .apply(let store, let selection, let owners):
            text +=
                "apply \(store) (held by \(owners.joined(separator: ", "))): \(selection.json.serialized())"
        case .remove(let store, let selection): text += "remove \(store): \(selection.json.serialized())"
        }
        if wall != at { text += " (machine clock \(formatISO8601(millisFromDate(wall))))" }
        if let failure { text += " — failed: \(failure)" }
        return text
    }

    var jsonObject: JSONValue {
        var members: [(String, JSONValue)] = [("at", .string(formatISO8601(millisFromDate(at))))]
        if wall != at { members.append(("wall", .string(formatISO8601(millisFromDate(wall))))) }
        func time(_ d: Date) -> JSONValue { .string(formatISO8601(millisFromDate(d))) }
        switch effect {
        case .persist:
            members.append(("effect", .string("persist")))
        case .wakeUp(let date, _):
            members.append(("effect", .string("wake-up")))
            members.append(("wakeAt", time(date)))
        case .notify(let notice):
            members.append(("effect", .string("notify")))
            members.append(("event", .string(notice.kind.rawValue)))
            if let store = notice.store { members.append(("store", .string(store))) }
            if let owner = notice.owner { members.append(("owner", .string(owner))) }
            if let until = notice.until { members.append(("until", time(until))) }
            members.append(("reason", .string(notice.reason)))
        case .apply(let store, let selection, let owners):
            members.append(("effect", .string("apply")))
            members.append(("store", .string(store)))
            members.append(("owners", .array(owners.map { .string($0) })))
            members.append(("targets", selection.json))
        case .remove(let store, let selection):
            members.append(("effect", .string("remove")))
            members.append(("store", .string(store)))
            members.append(("targets", selection.json))
        }
        if let failure { members.append(("failed", .string(failure))) }
        return .object(members)
    }
}

/// The simulated engine asked for more wake-ups than `PolicySimulator` delivers in one advance.
public struct PolicySimulationError: Error, CustomStringConvertible {
    /// What happened.
    public var message: String
    /// The records produced before the simulator gave up.
    public var records: [PolicyRecord]

    public var description: String { message }
}

/// Runs a `PolicyEngine` on a simulated clock, carrying out its effects the way the daemon
/// does: state goes to a `PolicyStateStore`, wake-ups become ticks at the right time, and a
/// failed persist or wake-up is reported back at once.
///
/// Time is real (script) time in milliseconds. The machine's wall clock is real time plus an
/// offset that `setWallClock` changes; the boot clock counts real time since the last reboot.
public struct PolicySimulator {
    /// The engine being driven.
    public private(set) var engine: PolicyEngine
    /// Where state is saved.
    public var stateStore: any PolicyStateStore
    /// When set, arming a wake-up fails with this reason.
    public var wakeUpFailure: String?
    /// Stores whose shields fail (apply and remove), with the reason.
    public var failingShields: [String: String] = [:]
    /// The targets the simulated shields enforce: every `apply` and `remove` actually carried out
    /// (not the ones dropped after a failed `persist` or `wakeUp`), corrected by shield reports.
    /// Shields do not survive a reboot.
    public private(set) var enforced: Set<Target> = []
    private let systemZoneAtStart: String?
    private var real: Int64
    private var wallOffset: Int64 = 0
    /// Whether the wall clock is synchronized to network time: true until it is set by hand
    /// (as the kernel does, setting the clock marks it unsynchronized), true again after
    /// `synchronizeClock()`.
    public private(set) var clockSynchronized = true
    private var bootNumber = 1
    private var bootStart: Int64
    private var pendingWake: Int64?
    /// Set when `advance(to:)` gave up (more than `wakeUpLimit` wake-ups on the way).
    public private(set) var stalled: PolicySimulationError?
    /// The most wake-ups one `advance` delivers before giving up.
    var wakeUpLimit = 100_000
    private var wakeUpFailed = false
    private var lastInput: Int64
    /// The machine's system zone (the last `.zoneChanged` sent), given to an engine after a restart.
    private var machineZone: String?
    /// Whether the machine is powered off (`powerOff()` until `restart(reboot: true)`).
    public private(set) var isPoweredOff = false

    /// Starts at real time `start`, loading state from `stateStore`.
    public init(
        configuration: PolicyConfiguration, stateStore: any PolicyStateStore, systemZone: String? = nil,
        start: Date
    ) {
        var store = stateStore
        engine = PolicyEngine(configuration: configuration, restoring: store.load(), systemZone: systemZone)
        self.stateStore = store
        systemZoneAtStart = systemZone
        machineZone = systemZone
        real = millisFromDate(start)
        bootStart = real
        lastInput = real
    }

    /// The current reading of the simulated clocks.
    public var instant: Instant {
        Instant(
            wallMillis: real + wallOffset, monoMillis: real - bootStart, bootID: "boot-\(bootNumber)",
            clockSynchronized: clockSynchronized)
    }

    /// Real (script) time now.
    public var now: Date { dateFromMillis(real) }

    /// Moves real time forward to `date`, delivering a `.tick` at every wake-up due on the way.
    /// Moving backwards is ignored (real time only goes forward).
    ///
    /// An engine that asks for more than `wakeUpLimit` wake-ups on the way is stuck: the
    /// simulator stops where it is and sets `stalled` (see `advance(until:)` to get it thrown).
    public mutating func advance(to date: Date) -> [PolicyRecord] {
        do throws(PolicySimulationError) {
            return try advance(until: date)
        } catch {
            stalled = error
            return error.records
        }
    }

    /// Like `advance(to:)`, but throws when the engine asks for more than `wakeUpLimit`
    /// wake-ups before `date` (the error carries the records produced until then).
    public mutating func advance(until date: Date) throws(PolicySimulationError) -> [PolicyRecord] {
        let target = millisFromDate(date)
        var records: [PolicyRecord] = []
        var count = 0
        while !isPoweredOff, let next = nextTick(), next <= target {
            guard count < wakeUpLimit else {
                throw PolicySimulationError(
                    message:
                        "more than \(wakeUpLimit) wake-ups between \(formatISO8601(millisFromDate(now))) and "
                        + "\(formatISO8601(target)); the engine keeps asking to be woken",
                    records: records)
            }
            count += 1
            real = max(real, next)
            pendingWake = nil
            records += send(.tick)
        }
        real = max(real, target)
        return records
    }

    /// Real time of the next `.tick`: the armed wake-up; after a failed batch and until a wake-up
    /// is armed again, also the shell's fallback tick, a minute after the last input.
    private func nextTick() -> Int64? {
        var next = pendingWake.map { bootStart + $0 }
        if wakeUpFailed { next = min(next ?? .max, lastInput + 60_000) }
        return next
    }

    /// Delivers one input now and carries out the effects.
    public mutating func send(_ input: PolicyInput) -> [PolicyRecord] {
        lastInput = real
        if case .zoneChanged(let zone) = input { machineZone = zone }
        return perform(engine.handle(input, at: instant), depth: 0)
    }

    /// Delivers a shield's report about `store`, and makes the simulated shields match it: an
    /// `.applied` report says exactly which of the store's own targets are enforced; a `.failed`
    /// report means none of them is (targets other stores also select stay enforced).
    public mutating func report(store: String, _ report: ShieldReport) -> [PolicyRecord] {
        // Shields act on behalf of each store: a target another store also selects stays in force.
        var selection = engine.configuration.store(named: store)?.selection.targets ?? []
        for other in engine.configuration.stores where other.name != store {
            selection.subtract(other.selection.targets)
        }
        enforced.subtract(selection)
        if case .applied(let reported) = report { enforced.formUnion(reported.targets) }
        return send(.shieldReport(store: store, report))
    }

    /// Sets the machine's wall clock (real time goes on) and delivers a `.tick`. While the machine
    /// is powered off it sets the firmware clock: no tick, the next boot starts from it.
    public mutating func setWallClock(to date: Date) -> [PolicyRecord] {
        wallOffset = millisFromDate(date) - real
        clockSynchronized = false
        return isPoweredOff ? [] : send(.tick)
    }

    /// Network time arrives: the wall clock is set to real time and counts as synchronized.
    /// Delivers a `.tick`.
    public mutating func synchronizeClock() -> [PolicyRecord] {
        wallOffset = 0
        clockSynchronized = true
        return send(.tick)
    }

    /// Powers the machine off: no wake-ups or ticks until `restart(reboot: true)`, and whatever
    /// was not saved is lost. Shields do not survive it.
    public mutating func powerOff() {
        isPoweredOff = true
        pendingWake = nil
        enforced.removeAll()
    }

    /// Restarts the daemon: a fresh engine loads the saved state (only what was saved: nothing
    /// of the old engine's memory is kept). With `reboot`, the boot clock restarts too (new boot
    /// id), after a power-off if the machine is off. Delivers a `.tick` as the first input.
    public mutating func restart(reboot: Bool) -> [PolicyRecord] {
        if reboot {
            bootNumber += 1
            bootStart = real
            enforced.removeAll()
            isPoweredOff = false
        }
        pendingWake = nil
        let loaded = stateStore.load()
        engine = PolicyEngine(
            configuration: engine.configuration, restoring: loaded, systemZone: machineZone)
        return send(.tick)
    }

    private mutating func perform(_ effects: [PolicyEffect], depth: Int) -> [PolicyRecord] {
        var machine = SimulatedMachine(
            stateStore: stateStore, wakeUpFailure: wakeUpFailure, failingShields: failingShields,
            pendingWake: pendingWake, wakeUpFailed: wakeUpFailed, enforced: enforced,
            at: dateFromMillis(real),
            wall: dateFromMillis(real + wallOffset))
        var engine = self.engine
        let now = instant
        PolicyDriver.perform(effects, in: &machine, handle: { engine.handle($0, at: now) })
        self.engine = engine
        stateStore = machine.stateStore
        pendingWake = machine.pendingWake
        wakeUpFailed = machine.wakeUpFailed
        enforced = machine.enforced
        return machine.records
    }
}

// MARK: - Replay

/// Runs a recorded walk's step events through the policy on the recording's own clock, for
/// `stepgate replay WALK.csv --policy CONFIG --start ISO-TIME [--zone ID]`.
///
/// Feed `steps(_:at:)` with each step event's offset from the start of the recording (in
/// order), then `finish(at:)` with the recording's length. Relocks and schedule boundaries
/// between step events appear at their own times.
public struct PolicyReplay {
    /// The simulator underneath (state in memory).
    public private(set) var simulator: PolicySimulator
    private let start: Int64

    /// Starts a replay at wall time `start`, with `zone` as the system time zone.
    public init(configuration: PolicyConfiguration, start: Date, zone: String? = nil) {
        simulator = PolicySimulator(
            configuration: configuration, stateStore: InMemoryPolicyStateStore(), systemZone: zone,
            start: start)
        self.start = millisFromDate(start)
    }

    /// The policy's first effects (shields applied at the start of the recording).
    public mutating func begin() -> [PolicyRecord] { simulator.send(.tick) }

    /// Feeds `count` steps detected at `offset` into the recording.
    public mutating func steps(_ count: Int, at offset: Duration) -> [PolicyRecord] {
        var records = simulator.advance(to: date(offset))
        records += simulator.send(.steps(count))
        return records
    }

    /// Runs the clock to `offset` (the end of the recording), delivering due wake-ups.
    public mutating func finish(at offset: Duration) -> [PolicyRecord] {
        simulator.advance(to: date(offset))
    }

    /// The policy's status now.
    public var status: PolicyStatus { simulator.engine.status(at: simulator.instant) }

    private func date(_ offset: Duration) -> Date {
        let (s, a) = offset.components
        return dateFromMillis(start + s * 1000 + a / 1_000_000_000_000_000)
    }
}

/// The simulated machine's side of the effects: the state store, the wake-up timer and the
/// shields, carried out by ``PolicyDriver`` by the same rules as the daemon's.
struct SimulatedMachine: PolicyEnvironment {
    var stateStore: any PolicyStateStore
    var wakeUpFailure: String?
    var failingShields: [String: String]
    var pendingWake: Int64?
    var wakeUpFailed: Bool
    var enforced: Set<Target>
    let at: Date
    let wall: Date
    var records: [PolicyRecord] = []

    mutating func persist(_ state: PolicyState) -> String? {
        do throws(PolicyStateError) {
            try stateStore.save(state)
            return nil
        } catch {
            return error.description
        }
    }

    mutating func armWakeUp(at date: Date, monotonic: Duration) -> String? {
        if let wakeUpFailure { return wakeUpFailure }
        let (s, a) = monotonic.components
        pendingWake = s * 1000 + a / 1_000_000_000_000_000
        wakeUpFailed = false
        return nil
    }

    mutating func notify(_ notice: PolicyNotice) {}

    mutating func apply(store: String, selection: Selection, owners: [String], until: Date?) -> String? {
        if let reason = failingShields[store] { return reason }
        enforced.formUnion(selection.targets)
        return nil
    }

    mutating func remove(store: String, selection: Selection) -> String? {
        if let reason = failingShields[store] { return reason }
        enforced.subtract(selection.targets)
        return nil
    }

    mutating func carriedOut(_ effect: PolicyEffect, failure: String?) {
        var record = PolicyRecord(at: at, wall: wall, effect: effect)
        record.failure = failure
        records.append(record)
        switch effect {
        case .persist, .wakeUp:
            // The wake-up may be among the effects the engine's answer drops.
            if failure != nil { wakeUpFailed = true }
        default: break
        }
    }
}
