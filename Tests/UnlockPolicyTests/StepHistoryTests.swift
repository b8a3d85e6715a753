import Foundation
import StepHistoryStore
import Testing
import TypedJSON
import UnlockPolicy

private func at(_ iso: String) -> Date {
    guard let date = ISO8601DateFormatter().date(from: iso) else { fatalError("bad date \(iso)") }
    return date
}

private func day(_ label: String) -> Int64 {
    guard let day = StepHistory.day(from: label) else { fatalError("bad day \(label)") }
    return day
}

private let berlin = LocalClock(zone: "Europe/Berlin")!
private let newYork = LocalClock(zone: "America/New_York")!

@Suite("Step history")
struct StepHistoryTests {
    /// One step a minute through a whole UTC span, so every local hour gets 60 per real hour.
    private func walkEveryMinute(_ history: inout StepHistory, from: String, minutes: Int, clock: LocalClock)
    {
        let start = at(from)
        for minute in 0..<minutes {
            history.add(1, at: start.addingTimeInterval(Double(minute) * 60), clock: clock)
        }
    }

    @Test func aSpringDSTDayHas23HoursAndTheSkippedHourStaysEmpty() {
        var history = StepHistory()
        // 2026-03-29 in Berlin: 02:00 CET becomes 03:00 CEST. Local midnight to midnight is
        // 2026-03-28T23:00Z to 2026-03-29T22:00Z.
        walkEveryMinute(&history, from: "2026-03-28T22:00:00Z", minutes: 25 * 60, clock: berlin)
        #expect(history.steps(onDay: day("2026-03-29")) == 23 * 60)
        #expect(history.hours(onDay: day("2026-03-29"))[2] == 0)
        #expect(history.hours(onDay: day("2026-03-29"))[1] == 60)
        #expect(history.hours(onDay: day("2026-03-29"))[3] == 60)
        #expect(history.steps(onDay: day("2026-03-28")) == 60)
        #expect(history.steps(onDay: day("2026-03-30")) == 60)
        #expect(history.total == 25 * 60)
    }

    @Test func anAutumnDSTDayHas25HoursAndTheRepeatedHourAddsUp() {
        var history = StepHistory()
        // 2026-10-25 in Berlin: 03:00 CEST becomes 02:00 CET; the day runs 22:00Z to 23:00Z next.
        walkEveryMinute(&history, from: "2026-10-24T21:00:00Z", minutes: 27 * 60, clock: berlin)
        #expect(history.steps(onDay: day("2026-10-25")) == 25 * 60)
        #expect(history.hours(onDay: day("2026-10-25"))[2] == 120)
        #expect(history.steps(onDay: day("2026-10-24")) == 60)
        #expect(history.steps(onDay: day("2026-10-26")) == 60)
    }

    @Test func aZoneChangeKeepsPastHoursAndCountsOnInTheNewZone() {
        var history = StepHistory()
        // 23:30 in Berlin on 1 June.
        history.add(10, at: at("2026-06-01T21:30:00Z"), clock: berlin)
        // The zone becomes New York: an hour later it is 18:30 on 1 June there.
        history.add(20, at: at("2026-06-01T22:30:00Z"), clock: newYork)
        // 23:30 in New York, already 2 June in Berlin: still 1 June in the zone in force.
        history.add(5, at: at("2026-06-02T03:30:00Z"), clock: newYork)
        let june1 = history.hours(onDay: day("2026-06-01"))
        #expect(june1[23] == 15)
        #expect(june1[18] == 20)
        #expect(history.steps(onDay: day("2026-06-01")) == 35)
        #expect(history.steps(onDay: day("2026-06-02")) == 0)
        // Today follows the zone asked about.
        #expect(history.today(at: at("2026-06-02T03:30:00Z"), clock: newYork) == 35)
        #expect(history.today(at: at("2026-06-02T03:30:00Z"), clock: berlin) == 0)
    }

    @Test func aClockSetBackLosesNothingAndAJumpYearsAheadDoesNotWipeTheHistory() {
        var history = StepHistory()
        for offset in 0..<30 {
            history.add(
                1000 + offset, at: at("2026-05-01T10:15:00Z").addingTimeInterval(Double(offset) * 86_400),
                clock: .utc)
        }
        let before = history.total
        // Set back two hours: later steps go to the earlier hour, none lost or doubled.
        history.add(100, at: at("2026-05-30T12:00:00Z"), clock: .utc)
        history.add(50, at: at("2026-05-30T10:20:00Z"), clock: .utc)
        #expect(history.hours(onDay: day("2026-05-30"))[10] == 1029 + 50)
        #expect(history.hours(onDay: day("2026-05-30"))[12] == 100)
        // A clock that jumps three years ahead and back costs one bogus day, nothing else.
        history.add(7, at: at("2029-05-30T10:20:00Z"), clock: .utc)
        history.add(3, at: at("2026-05-30T10:21:00Z"), clock: .utc)
        #expect(history.days.count == 31)
        #expect(history.total == before + 100 + 50 + 7 + 3)
        #expect(history.steps(onDay: day("2026-05-01")) == 1000)
    }

