public import Foundation
public import TypedJSON

/// Errors in the policy configuration name the JSON path of the offending value, e.g.
/// `stores.games.schedules[1].start: expected "HH:MM", found "25:00"`.
public typealias PolicyConfigurationError = JSONPathError

/// The policy section of StepGate's configuration: stores, their gates and schedules, the time
/// zone and the emergency allowance. See `samples/policy.example.json` and `docs/policy.md`.
public struct PolicyConfiguration: Sendable, Hashable {
    /// The zone identifier schedules use unless they name their own; `nil` follows the system
    /// zone that the shell reports with `PolicyInput.zoneChanged(_:)`.
    public var timeZone: String?
    /// How many emergency unlocks a week allows and how long each lasts.
    public var emergency: EmergencyPolicy
    /// The stores, sorted by name.
    public var stores: [StoreConfiguration]

    /// Creates a configuration; stores are sorted by name. Call `validate()` before use.
    public init(timeZone: String? = nil, emergency: EmergencyPolicy = .init(), stores: [StoreConfiguration]) {
        self.timeZone = timeZone
        self.emergency = emergency
        self.stores = stores.sorted { $0.name < $1.name }
    }

    /// The store with this name.
    public func store(named name: String) -> StoreConfiguration? { stores.first { $0.name == name } }
}

/// The emergency allowance: `perWeek` unlocks within any 7 days of elapsed time, each lifting
/// every owner of one store for `minutes`.
public struct EmergencyPolicy: Sendable, Hashable {
    /// Uses allowed within any 7 days of elapsed time.
    public var perWeek: Int
    /// How long one emergency unlock lasts, in minutes.
    public var minutes: Int

    /// Creates an allowance (defaults: 2 a week, 15 minutes each).
    public init(perWeek: Int = 2, minutes: Int = 15) {
        self.perWeek = perWeek
        self.minutes = minutes
    }
}

/// A named shield: a selection and the owners that may hold it (the gate, schedules, manual locks).
public struct StoreConfiguration: Sendable, Hashable {
    /// The store's name: letters, digits, `-`, `_`, `.`.
    public var name: String
    /// What the store shields.
    public var selection: Selection
    /// The walking gate ("locked until you walk"); `nil` when the store has no gate owner.
    public var gate: GateConfiguration?
    /// Repeating windows during which the store is held.
    public var schedules: [ScheduleConfiguration]

    /// Creates a store.
    public init(
        name: String, selection: Selection, gate: GateConfiguration? = nil,
        schedules: [ScheduleConfiguration] = []
    ) {
        self.name = name
        self.selection = selection
        self.gate = gate
        self.schedules = schedules
    }
}

/// The walking gate: while locked, reaching a goal tier's steps unlocks the store for that tier's
/// minutes; `dailyUnlockCap` limits unlocks per day. Its tiers are all of one kind: steps counted
/// from when the gate locked (graduated: a higher tier lengthens the unlock), or the local day's
/// steps (`daily`: each tier pays its minutes once a day, added to a running unlock).
public struct GateConfiguration: Sendable, Hashable {
    /// Goal tiers, increasing in both steps and minutes.
    public var goals: [GoalTier]
    /// The most unlocks per local day; `nil` for no cap.
    public var dailyUnlockCap: Int?

    /// Creates a gate.
    public init(goals: [GoalTier], dailyUnlockCap: Int? = nil) {
        self.goals = goals
        self.dailyUnlockCap = dailyUnlockCap
    }
}

/// One tier of a gate's goal: `steps` → an unlock window of `minutes`. A daily tier
/// (`"stepsToday"` in the file) counts the steps of the local day, wherever they were walked.
public struct GoalTier: Sendable, Hashable {
    /// Steps needed.
    public var steps: Int
    /// Length of the unlock window, in minutes.
    public var minutes: Int
    /// Whether `steps` are the local day's steps (`stepsToday`) rather than those since the lock.
    public var daily: Bool

    /// Creates a tier.
    public init(steps: Int, minutes: Int, daily: Bool = false) {
        self.steps = steps
        self.minutes = minutes
        self.daily = daily
    }

    /// The key that names the tier's steps in the configuration file.
    public var stepsKey: String { daily ? "stepsToday" : "steps" }
}

extension GateConfiguration {
    /// Whether the gate's goals count the local day's steps.
    public var isDaily: Bool { goals.first?.daily ?? false }
}

