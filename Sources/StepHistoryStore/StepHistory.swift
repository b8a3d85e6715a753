public import TypedJSON

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Maps an instant to the local calendar day and hour of a time zone.
///
/// The history asks it once per batch of steps. The zone is the policy's (its `timeZone`, else
/// the system's); tests inject fixed or named zones.
public struct LocalClock: Sendable {
    /// The zone's name, for messages and exports.
    public let name: String
    /// The zone's offset from UTC, in seconds, at an instant given in seconds since 1970.
    private let offset: @Sendable (Int64) -> Int64

    /// A clock with an offset function (seconds since 1970 → seconds east of UTC).
    public init(name: String, offset: @escaping @Sendable (Int64) -> Int64) {
        self.name = name
        self.offset = offset
    }

    /// UTC.
    public static let utc = LocalClock(name: "UTC") { _ in 0 }

    /// The local day (days since 1970-01-01 of the local date) and hour (0–23) of an instant
    /// in seconds since 1970 (UTC).
    public func dayAndHour(secondsSince1970 time: Double) -> (day: Int64, hour: Int) {
        let seconds = Int64(max(-1.0e15, min(1.0e15, time.rounded(.down))))
        let local = seconds + offset(seconds)
        let day = floorDiv(local, 86_400)
        return (day, Int((local - day * 86_400) / 3600))
    }

    /// The local day of an instant in seconds since 1970.
    public func day(secondsSince1970 time: Double) -> Int64 { dayAndHour(secondsSince1970: time).day }
}

/// The wall clock (`CLOCK_REALTIME`) in seconds since 1970, as Foundation's `Date()` reads it.
public func wallClockSeconds() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}

/// Steps per local hour for the last ``retainedDays`` days on which steps were counted.
///
/// Each batch of steps goes to the local hour the wall clock shows when it is counted, in the
/// zone in force then; a day keeps the hours it was given. So a zone change never moves past
/// days, a DST day simply has 23 (spring) or 25 (autumn: the repeated hour adds up) hours in
/// its 24 slots, and a clock set back puts later steps into the earlier hour without losing or
/// double-counting any. The history is bounded by the number of *distinct days* kept, not by
/// date arithmetic, so a clock that jumps years ahead and back drops at most one old day per
/// bogus day instead of everything.
public struct StepHistory: Sendable, Equatable {
    /// The file format written; version 1 was the single-day `steps.json`.
    public static let formatVersion = 2
    /// How many days (the most recent day numbers) are kept.
    public static let retainedDays = 400
    /// The most steps one hour holds (about 28 a second, beyond any walk), which bounds the file.
    public static let maximumPerHour = 99_999

    /// Steps per local day (days since 1970-01-01), 24 hours each.
    public private(set) var days: [Int64: [Int]] = [:]

    /// An empty history.
    public init() {}

    /// Adds `steps` counted at an instant (seconds since 1970), in the local hour of `clock`.
    public mutating func add(_ steps: Int, atSecondsSince1970 time: Double, clock: LocalClock) {
        guard steps > 0 else { return }
        let (day, hour) = clock.dayAndHour(secondsSince1970: time)
        set(day: day, hour: hour, to: (days[day]?[hour] ?? 0) + min(steps, Self.maximumPerHour))
    }

    /// Sets one hour's count (clamped to ``maximumPerHour``), dropping the oldest days beyond
    /// ``retainedDays``.
    mutating func set(day: Int64, hour: Int, to count: Int) {
        var hours = days[day] ?? Array(repeating: 0, count: 24)
        hours[hour] = max(0, min(Self.maximumPerHour, count))
        days[day] = hours
        prune()
    }

    /// Drops the oldest days beyond ``retainedDays``.
    private mutating func prune() {
        if days.count > Self.retainedDays {
            for old in days.keys.sorted().prefix(days.count - Self.retainedDays) { days[old] = nil }
        }
    }

    /// Steps on a local day.
    public func steps(onDay day: Int64) -> Int { days[day]?.reduce(0, +) ?? 0 }

    /// The 24 hourly counts of a local day (zeros when nothing was counted).
    public func hours(onDay day: Int64) -> [Int] { days[day] ?? Array(repeating: 0, count: 24) }

    /// Steps on the local day of an instant (seconds since 1970) in `clock`'s zone.
    public func today(atSecondsSince1970 time: Double, clock: LocalClock) -> Int {
        steps(onDay: clock.day(secondsSince1970: time))
    }

    /// All steps kept.
    public var total: Int { days.values.reduce(0) { $0 + $1.reduce(0, +) } }

    // MARK: - The file format

