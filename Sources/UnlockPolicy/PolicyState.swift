public import Foundation
import StepHistoryStore
import TypedJSON

/// A window of elapsed time: an unlock, a manual lock or an emergency unlock.
///
/// It ends when `length` of elapsed time (the engine's ledger) has passed since it started, or,
/// for unlocks (`wallBound`), when the wall clock reaches `startWall + length`, whichever
/// comes first. So a wall-clock jump can end an unlock early but never lengthen it.
struct TimedWindow: Sendable, Hashable {
    var startWall: Int64
    var startLedger: Int64
    var length: Int64
    var wallBound: Bool
    /// The warnings before this window ends that are done or waived: every lead (time before
    /// the end) at or above this many milliseconds. `nil`: none yet. A lead is also waived when
    /// the window is not longer than it (see `coveredLead`).
    var warned: Int64? = nil

    /// The leads at or above which no warning is due: those already given, and those the window
    /// is not longer than (a 3-minute unlock gets no 5-minute warning).
    var coveredLead: Int64 { min(warned ?? .max, length) }

    var wallDeadline: Int64 { startWall + length }

    /// Milliseconds left at (ledger, wall); zero or less when over.
    func remaining(ledger: Int64, wall: Int64) -> Int64 {
        let byElapsed = length - (ledger - startLedger)
        return wallBound ? min(byElapsed, wallDeadline - wall) : byElapsed
    }
}

/// A clock reading in milliseconds.
struct SeenClock: Sendable, Hashable {
    var wall: Int64
    var mono: Int64
    var bootID: String
}

/// A reboot's credit for time powered off, waiting for a synchronized clock.
struct PendingProof: Sendable, Hashable {
    /// The last wall reading before the reboot.
    var lastWall: Int64
    /// The boot whose synchronized reading settles it.
    var bootID: String
    /// The credit beyond the uptime.
    var amount: Int64
}

/// A moment recorded both on the wall clock and on the elapsed-time ledger.
struct Stamp: Sendable, Hashable {
    var wall: Int64
    var ledger: Int64
}

struct GateState: Sendable, Hashable {
    /// Wall time the gate (re)locked; steps count from here.
    var lockedSince: Int64?
    /// Steps since the gate locked (including those walked during an unlock, for upgrades).
    var steps = 0
    /// The index of the highest goal tier reached in the current unlock; -1 while locked, -2
    /// while locked after the daily cap refused an unlock (so the refusal is said once).
    var tier = -1
    var window: TimedWindow?
}

struct OccurrenceState: Sendable, Hashable {
    var steps = 0
    var end: Int64
    var window: TimedWindow?
}

struct HeldWindow: Sendable, Hashable {
    var by: String
    var window: TimedWindow
}

/// A gate unlock, for the daily cap: when (wall and elapsed), and the wall time its local day
/// ended in the zone in force then (it counts toward the cap until then, in elapsed time).
struct GateUnlock: Sendable, Hashable {
    var wall: Int64
    var ledger: Int64
    var dayEnd: Int64
}

/// The local day's steps, for daily goals. The day ends when `endsLedger` of proven elapsed time
/// is reached (its local midnight, in the zone in force when it began, measured in elapsed time),
/// so neither a clock set forward nor a zone change starts a new day early.
struct DayTally: Sendable, Hashable {
    /// The local day number (days since 1970-01-01 in the zone in force when it began).
    var day: Int64
    /// Steps counted on it.
    var steps = 0
    /// The proven elapsed time (`ledger - unproven`) at which it ends.
    var endsLedger: Int64
}

struct StoreState: Sendable, Hashable {
    var gate = GateState()
    /// How many of a daily gate's tiers have paid out on the current day.
    var dailyPaid = 0
    var unlocks: [GateUnlock] = []
    var manualLock: HeldWindow?
    var emergency: HeldWindow?
    var occurrences: [String: OccurrenceState] = [:]
}

