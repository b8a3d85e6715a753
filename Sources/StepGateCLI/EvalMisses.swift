import Formatting
import Foundation
import StepDetection
import Tuning

extension Eval {
    /// How near a counted step must come to a true step, after the lag, to be that step.
    static let missTolerance: Int64 = 250_000_000

    /// `--misses`: each recording with per-step truth, its true steps matched to the counted
    /// ones, the missed ones by phase of the walk, and the totals by phase.
    static func missesTable(_ labelled: [LabelledRecording], configuration: DetectorConfiguration)
        async throws -> String
    {
        let loaded = try await Tune.load(labelled, jobs: max(1, ProcessInfo.processInfo.activeProcessorCount))
        var landmarks: [String: [String: WalkLandmarks]] = [:]
        var rows: [MissedSteps] = []
        for recording in loaded {
            guard let truth = recording.stepTimes else { continue }
            let manifest = recording.labelled.origin?.path ?? ""
            if landmarks[manifest] == nil {
                landmarks[manifest] = try WalkLandmarks.read(besideManifest: manifest)
            }
            var detector = StepDetector(configuration: configuration, input: recording.input)
            var counted: [Int64] = []
            detector.process(recording.samples) { counted.append($0.timestamp) }
            counted.sort()
            rows.append(
                MissedSteps(
                    name: recording.labelled.name, truth: truth, counted: counted,
                    landmarks: landmarks[manifest]?[recording.labelled.name] ?? WalkLandmarks(),
                    tolerance: missTolerance))
        }
        guard !rows.isEmpty else {
            throw LabelledSetError(
                path: labelled[0].origin?.path ?? labelled[0].path,
                message: "'--misses' needs recordings with per-step truth (a stepcounter.csv or steps.csv)")
        }
        let phases = WalkPhase.allCases
        let width = min(40, max(9, rows.map(\.name.count).max() ?? 0))
        var text =
            "true steps missed, by phase (a counted step within ±\(formatFixed(Double(missTolerance) / 1e9, decimals: 2)) s "
            + "of a true one, after the recording's lag, is that step)\n\n"
        text +=
            rightPad("recording", width) + leftPad("truth", 7) + leftPad("counted", 9) + leftPad("lag", 7)
            + phases.map { leftPad($0.rawValue, 8) }.joined() + leftPad("extra", 7) + "\n"
        func cell(_ missed: Int?, _ steps: Int?) -> String {
            guard let steps, steps > 0 else { return "—" }
            return "\(missed ?? 0)/\(steps)"
        }
        for row in rows {
            var name = row.name
            if name.count > width { name = "…" + name.suffix(width - 1) }
            text +=
                rightPad(name, width) + leftPad(String(row.truth), 7) + leftPad(String(row.counted), 9)
                + leftPad(signed(Double(row.lag) / 1e9, decimals: 2), 7)
                + phases.map { leftPad(cell(row.missed[$0], row.steps[$0]), 8) }.joined()
                + leftPad(String(row.extra), 7) + "\n"
        }
        text += "\nphase     steps  missed\n"
        var allSteps = 0
        var allMissed = 0
        for phase in phases {
            let steps = rows.reduce(0) { $0 + ($1.steps[phase] ?? 0) }
            let missed = rows.reduce(0) { $0 + ($1.missed[phase] ?? 0) }
            guard steps > 0 else { continue }
            allSteps += steps
            allMissed += missed
            text += rightPad(phase.rawValue, 8) + leftPad(String(steps), 7) + leftPad(String(missed), 8)
            text += "  " + leftPad(formatFixed(Double(missed) / Double(steps) * 100, decimals: 1), 5) + " %\n"
        }
        text += rightPad("all", 8) + leftPad(String(allSteps), 7) + leftPad(String(allMissed), 8)
        text +=
            "  " + leftPad(formatFixed(Double(allMissed) / Double(max(1, allSteps)) * 100, decimals: 1), 5)
            + " %\n"
        let extra = rows.reduce(0) { $0 + $1.extra }
        text += "counted steps matching no true step: \(extra) (\(plural(rows.count, "recording")))\n"
        return text
    }

    static func signed(_ value: Double, decimals: Int) -> String {
        (value >= 0 ? "+" : "") + formatFixed(value, decimals: decimals)
    }
}
