import Counting
import Foundation
import StepGateTestSupport
import StepHistoryStore
import Testing
import UnlockPolicy

@testable import StepGateCLI
@testable import StepGateDaemon

@Suite("Step ledger and history command")
struct StepLedgerTests {
    @Test(arguments: [0.0, 1_764_374_399, 1_764_374_400, 1_711_846_800, 1_730_595_600, 4_102_444_799])
    func theSystemClockMatchesTheCalendar(seconds: Double) {
        let date = Date(timeIntervalSince1970: seconds)
        let c = Calendar.current.dateComponents([.year, .month, .day, .hour], from: date)
        let expected = String(format: "%04d-%02d-%02d", c.year ?? 0, c.month ?? 0, c.day ?? 0)
        let (day, hour) = LocalClock.system.dayAndHour(date)
        #expect(StepHistory.dayLabel(day) == expected)
        #expect(hour == c.hour)
    }

    @Test func aRestartContinuesTheDayAndANewDayStartsAtZero() throws {
        let folder = try TemporaryFolders.make("ledger")
        defer { TemporaryFolders.remove(folder) }
        let path = folder.appendingPathComponent("steps.json").path
        let noon = Date(timeIntervalSince1970: 1_764_417_600)
        let ledger = StepLedger(path: path, clock: .utc, warn: { Issue.record("unexpected warning: \($0)") })
        ledger.add(120, now: noon)
        try ledger.save()
        let again = StepLedger(path: path, clock: .utc, warn: { _ in })
        #expect(again.steps(at: noon.addingTimeInterval(60)) == 120)
        #expect(again.steps(at: noon.addingTimeInterval(86_400)) == 0)
        again.add(30, now: noon.addingTimeInterval(86_400))
        #expect(again.steps(at: noon.addingTimeInterval(86_400)) == 30)
        #expect(again.snapshot.history.total == 150)
        try "not json".write(toFile: path, atomically: true, encoding: .utf8)
        var warned = false
        let broken = StepLedger(path: path, clock: .utc, warn: { _ in warned = true })
        #expect(broken.steps(at: noon) == 0)
        #expect(warned)
    }

    @Test func theDaemonsAnswerCarriesTheDaysAskedFor() throws {
        let folder = try TemporaryFolders.make("ledger")
        defer { TemporaryFolders.remove(folder) }
        let ledger = StepLedger(
            path: folder.appendingPathComponent("steps.json").path, clock: .utc, warn: { _ in })
        let now = Date(timeIntervalSince1970: 1_764_417_600)  // 2025-11-29T12:00Z
        for back in 0..<10 { ledger.add(100 + back, now: now.addingTimeInterval(-Double(back) * 86_400)) }
        let text = ledger.historyJSON(days: 3, goal: 500, now: now)
        let answer = try ControlAnswer(line: text)
        let reply = try answer.decode(HistoryReply.self)
        #expect(reply.today == "2025-11-29")
        #expect(reply.hour == 12)
        let report = try HistoryReport(answer: answer, days: 3, grouping: .day, goal: nil)
        #expect(report.buckets.map(\.steps) == [102, 101, 100])
        #expect(report.goal == 500)
        let days = ledger.lastDays(now: now)
        #expect(days.count == 7)
        #expect(days.last == StatusReply.Day(day: "2025-11-29", steps: 100))
        #expect(days.first?.steps == 106)
    }

    @Test func theReportDrawsBarsTheGoalAndToday() throws {
        var history = StepHistory()
        let today = try #require(StepHistory.day(from: "2026-12-01"))
        for (back, steps) in [(2, 8000), (1, 2000), (0, 4000)] {
            history.add(
                steps, at: Date(timeIntervalSince1970: Double(today - Int64(back)) * 86_400 + 9 * 3600),
                clock: .utc)
        }
        let report = HistoryReport(
            history: history, zone: "UTC", today: today, hour: 10, days: 3, grouping: .day, goal: 4000)
        let chart = report.chart(width: 40)
        let lines = chart.split(separator: "\n").map(String.init)
        #expect(lines[0] == "steps per day, 2026-11-29 to 2026-12-01 (UTC); goal 4000 steps (|)")
        #expect(
            lines[1] == "Sun 2026-11-29  " + String(repeating: "█", count: 20) + "|"
                + String(repeating: "█", count: 19) + " 8000 ✓")
        #expect(
            lines[2] == "Mon 2026-11-30  " + String(repeating: "█", count: 10)
                + String(repeating: " ", count: 10) + "|" + String(repeating: " ", count: 19) + " 2000")
        #expect(lines[3].hasSuffix(" 4000 ✓  ← today"))
        #expect(lines[4] == "total 14000 steps, 4666 per day")
        #expect(report.csv() == "period,steps\n2026-11-29,8000\n2026-11-30,2000\n2026-12-01,4000\n")
        #expect(report.json().contains(#""buckets":[{"period":"2026-11-29","steps":8000,"current":false}"#))
        let svg = report.svg()
        #expect(svg.contains("<svg") && svg.contains("stroke-dasharray") && svg.contains("#e07b00"))
        #expect(svg.components(separatedBy: "<rect").count - 1 >= 3 + 2)
    }
}