/// Days of the week; raw values follow `Calendar`'s weekday minus one (Sunday = 0).
public enum Weekday: Int, Sendable, Hashable, CaseIterable, Comparable {
    case sunday, monday, tuesday, wednesday, thursday, friday, saturday

    /// The three-letter name used in configuration files.
    public var shortName: String {
        ["sun", "mon", "tue", "wed", "thu", "fri", "sat"][rawValue]
    }

    public static func < (lhs: Weekday, rhs: Weekday) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// A repeating window, daily or on some weekdays, in a named zone. `end <= start` means the
/// window ends the next day (crosses midnight).
public struct ScheduleConfiguration: Sendable, Hashable {
    /// Unique across the configuration; occurrences are named `name@YYYY-MM-DD` (local start date).
    public var name: String
    /// The days on which a window starts.
    public var days: Set<Weekday>
    /// Local start time.
    public var start: TimeOfDay
    /// Local end time; at or before `start` means the next day.
    public var end: TimeOfDay
    /// The zone identifier; `nil` uses the configuration's zone.
    public var timeZone: String?
    /// A step goal inside the window that lifts this schedule's hold.
    public var goal: ScheduleGoal?

    /// Creates a schedule.
    public init(
        name: String, days: Set<Weekday> = Set(Weekday.allCases), start: TimeOfDay, end: TimeOfDay,
        timeZone: String? = nil, goal: ScheduleGoal? = nil
    ) {
        self.name = name
        self.days = days
        self.start = start
        self.end = end
        self.timeZone = timeZone
        self.goal = goal
    }
}

/// A goal inside a schedule's window: `steps` (counted from the window's start) lift the
/// schedule's hold for `minutes`, or for the rest of the window when `minutes` is `nil`.
public struct ScheduleGoal: Sendable, Hashable {
    /// Steps needed within the occurrence.
    public var steps: Int
    /// Unlock length in minutes; `nil` for the rest of the window.
    public var minutes: Int?

