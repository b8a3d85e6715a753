import Foundation
import StepHistoryStore

/// Converts between UTC instants and local wall times of one zone, with the policy's DST rules:
/// a local time in a skipped hour resolves to the first valid instant after it (the transition),
/// and a local time in a repeated hour resolves to its first occurrence.
struct ZoneResolver: Sendable {
    let zone: TimeZone

    init(identifier: String) {
        zone = TimeZone(identifier: identifier) ?? TimeZone(secondsFromGMT: 0) ?? .current
    }

    /// UTC offset at an instant, in milliseconds.
    func offset(at ms: Int64) -> Int64 {
        Int64(zone.secondsFromGMT(for: dateFromMillis(ms))) * 1000
    }

    /// Local wall time (milliseconds since 1970 as if the zone were UTC) of an instant.
    func local(_ ms: Int64) -> Int64 { ms + offset(at: ms) }

    /// The local day number (days since 1970-01-01) of an instant.
    func localDay(_ ms: Int64) -> Int64 { floorDiv(local(ms), millisPerDay) }

    /// The instant at which local wall time `localMillis` happens, per the DST rules above.
    func instant(local localMillis: Int64) -> Int64 {
        var offsets: [Int64] = []
        for probe in [localMillis - millisPerDay, localMillis, localMillis + millisPerDay] {
            let o = offset(at: probe)
            if !offsets.contains(o) { offsets.append(o) }
        }
        var best: Int64?
        for o in offsets {
            let candidate = localMillis - o
            if offset(at: candidate) == o {
                best = min(best ?? candidate, candidate)
            }
        }
        if let best { return best }
        // In a gap: the transition lies between the instants the two offsets give.
        guard let low = offsets.max(), let high = offsets.min() else { return localMillis }
        var lo = (localMillis - low) / 1000  // before the transition
        var hi = (localMillis - high) / 1000 + 1  // after it
        let after = offset(at: hi * 1000)
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2
            if offset(at: mid * 1000) == after { hi = mid } else { lo = mid }
        }
        return hi * 1000
    }
}

/// One occurrence of a schedule: `[start, end)` in UTC milliseconds, named `name@YYYY-MM-DD`.
struct Occurrence: Sendable, Hashable {
    var id: String
    var schedule: String
    var start: Int64
    var end: Int64
}

extension ScheduleConfiguration {
    /// The occurrence that starts on local day `day`, if the schedule runs that day and the
    /// window is not empty after DST resolution.
    func occurrence(onDay day: Int64, resolver: ZoneResolver) -> Occurrence? {
        guard let weekday = Weekday(rawValue: weekday(ofDay: day)), days.contains(weekday) else { return nil }
        let startLocal = day * millisPerDay + Int64(start.minutes) * millisPerMinute
        let endDay = end > start ? day : day + 1
        let endLocal = endDay * millisPerDay + Int64(end.minutes) * millisPerMinute
        let s = resolver.instant(local: startLocal)
        let e = resolver.instant(local: endLocal)
        guard e > s else { return nil }
        return Occurrence(id: "\(name)@\(formatDay(day))", schedule: name, start: s, end: e)
    }

    /// The occurrence containing `now`, if any.
    func occurrence(containing now: Int64, resolver: ZoneResolver) -> Occurrence? {
        let today = resolver.localDay(now)
        for day in [today - 1, today] {
            if let o = occurrence(onDay: day, resolver: resolver), o.start <= now, now < o.end { return o }
        }
        return nil
    }

    /// The earliest start or end of an occurrence strictly after `now`.
    func nextBoundary(after now: Int64, resolver: ZoneResolver) -> Int64? {
        let today = resolver.localDay(now)
        var best: Int64?
        for day in (today - 1)...(today + 8) {
            guard let o = occurrence(onDay: day, resolver: resolver) else { continue }
            for t in [o.start, o.end] where t > now {
                best = min(best ?? t, t)
            }
            if let best, best < o.start { break }
        }
        return best
    }

    /// The first occurrence that ends after `now` (the current one, or the next to start).
    func currentOrNextOccurrence(after now: Int64, resolver: ZoneResolver) -> Occurrence? {
        let today = resolver.localDay(now)
        for day in (today - 1)...(today + 8) {
            if let o = occurrence(onDay: day, resolver: resolver), o.end > now { return o }
        }
        return nil
    }
}
