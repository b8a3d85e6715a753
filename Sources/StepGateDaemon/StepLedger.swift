package import Counting
package import Foundation
package import StepHistoryStore
package import UnlockPolicy

extension StepLedger {
    /// Steps today (the local day of `now`).
    package func steps(at now: Date) -> Int { steps(atSecondsSince1970: now.timeIntervalSince1970) }

    /// Adds steps counted at `now`.
    package func add(_ count: Int, now: Date) { add(count, atSecondsSince1970: now.timeIntervalSince1970) }
}

extension LocalClock {
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