/// One use of the emergency allowance: who, which store, and when (wall and elapsed).
public struct EmergencyUse: Sendable, Hashable {
    /// The store that was unlocked.
    public var store: String
    /// Who asked (a user name from the control socket's peer credentials).
    public var by: String
    /// When, on the wall clock.
    public var at: Date { dateFromMillis(stamp.wall) }
    var stamp: Stamp
}

/// Everything the policy must remember across restarts: gates, windows, skip marks, the
/// emergency log and the elapsed-time ledger. Written as a versioned JSON envelope
/// (`PolicyState.encoded()`); see `docs/policy.md` ("State file").
public struct PolicyState: Sendable, Hashable {
    /// The state-file format this build writes. Version 2 added `warnedSeconds` to windows (the
    /// relock warnings already given), version 3 the day's steps (`today`, `dailyPaid`); older
    /// files are read as the current version without them.
    public static let currentVersion = 3

    /// Elapsed time observed by the engine, in milliseconds: advances with the boot clock within
    /// a boot, and by the larger of the wall-clock gap and the new boot's uptime across a reboot.
    var ledger: Int64 = 0
    /// The part of `ledger` that reboots credited for time powered off without a synchronized
    /// clock to prove it (a firmware clock anyone at the keyboard can set). Ends unlock windows
    /// (the generous side) but does not age what restrains: manual locks, the daily unlock cap
    /// and the emergency allowance run on `ledger - unproven`.
    var unproven: Int64 = 0
    /// The latest reboot's unproven credit, proven (taken back from `unproven`) by the first
    /// synchronized reading of that boot.
    var pendingProof: PendingProof?
    /// The last clock reading the engine saw (milliseconds).
    var lastSeen: SeenClock?
    /// The system zone last reported by the shell.
    var systemZone: String?
    var stores: [String: StoreState] = [:]
    /// Skipped occurrence ids and the wall time their occurrence ends.
    var skips: [String: Int64] = [:]
    var emergencyUses: [EmergencyUse] = []
    /// The local day's steps; `nil` before the first evaluation.
    var today: DayTally?

    /// A fresh state: every gate locked, nothing skipped, the emergency allowance full.
    public init() {}

    /// The emergency uses still on record (the last 30 days of elapsed time).
    public var emergencyLog: [EmergencyUse] { emergencyUses }
}

/// Why a state file could not be used.
public enum PolicyStateError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The file is not valid JSON or not a valid state.
    case corrupt(String)
    /// The file was written by a newer StepGate; it is left untouched.
    case newerVersion(Int)
    /// The file could not be read or written.
    case io(String)

    public var description: String {
        switch self {
        case .corrupt(let reason): "state file is corrupt: \(reason)"
        case .newerVersion(let v):
            "state file has version \(v), newer than this StepGate's \(PolicyState.currentVersion); not overwriting it"
        case .io(let reason): "state file: \(reason)"
        }
    }
}

// MARK: - Encoding

private func seconds(_ ms: Int64) -> JSONValue { .number(Double(ms) / 1000, isInteger: ms % 1000 == 0) }
private func instant(_ ms: Int64) -> JSONValue { .string(formatISO8601(ms)) }

extension TimedWindow {
    var json: JSONValue {
        var members: [(String, JSONValue)] = [
            ("start", instant(startWall)), ("startElapsedSeconds", seconds(startLedger)),
            ("lengthSeconds", seconds(length)), ("wallDeadline", wallBound ? instant(wallDeadline) : .null),
        ]
        if let warned { members.append(("warnedSeconds", seconds(warned))) }
        return .object(members)
    }

