import Foundation
import SensorInput
import StepDetection
import Tuning

/// `stepgate eval`: scores the detector on labelled recordings.
struct Eval: Command {
    static let configuration = CommandConfiguration(
        commandName: "eval",
        abstract: "Score the step detector on labelled recordings.",
        discussion: """
            Each argument is a manifest CSV (columns path, format, placement, device, kind, \
            truth_steps, truth_source; paths relative to the manifest) or a folder of recordings \
            whose file names carry the true count (100_3.csv, walk-1834.csv; 0 means a no-walk log). \
            Prints each recording's truth, count and error, then three figures: walks MAPE (and per \
            placement), false steps per hour on no-walk logs, and mixed-log absolute % error.
            """,
        arguments: [ArgumentHelp("<set>...", help: "Manifest CSV files or folders of recordings.")],
        options: [
            .option("config", "file", help: "Detector configuration (JSON); defaults otherwise."),
            .flag("json", help: "Print one JSON line per recording and one with the summary."),
            .flag("markdown", help: "Print the summary figures as a Markdown table (for documentation)."),
        ]
    )

    var sets: [String]
    var configPath: String?
    var json: Bool
    var markdown: Bool

    init(arguments: ParsedArguments) throws(UsageError) {
        sets = arguments.positionals
        guard !sets.isEmpty else { throw UsageError("missing expected argument '<set>...'") }
        configPath = arguments.value("config")
        json = arguments.flag("json")
        markdown = arguments.flag("markdown")
        guard !(json && markdown) else { throw UsageError("'--json' and '--markdown' exclude each other") }
    }

    func run() async throws {
        let detector = try configPath.map(loadDetectorConfiguration(path:)) ?? DetectorConfiguration()
        let recordings = try Eval.load(sets)
        guard !recordings.isEmpty else {
            throw LabelledSetError(path: sets[0], message: "no recordings found")
        }
        let results = try await Eval.evaluate(recordings, configuration: detector)
        let summary = EvaluationSummary(results)
        let out = StandardOutput()
        defer { out.flush() }
        if json {
            for result in results { out.line(Eval.jsonLine(result)) }
            out.line(Eval.jsonLine(summary))
        } else if markdown {
            out.write(Eval.markdown(results, summary))
        } else {
            out.write(Eval.table(results, summary))
        }
    }

    /// Expands manifests and folders (names carrying the truth, or Oxford-style per-step
    /// truth) into labelled recordings; files that cannot be scored are named on stderr.
    static func load(_ sets: [String]) throws -> [LabelledRecording] {
        try LabelledSets.load(sets, warn: { printError($0) })
    }

    /// Counts every recording, using all cores; results keep the input order.
    static func evaluate(_ recordings: [LabelledRecording], configuration: DetectorConfiguration) async throws
        -> [EvaluationResult]
    {
        try await withThrowingTaskGroup(of: (Int, EvaluationResult).self) { group in
            let width = max(1, ProcessInfo.processInfo.activeProcessorCount)
            var next = 0
            var results = [EvaluationResult?](repeating: nil, count: recordings.count)
            func start(_ index: Int) {
                let recording = recordings[index]
                group.addTask {
                    let summary = try countSteps(
                        inFile: recording.path, options: RecordingReader.Options(format: recording.format),
                        configuration: configuration)
                    try Replay.requireSamples(summary, file: recording.path)
                    return (
                        index,
                        EvaluationResult(
                            recording: recording, counted: summary.steps, hours: summary.duration / 3600,
                            samples: summary.samples)
                    )
                }
            }
            while next < min(width, recordings.count) {
                start(next)
                next += 1
            }
            while let (index, result) = try await group.next() {
                results[index] = result
                if next < recordings.count {
                    start(next)
                    next += 1
                }
            }
            return results.compactMap { $0 }
        }
    }

