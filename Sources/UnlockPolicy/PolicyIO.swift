public import Foundation

/// One input to the policy engine, delivered with the instant it happened.
public enum PolicyInput: Sendable, Hashable {
    /// Steps walked since the previous `.steps` input (a count, not a total).
    case steps(Int)
    /// Time passed: deliver at every `.wakeUp` and at least once a minute, so wall-clock jumps
    /// and schedule boundaries are noticed.
    case tick
    /// A command from the control socket.
    case command(PolicyCommand)
    /// The system time zone changed to this identifier.
    case zoneChanged(String)
    /// What a store's shield reports: the targets it has applied, or a failure.
    case shieldReport(store: String, ShieldReport)
    /// An effect could not be carried out: the policy locks again at once and says why.
    case effectFailed(EffectFailure)
}

/// Commands, as sent over the control socket (the shell checks who may send them).
public enum PolicyCommand: Sendable, Hashable {
    /// Holds `store` for `duration` of elapsed time ("lock for 2 hours").
    case lock(store: String, duration: Duration, by: String)
    /// Marks one occurrence of a schedule as done. `occurrence` is its local start date
    /// (`YYYY-MM-DD`) or full id (`evening@YYYY-MM-DD`); `nil` means the current occurrence, or
    /// the next one when none is running ("skip tonight").
    case skip(schedule: String, occurrence: String?)
    /// Lifts every owner of `store` for the configured emergency minutes, if the weekly
    /// allowance has a use left; recorded with who and when.
    case emergencyUnlock(store: String, by: String)
    /// Replaces the configuration; state of stores that remain is kept.
    case reload(PolicyConfiguration)
}

/// A shield's account of a store.
public enum ShieldReport: Sendable, Hashable {
    /// These targets are applied for the store (empty: nothing is).
    case applied(Selection)
    /// The shield could not apply or check the store.
    case failed(String)
}

/// An effect the shell could not carry out.
public enum EffectFailure: Sendable, Hashable {
    /// The wake-up (and so the relock) could not be armed.
    case wakeUp(String)
    /// The state could not be persisted.
    case persist(String)
}

/// What the shell must do, in order. If a `.persist` or `.wakeUp` fails, the shell reports
/// `.effectFailed` at once and drops the rest of the batch; the engine's answer supersedes it.
public enum PolicyEffect: Sendable, Hashable {
    /// Save the state (atomically) before anything else.
    case persist(PolicyState)
    /// Arm the next wake-up: when the boot clock reads `monotonic` (expected wall time `at`),
    /// deliver `.tick`. Replaces any earlier wake-up.
    case wakeUp(at: Date, monotonic: Duration)
    /// Tell the user (and the log) what happened.
    case notify(PolicyNotice)
    /// Shield these targets of `store`; `owners` hold it.
    case apply(store: String, selection: Selection, owners: [String])
    /// Unshield these targets of `store`; targets another store still holds are never listed.
    case remove(store: String, selection: Selection)
}

/// A state change or event, with who (store, owner), until when, and why.
public struct PolicyNotice: Sendable, Hashable, CustomStringConvertible {
    /// Kinds of notice.
    public enum Kind: String, Sendable, Hashable {
        /// An owner started holding a store.
        case ownerAdded = "owner-added"
        /// An owner stopped holding a store (goal met, window over, skip, lock ended).
        case ownerRemoved = "owner-removed"
        /// A walked goal upgraded the current unlock to a longer tier.
        case unlockExtended = "unlock-extended"
        /// A timed unlock (gate, schedule goal, emergency) ends soon and the store will be
        /// shielded again: `until` is when. Given 5 minutes and 1 minute before, once each per
        /// window (see `PolicyEngine.relockWarningLeads`).
        case relockWarning = "relock-warning"
        /// An occurrence was marked as skipped.
        case skipped
        /// An emergency unlock started.
        case emergencyStarted = "emergency-started"
        /// An emergency unlock ended.
        case emergencyEnded = "emergency-ended"
        /// A command or goal was refused (cap reached, allowance used up, unknown store…).
        case refused
        /// Something failed and the policy locked again.
        case failClosed = "fail-closed"
        /// A shield failed; the policy retries on the next tick.
        case shieldFailed = "shield-failed"
        /// The wall clock jumped relative to elapsed time.
        case clockJumped = "clock-jumped"
        /// The system time zone changed.
        case zoneChanged = "zone-changed"
        /// The configuration was replaced.
        case configurationReloaded = "configuration-reloaded"
    }

