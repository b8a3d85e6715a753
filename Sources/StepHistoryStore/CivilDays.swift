// Civil dates (proleptic Gregorian, after Howard Hinnant's algorithms): day numbers (days since
// 1970-01-01) and `YYYY-MM-DD`, for the step history and the policy.

/// Days since 1970-01-01 for a civil date.
package func daysFromCivil(year: Int64, month: Int64, day: Int64) -> Int64 {
    let y = month <= 2 ? year - 1 : year
    let era = (y >= 0 ? y : y - 399) / 400
    let yoe = y - era * 400
    let mp = (month + 9) % 12
    let doy = (153 * mp + 2) / 5 + day - 1
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
    return era * 146_097 + doe - 719_468
}

/// The civil date of a day number (days since 1970-01-01).
package func civilFromDays(_ days: Int64) -> (year: Int64, month: Int64, day: Int64) {
    let z = days + 719_468
    let era = (z >= 0 ? z : z - 146_096) / 146_097
    let doe = z - era * 146_097
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
    let mp = (5 * doy + 2) / 153
    let day = doy - (153 * mp + 2) / 5 + 1
    let month = mp < 10 ? mp + 3 : mp - 9
    return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
}

package func floorDiv(_ a: Int64, _ b: Int64) -> Int64 {
    let q = a / b
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q
}

/// 0 = Sunday … 6 = Saturday.
package func weekday(ofDay days: Int64) -> Int {
    Int(((days + 4) % 7 + 7) % 7)
}

package func twoDigits(_ n: Int64) -> String { n < 10 ? "0\(n)" : "\(n)" }

/// `YYYY-MM-DD` for a day number.
package func formatDay(_ days: Int64) -> String {
    let (y, m, d) = civilFromDays(days)
    let year = String(y)
    return String(repeating: "0", count: max(0, 4 - year.count)) + year + "-" + twoDigits(m) + "-"
        + twoDigits(d)
}

/// Parses `YYYY-MM-DD` to a day number.
package func parseDay(_ text: Substring) -> Int64? {
    let parts = text.split(separator: "-", omittingEmptySubsequences: false)
    guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
        let y = Int64(parts[0]), let m = Int64(parts[1]), let d = Int64(parts[2]),
        (1...12).contains(m), (1...31).contains(d)
    else { return nil }
    let days = daysFromCivil(year: y, month: m, day: d)
    let back = civilFromDays(days)
    guard back.month == m, back.day == d else { return nil }
    return days
}
