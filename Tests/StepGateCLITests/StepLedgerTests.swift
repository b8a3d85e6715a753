import Foundation
import StepGateTestSupport
import Testing

@testable import StepGateCLI
@testable import StepGateDaemon

@Suite("Step ledger")
struct StepLedgerTests {
    @Test(arguments: [0.0, 1_764_374_399, 1_764_374_400, 1_711_846_800, 1_730_595_600, 4_102_444_799])
    func theLocalDayMatchesTheCalendar(seconds: Double) {
        let date = Date(timeIntervalSince1970: seconds)
        let c = Calendar.current.dateComponents([.year, .month, .day], from: date)
        let expected = String(format: "%04d-%02d-%02d", c.year ?? 0, c.month ?? 0, c.day ?? 0)
        #expect(StepLedger.today(date) == expected)
    }

    @Test func aRestartContinuesTheDayAndANewDayStartsAtZero() throws {
        let folder = try TemporaryFolders.make("ledger")
        defer { TemporaryFolders.remove(folder) }
        let path = folder.appendingPathComponent("steps.json").path
        let noon = Date(timeIntervalSince1970: 1_764_417_600)
        var ledger = StepLedger(path: path, now: noon, warn: { Issue.record("unexpected warning: \($0)") })
        ledger.add(120, now: noon)
        try ledger.save()
        let again = StepLedger(path: path, now: noon.addingTimeInterval(60), warn: { _ in })
        #expect(again.steps == 120)
        let tomorrow = StepLedger(path: path, now: noon.addingTimeInterval(86_400), warn: { _ in })
        #expect(tomorrow.steps == 0)
        try "not json".write(toFile: path, atomically: true, encoding: .utf8)
        var warned = false
        let broken = StepLedger(path: path, now: noon, warn: { _ in warned = true })
        #expect(broken.steps == 0)
        #expect(warned)
    }
}