    /// What happened.
    public var kind: Kind
    /// The store concerned, if any.
    public var store: String?
    /// The owner concerned (`gate`, `schedule:NAME@DATE`, `lock:WHO`), if any.
    public var owner: String?
    /// Until when the change holds (the relock time of an unlock, the end of a hold), if known.
    public var until: Date?
    /// Why, in words for the user.
    public var reason: String

    /// Creates a notice.
    public init(kind: Kind, store: String? = nil, owner: String? = nil, until: Date? = nil, reason: String) {
        self.kind = kind
        self.store = store
        self.owner = owner
        self.until = until
        self.reason = reason
    }

    public var description: String {
        var text = kind.rawValue
        if let store { text += " \(store)" }
        if let owner { text += " [\(owner)]" }
        if let until { text += " until \(formatISO8601(millisFromDate(until)))" }
        return text + ": " + reason
    }
}

/// What the policy holds right now, for `stepgate status`.
public struct PolicyStatus: Sendable, Hashable, CustomStringConvertible {
    /// One store's status.
    public struct Store: Sendable, Hashable {
        /// The store's name.
        public var name: String
        /// Whether its shield should be applied now.
        public var shielded: Bool
        /// The owners holding it (even while an emergency unlock suspends them).
        public var owners: [String]
        /// When the gate relocks, while the gate is unlocked.
        public var unlockedUntil: Date?
        /// When the emergency unlock ends, while one runs.
        public var emergencyUntil: Date?
        /// Steps counted toward the gate's goal: since it locked, or today's for a daily gate.
        public var steps: Int
        /// Steps needed for the next goal tier, if there is one.
        public var nextGoal: Int?
        /// Whether the goal counts the local day's steps (`stepsToday`).
        public var goalIsDaily = false
        /// Gate unlocks today, and the cap if any.
        public var unlocksToday: Int
        /// The daily cap, if any.
        public var dailyUnlockCap: Int?
        /// Why the store is not shielded although owners hold it (e.g. empty selection).
        public var note: String?
    }

    /// The stores, by name.
    public var stores: [Store]
    /// Emergency unlocks left in the last 7 days of elapsed time.
    public var emergencyRemaining: Int
    /// Why the policy locked or distrusts something (fail-closed reasons), newest last.
    public var problems: [String]
    /// When the policy next changes something by itself (a relock, a schedule boundary, a new
    /// day for daily goals), if it will.
    public var nextChange: Date?

    public var description: String {
        var lines: [String] = []
        for s in stores {
            var line = "\(s.name): \(s.shielded ? "shielded" : "open")"
            if !s.owners.isEmpty { line += " (held by \(s.owners.joined(separator: ", ")))" }
            if let until = s.unlockedUntil {
                line += ", unlocked until \(formatISO8601(millisFromDate(until)))"
            }
            if let until = s.emergencyUntil {
                line += ", emergency until \(formatISO8601(millisFromDate(until)))"
            }
            if let goal = s.nextGoal { line += ", \(s.steps)/\(goal) steps\(s.goalIsDaily ? " today" : "")" }
            if let note = s.note { line += " — \(note)" }
            lines.append(line)
        }
        lines.append("emergency unlocks left this week: \(emergencyRemaining)")
        lines += problems.map { "problem: \($0)" }
        return lines.joined(separator: "\n")
    }
}
