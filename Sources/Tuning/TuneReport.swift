import Formatting
public import StepDetection

/// Everything a tuning run found, and its Markdown and terminal forms.
public struct TuneReport: Sendable {
    public var sets: [String]
    public var space: ParameterSpace
    public var objective: Objective
    public var seed: UInt64
    public var budget: Int
    public var search: SearchResult
    /// k-fold cross-validation by recording, if run.
    public var folds: CrossValidation.Report?
    public var foldCount: Int
    /// Leave-one-placement-out, if run.
    public var placements: CrossValidation.Report?
    /// Leave-one-set-out, if run.
    public var heldOutSets: CrossValidation.Report?
    public var cvBudget: Int
    /// Seconds spent searching on the whole set, and in all.
    public var searchSeconds: Double
    public var totalSeconds: Double
    public var jobs: Int
    public var samples: Int
    /// Step-time matching (±250 ms) before and after, on recordings with per-step truth.
    public var matchingBefore: StepMatch?
    public var matchingAfter: StepMatch?

    public init(
        sets: [String], space: ParameterSpace, objective: Objective, seed: UInt64, budget: Int,
        search: SearchResult, folds: CrossValidation.Report?, foldCount: Int,
        placements: CrossValidation.Report?, heldOutSets: CrossValidation.Report? = nil, cvBudget: Int,
        searchSeconds: Double, totalSeconds: Double,
        jobs: Int, samples: Int, matchingBefore: StepMatch? = nil, matchingAfter: StepMatch? = nil
    ) {
        self.sets = sets
        self.space = space
        self.objective = objective
        self.seed = seed
        self.budget = budget
        self.search = search
        self.folds = folds
        self.foldCount = foldCount
        self.placements = placements
        self.heldOutSets = heldOutSets
        self.cvBudget = cvBudget
        self.searchSeconds = searchSeconds
        self.totalSeconds = totalSeconds
        self.jobs = jobs
        self.samples = samples
        self.matchingBefore = matchingBefore
        self.matchingAfter = matchingAfter
    }

    /// Configurations evaluated per second on the whole set.
    public var configurationsPerSecond: Double {
        searchSeconds > 0 ? Double(search.evaluations) / searchSeconds : 0
    }

    /// The parameters whose value changed: key, before, after.
    public var changes: [(key: String, before: Double, after: Double)] {
        DetectorConfiguration.keys.compactMap { key in
            let a = search.start.configuration[parameter: key]
            let b = search.best.configuration[parameter: key]
            return a == b ? nil : (key, a, b)
        }
    }

    /// Why the kept configuration is not the lowest objective seen, when the robust choice
    /// kept a configuration other than the lowest (the objective chart rings it).
    public var robustNote: String? {
        guard let robust = search.robustObjective, let lowest = search.objectives.min(),
            lowest < search.bestObjective - 1e-12
        else { return nil }
        let kept = changes.isEmpty ? "the starting configuration" : "a configuration"
        return "the lowest objective seen was \(fixed(lowest, 3)), but the robust choice kept \(kept) "
            + "(objective \(fixed(search.bestObjective, 3))), whose neighbourhood averages \(fixed(robust, 3)), "
            + "better than the neighbourhood of any lower value; '--no-robust' keeps the lowest value instead."
    }

