import CoreCommands
import Dispatch
import Formatting
import Foundation
import StepDetection
import StepGateDaemon
import StepHistoryStore
import Synchronization
import SystemFiles
import Tuning
import TypedJSON
import UnlockPolicy

/// `stepgate tune`: searches detector configurations on labelled recordings.
struct Tune: Command {
    static let configuration = CommandConfiguration(
        commandName: "tune",
        abstract: "Tune detector parameters on labelled recordings, with cross-validation.",
        discussion: """
            Each argument is a manifest CSV, a folder whose file names carry the true count, or a \
            folder of Oxford-style recordings (accelerometer.csv with stepcounter.csv beside it). \
            Every recording is read into memory once. The search evaluates the starting \
            configuration (--config, else the defaults), a Latin-hypercube design over the space \
            (40 % of the budget), then coordinate refinement from the best points and a robust \
            choice (the best mean over neighbours), minimising walks MAPE + w1 x false steps/h \
            + w2 x mixed-log error + w3 x worst placement MAPE. \
            With several sets (a manifest holding several formats is one set per format), the \
            objective is the weighted mean over sets plus a weight on the worst set, and \
            leave-one-set-out cross-validation runs too; --daily-life adds day-like recordings \
            (see eval --daily-life) and their error to the objective. \
            Then k-fold cross-validation by recording session and leave-one-placement-out, each fold tuned \
            with --cv-budget evaluations. Writes best.json, report.md, objective.svg, \
            placements.svg and space.json to --output. Ctrl-C stops the search and keeps the best \
            found so far. A seed gives the same result with any --jobs (unless --time or Ctrl-C \
            cut the search short). See docs/tuning.md.
            """,
        arguments: [ArgumentHelp("<set>...", help: "Manifest CSV files or folders of recordings.")],
        options: [
            .option("space", "file", help: "Parameter bounds (JSON); see 'stepgate tune --print-space'."),
            .option("config", "file", help: "Starting configuration; parameters outside the space keep it."),
            .option("budget", "n", help: "Configurations to evaluate on the whole set (default 300)."),
            .option(
                "time", "duration", help: "Limit the search on the whole set (60s, 2m); CV then scales to it."
            ),
            .option("seed", "s", help: "Random seed (default 1)."),
            .option("jobs", "j", help: "Concurrent detector runs (default: active cores)."),
            .option("folds", "k", help: "Cross-validation folds by recording (default 5; 0: none)."),
            .option("cv-budget", "n", help: "Evaluations per cross-validation fold (default budget / k)."),
            .flag("no-placement-cv", help: "Skip leave-one-placement-out cross-validation."),
            .flag("no-robust", help: "Keep the single best value instead of the best neighbourhood."),
            .option(
                "false-step-weight", "w", help: "Objective weight of false steps per hour (default 0.1)."),
            .option("mixed-weight", "w", help: "Objective weight of the mixed-log % error (default 0.01)."),
            .option(
                "placement-weight", "w", help: "Objective weight of the worst placement's MAPE (default 0.2)."
            ),
            .option(
                "set-weight", "name=w",
                help: "Weight of one set in the mean over sets (default 1); names as in the report.",
                repeatable: true),
            .option(
                "worst-set-weight", "w", help: "Objective weight of the worst set's objective (default 0.5)."),
            .option(
                "daily-life", "days",
                help: "Add this many daily-life days (spliced from the sets) to the objective (default 0)."),
            .option(
                "daily-life-weight", "w",
                help: "Objective weight of the days' mean absolute error (default 0.2)."
            ),
            .flag("no-set-cv", help: "Skip leave-one-set-out cross-validation."),
            .option("output", "dir", help: "Folder for the results (default tune-out)."),
            .flag("print-space", help: "Print the default parameter space as JSON and exit."),
        ]
    )

    var sets: [String]
    var spacePath: String?
    var configPath: String?
    var budget: Int
    var budgetGiven: Bool
    var timeLimit: Double?
    var seed: UInt64
    var jobs: Int
    var folds: Int
    var cvBudget: Int?
    var placementCV: Bool
    var robust: Bool
    var objective = Objective()
    var output: String
    var printSpace: Bool
    var dailyLifeDays = 0
    var setCV: Bool

