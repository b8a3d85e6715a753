import Foundation
import TypedJSON

/// A problem with a scenario script line, or an `expect` that did not hold.
public struct ScenarioError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The 1-based line number.
    public var line: Int
    /// What went wrong.
    public var message: String

    /// Creates an error.
    public init(line: Int, message: String) {
        self.line = line
        self.message = message
    }

    public var description: String { "line \(line): \(message)" }
}

/// The deterministic scenario runner behind `stepgate simulate --config CONFIG SCRIPT.jsonl`.
///
/// Each script line is one JSON object: a time (`at` or `after`) and one action (`steps`,
/// `tick`, `lock`, `skip`, `emergency`, `setClock`, `syncClock`, `zone`, `restart`, `reboot`, `powerOff`,
/// `shield`, `failPersist`, `failWakeUps`, `failShields`, `reload`, `status`, `expect`). The output is one JSON line
/// per effect and state change. Blank lines and lines starting with `#` or `//` are skipped.
/// The format is documented in `docs/policy.md` ("Scenario scripts").
public struct ScenarioRunner {
    private let configuration: PolicyConfiguration
    private let systemZone: String?
    private var storeAtStart: (any PolicyStateStore)?
    private var simulator: PolicySimulator?
    private var sinceLastLine: [PolicyRecord] = []

    /// Creates a runner. State is loaded from and saved to `stateStore` (in memory for
    /// `simulate`); `systemZone` is the zone the simulated machine starts in.
    public init(
        configuration: PolicyConfiguration, stateStore: any PolicyStateStore = InMemoryPolicyStateStore(),
        systemZone: String? = nil
    ) {
        self.configuration = configuration
        self.systemZone = systemZone
        self.storeAtStart = stateStore
    }

    /// The simulator, once the first line has set the clock.
    public var currentSimulator: PolicySimulator? { simulator }

