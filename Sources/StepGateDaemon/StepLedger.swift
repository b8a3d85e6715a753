import Formatting
package import Foundation
@preconcurrency import Glibc
import Synchronization
import SystemFiles
import TypedJSON
package import UnlockPolicy

/// The step history while counting (`stepgate run`, the daemon): steps per local hour for the
/// last 400 days (``StepHistory``), on disk in `steps.json` (``StepHistoryFile``), so a restart
/// or a device gap never loses the day's steps. Shared between the input task, which adds and
/// saves, and whoever answers `status` and `history`; the zone can change under it (the policy's
/// zone, a reload, the system's zone changing).
package final class StepLedger: Sendable {
    package let path: String
    private let file: StepHistoryFile
    private let state: Mutex<(history: StepHistory, clock: LocalClock)>

    /// The default location: `$STATE_DIRECTORY` (systemd), else `$XDG_STATE_HOME/stepgate`,
    /// else `~/.local/state/stepgate`, file `steps.json`.
    package static var defaultPath: String {
        let environment = ProcessInfo.processInfo.environment
        if let state = environment["STATE_DIRECTORY"], !state.isEmpty {
            return state.split(separator: ":").first.map { "\($0)/steps.json" } ?? "\(state)/steps.json"
        }
        let base =
            environment["XDG_STATE_HOME"].flatMap { $0.isEmpty ? nil : $0 }
            ?? NSHomeDirectory() + "/.local/state"
        return base + "/stepgate/steps.json"
    }

    /// Loads the history; a missing file starts empty, an unreadable one is moved aside and
    /// reported through `warn` (see ``StepHistoryFile``).
    package init(path: String, clock: LocalClock = .system, warn: (String) -> Void) {
        self.path = path
        let (file, history) = StepHistoryFile.load(path: path, clock: clock, warn: warn)
        self.file = file
        state = Mutex((history, clock))
    }

    /// The zone days are counted in.
    package var clock: LocalClock {
        get { state.withLock { $0.clock } }
        set { state.withLock { $0.clock = newValue } }
    }

    /// Steps today (the local day of `now`).
    package func steps(at now: Date = Date()) -> Int {
        state.withLock { $0.history.today(at: now, clock: $0.clock) }
    }

    /// Today's steps now.
    package var steps: Int { steps() }

    /// A copy of the history and the zone.
    package var snapshot: (history: StepHistory, clock: LocalClock) { state.withLock { $0 } }

    /// Adds steps counted at `now`.
    package func add(_ count: Int, now: Date = Date()) {
        state.withLock { $0.history.add(count, at: now, clock: $0.clock) }
    }

    /// Writes the history atomically.
    package func save() throws {
        let history = state.withLock { $0.history }
        do {
            try file.save(history)
        } catch {
            throw LedgerError(path: path, reason: error.description)
        }
    }
}

extension LocalClock {
    /// The system's zone as the C library sees it (`TZ`, `/etc/localtime`), through
    /// `localtime_r`: no ICU data loaded, which keeps `stepgate run` small.
    package static let system = LocalClock(name: "system") { seconds in
        var time = time_t(seconds)
        var parts = tm()
        guard localtime_r(&time, &parts) != nil else { return 0 }
        return Int64(parts.tm_gmtoff)
    }

    /// The zone the policy counts days in: its `timeZone`, else the system zone `systemZone`.
    package static func policy(_ configuration: PolicyConfiguration, systemZone: String) -> LocalClock {
        configuration.timeZone.flatMap { LocalClock(zone: $0) } ?? LocalClock(zone: systemZone) ?? .utc
    }
}

// MARK: - Answers for the control socket

extension StepLedger {
    /// The answer to `{"command":"history","days":N}`: the zone, today, the current hour, the
    /// goal line and the last `days` days as a history object (the file format).
    package func historyJSON(days: Int, goal: Int?, now: Date = Date()) -> String {
        let (history, clock) = snapshot
        let (today, hour) = clock.dayAndHour(now)
        let recent = history.restricted(from: today - Int64(days) + 1, through: today)
        let head = ControlCoding.line(
            HistoryReply(
                ok: true, zone: clock.name, today: StepHistory.dayLabel(today), hour: hour, goal: goal))
        // The history in its own format, as the last member.
        let text = String(decoding: recent.encoded(), as: UTF8.self).replacingOccurrences(of: "\n", with: "")
        return String(head.dropLast()) + ",\"history\":" + text + "}"
    }

    /// Today and the six days before it, oldest first: `[{"day":"YYYY-MM-DD","steps":N},…]`.
    package func lastDays(now: Date = Date()) -> [StatusReply.Day] {
        let (history, clock) = snapshot
        let today = clock.day(now)
        return (today - 6...today).map { day in
            StatusReply.Day(day: StepHistory.dayLabel(day), steps: history.steps(onDay: day))
        }
    }
}

/// The goal line of history charts: the first goal tier of the gates, the largest of them.
package func historyGoal(_ policy: PolicyConfiguration) -> Int? {
    policy.stores.compactMap { $0.gate?.goals.first?.steps }.max()
}

/// The ledger could not be written.
package struct LedgerError: Error, CustomStringConvertible {
    package var path: String
    package var reason: String
    package var description: String { "\(path): cannot save the step history: \(reason)" }
}
