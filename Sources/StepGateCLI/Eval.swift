import CoreCommands
import Counting
import Formatting
import Foundation
import SensorInput
import StepDetection
import StepGateDaemon
import Tuning

/// `stepgate eval`: scores the detector on labelled recordings.
struct Eval: Command {
    static let configuration = CommandConfiguration(
        commandName: "eval",
        abstract: "Score the step detector on labelled recordings.",
        discussion: """
            Each argument is a manifest CSV (columns path, format, placement, device, kind, \
            truth_steps, truth_source; paths relative to the manifest; optional start_s and end_s make a \
            row the stretch of its file between those seconds from its first sample) or a folder of recordings \
            whose file names carry the true count (100_3.csv, walk-1834.csv; 0 means a no-walk log). \
            Prints each recording's truth, count and error, then three figures: walks MAPE (and per \
            placement), false steps per hour on no-walk logs, and mixed-log absolute % error. \
            With --daily-life SEED, builds day-like recordings instead: walking bouts of exact \
            count, cut from the walks with per-step truth (and whole short walks), between real \
            no-walk segments, bout lengths as in everyday life; prints each day's error, the \
            recall of bouts by length and false steps per hour between bouts. With \
            --remove-gravity, each recording that includes gravity is counted as gravity-removed \
            input instead: 1 g along the mean acceleration of a centred 4 s window is subtracted \
            from every sample, as a phone's linear-acceleration export does with its own estimate. \
            With --misses, matches the counted steps of each recording with per-step truth to its \
            true steps (within 0.25 s, after the recording's median lag) and prints the true steps \
            missed by phase: the first three, the U-turn and the end of the walk where a detail.csv \
            beside the manifest gives them (columns path, uturn_start_s, uturn_end_s, trial_end_s), \
            the last three before the end, the steps after it, and the rest.
            """,
        arguments: [ArgumentHelp("<set>...", help: "Manifest CSV files or folders of recordings.")],
        options: [
            .option("config", "file", help: "Detector configuration (JSON); defaults otherwise."),
            .flag("json", help: "Print one JSON line per recording and one with the summary."),
            .flag("markdown", help: "Print the summary figures as a Markdown table (for documentation)."),
            .flag(
                "remove-gravity",
                help:
                    "Take gravity out of each recording (a centred 4 s estimate) and count it as gravity-removed input."
            ),
            .flag(
                "misses", help: "Print the true steps missed, by phase of the walk (needs per-step truth)."),
            .option(
                "daily-life", "seed",
                help: "Score day-like recordings spliced from the sets (seeds SEED, SEED+1, …)."),
            .option("days", "n", help: "Days for --daily-life (default 5)."),
            .option("bouts", "n", help: "Walking bouts per day for --daily-life (default 60)."),
        ]
    )

    var sets: [String]
    var configPath: String?
    var json: Bool
    var markdown: Bool
    var removeGravity: Bool
    var misses: Bool
    var dailyLifeSeed: UInt64?
    var days = 5
    var bouts = 60

    init(arguments: ParsedArguments) throws(UsageError) {
        sets = arguments.positionals
        guard !sets.isEmpty else { throw UsageError("missing expected argument '<set>...'") }
        configPath = arguments.value("config")
        json = arguments.flag("json")
        markdown = arguments.flag("markdown")
        guard !(json && markdown) else { throw UsageError("'--json' and '--markdown' exclude each other") }
        removeGravity = arguments.flag("remove-gravity")
        misses = arguments.flag("misses")
        guard !(misses && (json || markdown || removeGravity)) else {
            throw UsageError("'--misses' goes with none of '--json', '--markdown', '--remove-gravity'")
        }
        if let text = arguments.value("daily-life") {
            guard let seed = UInt64(text) else {
                throw UsageError("option '--daily-life <seed>': expected a whole number ≥ 0, found '\(text)'")
            }
            dailyLifeSeed = seed
            guard !removeGravity && !misses else {
                throw UsageError(
                    "'--\(misses ? "misses" : "remove-gravity")' does not go with '--daily-life'")
            }
        }
        for (name, minimum) in [("days", 1), ("bouts", 1)] {
            guard let text = arguments.value(name) else { continue }
            guard dailyLifeSeed != nil else { throw UsageError("option '--\(name)' needs '--daily-life'") }
            guard let value = Int(text), value >= minimum, value <= 10_000 else {
                throw UsageError(
                    "option '--\(name) <n>': expected a whole number in 1...10000, found '\(text)'")
            }
            if name == "days" { days = value } else { bouts = value }
        }
    }