    /// Runs a whole script; returns the output lines.
    public mutating func run(script: String) throws(ScenarioError) -> [String] {
        var output: [String] = []
        for (i, line) in script.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            output += try run(line: String(line), lineNumber: i + 1)
        }
        return output
    }

    /// Runs one script line; returns the output lines (JSON) it produced.
    public mutating func run(line: String, lineNumber: Int) throws(ScenarioError) -> [String] {
        let trimmed = line.trimmingCharacters(in: .whitespaces)
        if trimmed.isEmpty || trimmed.hasPrefix("#") || trimmed.hasPrefix("//") { return [] }
        do throws(JSONPathError) {
            return try runParsed(try JSONValue.parse(trimmed), lineNumber: lineNumber)
        } catch {
            throw ScenarioError(line: lineNumber, message: error.description)
        }
    }

    private static let actions = [
        "steps", "tick", "lock", "skip", "emergency", "setClock", "syncClock", "zone", "restart", "reboot",
        "powerOff", "shield", "failPersist", "failWakeUps", "failShields", "reload", "status", "expect",
    ]
    /// What a script may do while the simulated machine is powered off.
    private static let whilePoweredOff: Set<String> = [
        "setClock", "reboot", "failPersist", "failWakeUps", "failShields",
    ]

    private mutating func runParsed(_ value: JSONValue, lineNumber: Int) throws(JSONPathError) -> [String] {
        let r = try JSONObjectReader(value, path: "")
        try r.rejectUnknownKeys(allowed: ["at", "after", "note"] + Self.actions)
        let present = Self.actions.filter { r.has($0) }
        guard present.count == 1, let action = present.first else {
            throw JSONPathError(
                path: "", message: "expected exactly one action (\(Self.actions.joined(separator: ", ")))")
        }
        // Time first: fire due wake-ups up to the line's time.
        var records: [PolicyRecord] = []
        if let atText = try r.optionalString("at") {
            guard let ms = parseISO8601(atText) else {
                throw JSONPathError(path: "at", message: "expected an ISO 8601 instant, found \"\(atText)\"")
            }
            records += try moveTo(ms, path: "at")
        } else if r.value("after") != nil {
            let seconds = try r.double("after")
            guard seconds >= 0, seconds < 1.0e10 else {
                throw JSONPathError(
                    path: "after",
                    message:
                        "expected seconds in 0...10000000000 (about 317 years), found \(seconds.rounded() == seconds && abs(seconds) < 1e18 ? String(Int64(seconds)) : "\(seconds)")"
                )
            }
            guard let sim = simulator else {
                throw JSONPathError(path: "after", message: "the first line needs an \"at\" time")
            }
            records += try moveTo(millisFromDate(sim.now) + Int64((seconds * 1000).rounded()), path: "after")
        } else if simulator == nil {
            throw JSONPathError(path: "at", message: "the first line needs an \"at\" time")
        }
        guard var sim = simulator else { return [] }
        if sim.isPoweredOff, !Self.whilePoweredOff.contains(action) {
            throw JSONPathError(
                path: action, message: "the machine is powered off; only setClock and reboot until it boots")
        }
        var extra: [String] = []
        switch action {
        case "steps":
            records += sim.send(.steps(try r.int("steps", minimum: 0)))
        case "tick":
            records += sim.send(.tick)
        case "lock":
            let o = try r.object("lock")
            try o.rejectUnknownKeys(allowed: ["store", "minutes", "by"])
            let minutes = try o.double("minutes")
            guard minutes.isFinite, abs(minutes) < 1.0e8 else {
                throw JSONPathError(path: "lock.minutes", message: "out of range")
            }
            records += sim.send(
                .command(
                    .lock(
                        store: try o.string("store"),
                        duration: .milliseconds(Int64((minutes * 60_000).rounded())),
                        by: try o.optionalString("by") ?? "script")))
        case "skip":
            let o = try r.object("skip")
            try o.rejectUnknownKeys(allowed: ["schedule", "occurrence"])
            records += sim.send(
                .command(
                    .skip(schedule: try o.string("schedule"), occurrence: try o.optionalString("occurrence")))
            )
        case "emergency":
            let o = try r.object("emergency")
            try o.rejectUnknownKeys(allowed: ["store", "by"])
            records += sim.send(
                .command(
                    .emergencyUnlock(store: try o.string("store"), by: try o.optionalString("by") ?? "script")
                ))
        case "setClock":
            let text = try r.string("setClock")
            guard let ms = parseISO8601(text) else {
                throw JSONPathError(
                    path: "setClock", message: "expected an ISO 8601 instant, found \"\(text)\"")
            }
            records += sim.setWallClock(to: dateFromMillis(ms))
        case "syncClock":
            guard try r.bool("syncClock") == true else {
                throw JSONPathError(path: "syncClock", message: "expected true")
            }
            records += sim.synchronizeClock()
        case "zone":
            records += sim.send(.zoneChanged(try r.string("zone")))
        case "restart", "powerOff":
            guard try r.bool(action) == true else {
                throw JSONPathError(path: action, message: "expected true")
            }
            if action == "powerOff" {
                guard !sim.isPoweredOff else {
                    throw JSONPathError(path: action, message: "the machine is already powered off")
                }
                sim.powerOff()
            } else {
                records += sim.restart(reboot: false)
            }
        case "reboot":
            // `true`, or `{"clock": ISO}`: a power cycle with the firmware clock set to ISO.
            if case .object = r.value("reboot") {
                let o = try r.object("reboot")
                try o.rejectUnknownKeys(allowed: ["clock"])
                let text = try o.string("clock")
                guard let ms = parseISO8601(text) else {
                    throw JSONPathError(
                        path: "reboot.clock", message: "expected an ISO 8601 instant, found \"\(text)\"")
                }
                if !sim.isPoweredOff { sim.powerOff() }
                _ = sim.setWallClock(to: dateFromMillis(ms))
            } else if try r.bool("reboot") != true {
                throw JSONPathError(path: "reboot", message: "expected true or {\"clock\": ISO}")
            }
            records += sim.restart(reboot: true)
        case "shield":
            let o = try r.object("shield")
            try o.rejectUnknownKeys(allowed: ["store", "applied", "failed"])
            let store = try o.string("store")
            if let reason = try o.optionalString("failed") {
                records += sim.report(store: store, .failed(reason))
            } else {
                let applied = try o.require("applied")
                let selection: Selection
                switch applied {
                case .bool(true): selection = configuration.store(named: store)?.selection ?? .empty
                case .bool(false): selection = .empty
                default:
                    let parsed = try PolicyConfiguration.parseStore(
                        name: store,
                        reader: try JSONObjectReader(.object([("selection", applied)]), path: "shield"))
                    selection = parsed.selection
                }
                records += sim.report(store: store, .applied(selection))
            }
        case "failPersist":
            let reason = try r.optionalString("failPersist")
            guard var memory = sim.stateStore as? InMemoryPolicyStateStore else {
                throw JSONPathError(
                    path: "failPersist", message: "only the in-memory state store can be made to fail")
            }
            memory.failure = reason
            sim.stateStore = memory
        case "failShields":
            // The stores whose shields fail from now on (an empty list: none).
            var failing: [String: String] = [:]
            for store in try r.stringArray("failShields") {
                guard configuration.store(named: store) != nil else {
                    throw JSONPathError(path: "failShields", message: "no store named \"\(store)\"")
                }
                failing[store] = "simulated shield failure"
            }
            sim.failingShields = failing
        case "failWakeUps":
            sim.wakeUpFailure = try r.optionalString("failWakeUps")
        case "reload":
            let configuration = try PolicyConfiguration.parse(document: try r.require("reload"))
            records += sim.send(.command(.reload(configuration)))
        case "status":
            extra.append(statusLine(sim))
        case "expect":
            let o = try r.object("expect")
            try check(o, sim, records: sinceLastLine + records)
            extra.append(
                JSONValue.object([
                    ("at", .string(formatISO8601(millisFromDate(sim.now)))), ("expect", .string("ok")),
                ]).serialized())
        default:
            break
        }
        simulator = sim
        if action != "expect" { sinceLastLine = records }
        return records.map(\.jsonLine) + extra
    }

    private mutating func moveTo(_ ms: Int64, path: String) throws(JSONPathError) -> [PolicyRecord] {
        if var sim = simulator {
            let current = millisFromDate(sim.now)
            guard ms >= current else {
                throw JSONPathError(
                    path: path,
                    message:
                        "time goes back from \(formatISO8601(current)); use \"setClock\" to move the wall clock"
                )
            }
            do throws(PolicySimulationError) {
                let records = try sim.advance(until: dateFromMillis(ms))
                simulator = sim
                return records
            } catch {
                throw JSONPathError(path: path, message: error.message)
            }
        }
        var sim = PolicySimulator(
            configuration: configuration, stateStore: storeAtStart ?? InMemoryPolicyStateStore(),
            systemZone: systemZone, start: dateFromMillis(ms))
        storeAtStart = nil
        let records = sim.send(.tick)
        simulator = sim
        return records
    }

    private func statusJSON(_ sim: PolicySimulator) -> JSONValue {
        let status = sim.engine.status(at: sim.instant)
        var stores: [(String, JSONValue)] = []
        for s in status.stores {
            var fields: [(String, JSONValue)] = [
                ("shielded", .bool(s.shielded)), ("owners", .array(s.owners.map { .string($0) })),
                ("steps", .number(Double(s.steps), isInteger: true)),
            ]
            if let goal = s.nextGoal { fields.append(("nextGoal", .number(Double(goal), isInteger: true))) }
            if s.goalIsDaily { fields.append(("goalIsDaily", .bool(true))) }
            if let d = s.unlockedUntil {
                fields.append(("unlockedUntil", .string(formatISO8601(millisFromDate(d)))))
            }
            if let d = s.emergencyUntil {
                fields.append(("emergencyUntil", .string(formatISO8601(millisFromDate(d)))))
            }
            fields.append(("unlocksToday", .number(Double(s.unlocksToday), isInteger: true)))
            if let note = s.note { fields.append(("note", .string(note))) }
            stores.append((s.name, .object(fields)))
        }
        return .object([
            ("stores", .object(stores)),
            ("emergencyRemaining", .number(Double(status.emergencyRemaining), isInteger: true)),
            ("problems", .array(status.problems.map { .string($0) })),
        ])
    }

    private func statusLine(_ sim: PolicySimulator) -> String {
        JSONValue.object([
            ("at", .string(formatISO8601(millisFromDate(sim.now)))), ("status", statusJSON(sim)),
        ])
        .serialized()
    }

    /// Checks an `expect` object against the status now and the records of the previous line.
    private func check(_ o: JSONObjectReader, _ sim: PolicySimulator, records: [PolicyRecord])
        throws(JSONPathError)
    {
        try o.rejectUnknownKeys(allowed: [
            "shielded", "open", "owners", "emergencyRemaining", "problem", "noProblem", "events",
            "noEvents", "unlockedUntil", "steps", "nextGoal", "nextChange",
        ])
        let status = sim.engine.status(at: sim.instant)
        let configuration = sim.engine.configuration
        func store(_ name: String, _ path: String) throws(JSONPathError) -> PolicyStatus.Store {
            guard let s = status.stores.first(where: { $0.name == name }) else {
                throw JSONPathError(path: path, message: "no store named \"\(name)\"")
            }
            return s
        }
        // "shielded" and "open" check both what the engine says and what the simulated shields
        // actually enforce (the effects carried out), so a dropped `apply` cannot pass unnoticed.
        for name in try o.stringArray("shielded") {
            guard try store(name, "expect.shielded").shielded else {
                throw JSONPathError(
                    path: "expect.shielded",
                    message: "\(name) is open; status: \(statusJSON(sim).serialized())")
            }
            let missing = (configuration.store(named: name)?.selection.targets ?? []).subtracting(
                sim.enforced)
            guard missing.isEmpty else {
                throw JSONPathError(
                    path: "expect.shielded",
                    message:
                        "\(name) is shielded by the policy but not enforced: \(Selection(targets: missing).json.serialized()) "
                        + "never applied; status: \(statusJSON(sim).serialized())")
            }
        }
        var heldElsewhere = Set<Target>()
        for s in status.stores where s.shielded {
            heldElsewhere.formUnion(configuration.store(named: s.name)?.selection.targets ?? [])
        }
        for name in try o.stringArray("open") {
            guard !(try store(name, "expect.open").shielded) else {
                throw JSONPathError(
                    path: "expect.open",
                    message: "\(name) is shielded; status: \(statusJSON(sim).serialized())")
            }
            let stuck = (configuration.store(named: name)?.selection.targets ?? []).subtracting(heldElsewhere)
                .intersection(sim.enforced)
            guard stuck.isEmpty else {
                throw JSONPathError(
                    path: "expect.open",
                    message:
                        "\(name) is open in the policy but still enforced: \(Selection(targets: stuck).json.serialized())"
                )
            }
        }
        if let owners = try o.optionalObject("owners") {
            for name in owners.keys {
                let expected = try owners.stringArray(name)
                let actual = try store(name, "expect.owners").owners
                guard expected == actual else {
                    throw JSONPathError(
                        path: "expect.owners.\(name)", message: "owners are \(actual), expected \(expected)")
                }
            }
        }
        if let remaining = try o.optionalInt("emergencyRemaining"), remaining != status.emergencyRemaining {
            throw JSONPathError(
                path: "expect.emergencyRemaining",
                message: "\(status.emergencyRemaining) left, expected \(remaining)")
        }
        if let text = try o.optionalString("problem"), !status.problems.contains(where: { $0.contains(text) })
        {
            throw JSONPathError(
                path: "expect.problem",
                message: "no problem mentions \"\(text)\"; problems: \(status.problems)")
        }
        if let text = try o.optionalString("noProblem"),
            let listed = status.problems.first(where: { $0.contains(text) })
        {
            throw JSONPathError(
                path: "expect.noProblem", message: "a problem mentions \"\(text)\": \(listed)")
        }
        if let until = try o.optionalObject("unlockedUntil") {
            for name in until.keys {
                let text = try until.string(name)
                let actual = try store(name, "expect.unlockedUntil").unlockedUntil.map {
                    formatISO8601(millisFromDate($0))
                }
                guard actual == text else {
                    throw JSONPathError(
                        path: "expect.unlockedUntil.\(name)",
                        message: "unlocked until \(actual ?? "never"), expected \(text)")
                }
            }
        }
        if let text = try o.optionalString("nextChange") {
            let actual = status.nextChange.map { formatISO8601(millisFromDate($0)) }
            guard actual == text else {
                throw JSONPathError(
                    path: "expect.nextChange",
                    message: "next change at \(actual ?? "never"), expected \(text)")
            }
        }
        if let steps = try o.optionalObject("steps") {
            for name in steps.keys {
                let expected = try steps.int(name)
                let actual = try store(name, "expect.steps").steps
                guard actual == expected else {
                    throw JSONPathError(
                        path: "expect.steps.\(name)",
                        message: "\(actual) steps toward the goal, expected \(expected)")
                }
            }
        }
        if let goals = try o.optionalObject("nextGoal") {
            for name in goals.keys {
                let expected = try goals.optionalInt(name)
                let actual = try store(name, "expect.nextGoal").nextGoal
                guard actual == expected else {
                    throw JSONPathError(
                        path: "expect.nextGoal.\(name)",
                        message:
                            "next goal \(actual.map(String.init) ?? "none"), expected \(expected.map(String.init) ?? "none")"
                    )
                }
            }
        }
        let seen = records.compactMap { record -> String? in
            if case .notify(let n) = record.effect { return n.kind.rawValue }
            if case .apply = record.effect { return "apply" }
            if case .remove = record.effect { return "remove" }
            if case .persist = record.effect { return record.failure == nil ? "persist" : "persist-failed" }
            if case .wakeUp = record.effect { return record.failure == nil ? "wake-up" : "wake-up-failed" }
            return nil
        }
        for event in try o.stringArray("events") where !seen.contains(event) {
            throw JSONPathError(
                path: "expect.events", message: "no \(event) after the previous line; saw \(seen)")
        }
        for event in try o.stringArray("noEvents") where seen.contains(event) {
            throw JSONPathError(
                path: "expect.noEvents", message: "unexpected \(event) after the previous line")
        }
    }
}
