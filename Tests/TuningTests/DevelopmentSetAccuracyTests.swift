import Foundation
import SensorInput
import StepDetection
import StepGateTestSupport
import Testing

@testable import Tuning

/// Accuracy of the default detector on the labelled development recordings in
/// `../shared/data`, against the product targets: walks MAPE ≤ 3 %, every placement ≤ 6 %,
/// ≤ 10 false steps per hour on no-walk logs, long wrist walks within 3 % (in-sample: the
/// defaults were tuned on this set; held-out figures come from `stepgate tune`).
@Suite(.enabled(if: Fixtures.sharedDataAvailable, "../shared/data is not present"))
struct DevelopmentSetAccuracyTests {
    static func evaluate() throws -> [EvaluationResult] {
        let manifest = Fixtures.sharedData.appendingPathComponent("manifest.csv")
        let recordings = try LabelledSet.manifest(
            text: String(contentsOf: manifest, encoding: .utf8), path: manifest.path)
        #expect(recordings.count == 74)
        var results: [EvaluationResult] = []
        for recording in recordings {
            let summary = try countSteps(
                inFile: recording.path, options: RecordingReader.Options(format: recording.format))
            results.append(
                EvaluationResult(
                    recording: recording, counted: summary.steps, hours: summary.duration / 3600,
                    samples: summary.samples))
        }
        return results
    }

    @Test func defaultDetectorMeetsTheAccuracyTargets() throws {
        let results = try Self.evaluate()
        let summary = EvaluationSummary(results)
        let mape = try #require(summary.walkMAPE)
        let falsePerHour = try #require(summary.falseStepsPerHour)
        #expect(mape <= 3, "walks MAPE \(mape) %")
        #expect(falsePerHour <= 10, "false steps per hour \(falsePerHour)")
        for placement in summary.placements {
            #expect(placement.mape <= 6, "\(placement.placement): \(placement.mape) %")
        }
        let long = results.filter { $0.recording.truth >= 3000 }
        #expect(long.count == 2)
        for result in long {
            let error = abs(try #require(result.percentError))
            #expect(error <= 3, "\(result.recording.name): \(error) %")
        }
    }
}