    @Test func fourHundredDaysAreKeptAndTheFullestFileStaysUnder100KB() throws {
        var history = StepHistory()
        let start = at("2025-01-01T00:30:00Z")
        for dayIndex in 0..<430 {
            for hour in 6..<22 {
                let date = start.addingTimeInterval(Double(dayIndex) * 86_400 + Double(hour) * 3600)
                history.add(dayIndex * 10 + hour, at: date, clock: berlin)
            }
        }
        #expect(history.days.count == StepHistory.retainedDays)
        let newest = berlin.day(start.addingTimeInterval(429 * 86_400 + 21 * 3600))
        #expect(history.days.keys.min() == newest - 399)
        let bytes = history.encoded()
        #expect(try StepHistory.decode(bytes) == history)
        // Every hour of every day at the most an hour may hold.
        var full = StepHistory()
        for dayIndex in 0..<500 {
            for hour in 0..<24 {
                full.add(
                    StepHistory.maximumPerHour * 2,
                    at: start.addingTimeInterval(Double(dayIndex) * 86_400 + Double(hour) * 3600), clock: .utc
                )
            }
        }
        #expect(full.days.count == 400)
        #expect(full.encoded().count < 100_000, "\(full.encoded().count) bytes")
        #expect(try StepHistory.decode(full.encoded()) == full)
    }

    @Test func migratesTheSingleDayLedger() throws {
        let history = try StepHistory.decode(
            Array(#"{"version":1,"day":"2026-11-29","steps":1234}"#.utf8), legacyHour: 14)
        #expect(history.steps(onDay: day("2026-11-29")) == 1234)
        #expect(history.hours(onDay: day("2026-11-29"))[14] == 1234)
        #expect(history.days.count == 1)
    }

    @Test(arguments: [
        (
            #"{"version":2,"days":{"2026-11-29":[1,2]}}"#,
            "days.2026-11-29: expected 24 hourly counts, found 2"
        ),
        (#"{"version":2,"days":{"2026-02-30":[]}}"#, "days.2026-02-30: expected a date"),
        (#"{"version":3,"days":{}}"#, "version: history version 3 is newer"),
        (#"{"version":2,"days":{},"extra":1}"#, "extra: unknown key"),
        (#"{"version":1,"day":"2026-11-29","steps":-4}"#, "steps: expected an integer of at least 0"),
        (
            #"{"version":2,"days":{"2026-11-29":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,100000]}}"#,
            "days.2026-11-29[23]: expected at most 99999"
        ),
        ("[]", "expected an object"),
    ])
    func badFilesAreRejectedWithThePath(text: String, message: String) {
        let error = #expect(throws: JSONPathError.self) { try StepHistory.decode(Array(text.utf8)) }
        #expect(error?.description.contains(message) == true, "\(error?.description ?? "no error")")
    }

    @Test func bucketsByHourDayAndWeekStartingOnMonday() {
        var history = StepHistory()
        // Monday 30 November 2026 .. Sunday 6 December, 100 × (weekday index + 1) at 09:xx.
        for offset in 0..<7 {
            history.add(
                100 * (offset + 1),
                at: at("2026-11-30T09:10:00Z").addingTimeInterval(Double(offset) * 86_400),
                clock: .utc)
        }
        let today = day("2026-12-06")
        let days = history.buckets(dayCount: 8, today: today, by: .day)
        #expect(days.map(\.steps) == [0, 100, 200, 300, 400, 500, 600, 700])
        #expect(days.last?.isCurrent == true && days.filter(\.isCurrent).count == 1)
        let weeks = history.buckets(dayCount: 8, today: today, by: .week)
        #expect(weeks.map(\.label) == ["2026-11-23", "2026-11-30"])
        #expect(weeks.map(\.steps) == [0, 2800])
        let hours = history.buckets(dayCount: 1, today: today, currentHour: 9, by: .hour)
        #expect(hours.count == 24)
        #expect(hours[9].steps == 700 && hours[9].isCurrent && hours[9].label == "2026-12-06T09")
    }
}