    /// The history as a file: `{"version":2,"days":{"YYYY-MM-DD":[24 counts],…}}`, one day a
    /// line, oldest first.
    public func encoded() -> [UInt8] {
        var text = "{\"version\":\(Self.formatVersion),\"days\":{"
        for (index, day) in days.keys.sorted().enumerated() {
            text += index == 0 ? "\n" : ",\n"
            text +=
                "\"\(formatDay(day))\":[" + hours(onDay: day).map(String.init).joined(separator: ",") + "]"
        }
        text += "\n}}\n"
        return Array(text.utf8)
    }

    /// Reads a history file of this version, or migrates a version 1 `steps.json`
    /// (`{"version":1,"day":"YYYY-MM-DD","steps":N}`): its count goes to `legacyHour` of its
    /// day (when the old file was last written; the steps were counted by then).
    public static func decode(_ bytes: [UInt8], legacyHour: Int = 23) throws(JSONPathError) -> StepHistory {
        let root = try JSONObjectReader(try JSONValue.parse(bytes: bytes), path: "")
        let version = try root.int("version", minimum: 1)
        var history = StepHistory()
        switch version {
        case 1:
            try root.rejectUnknownKeys(allowed: ["version", "day", "steps"])
            let text = try root.string("day")
            guard let day = parseDay(Substring(text)) else {
                throw JSONPathError(path: "day", message: "expected a date YYYY-MM-DD, found \"\(text)\"")
            }
            history.set(day: day, hour: max(0, min(23, legacyHour)), to: try root.int("steps", minimum: 0))
        case formatVersion:
            try root.rejectUnknownKeys(allowed: ["version", "days"])
            let days = try root.object("days")
            for key in days.keys {
                guard let day = parseDay(Substring(key)) else {
                    throw JSONPathError(
                        path: days.childPath(key), message: "expected a date YYYY-MM-DD as the key")
                }
                let hours = try days.array(key)
                guard hours.count == 24 else {
                    throw JSONPathError(
                        path: days.childPath(key), message: "expected 24 hourly counts, found \(hours.count)")
                }
                var counts: [Int] = []
                for (value, path) in hours {
                    let count = try JSONObjectReader.int(value, path: path, minimum: 0)
                    guard count <= maximumPerHour else {
                        throw JSONPathError(
                            path: path,
                            message: "expected at most \(maximumPerHour) steps an hour, found \(count)")
                    }
                    counts.append(count)
                }
                history.days[day] = counts
            }
            history.prune()
        default:
            throw JSONPathError(
                path: "version",
                message:
                    "history version \(version) is newer than this StepGate (it reads 1 and \(formatVersion))"
            )
        }
        return history
    }

    // MARK: - Summaries

    /// One bar of a chart or row of an export.
    public struct Bucket: Sendable, Equatable {
        /// `YYYY-MM-DD` for days and weeks (a week's Monday), `YYYY-MM-DDTHH` for hours.
        public var label: String
        public var steps: Int
        /// Whether the bucket holds the current day (or hour).
        public var isCurrent: Bool
    }

    /// How buckets are grouped.
    public enum Grouping: String, Sendable, CaseIterable {
        case hour, day, week
    }

    /// The last `dayCount` local days up to and including `today`, grouped. Weeks start on
    /// Monday and cover only the days asked for.
    public func buckets(dayCount: Int, today: Int64, currentHour: Int? = nil, by grouping: Grouping)
        -> [Bucket]
    {
        let first = today - Int64(max(1, dayCount)) + 1
        var result: [Bucket] = []
        for day in first...today {
            switch grouping {
            case .day:
                result.append(
                    Bucket(label: formatDay(day), steps: steps(onDay: day), isCurrent: day == today))
            case .hour:
                for (hour, count) in hours(onDay: day).enumerated() {
                    result.append(
                        Bucket(
                            label: formatDay(day) + "T" + twoDigits(Int64(hour)), steps: count,
                            isCurrent: day == today && hour == currentHour))
                }
            case .week:
                // Monday of the day's week (weekday 0 is Sunday).
                let monday = day - Int64((weekday(ofDay: day) + 6) % 7)
                let label = formatDay(monday)
                if result.last?.label == label {
                    result[result.count - 1].steps += steps(onDay: day)
                    result[result.count - 1].isCurrent = result[result.count - 1].isCurrent || day == today
                } else {
                    result.append(Bucket(label: label, steps: steps(onDay: day), isCurrent: day == today))
                }
            }
        }
        return result
    }

    /// `YYYY-MM-DD` of a day number.
    public static func dayLabel(_ day: Int64) -> String { formatDay(day) }

    /// The day number of `YYYY-MM-DD`.
    public static func day(from label: String) -> Int64? { parseDay(Substring(label)) }

    /// The three-letter weekday name of a day number.
    public static func weekdayName(_ day: Int64) -> String {
        ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"][weekday(ofDay: day)]
    }

    /// A copy keeping only days from `first` through `last`.
    public func restricted(from first: Int64, through last: Int64) -> StepHistory {
        var copy = StepHistory()
        copy.days = days.filter { $0.key >= first && $0.key <= last }
        return copy
    }
}