    /// Creates a schedule goal.
    public init(steps: Int, minutes: Int? = nil) {
        self.steps = steps
        self.minutes = minutes
    }
}

// MARK: - Validation

/// Whether `identifier` names a time zone (an identifier such as `Europe/Berlin`, never an
/// offset such as `+02:00`, `GMT+2` or `Etc/GMT-2`).
func timeZoneProblem(_ identifier: String) -> String? {
    let scalars = Array(identifier.unicodeScalars)
    for (i, scalar) in scalars.enumerated() where scalar == "+" || scalar == "-" {
        if i + 1 < scalars.count, ("0"..."9").contains(scalars[i + 1]) {
            return "\"\(identifier)\" is an offset; use a zone identifier such as \"Europe/Berlin\""
        }
    }
    if identifier.first.map({ $0 == "+" || $0 == "-" || $0.isNumber }) ?? true {
        return "\"\(identifier)\" is not a time zone identifier"
    }
    guard TimeZone(identifier: identifier) != nil else {
        return "unknown time zone \"\(identifier)\""
    }
    return nil
}

/// The longest window a configuration may ask for: 366 days, like a manual lock.
let maximumWindowMinutes = 366 * 24 * 60
/// The largest step goal: a billion steps (the engine counts at most that many per input).
let maximumGoalSteps = 1_000_000_000

private func checkMinutes(_ minutes: Int, path: String) throws(PolicyConfigurationError) {
    guard minutes >= 1 else {
        throw JSONPathError(path: path, message: "an unlock window must last at least a minute")
    }
    guard minutes <= maximumWindowMinutes else {
        throw JSONPathError(
            path: path,
            message:
                "an unlock window must last at most 366 days (\(maximumWindowMinutes) minutes), found \(minutes)"
        )
    }
}

private func checkSteps(_ steps: Int, path: String) throws(PolicyConfigurationError) {
    guard steps >= 1 else { throw JSONPathError(path: path, message: "expected at least 1 step") }
    guard steps <= maximumGoalSteps else {
        throw JSONPathError(path: path, message: "expected at most \(maximumGoalSteps) steps, found \(steps)")
    }
}

extension PolicyConfiguration {
    /// Checks names, windows, goals and zones; throws the first problem with its JSON path.
    public func validate() throws(PolicyConfigurationError) {
        if let timeZone, let problem = timeZoneProblem(timeZone) {
            throw JSONPathError(path: "timeZone", message: problem)
        }
        guard emergency.perWeek >= 0 else {
            throw JSONPathError(path: "emergency.perWeek", message: "must not be negative")
        }
        guard emergency.perWeek <= 10_000 else {
            throw JSONPathError(
                path: "emergency.perWeek", message: "expected at most 10000, found \(emergency.perWeek)")
        }
        try checkMinutes(emergency.minutes, path: "emergency.minutes")
        var scheduleNames: [String: String] = [:]
        var storeNames = Set<String>()
        for store in stores {
            let path = "stores.\(store.name)"
            guard isValidName(store.name) else {
                throw JSONPathError(path: path, message: "store names use letters, digits, '-', '_' and '.'")
            }
            guard storeNames.insert(store.name).inserted else {
                throw JSONPathError(path: path, message: "duplicate store")
            }
            if let gate = store.gate {
                guard !gate.goals.isEmpty else {
                    throw JSONPathError(path: "\(path).gate.goals", message: "a gate needs at least one goal")
                }
                for (i, tier) in gate.goals.enumerated() {
                    let tierPath = "\(path).gate.goals[\(i)]"
                    try checkSteps(tier.steps, path: "\(tierPath).\(tier.stepsKey)")
                    try checkMinutes(tier.minutes, path: "\(tierPath).minutes")
                    guard i > 0 else { continue }
                    let previous = gate.goals[i - 1]
                    guard tier.daily == previous.daily else {
                        throw JSONPathError(
                            path: tierPath,
                            message:
                                "a gate's goals are all \"steps\" (since the lock) or all \"stepsToday\" (the day's)"
                        )
                    }
                    if tier.daily {
                        guard tier.steps > previous.steps else {
                            throw JSONPathError(
                                path: "\(tierPath).stepsToday", message: "daily goals must increase in steps")
                        }
                    } else {
                        guard tier.steps > previous.steps, tier.minutes > previous.minutes else {
                            throw JSONPathError(
                                path: tierPath,
                                message: "graduated goals must increase in both steps and minutes")
                        }
                    }
                }
                if let cap = gate.dailyUnlockCap, cap < 0 {
                    throw JSONPathError(path: "\(path).gate.dailyUnlockCap", message: "must not be negative")
                }
            }
            for (i, schedule) in store.schedules.enumerated() {
                let sPath = "\(path).schedules[\(i)]"
                guard isValidName(schedule.name) else {
                    throw JSONPathError(
                        path: "\(sPath).name", message: "schedule names use letters, digits, '-', '_' and '.'"
                    )
                }
                if let other = scheduleNames[schedule.name] {
                    throw JSONPathError(
                        path: "\(sPath).name",
                        message: "schedule \"\(schedule.name)\" is already defined in \(other)")
                }
                scheduleNames[schedule.name] = sPath
                guard !schedule.days.isEmpty else {
                    throw JSONPathError(path: "\(sPath).days", message: "a schedule needs at least one day")
                }
                guard schedule.start != schedule.end else {
                    throw JSONPathError(
                        path: "\(sPath).end",
                        message:
                            "start and end are both \(schedule.start): a window must last at least a minute")
                }
                if let zone = schedule.timeZone, let problem = timeZoneProblem(zone) {
                    throw JSONPathError(path: "\(sPath).timeZone", message: problem)
                }
                if let goal = schedule.goal {
                    try checkSteps(goal.steps, path: "\(sPath).goal.steps")
                    if let minutes = goal.minutes { try checkMinutes(minutes, path: "\(sPath).goal.minutes") }
                }
            }
        }
    }
}

func isValidName(_ name: String) -> Bool {
    !name.isEmpty && name.count <= 64
        && name.unicodeScalars.allSatisfy {
            $0.isASCII
                && ($0.properties.isAlphabetic || ("0"..."9").contains($0)
                    || "-_.".unicodeScalars.contains($0))
        }
}

// MARK: - Parsing

extension PolicyConfiguration {
    /// Parses and validates the policy configuration from JSON text.
    ///
    /// The document is either the policy section itself or a StepGate config whose `policy`
    /// member is the policy section (other top-level members belong to other modules and are
    /// not checked here).
    public static func parse(_ text: String) throws(PolicyConfigurationError) -> PolicyConfiguration {
        let document = try JSONValue.parse(text)
        return try parse(document: document)
    }