    init(_ r: JSONObjectReader) throws(JSONPathError) {
        try r.rejectUnknownKeys(allowed: [
            "start", "startElapsedSeconds", "lengthSeconds", "wallDeadline", "warnedSeconds",
        ])
        startWall = try readInstant(r, "start")
        startLedger = try readSeconds(r, "startElapsedSeconds")
        length = try readSeconds(r, "lengthSeconds")
        wallBound = r.value("wallDeadline") != nil
        if wallBound {
            let deadline = try readInstant(r, "wallDeadline")
            guard deadline == startWall + length else {
                throw JSONPathError(
                    path: r.childPath("wallDeadline"), message: "does not match start + length")
            }
        }
        guard length > 0 else {
            throw JSONPathError(path: r.childPath("lengthSeconds"), message: "must be positive")
        }
        if r.value("warnedSeconds") != nil {
            let lead = try readSeconds(r, "warnedSeconds")
            guard lead >= 0 else {
                throw JSONPathError(path: r.childPath("warnedSeconds"), message: "must not be negative")
            }
            warned = lead
        }
    }
}

private func readInstant(_ r: JSONObjectReader, _ key: String) throws(JSONPathError) -> Int64 {
    let text = try r.string(key)
    guard let ms = parseISO8601(text) else {
        throw JSONPathError(
            path: r.childPath(key), message: "expected an ISO 8601 instant, found \"\(text)\"")
    }
    return ms
}

private func readSeconds(_ r: JSONObjectReader, _ key: String) throws(JSONPathError) -> Int64 {
    let value = try r.double(key)
    guard abs(value) < 1.0e12 else { throw JSONPathError(path: r.childPath(key), message: "out of range") }
    return Int64((value * 1000).rounded())
}

extension PolicyState {
    /// The state as versioned JSON: plain units (seconds), ISO 8601 UTC instants, sorted keys.
    public func encoded() -> String {
        var storeMembers: [(String, JSONValue)] = []
        for name in stores.keys.sorted() {
            guard let s = stores[name] else { continue }
            var gate: [(String, JSONValue)] = [
                ("steps", .number(Double(s.gate.steps), isInteger: true)),
                ("tier", .number(Double(s.gate.tier), isInteger: true)),
            ]
            if let since = s.gate.lockedSince { gate.append(("lockedSince", instant(since))) }
            if let w = s.gate.window { gate.append(("unlock", w.json)) }
            if s.dailyPaid > 0 { gate.append(("dailyPaid", .number(Double(s.dailyPaid), isInteger: true))) }
            var members: [(String, JSONValue)] = [
                ("gate", .object(gate)),
                (
                    "unlocks",
                    .array(
                        s.unlocks.map {
                            .object([
                                ("at", instant($0.wall)), ("elapsedSeconds", seconds($0.ledger)),
                                ("dayEnds", instant($0.dayEnd)),
                            ])
                        })
                ),
            ]
            if let lock = s.manualLock {
                members.append(
                    ("manualLock", .object([("by", .string(lock.by)), ("window", lock.window.json)])))
            }
            if let e = s.emergency {
                members.append(("emergency", .object([("by", .string(e.by)), ("window", e.window.json)])))
            }
            var occurrences: [(String, JSONValue)] = []
            for id in s.occurrences.keys.sorted() {
                guard let o = s.occurrences[id] else { continue }
                var fields: [(String, JSONValue)] = [
                    ("steps", .number(Double(o.steps), isInteger: true)), ("ends", instant(o.end)),
                ]
                if let w = o.window { fields.append(("unlock", w.json)) }
                occurrences.append((id, .object(fields)))
            }
            members.append(("occurrences", .object(occurrences)))
            storeMembers.append((name, .object(members)))
        }
        var root: [(String, JSONValue)] = [
            ("version", .number(Double(PolicyState.currentVersion), isInteger: true)),
            ("elapsedSeconds", seconds(ledger)),
        ]
        if let lastSeen {
            root.append(
                (
                    "lastSeen",
                    .object([
                        ("wall", instant(lastSeen.wall)), ("monotonicSeconds", seconds(lastSeen.mono)),
                        ("bootID", .string(lastSeen.bootID)),
                    ])
                ))
        }
        if unproven != 0 { root.append(("unprovenSeconds", seconds(unproven))) }
        if let p = pendingProof {
            root.append(
                (
                    "unprovenReboot",
                    .object([
                        ("lastWall", instant(p.lastWall)), ("bootID", .string(p.bootID)),
                        ("seconds", seconds(p.amount)),
                    ])
                ))
        }
        if let systemZone { root.append(("systemTimeZone", .string(systemZone))) }
        if let today {
            root.append(
                (
                    "today",
                    .object([
                        ("day", .string(StepHistory.dayLabel(today.day))),
                        ("steps", .number(Double(today.steps), isInteger: true)),
                        ("endsElapsedSeconds", seconds(today.endsLedger)),
                    ])
                ))
        }
        root.append(("stores", .object(storeMembers)))
        root.append(
            (
                "skips",
                .array(
                    skips.keys.sorted().map { id in
                        .object([("occurrence", .string(id)), ("until", instant(skips[id] ?? 0))])
                    })
            ))
        root.append(
            (
                "emergencyUses",
                .array(
                    emergencyUses.map {
                        .object([
                            ("store", .string($0.store)), ("by", .string($0.by)),
                            ("at", instant($0.stamp.wall)),
                            ("elapsedSeconds", seconds($0.stamp.ledger)),
                        ])
                    })
            ))
        return JSONValue.object(root).prettySerialized() + "\n"
    }