    /// The summary table rows: figure, before, after, k-fold, leave-one-placement-out.
    public func summaryRows() -> [[String]] {
        let before = search.start.summary
        let after = search.best.summary
        let cv = folds?.summary
        let lopo = placements?.summary
        let loso = heldOutSets?.summary
        var rows: [[String]] = []
        rows.append([
            "objective", fixed(search.startObjective, 3), fixed(search.bestObjective, 3), "", "", "",
        ])
        rows.append([
            "walks MAPE %", opt(before.walkMAPE, 2), opt(after.walkMAPE, 2), opt(cv?.walkMAPE, 2),
            opt(lopo?.walkMAPE, 2), opt(loso?.walkMAPE, 2),
        ])
        rows.append([
            "false steps / h", opt(before.falseStepsPerHour, 1), opt(after.falseStepsPerHour, 1),
            opt(cv?.falseStepsPerHour, 1), "", opt(loso?.falseStepsPerHour, 1),
        ])
        rows.append([
            "mixed-log error %", opt(before.mixedError, 1), opt(after.mixedError, 1), opt(cv?.mixedError, 1),
            "", "",
        ])
        if before.dailyLifeError != nil {
            rows.append([
                "daily-life error %", opt(before.dailyLifeError, 1), opt(after.dailyLifeError, 1),
                opt(cv?.dailyLifeError, 1), "", "",
            ])
        }
        let beforeSets = objective.setValues(search.start.results)
        if beforeSets.count > 1 {
            let afterSets = objective.setValues(search.best.results)
            let cvSets = folds.map { objective.setValues($0.splits.flatMap(\.heldOutResults)) }
            for (i, entry) in beforeSets.enumerated() {
                let a = afterSets.first { $0.set == entry.set }?.summary
                let c = cvSets?.first { $0.set == entry.set }?.summary
                let held = heldOutSets?.splits.first { $0.name == entry.set }
                    .map { EvaluationSummary($0.heldOutResults) }
                _ = i
                rows.append([
                    "  set \(entry.set) walks MAPE %", opt(entry.summary.walkMAPE, 2), opt(a?.walkMAPE, 2),
                    opt(c?.walkMAPE, 2), "", opt(held?.walkMAPE, 2),
                ])
                if entry.summary.falseStepsPerHour != nil {
                    rows.append([
                        "  set \(entry.set) false steps / h", opt(entry.summary.falseStepsPerHour, 1),
                        opt(a?.falseStepsPerHour, 1), opt(c?.falseStepsPerHour, 1), "",
                        opt(held?.falseStepsPerHour, 1),
                    ])
                }
            }
        }
        let names = Set(before.placements.map(\.placement)).union(after.placements.map(\.placement)).sorted()
        for name in names {
            func find(_ s: EvaluationSummary?) -> Double? {
                s?.placements.first { $0.placement == name }?.mape
            }
            rows.append([
                "  \(name) MAPE %", opt(find(before), 2), opt(find(after), 2), opt(find(cv), 2),
                opt(find(lopo), 2), opt(find(loso), 2),
            ])
        }
        return rows
    }

    /// Whether the cross-validated walks MAPE lies within `points` of the in-sample one.
    public func generalises(within points: Double = 1) -> Bool? {
        guard let cv = folds?.summary.walkMAPE, let fit = search.best.summary.walkMAPE else { return nil }
        return abs(cv - fit) <= points
    }

