import Counting
import Foundation
import SensorInput
import StepDetection
import StepGateTestSupport
import Testing

@testable import StepGateDaemon

/// The one sample → detector → ledger path that `stepgate run` and the daemon share.
@Suite("Step counting") struct StepCountingTests {
    let walk = Fixtures.samples.appendingPathComponent("walk-wrist-100.csv").path

    @Test("a recording read as a live source counts what the detector counts reading the file")
    func aRecordingSourceLosesNoSample() async throws {
        var reader = try RecordingReader(path: walk)
        var detector = StepDetector()
        var samples = 0
        while let sample = try reader.next() {
            detector.process(sample) { _ in }
            samples += 1
        }
        var counter = StepCounter(configuration: DetectorConfiguration(), ledger: nil)
        var seen = 0
        try await countSteps(from: RecordingSource(path: walk, speed: 1000), into: &counter, log: Logger()) {
            _, events, _ in
            seen += events.count
            return true
        }
        #expect(counter.samples == samples)
        #expect(counter.steps == detector.count)
        #expect(seen == detector.count)
        #expect(counter.today == detector.count, "without a ledger, today is this session")
    }

    @Test("the ledger adds the session to the day's count and is saved when counting ends")
    func theLedgerIsSavedAtTheEnd() async throws {
        let folder = try Fixtures.temporaryFolder()
        let path = folder.path + "/steps.json"
        let ledger = StepLedger(
            path: path, saveInterval: .seconds(3600), warn: { Issue.record("unexpected warning: \($0)") })
        ledger.add(40)
        var counter = StepCounter(configuration: DetectorConfiguration(), ledger: ledger)
        try await countSteps(from: RecordingSource(path: walk, speed: 1000), into: &counter, log: Logger()) {
            _, _, _ in true
        }
        #expect(counter.today == 40 + counter.steps)
        let saved = StepLedger(path: path, warn: { Issue.record("unexpected warning: \($0)") })
        #expect(saved.steps == 40 + counter.steps)
    }

    @Test("the body can stop the count early, and the ledger is still saved")
    func stoppingEarlySaves() async throws {
        let folder = try Fixtures.temporaryFolder()
        let path = folder.path + "/steps.json"
        let ledger = StepLedger(
            path: path, saveInterval: .seconds(3600), warn: { Issue.record("unexpected warning: \($0)") })
        var counter = StepCounter(configuration: DetectorConfiguration(), ledger: ledger)
        try await countSteps(from: RecordingSource(path: walk, speed: 1000), into: &counter, log: Logger()) {
            _, _, counter in counter.steps < 20
        }
        #expect(counter.steps == 20)
        #expect(StepLedger(path: path, warn: { _ in }).steps == 20)
    }

    @Test("a recording that cannot be read is an error when it is opened, naming the file")
    func aMissingRecordingIsAnError() {
        #expect(throws: RecordingError.self) { try RecordingSource(path: "/nonexistent/walk.csv") }
    }
}