    init(arguments: ParsedArguments) throws(UsageError) {
        sets = arguments.positionals
        printSpace = arguments.flag("print-space")
        guard !sets.isEmpty || printSpace else { throw UsageError("missing expected argument '<set>...'") }
        spacePath = arguments.value("space")
        configPath = arguments.value("config")
        budgetGiven = arguments.value("budget") != nil
        budget =
            try arguments.value("budget", expected: "a whole number ≥ 1") {
                Int($0).flatMap { $0 >= 1 ? $0 : nil }
            }
            ?? 300
        timeLimit = try arguments.value(
            "time", expected: "a duration such as 60s, 90, 2m or 1h", Tune.duration)
        seed = try arguments.value("seed", expected: "a whole number ≥ 0") { UInt64($0) } ?? 1
        jobs =
            try arguments.value("jobs", expected: "a whole number in 1...256") {
                Int($0).flatMap { (1...256).contains($0) ? $0 : nil }
            } ?? max(1, ProcessInfo.processInfo.activeProcessorCount)
        folds =
            try arguments.value("folds", expected: "0 or a whole number in 2...100") {
                Int($0).flatMap { $0 == 0 || (2...100).contains($0) ? $0 : nil }
            } ?? 5
        cvBudget = try arguments.value("cv-budget", expected: "a whole number ≥ 1") {
            Int($0).flatMap { $0 >= 1 ? $0 : nil }
        }
        placementCV = !arguments.flag("no-placement-cv")
        robust = !arguments.flag("no-robust")
        func weight(_ name: String) throws(UsageError) -> Double? {
            try arguments.value(name, expected: "a number ≥ 0") {
                Double($0).flatMap { $0 >= 0 && $0.isFinite ? $0 : nil }
            }
        }
        objective.falseStepWeight = try weight("false-step-weight") ?? objective.falseStepWeight
        objective.mixedWeight = try weight("mixed-weight") ?? objective.mixedWeight
        objective.placementWeight = try weight("placement-weight") ?? objective.placementWeight
        objective.worstSetWeight = try weight("worst-set-weight") ?? objective.worstSetWeight
        objective.dailyLifeWeight = try weight("daily-life-weight") ?? objective.dailyLifeWeight
        for text in arguments.values("set-weight") {
            guard let equals = text.lastIndex(of: "="), let w = Double(text[text.index(after: equals)...]),
                w >= 0, w.isFinite, equals != text.startIndex
            else {
                throw UsageError(
                    "option '--set-weight <name=w>': expected NAME=WEIGHT (a number ≥ 0), found '\(text)'")
            }
            objective.setWeights[String(text[..<equals])] = w
        }
        dailyLifeDays =
            try arguments.value("daily-life", expected: "a whole number in 0...100") {
                Int($0).flatMap { (0...100).contains($0) ? $0 : nil }
            } ?? 0
        setCV = !arguments.flag("no-set-cv")
        output = arguments.value("output") ?? "tune-out"
    }

    /// Parses `60s`, `90`, `2m`, `1.5h` into seconds.
    static func duration(_ text: String) -> Double? {
        var number = Substring(text)
        var scale = 1.0
        if let last = number.last, last.isLetter {
            switch last {
            case "s": scale = 1
            case "m": scale = 60
            case "h": scale = 3600
            default: return nil
            }
            number = number.dropLast()
        }
        guard let value = Double(number), value > 0, value.isFinite else { return nil }
        return value * scale
    }

