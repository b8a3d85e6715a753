import Counting
import Foundation
import SensorInput
import StepDetection
import StepGateTestSupport
import Testing

@testable import Tuning

@Suite("Labelled sets")
struct LabelledSetTests {
    @Test func parsesAManifestWithCRLFAndABOM() throws {
        let text =
            "\u{FEFF}path,format,placement,device,kind,truth_steps,truth_source\r\n"
            + "a/walk.csv,bangle,wrist,Bangle.js,walk,100,counted\r\n"
            + "b.csv,oxford-ns,hand,Pixel,nowalk,0,\"protocol, by design\"\r\n\r\n"
        let recordings = try LabelledSet.manifest(text: text, path: "/data/set/manifest.csv")
        #expect(recordings.count == 2)
        #expect(recordings[0].path == "/data/set/a/walk.csv")
        #expect(recordings[0].name == "a/walk.csv")
        #expect(recordings[0].format == .bangle)
        #expect(recordings[0].kind == .walk)
        #expect(recordings[0].truth == 100)
        #expect(recordings[1].format == .oxford)
        #expect(recordings[1].placement == "hand")
        #expect(recordings[1].kind == .nowalk)
    }

    @Test func optionalColumnsMayBeAbsent() throws {
        let recordings = try LabelledSet.manifest(
            text: "path,kind,truth_steps\nx.csv,mixed,66\n", path: "m.csv")
        var expected = LabelledRecording(
            path: "x.csv", name: "x.csv", format: nil, placement: "unknown", kind: .mixed, truth: 66)
        expected.origin = ("m.csv", 2)
        #expect(recordings == [expected])
    }

    @Test(arguments: [
        ("path,kind\nx.csv,walk\n", 1, "missing column 'truth_steps'"),
        (
            "path,kind,truth_steps\nx.csv,run,5\n", 2,
            "column 'kind': expected walk, mixed or nowalk, found 'run'"
        ),
        (
            "path,kind,truth_steps\nx.csv,walk,-5\n", 2,
            "column 'truth_steps': expected a whole number ≥ 0, found '-5'"
        ),
        ("path,kind,truth_steps\n,walk,5\n", 2, "column 'path': expected a file path"),
        ("path,format,kind,truth_steps\nx.csv,xls,walk,5\n", 2, "column 'format'"),
        ("", 1, "expected a header"),
    ])
    func rejectsBadManifestsWithTheLine(text: String, line: Int, message: String) {
        let error = #expect(throws: LabelledSetError.self) {
            try LabelledSet.manifest(text: text, path: "m.csv")
        }
        #expect(error?.line == line)
        #expect(error?.description.contains(message) == true, "\(String(describing: error))")
    }

    @Test(arguments: [
        ("100_3.csv", 100), ("walk-1834.csv", 1834), ("0_HughB-drive-29min-0.csv", 0),
        ("HughB-drive-36min-0.csv", 0),
        ("dir/150.csv", 150), ("walk-wrist-100.csv", 100), ("3058.csv", 3058),
    ])
    func readsTheTruthFromFileNames(name: String, truth: Int) {
        #expect(LabelledSet.truth(fromFileName: name) == truth)
    }

    @Test func aFileNameWithoutACountIsAnError() {
        #expect(LabelledSet.truth(fromFileName: "manifest.csv") == nil)
        #expect(throws: LabelledSetError.self) { try LabelledSet.recording(fileNamed: "/x/walk.csv") }
    }
}

@Suite("Scoring")
struct EvaluationTests {
    private func result(
        _ kind: LabelledRecording.Kind, placement: String = "hand", truth: Int, counted: Int,
        hours: Double = 0.1
    )
        -> EvaluationResult
    {
        EvaluationResult(
            recording: LabelledRecording(
                path: "p", name: "p", format: nil, placement: placement, kind: kind, truth: truth),
            counted: counted, hours: hours, samples: 10)
    }

    @Test func computesTheThreeFigures() throws {
        let summary = EvaluationSummary([
            result(.walk, placement: "hand", truth: 100, counted: 90),  // 10 %
            result(.walk, placement: "hand", truth: 200, counted: 210),  // 5 %
            result(.walk, placement: "wrist", truth: 100, counted: 100),  // 0 %
            result(.nowalk, truth: 0, counted: 6, hours: 1),
            result(.nowalk, truth: 3, counted: 2, hours: 2),  // fewer than the truth: no false steps
            result(.mixed, truth: 50, counted: 60),  // 20 %
        ])
        #expect(abs(try #require(summary.walkMAPE) - 5) < 1e-9)
        #expect(summary.placements.map(\.placement) == ["hand", "wrist"])
        #expect(abs(summary.placements[0].mape - 7.5) < 1e-9)
        #expect(summary.falseSteps == 6)
        #expect(abs(try #require(summary.falseStepsPerHour) - 2) < 1e-9)
        #expect(abs(try #require(summary.mixedError) - 20) < 1e-9)
    }

    @Test func emptyKindsGiveNoFigure() {
        let summary = EvaluationSummary([result(.walk, truth: 10, counted: 10)])
        #expect(summary.falseStepsPerHour == nil)
        #expect(summary.mixedError == nil)
        #expect(summary.walkMAPE == 0)
    }
}

@Suite("Replaying files")
struct RecordingRunTests {
    @Test func countsTheBundledSampleWalk() throws {
        let path = Fixtures.samples.appendingPathComponent("walk-wrist-100.csv").path
        var events: [Int] = []
        let summary = try countSteps(inFile: path, onStep: { events.append($0.count) })
        #expect(summary.format == .bangle)
        #expect(summary.samples == 988)
        #expect(abs(summary.steps - 100) <= 3)
        #expect(events == Array(1...summary.steps))
        #expect(abs(summary.meanRate - 12.5) < 0.2)
    }

    @Test func theSyntheticWalkIsDeterministic() {
        let a = SyntheticWalk().samples(steps: 50)
        let b = SyntheticWalk().samples(steps: 50)
        #expect(a == b)
        #expect(a.count == Int(50 / 1.8 * 100))
    }
}