    /// Reads, parses and validates a configuration file.
    public static func load(contentsOf url: URL) throws(PolicyConfigurationError) -> PolicyConfiguration {
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw JSONPathError(path: "", message: "cannot read \(url.path): \(error.localizedDescription)")
        }
        let document = try JSONValue.parse(bytes: Array(data))
        return try parse(document: document)
    }

    static func parse(document: JSONValue) throws(PolicyConfigurationError) -> PolicyConfiguration {
        let root = try JSONObjectReader(document, path: "")
        if root.keys.contains("policy") {
            return try parse(section: try root.object("policy"))
        }
        return try parse(section: root)
    }

    static func parse(section: JSONObjectReader) throws(PolicyConfigurationError) -> PolicyConfiguration {
        try section.rejectUnknownKeys(allowed: ["timeZone", "emergency", "stores"])
        let prefix = section.path.isEmpty ? "" : section.path + "."
        var emergency = EmergencyPolicy()
        if let reader = try section.optionalObject("emergency") {
            try reader.rejectUnknownKeys(allowed: ["perWeek", "minutes"])
            emergency.perWeek = try reader.optionalInt("perWeek", minimum: 0) ?? emergency.perWeek
            emergency.minutes = try reader.optionalInt("minutes") ?? emergency.minutes
        }
        let storesReader = try section.object("stores")
        var stores: [StoreConfiguration] = []
        for name in storesReader.keys {
            stores.append(try parseStore(name: name, reader: try storesReader.object(name)))
        }
        let configuration = PolicyConfiguration(
            timeZone: try section.optionalString("timeZone"), emergency: emergency, stores: stores)
        do {
            try configuration.validate()
        } catch {
            throw JSONPathError(path: prefix + error.path, message: error.message)
        }
        return configuration
    }

    static func parseStore(name: String, reader: JSONObjectReader) throws(PolicyConfigurationError)
        -> StoreConfiguration
    {
        try reader.rejectUnknownKeys(allowed: ["selection", "gate", "schedules"])
        let selectionReader = try reader.object("selection")
        try selectionReader.rejectUnknownKeys(allowed: Target.Kind.allCases.map(\.jsonKey))
        for kind in Target.Kind.allCases {
            for (value, path) in try selectionReader.array(kind.jsonKey) {
                let text = try JSONObjectReader.string(value, path: path)
                guard !text.isEmpty, !text.contains("\n") else {
                    throw JSONPathError(path: path, message: "expected a non-empty name on one line")
                }
            }
        }
        var domains: [String] = []
        for (value, path) in try selectionReader.array("domains") {
            let text = try JSONObjectReader.string(value, path: path)
            switch DomainName.normalized(text) {
            case .success(let name): domains.append(name)
            case .failure(let refusal):
                throw JSONPathError(
                    path: path,
                    message:
                        "expected a domain name like example.com, found \(value.excerpt): \(refusal.reason)")
            }
        }
        let selection = Selection(
            executables: try selectionReader.stringArray("executables"),
            desktopCategories: try selectionReader.stringArray("desktopCategories"),
            systemdUnits: try selectionReader.stringArray("systemdUnits"),
            domains: domains,
            hooks: try selectionReader.stringArray("hooks"))
        var gate: GateConfiguration?
        if let gateReader = try reader.optionalObject("gate") {
            try gateReader.rejectUnknownKeys(allowed: ["goals", "dailyUnlockCap"])
            var goals: [GoalTier] = []
            for (value, path) in try gateReader.array("goals") {
                let tier = try JSONObjectReader(value, path: path)
                try tier.rejectUnknownKeys(allowed: ["steps", "stepsToday", "minutes"])
                let daily = tier.value("stepsToday") != nil
                if daily, tier.value("steps") != nil {
                    throw JSONPathError(
                        path: path,
                        message:
                            "a goal has \"steps\" (since the lock) or \"stepsToday\" (the day's), not both")
                }
                goals.append(
                    GoalTier(
                        steps: try tier.int(daily ? "stepsToday" : "steps"), minutes: try tier.int("minutes"),
                        daily: daily))
            }
            gate = GateConfiguration(
                goals: goals, dailyUnlockCap: try gateReader.optionalInt("dailyUnlockCap"))
        }
        var schedules: [ScheduleConfiguration] = []
        for (value, path) in try reader.array("schedules") {
            schedules.append(try parseSchedule(try JSONObjectReader(value, path: path)))
        }
        return StoreConfiguration(name: name, selection: selection, gate: gate, schedules: schedules)
    }