    func run() async throws {
        if printSpace {
            print(ParameterSpace.default.json, terminator: "")
            return
        }
        // A folder that cannot be written fails now, not after the whole search.
        try prepareOutput()
        let clock = ContinuousClock()
        let began = clock.now
        let start = try configPath.map(loadDetectorConfiguration(path:)) ?? DetectorConfiguration()
        let space =
            try spacePath.map(Tune.loadSpace(path:)) ?? .default
        var labelled = try LabelledSets.load(sets) { printError($0) }
        guard !labelled.isEmpty else { throw LabelledSetError(path: sets[0], message: "no recordings found") }
        var recordings = try await Tune.load(labelled, jobs: jobs)
        if dailyLifeDays > 0 {
            let bench = DailyLifeBench(recordings: recordings)
            guard bench.isUsable else {
                throw LabelledSetError(
                    path: sets[0],
                    message:
                        "--daily-life needs walks with per-step truth (an Oxford-style stepcounter.csv) and no-walk logs"
                )
            }
            let days = bench.recordings(days: dailyLifeDays, seed: seed)
            recordings += days
            labelled += days.map(\.labelled)
        }
        let names = Set(labelled.map(\.set))
        for name in objective.setWeights.keys where !names.contains(name) {
            throw UsageError(
                "option '--set-weight': no set named '\(name)' (sets: \(names.sorted().joined(separator: ", ")))"
            )
        }
        let evaluator = Evaluator(recordings: recordings, jobs: jobs)
        var tuner = Tuner(space: space, start: start, objective: objective, evaluator: evaluator)
        tuner.robustSelection = robust

        // Ctrl-C stops the search; the best so far is still written. A second Ctrl-C exits.
        let stop = StopFlag()
        let deadline = timeLimit.map { clock.now + .milliseconds(Int64($0 * 1000)) }
        signal(SIGINT, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
        source.setEventHandler {
            if stop.isSet { exit(130) }
            stop.set()
            printError(
                "\ninterrupted: finishing the current batch and writing the best so far (Ctrl-C again to quit)"
            )
        }
        source.resume()
        defer {
            source.cancel()
            signal(SIGINT, SIG_DFL)
        }
        // --time bounds the search on the whole set; Ctrl-C stops everything.
        let interrupted: @Sendable () -> Bool = { stop.isSet }
        let shouldStop: @Sendable () -> Bool = {
            stop.isSet || deadline.map { ContinuousClock().now >= $0 } ?? false
        }

        let k = min(folds, labelled.count)
        let foldSplits: [(name: String, heldOut: [Int])] =
            k >= 2
            ? CrossValidation.folds(labelled, k: k, seed: seed).enumerated().map {
                ("fold \($0.offset + 1)", $0.element)
            }
            : []
        let placementSplits: [(name: String, heldOut: [Int])] =
            placementCV ? CrossValidation.placementSplits(labelled).map { ($0.placement, $0.heldOut) } : []
        let setSplits: [(name: String, heldOut: [Int])] =
            setCV ? CrossValidation.setSplits(labelled).map { ($0.set, $0.heldOut) } : []
        // --time without --budget: size the budget (and so the design) from the time one
        // configuration takes, so the search reaches its refinement phase in time.
        var budget = budget
        if let timeLimit, !budgetGiven {
            let timed = clock.now
            _ = await evaluator.evaluate([start], on: Array(recordings.indices))
            let each = max(1e-4, seconds(clock.now - timed))
            budget = max(20, Int(timeLimit / each * 1.2))
        }
        var perFold = cvBudget ?? max(1, budget / max(1, k))
        let planned = budget + perFold * (foldSplits.count + placementSplits.count + setSplits.count)

        var bar = TuneProgress(total: planned)
        let searchBegan = clock.now
        let all = Array(recordings.indices)
        let search = await tuner.search(on: all, budget: budget, seed: seed, shouldStop: shouldStop) {
            bar.update(done: $0.evaluations, best: $0.best, phase: "search")
        }
        let searchSeconds = seconds(clock.now - searchBegan)
        var done = search.evaluations
        // Cut short by --time: cross-validate with the evaluations the search managed.
        if search.evaluations < budget && cvBudget == nil { perFold = max(1, search.evaluations / max(1, k)) }
        let base0 = search.evaluations
        bar.replan(
            total: base0 + perFold * (foldSplits.count + placementSplits.count + setSplits.count), done: base0
        )
        var foldReport: CrossValidation.Report?
        var placementReport: CrossValidation.Report?
        if !foldSplits.isEmpty && !interrupted() {
            var base = base0
            var lastSplit = 0
            foldReport = await CrossValidation.run(
                foldSplits, tuner: tuner, budget: perFold, seed: seed, shouldStop: interrupted
            ) { split, p in
                if split != lastSplit {
                    base += perFold
                    lastSplit = split
                }
                bar.update(
                    done: base + p.evaluations, best: p.best, phase: "fold \(split + 1)/\(foldSplits.count)")
            }
            done += foldReport?.evaluations ?? 0
        }
        bar.skip(to: base0 + perFold * foldSplits.count)
        if !placementSplits.isEmpty && !interrupted() {
            var base = base0 + perFold * foldSplits.count
            var lastSplit = 0
            placementReport = await CrossValidation.run(
                placementSplits, tuner: tuner, budget: perFold, seed: seed &+ 1000, shouldStop: interrupted
            ) { split, p in
                if split != lastSplit {
                    base += perFold
                    lastSplit = split
                }
                bar.update(
                    done: base + p.evaluations, best: p.best, phase: "without \(placementSplits[split].name)")
            }
            done += placementReport?.evaluations ?? 0
        }
        bar.skip(to: base0 + perFold * (foldSplits.count + placementSplits.count))
        var setReport: CrossValidation.Report?
        if !setSplits.isEmpty && !interrupted() {
            var base = base0 + perFold * (foldSplits.count + placementSplits.count)
            var lastSplit = 0
            setReport = await CrossValidation.run(
                setSplits, tuner: tuner, budget: perFold, seed: seed &+ 2000, shouldStop: interrupted
            ) { split, p in
                if split != lastSplit {
                    base += perFold
                    lastSplit = split
                }
                bar.update(
                    done: base + p.evaluations, best: p.best, phase: "without \(setSplits[split].name)")
            }
            done += setReport?.evaluations ?? 0
        }
        bar.finish()
        if let r = setReport, r.splits.count < setSplits.count { setReport = nil }
        // A cross-validation cut short by Ctrl-C or --time would be misleading: leave it out.
        if let r = foldReport, r.splits.count < foldSplits.count { foldReport = nil }
        if let r = placementReport, r.splits.count < placementSplits.count { placementReport = nil }

        var before = StepMatch()
        var after = StepMatch()
        var anyTruth = false
        for recording in recordings {
            guard let truth = recording.stepTimes else { continue }
            anyTruth = true
            before =
                before
                + StepMatch.match(
                    detected: stepTimes(in: recording.samples, configuration: search.start.configuration),
                    truth: truth)
            after =
                after
                + StepMatch.match(
                    detected: stepTimes(in: recording.samples, configuration: search.best.configuration),
                    truth: truth)
        }
        let report = TuneReport(
            sets: sets, space: space, objective: objective, seed: seed, budget: budget, search: search,
            folds: foldReport, foldCount: foldSplits.count, placements: placementReport,
            heldOutSets: setReport,
            cvBudget: perFold,
            searchSeconds: searchSeconds, totalSeconds: seconds(clock.now - began), jobs: jobs,
            samples: evaluator.sampleCount, matchingBefore: anyTruth ? before : nil,
            matchingAfter: anyTruth ? after : nil)
        try write(report, search: search)
        let out = StandardOutput()
        defer { out.flush() }
        out.write(report.terminal())
        if stop.isSet { out.line("interrupted after \(done) evaluations: kept the best found") }
        out.line("wrote \(output)/best.json, report.md, objective.svg, placements.svg, space.json")
    }

    /// Reads a `--space` file by the strict reader (duplicate keys are errors, errors located
    /// FILE:LINE:COLUMN).
    static func loadSpace(path: String) throws -> ParameterSpace {
        try ParameterSpace.parse(json: Data(try readConfigurationFile(path: path)), path: path)
    }

    /// Creates the output folder if needed and checks that files can be written in it.
    func prepareOutput() throws {
        var isFolder: ObjCBool = false
        if FileManager.default.fileExists(atPath: output, isDirectory: &isFolder) {
            guard isFolder.boolValue else {
                throw ConfigurationFileError(
                    path: output, message: "'--output' must be a folder, and this is a file")
            }
        } else {
            do {
                try FileManager.default.createDirectory(atPath: output, withIntermediateDirectories: true)
            } catch {
                throw ConfigurationFileError(
                    path: output, message: "cannot create the output folder: \(systemReason(error))")
            }
        }
        guard access(output, W_OK | X_OK) == 0 else {
            throw ConfigurationFileError(
                path: output,
                message: "cannot write in the output folder (\(String(cString: strerror(errno))))")
        }
    }

    /// Writes the results into the output folder.
    func write(_ report: TuneReport, search: SearchResult) throws {
        try prepareOutput()
        let placements = Set(search.start.summary.placements.map(\.placement))
            .union(search.best.summary.placements.map(\.placement)).sorted()
        func values(_ summary: EvaluationSummary?) -> [Double?] {
            placements.map { name in summary?.placements.first { $0.placement == name }?.mape }
        }
        var series: [(label: String, color: String, values: [Double?])] = [
            ("before", "#b0b0b0", values(search.start.summary)),
            ("after, in-sample", "#1f5fbf", values(search.best.summary)),
        ]
        if let folds = report.folds {
            series.append(("after, k-fold held out", "#e07b00", values(folds.summary)))
        }
        if let lopo = report.placements {
            series.append(("after, placement held out", "#7b3fa0", values(lopo.summary)))
        }
        let designEnd = Int((Double(report.budget) * 0.4).rounded()) + 1
        let files: [(String, String)] = [
            ("best.json", encodeDetectorConfiguration(search.best.configuration) + "\n"),
            ("report.md", report.markdown()),
            (
                "objective.svg",
                Charts.objective(
                    search.objectives, designEnd: designEnd,
                    chosen: search.robustObjective == nil
                        ? nil : search.objectives.firstIndex(of: search.bestObjective))
            ),
            ("placements.svg", Charts.placements(placements, series: series)),
            ("space.json", report.space.json),
        ]
        for (name, text) in files {
            let path = (output as NSString).appendingPathComponent(name)
            do {
                try text.write(toFile: path, atomically: true, encoding: .utf8)
            } catch {
                throw ConfigurationFileError(path: path, message: "cannot write: \(systemReason(error))")
            }
        }
    }

    /// Reads every recording into memory, in parallel; order kept.
    static func load(_ labelled: [LabelledRecording], jobs: Int) async throws -> [TuningRecording] {
        var bar = ProgressBar(label: "reading \(labelled.count) recordings")
        defer { bar.finish() }
        return try await withThrowingTaskGroup(of: (Int, TuningRecording).self) { group in
            var next = 0
            var loaded = [TuningRecording?](repeating: nil, count: labelled.count)
            func start() {
                let index = next
                let recording = labelled[index]
                next += 1
                group.addTask { (index, try TuningRecording.load(recording)) }
            }
            while next < min(jobs, labelled.count) { start() }
            var done = 0
            while let (index, recording) = try await group.next() {
                loaded[index] = recording
                done += 1
                bar.update(done: done, total: labelled.count)
                if next < labelled.count { start() }
            }
            return loaded.compactMap { $0 }
        }
    }
}

func seconds(_ duration: Duration) -> Double {
    let (s, attoseconds) = duration.components
    return Double(s) + Double(attoseconds) * 1e-18
}

/// Set once by the SIGINT handler, read by the search between batches.
final class StopFlag: Sendable {
    private let flag = Atomic<Bool>(false)