    static func table(_ results: [EvaluationResult], _ summary: EvaluationSummary) -> String {
        let width = min(72, max(9, results.map(\.recording.name.count).max() ?? 0))
        var text =
            rightPad("recording", width) + "  " + rightPad("placement", 13) + rightPad("kind", 7)
            + leftPad("truth", 7) + leftPad("counted", 9) + leftPad("error", 9) + "\n"
        for r in results {
            var name = r.recording.name
            if name.count > width { name = "…" + name.suffix(width - 1) }
            let error =
                r.percentError.map { ($0 >= 0 ? "+" : "") + formatFixed($0, decimals: 1) + "%" } ?? "—"
            text +=
                rightPad(name, width) + "  " + rightPad(r.recording.placement, 13)
                + rightPad(r.recording.kind.rawValue, 7)
                + leftPad(String(r.recording.truth), 7) + leftPad(String(r.counted), 9) + leftPad(error, 9)
                + "\n"
        }
        text += "\n"
        if let mape = summary.walkMAPE {
            text +=
                "walks MAPE            \(formatFixed(mape, decimals: 2)) %  (\(summary.walkCount) walks)\n"
            for p in summary.placements {
                text +=
                    "  " + rightPad(p.placement, 20) + leftPad(formatFixed(p.mape, decimals: 2), 6)
                    + " %  (\(p.count))\n"
            }
        }
        if let perHour = summary.falseStepsPerHour {
            text +=
                "false steps per hour  \(formatFixed(perHour, decimals: 1))  (\(summary.falseSteps) in "
                + "\(formatFixed(summary.noWalkHours, decimals: 2)) h, \(summary.noWalkCount) no-walk logs)\n"
        }
        if let mixed = summary.mixedError {
            text +=
                "mixed-log error       \(formatFixed(mixed, decimals: 1)) %  "
                + "(\(plural(summary.mixedCount, "log")))\n"
        }
        return text
    }

    /// The summary as a Markdown table: walks MAPE overall and per placement, the longest walks,
    /// false steps per hour and each mixed log's signed error. `scripts/figures.sh` puts it in
    /// the README.
    static func markdown(_ results: [EvaluationResult], _ summary: EvaluationSummary) -> String {
        func signed(_ value: Double?) -> String {
            guard let value else { return "—" }
            return (value >= 0 ? "+" : "−") + formatFixed(abs(value), decimals: 1) + " %"
        }
        var text = "| figure | value |\n|---|---:|\n"
        if let mape = summary.walkMAPE {
            text +=
                "| walks MAPE (\(plural(summary.walkCount, "walk"))) | \(formatFixed(mape, decimals: 2)) % |\n"
            for p in summary.placements {
                text += "| — \(p.placement) (\(p.count)) | \(formatFixed(p.mape, decimals: 2)) % |\n"
            }
            let long = results.filter { $0.recording.kind == .walk && $0.recording.truth >= 1000 }
                .sorted { $0.recording.truth > $1.recording.truth }
            for r in long {
                text +=
                    "| walk of \(grouped(r.recording.truth)) steps (\(r.recording.placement)) | "
                    + "\(signed(r.percentError)) |\n"
            }
        }
        if let perHour = summary.falseStepsPerHour {
            text +=
                "| false steps per hour, no-walk logs (\(plural(summary.noWalkCount, "log")), "
                + "\(formatFixed(summary.noWalkHours, decimals: 2)) h) | \(formatFixed(perHour, decimals: 1)) |\n"
        }
        for r in results where r.recording.kind == .mixed {
            text +=
                "| mixed log, \(grouped(r.recording.truth)) steps (\(r.recording.placement)), error | "
                + "\(signed(r.percentError)) |\n"
        }
        return text
    }

    static func jsonLine(_ r: EvaluationResult) -> String {
        var line = JSONLine()
        line.add("recording", r.recording.name)
        line.add("placement", r.recording.placement)
        line.add("kind", r.recording.kind.rawValue)
        line.add("truth", r.recording.truth)
        line.add("counted", r.counted)
        if let error = r.percentError { line.add("error_percent", error, decimals: 2) }
        line.add("hours", r.hours, decimals: 4)
        return line.string
    }

    static func jsonLine(_ s: EvaluationSummary) -> String {
        var line = JSONLine()
        if let mape = s.walkMAPE { line.add("walk_mape_percent", mape, decimals: 3) }
        line.add("walks", s.walkCount)
        if let perHour = s.falseStepsPerHour { line.add("false_steps_per_hour", perHour, decimals: 2) }
        line.add("false_steps", s.falseSteps)
        line.add("nowalk_hours", s.noWalkHours, decimals: 3)
        if let mixed = s.mixedError { line.add("mixed_error_percent", mixed, decimals: 2) }
        var placements = JSONLine()
        for p in s.placements { placements.add(p.placement, p.mape, decimals: 3) }
        line.addRaw("placement_mape_percent", placements.string)
        return line.string
    }
}

/// `1 log`, `2 logs`.
func plural(_ count: Int, _ noun: String) -> String { "\(count) \(noun)\(count == 1 ? "" : "s")" }

/// `10,021`.
func grouped(_ value: Int) -> String {
    let digits = String(value.magnitude)
    var text = ""
    for (index, digit) in digits.enumerated() {
        if index > 0 && (digits.count - index) % 3 == 0 { text += "," }
        text.append(digit)
    }
    return (value < 0 ? "-" : "") + text
}
