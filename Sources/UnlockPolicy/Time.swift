public import Foundation
import StepHistoryStore

/// One reading of the shell's clocks, passed with every input.
///
/// The engine never reads a clock. The shell reads the wall clock (UTC) and a clock that counts
/// elapsed time since boot *including suspend* (`CLOCK_BOOTTIME` on Linux), and names the boot
/// (`/proc/sys/kernel/random/boot_id`). Unlock windows, manual locks and the emergency allowance
/// are measured in elapsed time, so wall-clock jumps neither lengthen a window nor grant anything;
/// see `docs/policy.md` ("Time").
///
/// Both clocks are used at millisecond resolution.
public struct Instant: Sendable, Hashable, CustomStringConvertible {
    /// The wall clock, in UTC.
    public var wall: Date
    /// Elapsed time since boot, including time spent suspended.
    public var monotonic: Duration
    /// Identifies the boot that `monotonic` belongs to.
    public var bootID: String
    /// Whether the wall clock is known to be right: synchronized to network time (the kernel's
    /// `STA_UNSYNC` clear). Only a synchronized clock proves how long the machine was off.
    public var clockSynchronized: Bool

    /// Creates a clock reading.
    public init(wall: Date, monotonic: Duration, bootID: String, clockSynchronized: Bool = true) {
        self.wall = wall
        self.monotonic = monotonic
        self.bootID = bootID
        self.clockSynchronized = clockSynchronized
    }

    init(wallMillis: Int64, monoMillis: Int64, bootID: String, clockSynchronized: Bool = true) {
        self.wall = dateFromMillis(wallMillis)
        self.monotonic = .milliseconds(monoMillis)
        self.bootID = bootID
        self.clockSynchronized = clockSynchronized
    }

    var wallMillis: Int64 { millisFromDate(wall) }

    var monoMillis: Int64 {
        let (seconds, attoseconds) = monotonic.components
        guard seconds > -1_000_000_000_000, seconds < 1_000_000_000_000 else {
            return seconds < 0 ? -1_000_000_000_000_000 : 1_000_000_000_000_000
        }
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }

    public var description: String { "\(formatISO8601(wallMillis)) (+\(monoMillis) ms, boot \(bootID))" }
}

/// Milliseconds since 1970-01-01T00:00:00Z, rounded; extreme dates are clamped.
func millisFromDate(_ date: Date) -> Int64 {
    let ms = (date.timeIntervalSince1970 * 1000).rounded()
    guard ms.isFinite else { return 0 }
    return Int64(max(-1.0e15, min(1.0e15, ms)))
}

func dateFromMillis(_ ms: Int64) -> Date { Date(timeIntervalSince1970: Double(ms) / 1000) }

let millisPerMinute: Int64 = 60_000
let millisPerDay: Int64 = 86_400_000

// MARK: - ISO 8601

/// `2025-03-01T18:00:00Z`, with `.sss` only when the instant has milliseconds.
func formatISO8601(_ ms: Int64) -> String {
    let days = floorDiv(ms, millisPerDay)
    let rest = ms - days * millisPerDay
    let seconds = rest / 1000
    let millis = rest % 1000
    var text =
        formatDay(days) + "T" + twoDigits(seconds / 3600) + ":" + twoDigits(seconds / 60 % 60) + ":"
        + twoDigits(seconds % 60)
    if millis != 0 {
        let digits = String(millis)
        text += "." + String(repeating: "0", count: 3 - digits.count) + digits
    }
    return text + "Z"
}

/// Parses an ISO 8601 instant: `YYYY-MM-DDTHH:MM:SS[.fff](Z|±HH:MM)`. Returns milliseconds.
func parseISO8601(_ text: String) -> Int64? {
    let chars = Array(text.utf8)
    guard chars.count >= 20, chars[10] == UInt8(ascii: "T") || chars[10] == UInt8(ascii: "t") else {
        return nil
    }
    guard let days = parseDay(Substring(text.prefix(10))) else { return nil }
    func number(_ range: Range<Int>) -> Int64? {
        var n: Int64 = 0
        for i in range {
            guard i < chars.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(chars[i]) else {
                return nil
            }
            n = n * 10 + Int64(chars[i] - UInt8(ascii: "0"))
        }
        return n
    }
    guard chars[13] == UInt8(ascii: ":"), chars[16] == UInt8(ascii: ":"),
        let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
        hour < 24, minute < 60, second < 60
    else { return nil }
    var index = 19
    var millis: Int64 = 0
    if index < chars.count, chars[index] == UInt8(ascii: ".") {
        index += 1
        var digits = 0
        while index < chars.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(chars[index]) {
            if digits < 3 { millis = millis * 10 + Int64(chars[index] - UInt8(ascii: "0")) }
            digits += 1
            index += 1
        }
        guard digits > 0 else { return nil }
        for _ in digits..<max(digits, 3) { millis *= 10 }
    }
    guard index < chars.count else { return nil }
    var offset: Int64 = 0
    if chars[index] == UInt8(ascii: "Z") || chars[index] == UInt8(ascii: "z") {
        index += 1
    } else if chars[index] == UInt8(ascii: "+") || chars[index] == UInt8(ascii: "-") {
        let sign: Int64 = chars[index] == UInt8(ascii: "+") ? 1 : -1
        guard index + 6 == chars.count, chars[index + 3] == UInt8(ascii: ":"),
            let oh = number(index + 1..<index + 3), let om = number(index + 4..<index + 6), oh < 24, om < 60
        else { return nil }
        offset = sign * (oh * 3600 + om * 60) * 1000
        index += 6
    } else {
        return nil
    }
    guard index == chars.count else { return nil }
    return days * millisPerDay + (hour * 3600 + minute * 60 + second) * 1000 + millis - offset
}

// MARK: - Time of day

/// A local time of day, `HH:MM`, in minutes after midnight.
public struct TimeOfDay: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// Minutes after local midnight, 0 ..< 1440.
    public var minutes: Int

    /// Creates a time of day; `nil` unless `0 <= hour < 24` and `0 <= minute < 60`.
    public init?(hour: Int, minute: Int) {
        guard (0..<24).contains(hour), (0..<60).contains(minute) else { return nil }
        self.minutes = hour * 60 + minute
    }

    /// Parses `HH:MM` (two digits each).
    public init?(_ text: String) {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[0].count == 2, parts[1].count == 2,
            parts[0].allSatisfy(\.isASCII), parts[1].allSatisfy(\.isASCII),
            let h = Int(parts[0]), let m = Int(parts[1])
        else { return nil }
        self.init(hour: h, minute: m)
    }

    public static func < (lhs: TimeOfDay, rhs: TimeOfDay) -> Bool { lhs.minutes < rhs.minutes }

    public var description: String {
        twoDigits(Int64(minutes / 60)) + ":" + twoDigits(Int64(minutes % 60))
    }
}

/// Formats a duration in milliseconds for messages: `30 min`, `1 h 30 min`, `45 s`.
func formatDuration(_ ms: Int64) -> String {
    let seconds = max(0, ms) / 1000
    if seconds < 60 { return "\(seconds) s" }
    let minutes = (seconds + 30) / 60
    if minutes < 60 { return "\(minutes) min" }
    let h = minutes / 60
    let m = minutes % 60
    return m == 0 ? "\(h) h" : "\(h) h \(m) min"
}