    var isSet: Bool { flag.load(ordering: .relaxed) }

    func set() { flag.store(true, ordering: .relaxed) }
}

/// The tuning progress line on standard error (a terminal only): evaluations of the whole
/// plan (search and cross-validation), the phase, the best objective of the phase, and an ETA.
struct TuneProgress {
    private var total: Int
    private let enabled: Bool
    private let began = ContinuousClock().now
    private var lastDraw = ContinuousClock().now - .seconds(1)
    private var done = 0

    init(total: Int, enabled: Bool = isTerminal(2)) {
        self.total = max(1, total)
        self.enabled = enabled
    }

    mutating func update(done: Int, best: Double, phase: String) {
        self.done = done
        guard enabled else { return }
        let now = ContinuousClock().now
        guard now - lastDraw >= .milliseconds(100) || done >= total else { return }
        lastDraw = now
        let elapsed = seconds(now - began)
        let fraction = min(1, Double(done) / Double(total))
        let eta = fraction > 0 ? elapsed / fraction - elapsed : 0
        let width = 24
        let filled = Int(fraction * Double(width))
        let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
        let line =
            "\rtune [\(bar)] \(done)/\(total)  \(rightPad(phase, 22)) best \(formatFixed(best, decimals: 3))"
            + "  ETA \(Int(eta.rounded())) s   "
        var text = line
        text.withUTF8 { _ = writeAll(2, $0) }
    }

    /// A new plan: `total` evaluations in all, `done` of them done.
    mutating func replan(total: Int, done: Int) {
        self.total = max(1, total)
        self.done = done
    }

    /// Moves on to `done` (a phase ended early).
    mutating func skip(to done: Int) { self.done = max(self.done, done) }

    func finish() {
        guard enabled, done > 0 else { return }
        var text = "\r" + String(repeating: " ", count: 100) + "\r"
        text.withUTF8 { _ = writeAll(2, $0) }
    }
}
