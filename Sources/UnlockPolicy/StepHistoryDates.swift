public import Foundation
public import StepHistoryStore

// The step history (module Counting, which links no Foundation) in Foundation's terms: dates
// and named zones, for the policy, the daemon and the commands that have Foundation anyway.

extension LocalClock {
    /// A named zone (`Europe/Berlin`); `nil` when the identifier is not a zone.
    public init?(zone identifier: String) {
        guard timeZoneProblem(identifier) == nil, let zone = TimeZone(identifier: identifier) else {
            return nil
        }
        self.init(name: identifier) { seconds in
            Int64(zone.secondsFromGMT(for: Date(timeIntervalSince1970: Double(seconds))))
        }
    }

    /// The local day (days since 1970-01-01 of the local date) and hour (0–23) of `date`.
    public func dayAndHour(_ date: Date) -> (day: Int64, hour: Int) {
        dayAndHour(secondsSince1970: date.timeIntervalSince1970)
    }

    /// The local day of `date`.
    public func day(_ date: Date) -> Int64 { dayAndHour(date).day }
}

extension StepHistory {
    /// Adds `steps` counted at `date`, in the local hour of `clock`.
    public mutating func add(_ steps: Int, at date: Date, clock: LocalClock) {
        add(steps, atSecondsSince1970: date.timeIntervalSince1970, clock: clock)
    }

    /// Steps on the local day of `date` in `clock`'s zone.
    public func today(at date: Date, clock: LocalClock) -> Int {
        today(atSecondsSince1970: date.timeIntervalSince1970, clock: clock)
    }
}
