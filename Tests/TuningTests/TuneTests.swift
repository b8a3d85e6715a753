import Foundation
import StepDetection
import StepGateTestSupport
import StepHistoryStore
import Testing

@testable import Tuning

#if canImport(FoundationXML)
    import FoundationXML
#endif

@Suite("Parameter space")
struct ParameterSpaceTests {
    private func parse(_ json: String) throws(ParameterSpaceError) -> ParameterSpace {
        try ParameterSpace.parse(json: Data(json.utf8), path: "space.json")
    }

    @Test func parsesBoundsInDeclarationOrder() throws {
        let space = try parse(
            #"{"stepsToConfirm": {"min": 6, "max": 12}, "minimumPeak": {"min": 0.03, "max": 0.1}}"#)
        #expect(space.parameters.map(\.key) == ["minimumPeak", "stepsToConfirm"])
        #expect(space.parameters[1].isInteger)
        #expect(!space.parameters[0].isInteger)
        #expect(space.parameters[0].value(atUnit: 0.5) == 0.065)
        #expect(space.parameters[1].value(atUnit: 0.49) == 9)
    }

    @Test func defaultSpaceRoundTripsThroughJSON() throws {
        let space = try parse(ParameterSpace.default.json)
        #expect(space == ParameterSpace.default)
    }

    /// FILE:LINE:COLUMN: key.path: what, for every way a space file can be wrong.
    @Test(arguments: [
        (#"{"minimumPeek": {"min": 0, "max": 1}}"#, "space.json:1:2: minimumPeek: unknown parameter"),
        (#"{"fillMissedSteps": {"min": 0, "max": 1}}"#, "cannot be searched"),
        (#"{"minimumPeak": {"min": 0.03}}"#, "space.json:1:2: minimumPeak.max: missing required key"),
        (#"{"minimumPeak": {"min": 0.1, "max": 0.03}}"#, "space.json:1:2: minimumPeak: expected min ≤ max"),
        (
            #"{"minimumPeak": {"min": "low", "max": 0.1}}"#,
            #"space.json:1:18: minimumPeak.min: expected a number, found "low""#
        ),
        (
            #"{"minimumPeak": {"min": 0.01, "max": 0.1, "step": 2}}"#,
            "space.json:1:43: minimumPeak.step: unknown field"
        ),
        (#"{"stepsToConfirm": {"min": 6.5, "max": 12}}"#, "expected whole-number bounds"),
        (
            #"{"stepsToConfirm": {"min": 6, "max": 12, "integer": false}}"#,
            "stepsToConfirm.integer: this parameter takes whole numbers"
        ),
        (
            #"{"minimumPeak": {"min": -1, "max": 0.1}}"#,
            "minimumPeak: -1 is out of range: expected g in 0...8"
        ),
        (#"{"minimumPeak": 0.05}"#, "space.json:1:2: minimumPeak: expected an object, found 0.05"),
        (#"[1, 2]"#, "space.json:1:1: expected a JSON object of parameters"),
        (#"{}"#, "expected at least one parameter"),
        (#"{"minimumPeak": "#, "space.json:1:17: invalid JSON"),
        // Duplicate keys are refused, not silently merged.
        (
            "{\"minimumPeak\": {\"min\": 0.01, \"max\": 0.1},\n \"minimumPeak\": {\"min\": 0.5, \"max\": 0.6}}",
            "space.json:2:2: invalid JSON: duplicate key \"minimumPeak\""
        ),
    ])
    func rejectsBadSpacesNamingTheKey(json: String, message: String) {
        let error = #expect(throws: ParameterSpaceError.self) { try parse(json) }
        #expect(error?.description.hasPrefix("space.json:") == true)
        #expect(error?.description.contains(message) == true, "\(String(describing: error))")
    }

    @Test func configurationAtAPointKeepsOtherParameters() {
        var base = DetectorConfiguration()
        base.correlationWindow = 3
        let space = ParameterSpace.default
        let configuration = space.configuration(at: [Double](repeating: 1, count: space.count), base: base)
        #expect(configuration.correlationWindow == 3)
        #expect(configuration.minimumPeak == 0.1)
        #expect(configuration.stepsToConfirm == 12)
        let point = space.point(of: configuration)
        #expect(point.allSatisfy { abs($0 - 1) < 1e-12 })
    }
}

@Suite("Search")
struct SearchTests {
    @Test(arguments: [(1, 3), (10, 4), (37, 8)])
    func latinHypercubeHasOnePointPerStratum(count: Int, dimensions: Int) {
        var random = SplitMix64(seed: 7)
        let points = latinHypercube(count: count, dimensions: dimensions, random: &random)
        #expect(points.count == count)
        for d in 0..<dimensions {
            let strata = points.map { Int($0[d] * Double(count)) }
            #expect(Set(strata) == Set(0..<count))
            #expect(points.allSatisfy { $0[d] >= 0 && $0[d] < 1 })
        }
        var again = SplitMix64(seed: 7)
        #expect(latinHypercube(count: count, dimensions: dimensions, random: &again) == points)
    }

    /// Small synthetic walks and a noise log: fast enough for a real search in a test.
    static func recordings() -> [TuningRecording] {
        var recordings: [TuningRecording] = []
        for (i, cadence) in [1.6, 1.9, 2.2].enumerated() {
            var walk = SyntheticWalk()
            walk.cadence = cadence
            walk.rate = 50
            walk.seed = UInt64(i + 1)
            walk.stillBefore = 3
            let steps = 60 + 10 * i
            recordings.append(
                TuningRecording(
                    labelled: LabelledRecording(
                        path: "w\(i).csv", name: "w\(i).csv", format: nil, placement: i == 0 ? "hand" : "bag",
                        kind: .walk, truth: steps), samples: walk.samples(steps: steps)))
        }
        var still = SyntheticWalk()
        still.rate = 50
        still.noise = 0.08
        recordings.append(
            TuningRecording(
                labelled: LabelledRecording(
                    path: "n.csv", name: "n.csv", format: nil, placement: "hand", kind: .nowalk, truth: 0),
                samples: still.samples(duration: 120, steps: 0)))
        return recordings
    }

    @Test func aSeedGivesTheSameResultWithAnyNumberOfJobs() async {
        let recordings = Self.recordings()
        var results: [SearchResult] = []
        for jobs in [1, 3] {
            let tuner = Tuner(
                space: .default, start: DetectorConfiguration(), objective: Objective(),
                evaluator: Evaluator(recordings: recordings, jobs: jobs))
            results.append(await tuner.search(on: Array(recordings.indices), budget: 24, seed: 42))
        }
        #expect(results[0].best.configuration == results[1].best.configuration)
        #expect(results[0].objectives == results[1].objectives)
        #expect(results[0].evaluations == 24)
        #expect(results[0].bestObjective <= results[0].startObjective)
        #expect(results[0].bestObjective == results[0].objectives.min())
    }

    @Test func theRobustChoiceIsReproducibleAndComparesNeighbourhoods() async {
        let recordings = Self.recordings()
        var results: [SearchResult] = []
        for jobs in [1, 2] {
            let tuner = Tuner(
                space: .default, start: DetectorConfiguration(), objective: Objective(),
                evaluator: Evaluator(recordings: recordings, jobs: jobs))
            results.append(await tuner.search(on: Array(recordings.indices), budget: 60, seed: 5))
        }
        #expect(results[0].best.configuration == results[1].best.configuration)
        #expect(results[0].objectives == results[1].objectives)
        let result = results[0]
        #expect(result.evaluations <= 60)
        // The choice is one of the evaluated configurations, scored by its neighbourhood mean.
        #expect(result.objectives.contains(result.bestObjective))
        #expect(result.robustObjective != nil)
        #expect(abs(Objective().value(result.best.summary) - result.bestObjective) < 1e-12)
    }

    /// When the robust choice keeps a configuration other than the lowest value seen (here the
    /// start), the report and the terminal say so rather than "nothing beat the start".
    @Test func theReportExplainsARobustChoiceThatIsNotTheLowest() {
        let start = Evaluator.Evaluated(
            configuration: DetectorConfiguration(), results: [], summary: EvaluationSummary([]))
        let search = SearchResult(
            best: start, bestObjective: 3.5, start: start, startObjective: 3.5,
            objectives: [3.5, 3.348, 3.6],
            interrupted: false, ending: "budget used", robustObjective: 3.55)
        let report = TuneReport(
            sets: ["set.csv"], space: .default, objective: Objective(), seed: 1, budget: 3, search: search,
            folds: nil, foldCount: 0, placements: nil, cvBudget: 0, searchSeconds: 1, totalSeconds: 1,
            jobs: 1,
            samples: 0)
        let note =
            "the lowest objective seen was 3.348, but the robust choice kept the starting configuration"
        #expect(report.markdown().contains("None: " + note))
        #expect(!report.markdown().contains("no configuration in the search beat the starting one"))
        #expect(report.terminal().contains("unchanged: " + note))
        // Without the robust choice, the best is the lowest, and nothing needs explaining.
        var plain = search
        plain.robustObjective = nil
        plain.bestObjective = 3.348
        #expect(
            TuneReport(
                sets: [], space: .default, objective: Objective(), seed: 1, budget: 3, search: plain,
                folds: nil,
                foldCount: 0, placements: nil, cvBudget: 0, searchSeconds: 1, totalSeconds: 1, jobs: 1,
                samples: 0
            ).robustNote == nil)
    }

    @Test func stoppingKeepsTheBestSoFar() async {
        let recordings = Self.recordings()
        let tuner = Tuner(
            space: .default, start: DetectorConfiguration(), objective: Objective(),
            evaluator: Evaluator(recordings: recordings, jobs: 2))
        let result = await tuner.search(on: [0, 3], budget: 100, seed: 1, shouldStop: { true })
        #expect(result.interrupted)
        #expect(result.evaluations == 1)
        #expect(result.best.configuration == DetectorConfiguration())
    }

    @Test func objectiveAddsTheWeightedTerms() {
        func result(
            _ placement: String, _ kind: LabelledRecording.Kind, truth: Int, counted: Int, hours: Double
        )
            -> EvaluationResult
        {
            EvaluationResult(
                recording: LabelledRecording(
                    path: "x", name: "x", format: nil, placement: placement, kind: kind, truth: truth),
                counted: counted, hours: hours, samples: 0)
        }
        let summary = EvaluationSummary([
            result("wrist", .walk, truth: 100, counted: 90, hours: 0.1),  // 10 %
            result("hand", .walk, truth: 200, counted: 210, hours: 0.1),  // 5 %
            result("wrist", .nowalk, truth: 0, counted: 6, hours: 2),  // 3 / h
            result("wrist", .mixed, truth: 50, counted: 40, hours: 8),  // 20 %
        ])
        // 7.5 + 0.1 × 3 + 0.01 × 20 + 0.2 × 10
        #expect(abs(Objective().value(summary) - 10.0) < 1e-9)
        let plain = Objective(falseStepWeight: 1, mixedWeight: 0, placementWeight: 0)
        #expect(abs(plain.value(summary) - 10.5) < 1e-9)
        #expect(Objective().value(EvaluationSummary([])) == 0)
    }
}

@Suite("Cross-validation")
struct CrossValidationTests {
    static func set() -> [LabelledRecording] {
        var recordings: [LabelledRecording] = []
        let strata: [(String, LabelledRecording.Kind, Int)] = [
            ("hand", .walk, 9), ("wrist", .walk, 7), ("bag", .walk, 4), ("wrist", .nowalk, 5),
            ("wrist", .mixed, 1),
        ]
        for (placement, kind, count) in strata {
            for i in 0..<count {
                recordings.append(
                    LabelledRecording(
                        path: "\(placement)-\(kind)-\(i)", name: "\(placement)-\(kind)-\(i)", format: nil,
                        placement: placement, kind: kind, truth: kind == .nowalk ? 0 : 100))
            }
        }
        return recordings
    }

    @Test(arguments: [2, 5, 7])
    func foldsPartitionTheRecordingsAndStratify(k: Int) {
        let recordings = Self.set()
        let folds = CrossValidation.folds(recordings, k: k, seed: 3)
        #expect(folds.count == k)
        let all = folds.flatMap { $0 }
        #expect(all.count == recordings.count)
        #expect(Set(all) == Set(recordings.indices))
        let sizes = folds.map(\.count)
        #expect(sizes.max()! - sizes.min()! <= 1)
        // Each stratum is spread evenly: its count per fold differs by at most one.
        for key in Set(recordings.map { "\($0.kind)/\($0.placement)" }) {
            let perFold = folds.map { fold in
                fold.filter { "\(recordings[$0].kind)/\(recordings[$0].placement)" == key }.count
            }
            #expect(perFold.max()! - perFold.min()! <= 1, "\(key): \(perFold)")
        }
        #expect(CrossValidation.folds(recordings, k: k, seed: 3) == folds)
    }

    @Test func foldCountIsCappedByTheRecordings() {
        let folds = CrossValidation.folds(Array(Self.set().prefix(3)), k: 5, seed: 1)
        #expect(folds.count == 3)
        #expect(folds.allSatisfy { $0.count == 1 })
    }

    @Test func placementSplitsHoldOutOnlyWalks() {
        let recordings = Self.set()
        let splits = CrossValidation.placementSplits(recordings)
        #expect(splits.map(\.placement) == ["bag", "hand", "wrist"])
        let wrist = splits[2].heldOut
        #expect(wrist.count == 7)
        #expect(wrist.allSatisfy { recordings[$0].kind == .walk && recordings[$0].placement == "wrist" })
    }

    @Test func crossValidationScoresEveryRecordingOnce() async {
        let recordings = SearchTests.recordings()
        let tuner = Tuner(
            space: ParameterSpace(parameters: [
                ParameterBounds(key: "minimumPeak", minimum: 0.03, maximum: 0.1)
            ]),
            start: DetectorConfiguration(), objective: Objective(),
            evaluator: Evaluator(recordings: recordings, jobs: 2))
        let folds = CrossValidation.folds(recordings.map(\.labelled), k: 2, seed: 1)
        let report = await CrossValidation.run(
            folds.enumerated().map { ("fold \($0.offset + 1)", $0.element) }, tuner: tuner, budget: 4, seed: 1
        )
        #expect(report.splits.count == 2)
        #expect(report.splits.flatMap(\.heldOutResults).count == recordings.count)
        for split in report.splits { #expect(Set(split.training).isDisjoint(with: split.heldOut)) }
    }
}

@Suite("Per-step truth and matching")
struct StepTruthTests {
    @Test func countsRisingEdgesAfterTheFirstRow() throws {
        let text = "100,1,0\n200,0,0\n300,0,1\n400,1,1\n500,1,0\r\n600,0,1\n"
        #expect(try StepTruth.parse(text: text, path: "s.csv") == [300, 400, 600])
    }

    @Test func rejectsBadRowsWithTheLine() {
        let error = #expect(throws: LabelledSetError.self) {
            try StepTruth.parse(text: "100,1,0\n200,x,0\n", path: "s.csv")
        }
        #expect(error?.line == 2)
        #expect(error?.description.contains("expected timestamp_ns,foot1,foot2") == true)
    }

    @Test func matchesWithinTheTolerance() {
        let ms: Int64 = 1_000_000
        let match = StepMatch.match(
            detected: [0, 600 * ms, 1000 * ms, 1900 * ms], truth: [100 * ms, 1100 * ms, 1500 * ms, 2000 * ms])
        #expect(match == StepMatch(truth: 4, detected: 4, matched: 3))
        #expect(match.recall == 0.75)
    }

    @Test func foldersMixPerStepTruthAndNamedTruth() throws {
        let folder = try TemporaryFolders.make("sets")
        defer { TemporaryFolders.remove(folder) }
        let walk = folder.appendingPathComponent("Pixel_Me_Hard_FrontPocket_1")
        try FileManager.default.createDirectory(at: walk, withIntermediateDirectories: true)
        let oxford = try String(
            contentsOf: Fixtures.samples.appendingPathComponent("walk-front-pocket-303.csv"), encoding: .utf8)
        try oxford.split(whereSeparator: \.isNewline).prefix(50).joined(separator: "\n").write(
            to: walk.appendingPathComponent("accelerometer.csv"), atomically: true, encoding: .utf8)
        try "1000,1,0\n2000,0,0\n3000,0,1\n4000,1,0\n".write(
            to: walk.appendingPathComponent("stepcounter.csv"), atomically: true, encoding: .utf8)
        try "Time (ms),X,Y,Z\n0,0,0,8192\n".write(
            to: folder.appendingPathComponent("walk-150.csv"), atomically: true, encoding: .utf8)
        try "Time (ms),X,Y,Z\n0,0,0,8192\n".write(
            to: folder.appendingPathComponent("notes.csv"), atomically: true, encoding: .utf8)
        var warnings: [String] = []
        let recordings = try LabelledSets.load([folder.path]) { warnings.append($0) }
        #expect(recordings.map(\.name) == ["Pixel_Me_Hard_FrontPocket_1/accelerometer.csv", "walk-150.csv"])
        #expect(recordings[0].truth == 2)
        #expect(recordings[0].placement == "front-pocket")
        #expect(recordings[1].truth == 150)
        #expect(warnings.count == 1)
        #expect(warnings.first?.contains("notes.csv: not scored") == true)
        let loaded = try TuningRecording.load(recordings[0])
        #expect(loaded.stepTimes == [3000, 4000])
        #expect(loaded.samples.count == 50)
    }

    @Test(arguments: [
        ("Pixel_Jamie_Hard_BackPocket_1", "back-pocket"), ("Samsung_Dario_Hard_ArmBand_2", "armband"),
        ("Pixel_Jamie_Hard_Purse_1", "bag"), ("Pixel_Jamie_Hard_SwingingArm_1", "hand-swinging"),
        ("Nexus_Jamie_Hard_InHand_1", "hand"), ("walks", "unknown"),
    ])
    func placementFromOxfordFolderNames(name: String, placement: String) {
        #expect(LabelledSets.placement(fromName: name) == placement)
    }
}

@Suite("SVG")
struct SVGTests {
    /// Parses `svg` with Foundation's XMLParser; returns the element names, or nil when malformed.
    private func elements(_ svg: String) -> [String]? {
        final class Collector: NSObject, XMLParserDelegate {
            var names: [String] = []
            func parser(
                _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?,
                qualifiedName: String?, attributes: [String: String] = [:]
            ) { names.append(elementName) }
        }
        let parser = XMLParser(data: Data(svg.utf8))
        let collector = Collector()
        parser.delegate = collector
        return parser.parse() ? collector.names : nil
    }

    /// The fill and height of every `rect`, or nil when the SVG is malformed.
    private func rectangles(_ svg: String) -> [(fill: String, height: Double)]? {
        final class Collector: NSObject, XMLParserDelegate {
            var rects: [(fill: String, height: Double)] = []
            func parser(
                _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?,
                qualifiedName: String?, attributes: [String: String] = [:]
            ) {
                guard elementName == "rect", let fill = attributes["fill"],
                    let height = attributes["height"].flatMap(Double.init)
                else { return }
                rects.append((fill, height))
            }
        }
        let parser = XMLParser(data: Data(svg.utf8))
        let collector = Collector()
        parser.delegate = collector
        return parser.parse() ? collector.rects : nil
    }

    @Test func documentsAreWellFormedAndEscapeText() throws {
        var doc = SVGDocument(width: 100, height: 50)
        doc.text("a < b & \"c\"", x: 1, y: 2, halo: true)
        doc.polyline([(0, 0), (1.005, 2.5)], stroke: "#000")
        doc.rect(x: 0, y: 0, width: -5, height: 3, fill: "red")
        let text = doc.render()
        #expect(text.contains("a &lt; b &amp; &quot;c&quot;"))
        #expect(text.contains("width=\"0\""))
        #expect(elements(text) == ["svg", "rect", "text", "polyline", "rect"])
    }

    @Test func chartsAreWellFormed() throws {
        let objective = Charts.objective([5, 7, 4.5, 30, 4.2, 4.4, 4.1], designEnd: 4)
        #expect(elements(objective)?.contains("polyline") == true)
        let bars = Charts.placements(
            ["hand", "wrist & co"], series: [("before", "#999", [1.2, 5.8]), ("after", "#00f", [1.0, nil])])
        #expect(elements(bars) != nil)
        #expect(bars.contains("wrist &amp; co"))
        // Each value is one bar of its series' colour, as tall as its value (the legend adds one
        // small swatch per series); a missing value draws no bar.
        let rects = try #require(rectangles(bars))
        let grey = rects.filter { $0.fill == "#999" }.map(\.height).sorted(by: >)
        let blue = rects.filter { $0.fill == "#00f" }.map(\.height).sorted(by: >)
        #expect(grey.count == 3 && blue.count == 2)
        if grey.count == 3 && blue.count == 2 {
            #expect(abs(grey[0] / grey[1] - 5.8 / 1.2) < 0.05)
            #expect(abs(blue[0] / grey[1] - 1.0 / 1.2) < 0.05)
        }
        var trace = SignalTrace()
        trace.times = [0, 0.04, 0.08]
        trace.filtered = [0, 0.1, -0.05]
        trace.threshold = [0.06, 0.06, 0.06]
        trace.prominenceLevel = [-0.06, 0.04, 0.01]
        trace.detected = [0.04]
        trace.truth = [0.05]
        trace.walking = [0...0.08]
        let signal = Charts.signal(trace, title: "walk.csv")
        // One triangle for the detected step, one in the legend.
        #expect(elements(signal)?.filter { $0 == "polygon" }.count == 2)
    }

    @Test(arguments: [
        (0.0, 9.3, [0.0, 2, 4, 6, 8]),
        (0.013, 0.087, [0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08]),
        (-0.21, 0.38, [-0.2, -0.1, 0, 0.1, 0.2, 0.3]),
        (0.0, 673.0, [0.0, 100, 200, 300, 400, 500, 600]),
    ])
    func ticksAreNiceAndCoverTheRange(low: Double, high: Double, expected: [Double]) {
        let ticks = niceTicks(low: low, high: high, count: 6)
        #expect(ticks.count == expected.count, "\(ticks)")
        for (a, b) in zip(ticks, expected) { #expect(abs(a - b) < 1e-9, "\(ticks)") }
    }

    @Test func tickLabelsUseTheStepsDecimals() {
        #expect(tickLabel(0.30000000000000004, step: 0.1) == "0.3")
        #expect(tickLabel(250, step: 50) == "250")
        #expect(tickLabel(0.025, step: 0.025) == "0.025")
        #expect(niceStep(0.7) == 1)
        #expect(niceStep(0.23) == 0.25)
        #expect(niceStep(130) == 200)
    }
}
