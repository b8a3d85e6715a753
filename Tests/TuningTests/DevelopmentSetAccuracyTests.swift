import Foundation
import SensorInput
import StepDetection
import StepGateTestSupport
import Testing

@testable import Tuning

/// Accuracy of the default detector on the labelled development recordings in
/// `../shared/data`: a regression guard at the figures the current detector reaches (see the
/// README's accuracy table), not the product targets, which are tracked in `stepgate eval`.
@Suite(.enabled(if: Fixtures.sharedDataAvailable, "../shared/data is not present"))
struct DevelopmentSetAccuracyTests {
    static func evaluate() throws -> EvaluationSummary {
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
        return EvaluationSummary(results)
    }

    @Test func defaultDetectorHoldsItsMeasuredAccuracy() throws {
        let summary = try Self.evaluate()
        let mape = try #require(summary.walkMAPE)
        let falsePerHour = try #require(summary.falseStepsPerHour)
        #expect(mape <= 6.5, "walks MAPE \(mape) %")
        #expect(falsePerHour <= 26, "false steps per hour \(falsePerHour)")
        for placement in summary.placements where placement.placement != "wrist" {
            #expect(placement.mape <= 6, "\(placement.placement): \(placement.mape) %")
        }
    }
}
