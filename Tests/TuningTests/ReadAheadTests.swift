import Foundation
import SensorInput
import StepDetection
import StepGateTestSupport
import Testing

@testable import Counting
@testable import Tuning

/// Reading a long recording on a thread of its own (`replay`) gives exactly what reading it on
/// the counting thread gives: the same steps at the same times, the same summary, the same error
/// after the same steps.
@Suite("Reading ahead")
struct ReadAheadTests {
    /// A 100 Hz StepGate CSV of `seconds` of synthetic walking (about 37 bytes a sample).
    static func walkFile(_ folder: URL, seconds: Double, name: String = "walk.csv") throws -> String {
        var walk = SyntheticWalk()
        walk.jitter = 0.02
        let samples = walk.samples(duration: seconds, steps: Int(seconds * walk.cadence))
        let path = folder.appendingPathComponent(name).path
        var writer = try StepGateCSVWriter(path: path)
        try writer.write(contentsOf: samples)
        try writer.close()
        return path
    }

    struct Run: Equatable {
        var summary: RecordingSummary?
        var error: RecordingError?
        var steps: [StepEvent] = []
        var first: Int64 = -1
        var progressCalls = 0
    }

    static func run(_ path: String, readAhead: Bool, options: RecordingReader.Options = .init()) -> Run {
        var run = Run()
        do {
            run.summary = try countSteps(
                inFile: path, options: options, progress: { _, _ in run.progressCalls += 1 },
                onFirstSample: { run.first = $0 }, onStep: { run.steps.append($0) }, readAhead: readAhead)
        } catch {
            run.error = error
        }
        return run
    }

    @Test func aLongWalkCountsTheSameReadAheadOrNot() throws {
        try withTemporaryFolder { folder in
            // 2.2 MB, 60,000 samples: 15 batches, the last one partial.
            let path = try Self.walkFile(folder, seconds: 600)
            let size = try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int ?? 0
            #expect(ReadAhead.worthwhile(fileSize: size) == (sysconf(Int32(_SC_NPROCESSORS_ONLN)) > 1))
            let plain = Self.run(path, readAhead: false)
            let ahead = Self.run(path, readAhead: true)
            #expect(plain.error == nil)
            #expect(plain.steps.count > 900)
            #expect(ahead == plain)
        }
    }

    @Test func anErrorComesAfterTheStepsBeforeItAndSkippedRowsAreCounted() throws {
        try withTemporaryFolder { folder in
            let good = try Self.walkFile(folder, seconds: 300)
            var text = try String(contentsOfFile: good, encoding: .utf8)
            var lines = text.split(separator: "\n", omittingEmptySubsequences: false)
            // Two bad rows far into the file (past several batches).
            lines[20_000] = "12.5,oops,0,1"
            lines[27_000] = "13.0,0,0"
            text = lines.joined(separator: "\n")
            let path = folder.appendingPathComponent("bad.csv").path
            try text.write(toFile: path, atomically: true, encoding: .utf8)

            let plain = Self.run(path, readAhead: false)
            let ahead = Self.run(path, readAhead: true)
            #expect(plain.error != nil)
            #expect(plain.error?.description.contains(":20001") == true, "\(String(describing: plain.error))")
            #expect(!plain.steps.isEmpty)
            #expect(ahead == plain)

            let skipping = RecordingReader.Options(skipBadRows: true)
            let plainSkip = Self.run(path, readAhead: false, options: skipping)
            let aheadSkip = Self.run(path, readAhead: true, options: skipping)
            #expect(plainSkip.summary?.skipped.total == 2)
            #expect(aheadSkip == plainSkip)
        }
    }

    @Test func aReaderDroppedBeforeItsEndIsStopped() throws {
        try withTemporaryFolder { folder in
            let path = try Self.walkFile(folder, seconds: 600)
            let reader = try RecordingReader(path: path)
            do {
                // All slots fill and the reading thread waits for a free one; dropping the
                // reader must end that thread (or this test would hang).
                switch ReadAhead.start(reader) {
                case .reading(let ahead):
                    usleep(50_000)
                    _ = consume ahead
                case .notStarted:
                    Issue.record("no reading thread could be started")
                }
            }
        }
    }
}