    /// The report as Markdown, with the SVG figures beside it.
    public func markdown() -> String {
        var md = "# StepGate tuning report\n\n"
        md += "Sets: \(sets.map { "`\($0)`" }.joined(separator: ", ")) — "
        md += "\(search.start.results.count) recordings, \(samples) samples.\n\n"
        md += "Objective (lower is better): \(objective.formula).\n\n"
        md += "Search: seed \(seed), budget \(budget), \(search.evaluations) configurations evaluated "
        md += "(\(search.ending)) in \(fixed(searchSeconds, 1)) s on \(jobs) jobs "
        md +=
            "(\(fixed(configurationsPerSecond, 1)) configurations/s); whole run \(fixed(totalSeconds, 1)) s.\n\n"
        md += "## Summary\n\n"
        md += "In-sample figures are on the whole set; k-fold figures pool each recording's result with "
        md += "the configuration tuned without it (\(foldCount) folds by recording session, stratified by "
        md += "kind and placement, \(cvBudget) evaluations per fold); leave-one-placement-out scores each "
        md += "placement's walks with a configuration tuned on every other recording"
        md +=
            heldOutSets == nil
            ? ".\n\n" : "; leave-one-set-out scores each set with a configuration tuned on the others.\n\n"
        let header = [
            "figure", "before", "after (in-sample)", "after (k-fold)", "after (leave-placement-out)",
        ]
        md +=
            heldOutSets == nil
            ? table(header, summaryRows().map { Array($0.prefix(5)) }, rightAligned: [1, 2, 3, 4])
            : table(header + ["after (leave-set-out)"], summaryRows(), rightAligned: [1, 2, 3, 4, 5])
        if let ok = generalises() {
            md += "\nCross-validated walks MAPE is \(ok ? "within" : "**more than**") 1 point of the "
            md += "in-sample figure\(ok ? "" : ": the tuned configuration may be fitted to this set").\n"
        }
        if let a = matchingBefore, let b = matchingAfter {
            md += "\nStep times (recordings with per-step truth, a detected step matches a true step within "
            md += "±250 ms): recall \(fixed(a.recall * 100, 1)) → \(fixed(b.recall * 100, 1)) %, precision "
            md +=
                "\(fixed(a.precision * 100, 1)) → \(fixed(b.precision * 100, 1)) % (\(b.truth) true steps).\n"
        }
        md +=
            "\n![objective versus evaluations](objective.svg)\n\n![walk error by placement](placements.svg)\n"
        md += "\n## Parameters that changed\n\n"
        let changes = changes
        if changes.isEmpty {
            md += "None: " + (robustNote ?? "no configuration in the search beat the starting one.") + "\n"
        } else {
            md += table(
                ["parameter", "before", "after", "searched range"],
                changes.map { c in
                    let range = space.parameters.first { $0.key == c.key }.map {
                        "\(trim($0.minimum))…\(trim($0.maximum))"
                    }
                    return [c.key, trim(c.before), trim(c.after), range ?? ""]
                }, rightAligned: [1, 2])
        }
        if !changes.isEmpty, let robustNote { md += "\nKept: \(robustNote)\n" }
        md += "\nThe best configuration is in `best.json`, ready for `--config`.\n"
        md += "\n## Per recording\n\n"
        let rows = zip(search.start.results, search.best.results).map { a, b -> [String] in
            [
                "`\(a.recording.name)`", a.recording.placement, a.recording.kind.rawValue,
                String(a.recording.truth),
                String(a.counted), signedPercent(a), String(b.counted), signedPercent(b),
            ]
        }
        md += table(
            ["recording", "placement", "kind", "truth", "before", "error", "after", "error"], rows,
            rightAligned: [3, 4, 5, 6, 7])
        if let folds, !folds.splits.isEmpty {
            md += "\n## Cross-validation folds\n\n"
            md += table(
                [
                    "fold", "held out", "training objective", "held-out walks MAPE %",
                    "held-out false steps / h",
                ],
                folds.splits.map { s in
                    let summary = EvaluationSummary(s.heldOutResults)
                    return [
                        s.name, String(s.heldOut.count), fixed(s.trainingObjective, 3),
                        opt(summary.walkMAPE, 2),
                        opt(summary.falseStepsPerHour, 1),
                    ]
                }, rightAligned: [1, 2, 3, 4])
        }
        if let folds, !folds.splits.isEmpty {
            var worst: [[String]] = []
            for split in folds.splits {
                for r in split.heldOutResults {
                    let off = r.percentError.map { abs($0) > 10 } ?? (r.excessSteps > 0)
                    if off {
                        worst.append([
                            "`\(r.recording.name)`", split.name, r.recording.kind.rawValue,
                            String(r.recording.truth),
                            String(r.counted), signedPercent(r),
                        ])
                    }
                }
            }
            md += "\nHeld-out recordings more than 10 % off (or with false steps), each counted by the "
            md += "configuration tuned without its fold:\n\n"
            md +=
                worst.isEmpty
                ? "None.\n"
                : table(
                    ["recording", "fold", "kind", "truth", "held-out count", "error"], worst,
                    rightAligned: [3, 4, 5])
        }
        if let placements, !placements.splits.isEmpty {
            md += "\n## Leave one placement out\n\n"
            md += table(
                ["placement left out", "walks", "in-sample MAPE %", "held-out MAPE %"],
                placements.splits.map { s in
                    let held = EvaluationSummary(s.heldOutResults).walkMAPE
                    let fit = search.best.summary.placements.first { $0.placement == s.name }?.mape
                    return [s.name, String(s.heldOut.count), opt(fit, 2), opt(held, 2)]
                }, rightAligned: [1, 2, 3])
        }
        md += "\n## Search space\n\n```json\n\(space.json)```\n"
        return md
    }

    /// A short summary for the terminal.
    public func terminal() -> String {
        var text = ""
        let rows = summaryRows()
        var header = ["", "before", "after", "k-fold", "leave-placement-out", "leave-set-out"]
        let columns = heldOutSets == nil ? 5 : 6
        header = Array(header.prefix(columns))
        let widths = (0..<columns).map { c in ([header[c]] + rows.map { $0[c] }).map(\.count).max() ?? 0 }
        func line(_ cells: [String]) -> String {
            var s = pad(cells[0], widths[0], left: false)
            for c in 1..<columns { s += "  " + pad(cells[c], widths[c], left: true) }
            while s.hasSuffix(" ") { s.removeLast() }
            return s + "\n"
        }
        text += line(header)
        for row in rows { text += line(row) }
        if let robustNote { text += "\n\(changes.isEmpty ? "unchanged" : "kept"): \(robustNote)\n" }
        if !changes.isEmpty {
            text += "\nchanged:\n"
            let width = changes.map(\.key.count).max() ?? 0
            for c in changes {
                text += "  \(pad(c.key, width, left: false))  \(trim(c.before)) → \(trim(c.after))\n"
            }
        }
        text += "\n\(search.evaluations) configurations in \(fixed(searchSeconds, 1)) s "
        text += "(\(fixed(configurationsPerSecond, 1)) configurations/s, \(jobs) jobs, \(search.ending))"
        var cv: [String] = []
        if let folds { cv.append("\(folds.evaluations) k-fold") }
        if let placements { cv.append("\(placements.evaluations) placement-held-out") }
        if let heldOutSets { cv.append("\(heldOutSets.evaluations) set-held-out") }
        if !cv.isEmpty { text += "; cross-validation: " + cv.joined(separator: " + ") + " evaluations" }
        text += "; \(fixed(totalSeconds, 1)) s in all\n"
        return text
    }
}

