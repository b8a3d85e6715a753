import Foundation
import StepDetection
import StepGateTestSupport
import Testing

@testable import Tuning

/// Per-step truth listed in a `steps.csv` beside the recordings (the ipol-waist set's form):
/// each step's time on the recording's own clock, so bouts can be cut with their starts, turns
/// and stops and counted exactly.
@Suite("Per-step truth from steps.csv")
struct PerStepTruthTests {
    @Test func stepsListedForARecordingAreItsStepTimes() throws {
        let folder = try Fixtures.temporaryFolder().path
        try "time_s,x_g,y_g,z_g\n0.00,0,0,1\n0.01,0,0,1\n".write(
            toFile: folder + "/a.csv", atomically: true, encoding: .utf8)
        try "path,step_time_s\na.csv,1.50\nb.csv,2.0\na.csv,0.75\n".write(
            toFile: folder + "/steps.csv", atomically: true, encoding: .utf8)
        #expect(try StepTruth.listed(for: folder + "/a.csv") == [750_000_000, 1_500_000_000])
        #expect(try StepTruth.listed(for: folder + "/c.csv") == nil)
        try "path,step_time_s\r\na.csv,1.50\r\na.csv,0.75\r\n".write(
            toFile: folder + "/steps.csv", atomically: true, encoding: .utf8)
        #expect(try StepTruth.listed(for: folder + "/a.csv") == [750_000_000, 1_500_000_000], "CRLF lines")
        try "path,step_time_s\na.csv,1.50\nb.csv,2.0\na.csv,0.75\n".write(
            toFile: folder + "/steps.csv", atomically: true, encoding: .utf8)
        let recording = try TuningRecording.load(
            LabelledRecording(
                path: folder + "/a.csv", name: "a.csv", format: nil, placement: "waist", kind: .walk, truth: 2
            ))
        #expect(recording.stepTimes == [750_000_000, 1_500_000_000])
        try "path,step_time_s\na.csv,soon\n".write(
            toFile: folder + "/steps.csv", atomically: true, encoding: .utf8)
        #expect(
            throws: LabelledSetError(
                path: folder + "/steps.csv", line: 2, message: "expected FILE,SECONDS, found 'a.csv,soon'")
        ) {
            try StepTruth.listed(for: folder + "/a.csv")
        }
    }

    /// Every ipol-waist trial gets its annotated steps, as many as the manifest's truth, all
    /// within the recording.
    @Test(.enabled(if: Fixtures.sharedDataAvailable, "../shared/data is not present"))
    func everyIpolTrialHasItsSteps() throws {
        let manifest = Fixtures.sharedData.appendingPathComponent("ipol-waist/manifest.csv")
        try #require(
            FileManager.default.fileExists(atPath: manifest.path), "no ipol-waist set in ../shared/data")
        let recordings = try LabelledSet.manifest(
            text: String(contentsOf: manifest, encoding: .utf8), path: manifest.path)
        #expect(recordings.count == 74)
        var steps = 0
        for labelled in recordings {
            let recording = try TuningRecording.load(labelled)
            let times = try #require(recording.stepTimes, "\(labelled.name) has no step times")
            #expect(times.count == labelled.truth, "\(labelled.name)")
            let first = try #require(recording.samples.first).timestamp
            let last = try #require(recording.samples.last).timestamp
            #expect(times.allSatisfy { $0 >= first && $0 <= last }, "\(labelled.name)")
            steps += times.count
        }
        #expect(steps == 2533)
    }
}