    func run() async throws {
        let detector = try configPath.map(loadDetectorConfiguration(path:)) ?? DetectorConfiguration()
        let recordings = try Eval.load(sets)
        guard !recordings.isEmpty else {
            throw LabelledSetError(path: sets[0], message: "no recordings found")
        }
        if let seed = dailyLifeSeed {
            try await dailyLife(recordings, seed: seed, configuration: detector)
            return
        }
        if misses {
            let out = StandardOutput()
            defer { out.flush() }
            out.write(try await Eval.missesTable(recordings, configuration: detector))
            return
        }
        let results = try await Eval.evaluate(
            recordings, configuration: detector, removeGravity: removeGravity)
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

    /// `--daily-life`: builds the days, counts them on all cores, prints the report.
    func dailyLife(_ recordings: [LabelledRecording], seed: UInt64, configuration: DetectorConfiguration)
        async throws
    {
        let loaded = try await Tune.load(
            recordings, jobs: max(1, ProcessInfo.processInfo.activeProcessorCount))
        let bench = DailyLifeBench(recordings: loaded, boutsPerDay: bouts)
        guard bench.isUsable else {
            throw LabelledSetError(
                path: sets[0],
                message:
                    "the daily-life bench needs walks with per-step truth (an Oxford-style stepcounter.csv) and no-walk logs"
            )
        }
        let seeds = (0..<UInt64(days)).map { seed &+ $0 }
        let scores = await withTaskGroup(of: (Int, DailyLifeScore).self) { group in
            for (i, s) in seeds.enumerated() {
                group.addTask {
                    (i, DailyLifeScore.evaluate([bench.day(seed: s)], configuration: configuration))
                }
            }
            var all = [DailyLifeScore?](repeating: nil, count: seeds.count)
            for await (i, score) in group { all[i] = score }
            return all.compactMap { $0 }
        }
        var score = DailyLifeScore()
        for s in scores {
            score.days += s.days
            score.falseStepsAfterBouts += s.falseStepsAfterBouts
            score.falseStepsBySource.merge(s.falseStepsBySource, uniquingKeysWith: +)
            for c in score.classes.indices {
                score.classes[c].bouts += s.classes[c].bouts
                score.classes[c].boutsFound += s.classes[c].boutsFound
                score.classes[c].trueSteps += s.classes[c].trueSteps
                score.classes[c].recalledSteps += s.classes[c].recalledSteps
                score.classes[c].countedSteps += s.classes[c].countedSteps
            }
        }
        let out = StandardOutput()
        defer { out.flush() }
        out.write(json ? Eval.dailyLifeJSON(score) : Eval.dailyLifeTable(score, sources: bench.sourceCounts))
    }

    static func dailyLifeTable(
        _ score: DailyLifeScore, sources: (cutWalks: Int, wholeWalks: Int, noWalks: Int)
    ) -> String {
        var text =
            "daily-life days from \(sources.cutWalks) walks with per-step truth, \(sources.wholeWalks) whole "
            + "walks, \(sources.noWalks) no-walk logs\n\n"
        text +=
            rightPad("seed", 8) + leftPad("hours", 7) + leftPad("bouts", 7) + leftPad("truth", 8)
            + leftPad("counted", 9) + leftPad("error", 9) + leftPad("false", 7) + "\n"
        for d in score.days {
            text +=
                rightPad(String(d.seed), 8) + leftPad(formatFixed(d.hours, decimals: 2), 7)
                + leftPad(String(d.bouts), 7) + leftPad(String(d.truth), 8) + leftPad(String(d.counted), 9)
                + leftPad(
                    (d.percentError >= 0 ? "+" : "") + formatFixed(d.percentError, decimals: 1) + "%", 9)
                + leftPad(String(d.falseSteps), 7) + "\n"
        }
        text += "\nbout length   bouts  found   steps  counted  recall\n"
        for c in score.classes where c.bouts > 0 {
            let name =
                c.range.upperBound >= 100_000
                ? "\(c.range.lowerBound)+" : "\(c.range.lowerBound)–\(c.range.upperBound)"
            text +=
                rightPad(name, 12) + leftPad(String(c.bouts), 7) + leftPad(String(c.boutsFound), 7)
                + leftPad(String(c.trueSteps), 8) + leftPad(String(c.countedSteps), 9)
                + leftPad(formatFixed(c.recall ?? 0, decimals: 1), 7) + " %\n"
        }
        text += "\nday error             \(signed(score.pooledError)) % pooled, "
        text +=
            "\(formatFixed(score.meanAbsoluteDayError, decimals: 1)) % mean absolute (\(score.days.count) days)\n"
        text +=
            "false steps per hour  \(formatFixed(score.falseStepsPerHour, decimals: 1))  (between bouts; \(score.falseStepsAfterBouts) of them within 5 s after a bout)\n"
        let worst = score.falseStepsBySource.sorted {
            $0.value != $1.value ? $0.value > $1.value : $0.key < $1.key
        }
        if !worst.isEmpty {
            text +=
                "  most from: "
                + worst.prefix(4).map { "\($0.key.split(separator: "/").last ?? "") (\($0.value))" }.joined(
                    separator: ", ") + "\n"
        }
        return text
    }

    static func signed(_ value: Double) -> String {
        (value >= 0 ? "+" : "") + formatFixed(value, decimals: 1)
    }

    static func dailyLifeJSON(_ score: DailyLifeScore) -> String {
        var text = ""
        for d in score.days {
            var line = JSONLine()
            line.add("seed", Int(truncatingIfNeeded: d.seed))
            line.add("hours", d.hours, decimals: 3)
            line.add("bouts", d.bouts)
            line.add("truth", d.truth)
            line.add("counted", d.counted)
            line.add("error_percent", d.percentError, decimals: 2)
            line.add("false_steps", d.falseSteps)
            text += line.string + "\n"
        }
        var summary = JSONLine()
        summary.add("day_error_percent", score.pooledError, decimals: 2)
        summary.add("mean_absolute_day_error_percent", score.meanAbsoluteDayError, decimals: 2)
        summary.add("false_steps_per_hour", score.falseStepsPerHour, decimals: 2)
        var recall = JSONLine()
        for c in score.classes where c.bouts > 0 {
            recall.add("\(c.range.lowerBound)-\(c.range.upperBound)", c.recall ?? 0, decimals: 2)
        }
        summary.addRaw("recall_percent_by_bout_length", recall.string)
        return text + summary.string + "\n"
    }

    /// Expands manifests and folders (names carrying the truth, or Oxford-style per-step
    /// truth) into labelled recordings; files that cannot be scored are named on stderr.
    static func load(_ sets: [String]) throws -> [LabelledRecording] {
        try LabelledSets.load(sets, warn: { printError($0) })
    }

    /// Counts every recording, using all cores; results keep the input order.
    static func evaluate(
        _ recordings: [LabelledRecording], configuration: DetectorConfiguration, removeGravity: Bool = false
    ) async throws -> [EvaluationResult] {
        try await withThrowingTaskGroup(of: (Int, EvaluationResult).self) { group in
            let width = max(1, ProcessInfo.processInfo.activeProcessorCount)
            var next = 0
            var results = [EvaluationResult?](repeating: nil, count: recordings.count)
            func start(_ index: Int) {
                let recording = recordings[index]
                group.addTask {
                    if removeGravity {
                        return (
                            index, try Eval.countWithoutGravity(recording, configuration: configuration)
                        )
                    }
                    if recording.stretch != nil {
                        let loaded = try TuningRecording.load(recording)
                        return (
                            index,
                            loaded.result(
                                counted: StepDetector.countSteps(
                                    in: loaded.samples, configuration: configuration, input: loaded.input))
                        )
                    }
                    let summary = try recording.reading {
                        let summary = try countSteps(
                            inFile: recording.path,
                            options: RecordingReader.Options(format: recording.format),
                            configuration: configuration)
                        try ReplayArguments.requireSamples(summary, file: recording.path)
                        return summary
                    }
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

    /// Counts `recording` with gravity taken out (``GravityRemoval``) as gravity-removed input;
    /// a recording without gravity already is counted as it is.
    static func countWithoutGravity(_ recording: LabelledRecording, configuration: DetectorConfiguration)
        throws -> EvaluationResult
    {
        let loaded = try TuningRecording.load(recording)
        let samples =
            loaded.input == .totalAcceleration
            ? GravityRemoval.removingGravity(loaded.samples) : loaded.samples
        guard !samples.isEmpty else {
            throw RecordingError(
                kind: .emptyFile, path: recording.path, expected: "data rows after the header",
                found: "only the header")
        }
        return loaded.result(
            counted: StepDetector.countSteps(
                in: samples, configuration: configuration, input: .linearAcceleration))
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