/// How detected step times match true ones.
public struct StepMatch: Sendable, Hashable {
    /// True steps, detected steps, and matched pairs.
    public var truth = 0
    public var detected = 0
    public var matched = 0

    public init(truth: Int = 0, detected: Int = 0, matched: Int = 0) {
        self.truth = truth
        self.detected = detected
        self.matched = matched
    }

    public var recall: Double { truth > 0 ? Double(matched) / Double(truth) : 0 }
    public var precision: Double { detected > 0 ? Double(matched) / Double(detected) : 0 }

    public static func + (a: StepMatch, b: StepMatch) -> StepMatch {
        StepMatch(truth: a.truth + b.truth, detected: a.detected + b.detected, matched: a.matched + b.matched)
    }

    /// Greedy one-to-one matching of sorted step times within `tolerance` nanoseconds.
    public static func match(detected: [Int64], truth: [Int64], tolerance: Int64 = 250_000_000) -> StepMatch {
        let found = matchedTruth(detected: detected, truth: truth, tolerance: tolerance)
        return StepMatch(
            truth: truth.count, detected: detected.count, matched: found.reduce(0) { $0 + ($1 ? 1 : 0) })
    }

    /// For each of `truth` (sorted), whether a detected step (sorted) within `tolerance` is
    /// matched to it, each detected step at most once: in time order, the earlier of two steps
    /// too far apart is passed over, which gives the most matches.
    public static func matchedTruth(detected: [Int64], truth: [Int64], tolerance: Int64 = 250_000_000)
        -> [Bool]
    {
        var found = [Bool](repeating: false, count: truth.count)
        var i = 0
        var j = 0
        while i < detected.count && j < truth.count {
            let d = detected[i] - truth[j]
            if abs(d) <= tolerance {
                found[j] = true
                i += 1
                j += 1
            } else if d < 0 {
                i += 1
            } else {
                j += 1
            }
        }
        return found
    }

    /// The detector's lag behind the truth on one recording: the median over detected steps of
    /// the time since the nearest true step, among those within `reach` of one (the band-pass
    /// and the peak of the magnitude come a fixed time after the heel strike the truth marks,
    /// and that time differs by sensor and placement); 0 when none is that near.
    public static func lag(detected: [Int64], truth: [Int64], reach: Int64 = 500_000_000) -> Int64 {
        guard !truth.isEmpty else { return 0 }
        var offsets: [Int64] = []
        var j = 0
        for c in detected {
            while j + 1 < truth.count && abs(truth[j + 1] - c) <= abs(truth[j] - c) { j += 1 }
            let offset = c - truth[j]
            if abs(offset) <= reach { offsets.append(offset) }
        }
        guard !offsets.isEmpty else { return 0 }
        offsets.sort()
        return offsets[offsets.count / 2]
    }
}

/// The time of every step a configuration counts in `samples`.
public func stepTimes(in samples: [AccelerationSample], configuration: DetectorConfiguration) -> [Int64] {
    var detector = StepDetector(configuration: configuration)
    var times: [Int64] = []
    detector.process(samples) { times.append($0.timestamp) }
    return times
}

func signedPercent(_ r: EvaluationResult) -> String {
    r.percentError.map { ($0 >= 0 ? "+" : "") + fixed($0, 1) + " %" } ?? "—"
}

func opt(_ value: Double?, _ decimals: Int) -> String { value.map { fixed($0, decimals) } ?? "—" }

/// A number with up to 4 decimals, trailing zeros removed.
func trim(_ value: Double) -> String {
    var s = fixed(value, 4)
    if s.contains(".") {
        while s.hasSuffix("0") { s.removeLast() }
        if s.hasSuffix(".") { s.removeLast() }
    }
    return s
}

func pad(_ text: String, _ width: Int, left: Bool) -> String {
    let fill = String(repeating: " ", count: max(0, width - text.count))
    return left ? fill + text : text + fill
}

/// A Markdown table.
func table(_ header: [String], _ rows: [[String]], rightAligned: Set<Int>) -> String {
    var md = "| " + header.joined(separator: " | ") + " |\n|"
    for c in header.indices { md += rightAligned.contains(c) ? "---:|" : "---|" }
    md += "\n"
    for row in rows { md += "| " + row.map { $0.replacingPipes() }.joined(separator: " | ") + " |\n" }
    return md
}

extension String {
    func replacingPipes() -> String {
        var out = ""
        for c in self { out += c == "|" ? "\\|" : String(c) }
        return out
    }
}
