import Foundation
import StepDetection
import StepGateTestSupport
import Testing

@testable import Tuning

/// A manifest row may name a stretch of its file (`start_s`, `end_s`), so the non-walking
/// stretches of a day log can be labelled without cutting the file; the wrist no-walk
/// development set (`Tests/WristNoWalk/manifest.csv`, paths into `../shared/data`) is built so.
@Suite("Stretches of a file and the wrist no-walk set")
struct WristNoWalkSetTests {
    @Test func aStretchIsTheSamplesBetweenItsTimesFromTheFirstSample() throws {
        let folder = try Fixtures.temporaryFolder().path
        // 10 s at 10 Hz, the clock starting at 100 s.
        let rows = (0..<100).map { "\(100 + Double($0) / 10),0,0,1" }
        try ("time_s,x_g,y_g,z_g\n" + rows.joined(separator: "\n") + "\n").write(
            toFile: folder + "/day.csv", atomically: true, encoding: .utf8)
        let text = """
            path,kind,truth_steps,start_s,end_s
            day.csv,nowalk,0,2,4.5
            day.csv,nowalk,0,,
            """
        let recordings = try LabelledSet.manifest(text: text, path: folder + "/manifest.csv")
        #expect(recordings.map(\.stretch) == [2...4.5, nil])
        #expect(recordings.map(\.name) == ["day.csv#t=2,4.5", "day.csv"])
        let stretch = try TuningRecording.load(recordings[0])
        #expect(stretch.samples.count == 26)
        #expect(stretch.samples.first?.timestamp == 102_000_000_000)
        #expect(stretch.samples.last?.timestamp == 104_500_000_000)
        #expect(abs(stretch.hours - 2.5 / 3600) < 1e-9)
        #expect(try TuningRecording.load(recordings[1]).samples.count == 100)
        let beyond = try LabelledSet.manifest(
            text: "path,kind,truth_steps,start_s,end_s\nday.csv,nowalk,0,20,30\n",
            path: folder + "/manifest.csv")
        #expect(
            throws: LabelledSetError(
                path: folder + "/manifest.csv", line: 2,
                message: "day.csv#t=20,30: the stretch holds fewer than two samples (the file is 9.9 s long)")
        ) { try TuningRecording.load(beyond[0]) }
    }

    @Test(arguments: [("5", ""), ("", "5"), ("4", "2"), ("-1", "2"), ("a", "2")])
    func aStretchNeedsBothTimesInOrder(start: String, end: String) {
        #expect(
            throws: LabelledSetError(
                path: "m.csv", line: 2,
                message:
                    "columns 'start_s', 'end_s': expected seconds from the file's first sample, 0 ≤ start < end, found '\(start)', '\(end)'"
            )
        ) {
            try LabelledSet.manifest(
                text: "path,kind,truth_steps,start_s,end_s\nx.csv,nowalk,0,\(start),\(end)\n", path: "m.csv")
        }
    }

    static let manifest = Fixtures.packageRoot.appendingPathComponent("Tests/WristNoWalk/manifest.csv")

    /// Every row of the set names a file in `../shared/data` with a stretch inside it, and the
    /// default detector stays within the target of 20 false steps per hour on it.
    @Test(.enabled(if: Fixtures.sharedDataAvailable, "../shared/data is not present"))
    func wristNoWalkSetIsReadableAndWithinTheTarget() throws {
        let recordings = try LabelledSet.manifest(
            text: String(contentsOf: Self.manifest, encoding: .utf8), path: Self.manifest.path)
        #expect(recordings.count == 30)
        #expect(recordings.allSatisfy { $0.kind == .nowalk && $0.placement == "wrist" })
        var results: [EvaluationResult] = []
        for labelled in recordings {
            let recording = try TuningRecording.load(labelled)
            if let stretch = labelled.stretch {
                #expect(
                    abs(recording.hours * 3600 - (stretch.upperBound - stretch.lowerBound)) < 1,
                    "\(labelled.name)")
            }
            results.append(
                recording.result(
                    counted: StepDetector.countSteps(in: recording.samples, input: recording.input)))
        }
        let summary = EvaluationSummary(results)
        #expect(summary.noWalkHours > 5)
        let perHour = try #require(summary.falseStepsPerHour)
        #expect(perHour <= 20, "false steps per hour \(perHour)")
    }
}
