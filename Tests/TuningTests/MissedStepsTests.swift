import Foundation
import StepGateTestSupport
import Testing

@testable import Tuning

/// Which true steps a detector counted: counted step times matched to per-step truth, and the
/// misses told apart by where in the walk they fall.
@Suite("Missed steps by phase of the walk")
struct MissedStepsTests {
    static func seconds(_ values: [Double]) -> [Int64] { values.map { Int64(($0 * 1e9).rounded()) } }

    @Test func eachCountedStepMatchesAtMostOneTrueStepAfterTheLag() {
        let truth = Self.seconds([1.0, 1.5, 2.0, 2.5, 3.0])
        // 0.1 s late throughout; the step at 1.5 missed, two counted near 2.5, one far off.
        let counted = Self.seconds([1.1, 2.1, 2.55, 2.65, 3.1, 4.5])
        let lag = StepMatch.lag(detected: counted, truth: truth)
        #expect(lag == 100_000_000)
        #expect(
            StepMatch.matchedTruth(detected: counted.map { $0 - lag }, truth: truth, tolerance: 250_000_000)
                == [true, false, true, true, true])
        // Without the lag taken out, a tight tolerance misses all but one.
        #expect(
            StepMatch.matchedTruth(detected: counted, truth: truth, tolerance: 50_000_000)
                == [false, false, false, true, false])
        #expect(StepMatch.lag(detected: [], truth: truth) == 0)
    }

    @Test func phasesAreTheStartTheTurnTheStopAndAfterTheEnd() {
        let truth = Self.seconds((0..<14).map { 1 + Double($0) * 0.5 })  // 1.0 … 7.5
        let landmarks = WalkLandmarks(turn: 3_900_000_000...4_600_000_000, end: 6_600_000_000)
        #expect(
            landmarks.phases(of: truth) == [
                .start, .start, .start, .middle, .middle, .middle, .turn, .turn, .middle, .stop, .stop,
                .stop, .after, .after,
            ])
        #expect(
            WalkLandmarks().phases(of: Array(truth.prefix(7)))
                == [.start, .start, .start, .middle, .stop, .stop, .stop])
        let row = MissedSteps(
            name: "a", truth: truth, counted: Array(truth.prefix(11)), landmarks: landmarks,
            tolerance: 200_000_000)
        #expect(row.missed == [.stop: 1, .after: 2])
        #expect(row.steps == [.start: 3, .middle: 4, .turn: 2, .stop: 3, .after: 2])
        #expect(row.extra == 0)
    }

    @Test func landmarksComeFromADetailFileBesideTheManifest() throws {
        let folder = try Fixtures.temporaryFolder().path
        let manifest = folder + "/manifest.csv"
        try "path,kind,truth_steps\na.csv,walk,3\n".write(toFile: manifest, atomically: true, encoding: .utf8)
        #expect(try WalkLandmarks.read(besideManifest: manifest).isEmpty, "no detail.csv")
        try "path,trial_end_s,uturn_start_s,uturn_end_s\na.csv,20.5,10.00,11.5\n".write(
            toFile: folder + "/detail.csv", atomically: true, encoding: .utf8)
        #expect(
            try WalkLandmarks.read(besideManifest: manifest)
                == ["a.csv": WalkLandmarks(turn: 10_000_000_000...11_500_000_000, end: 20_500_000_000)])
        try "path,trial_end_s,uturn_start_s,uturn_end_s\na.csv,20.5,12,11.5\n".write(
            toFile: folder + "/detail.csv", atomically: true, encoding: .utf8)
        #expect(
            throws: LabelledSetError(
                path: folder + "/detail.csv", line: 2, message: "the U-turn ends before it starts")
        ) { try WalkLandmarks.read(besideManifest: manifest) }
        try "path,trial_end_s\na.csv,soon\n".write(
            toFile: folder + "/detail.csv", atomically: true, encoding: .utf8)
        #expect(
            throws: LabelledSetError(
                path: folder + "/detail.csv", line: 2,
                message: "column 'trial_end_s': expected seconds ≥ 0, found 'soon'")
        ) { try WalkLandmarks.read(besideManifest: manifest) }
    }
}