    /// Decodes a state file. Throws `.newerVersion` for files from a newer StepGate and
    /// `.corrupt` (with the JSON path) for anything else that is wrong.
    public static func decode(_ text: String) throws(PolicyStateError) -> PolicyState {
        try decode(bytes: Array(text.utf8))
    }

    /// Decodes a state file from raw bytes.
    public static func decode(bytes: [UInt8]) throws(PolicyStateError) -> PolicyState {
        do {
            let document = try JSONValue.parse(bytes: bytes)
            let root = try JSONObjectReader(document, path: "")
            let version = try root.int("version")
            if version > currentVersion { throw PolicyStateError.newerVersion(version) }
            guard version >= 1 else {
                throw JSONPathError(path: "version", message: "unsupported version \(version)")
            }
            // Versions 1 and 2 are version 3 without `warnedSeconds`, `today` and `dailyPaid`: one
            // reader for all.
            return try decodeV1(root)
        } catch let error as PolicyStateError {
            throw error
        } catch let error as JSONPathError {
            throw .corrupt(error.description)
        } catch {
            throw .corrupt("\(error)")
        }
    }

    private static func decodeV1(_ root: JSONObjectReader) throws(JSONPathError) -> PolicyState {
        try root.rejectUnknownKeys(allowed: [
            "version", "elapsedSeconds", "unprovenSeconds", "unprovenReboot", "lastSeen", "systemTimeZone",
            "stores", "skips", "emergencyUses", "today",
        ])
        var state = PolicyState()
        state.ledger = try readSeconds(root, "elapsedSeconds")
        if root.value("unprovenSeconds") != nil {
            state.unproven = try readSeconds(root, "unprovenSeconds")
            guard state.unproven >= 0, state.unproven <= state.ledger else {
                throw JSONPathError(path: "unprovenSeconds", message: "expected from 0 to elapsedSeconds")
            }
        }
        if let p = try root.optionalObject("unprovenReboot") {
            try p.rejectUnknownKeys(allowed: ["lastWall", "bootID", "seconds"])
            state.pendingProof = PendingProof(
                lastWall: try readInstant(p, "lastWall"), bootID: try p.string("bootID"),
                amount: max(0, try readSeconds(p, "seconds")))
        }
        if let seen = try root.optionalObject("lastSeen") {
            try seen.rejectUnknownKeys(allowed: ["wall", "monotonicSeconds", "bootID"])
            state.lastSeen = SeenClock(
                wall: try readInstant(seen, "wall"), mono: try readSeconds(seen, "monotonicSeconds"),
                bootID: try seen.string("bootID"))
        }
        if let zone = try root.optionalString("systemTimeZone") {
            if let problem = timeZoneProblem(zone) {
                throw JSONPathError(path: "systemTimeZone", message: problem)
            }
            state.systemZone = zone
        }
        if let t = try root.optionalObject("today") {
            try t.rejectUnknownKeys(allowed: ["day", "steps", "endsElapsedSeconds"])
            let text = try t.string("day")
            guard let day = StepHistory.day(from: text) else {
                throw JSONPathError(
                    path: t.childPath("day"), message: "expected YYYY-MM-DD, found \"\(text)\"")
            }
            state.today = DayTally(
                day: day, steps: try t.int("steps", minimum: 0),
                endsLedger: try readSeconds(t, "endsElapsedSeconds"))
        }
        let stores = try root.object("stores")
        for name in stores.keys {
            let r = try stores.object(name)
            try r.rejectUnknownKeys(allowed: ["gate", "unlocks", "manualLock", "emergency", "occurrences"])
            var s = StoreState()
            let g = try r.object("gate")
            try g.rejectUnknownKeys(allowed: ["steps", "tier", "lockedSince", "unlock", "dailyPaid"])
            if g.value("dailyPaid") != nil { s.dailyPaid = try g.int("dailyPaid", minimum: 0) }
            s.gate.steps = try g.int("steps", minimum: 0)
            s.gate.tier = try g.int("tier", minimum: -2)
            if g.value("lockedSince") != nil { s.gate.lockedSince = try readInstant(g, "lockedSince") }
            if let w = try g.optionalObject("unlock") { s.gate.window = try TimedWindow(w) }
            for (value, path) in try r.array("unlocks") {
                let u = try JSONObjectReader(value, path: path)
                try u.rejectUnknownKeys(allowed: ["at", "elapsedSeconds", "dayEnds"])
                let at = try readInstant(u, "at")
                // Files written before "dayEnds" existed: count the unlock for a whole day.
                let dayEnd = u.value("dayEnds") == nil ? at + millisPerDay : try readInstant(u, "dayEnds")
                s.unlocks.append(
                    GateUnlock(wall: at, ledger: try readSeconds(u, "elapsedSeconds"), dayEnd: dayEnd))
            }
            for key in ["manualLock", "emergency"] {
                guard let h = try r.optionalObject(key) else { continue }
                try h.rejectUnknownKeys(allowed: ["by", "window"])
                let held = HeldWindow(by: try h.string("by"), window: try TimedWindow(try h.object("window")))
                if key == "manualLock" { s.manualLock = held } else { s.emergency = held }
            }
            if let occurrences = try r.optionalObject("occurrences") {
                for id in occurrences.keys {
                    let o = try occurrences.object(id)
                    try o.rejectUnknownKeys(allowed: ["steps", "ends", "unlock"])
                    var occurrence = OccurrenceState(
                        steps: try o.int("steps", minimum: 0), end: try readInstant(o, "ends"))
                    if let w = try o.optionalObject("unlock") { occurrence.window = try TimedWindow(w) }
                    s.occurrences[id] = occurrence
                }
            }
            state.stores[name] = s
        }
        for (value, path) in try root.array("skips") {
            let k = try JSONObjectReader(value, path: path)
            try k.rejectUnknownKeys(allowed: ["occurrence", "until"])
            state.skips[try k.string("occurrence")] = try readInstant(k, "until")
        }
        for (value, path) in try root.array("emergencyUses") {
            let e = try JSONObjectReader(value, path: path)
            try e.rejectUnknownKeys(allowed: ["store", "by", "at", "elapsedSeconds"])
            state.emergencyUses.append(
                EmergencyUse(
                    store: try e.string("store"), by: try e.string("by"),
                    stamp: Stamp(wall: try readInstant(e, "at"), ledger: try readSeconds(e, "elapsedSeconds"))
                ))
        }
        return state
    }
}