    static func parseSchedule(_ reader: JSONObjectReader) throws(PolicyConfigurationError)
        -> ScheduleConfiguration
    {
        try reader.rejectUnknownKeys(allowed: ["name", "days", "start", "end", "timeZone", "goal"])
        func time(_ key: String) throws(PolicyConfigurationError) -> TimeOfDay {
            let text = try reader.string(key)
            guard let time = TimeOfDay(text) else {
                throw JSONPathError(
                    path: reader.childPath(key), message: "expected \"HH:MM\", found \"\(text)\"")
            }
            return time
        }
        var days = Set(Weekday.allCases)
        if let value = reader.value("days") {
            days = try parseDays(value, path: reader.childPath("days"))
        }
        var goal: ScheduleGoal?
        if let goalReader = try reader.optionalObject("goal") {
            try goalReader.rejectUnknownKeys(allowed: ["steps", "minutes"])
            goal = ScheduleGoal(
                steps: try goalReader.int("steps"), minutes: try goalReader.optionalInt("minutes"))
        }
        return ScheduleConfiguration(
            name: try reader.string("name"), days: days, start: try time("start"), end: try time("end"),
            timeZone: try reader.optionalString("timeZone"), goal: goal)
    }

    static func parseDays(_ value: JSONValue, path: String) throws(PolicyConfigurationError) -> Set<Weekday> {
        let expected = "expected \"daily\", \"weekdays\", \"weekends\" or a list of \"mon\"…\"sun\""
        switch value {
        case .string("daily"): return Set(Weekday.allCases)
        case .string("weekdays"): return [.monday, .tuesday, .wednesday, .thursday, .friday]
        case .string("weekends"): return [.saturday, .sunday]
        case .array(let elements):
            var days = Set<Weekday>()
            for (i, element) in elements.enumerated() {
                guard case .string(let name) = element,
                    let day = Weekday.allCases.first(where: { $0.shortName == name.lowercased() })
                else {
                    throw JSONPathError(
                        path: "\(path)[\(i)]", message: "\(expected), found \(element.excerpt)")
                }
                days.insert(day)
            }
            return days
        default:
            throw JSONPathError(path: path, message: "\(expected), found \(value.excerpt)")
        }
    }
}

// MARK: - Summaries

extension StoreConfiguration {
    /// What holds the store and what lifts it, in one line for `daemon --check`: its gate's
    /// goals, its schedules (zone: the schedule's, else `zone`, else the system's).
    public func summary(zone: String?) -> String {
        var parts: [String] = []
        if let gate {
            let tiers = gate.goals.enumerated().map { i, tier in
                let steps = "\(tier.steps) steps\(tier.daily ? " today" : "")"
                let more = tier.daily && i > 0 ? " more" : ""
                return "\(steps) → \(tier.minutes) min\(more)"
            }
            var text = "locked until walked: " + tiers.joined(separator: ", ")
            if let cap = gate.dailyUnlockCap { text += " (at most \(cap) unlocks a day)" }
            parts.append(text)
        }
        for schedule in schedules {
            var text =
                "shielded \(schedule.start)–\(schedule.end) \(schedule.daysDescription) "
                + "(\(schedule.name), \(schedule.timeZone ?? zone ?? "system time zone"))"
            if let goal = schedule.goal {
                text +=
                    "; \(goal.steps) steps lift it "
                    + (goal.minutes.map { "for \($0) min" } ?? "for the rest of the window")
            }
            parts.append(text)
        }
        if parts.isEmpty { parts.append("held only by manual locks") }
        return parts.joined(separator: "; ")
    }
}

extension ScheduleConfiguration {
    /// `daily`, `weekdays`, `weekends` or the days' short names.
    public var daysDescription: String {
        if days.count == 7 { return "daily" }
        if days == [.monday, .tuesday, .wednesday, .thursday, .friday] { return "weekdays" }
        if days == [.saturday, .sunday] { return "weekends" }
        return days.sorted().map(\.shortName).joined(separator: ", ")
    }
}
