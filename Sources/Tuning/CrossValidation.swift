public import StepDetection

/// Held-out figures: tune on part of the set, score on the rest.
public enum CrossValidation {
    /// `k` folds of recording indices, stratified by kind and placement: the recordings of each
    /// (kind, placement) group are shuffled with the seed and dealt round-robin, continuing
    /// from fold to fold across groups so the folds stay within one recording of each other in
    /// size. Every recording is in exactly one fold. `k` is capped at the number of recordings.
    ///
    /// Recordings of one session (``LabelledRecording/session``: a wearer's session, an Oxford
    /// folder) stay together: sessions are the units dealt, grouped by the kind and placement
    /// of their first recording, and each goes to the fold with the fewest recordings so far.
    public static func folds(_ recordings: [LabelledRecording], k: Int, seed: UInt64) -> [[Int]] {
        var sessions: [String: [Int]] = [:]
        var order: [String] = []
        for (i, r) in recordings.enumerated() {
            if sessions[r.session] == nil { order.append(r.session) }
            sessions[r.session, default: []].append(i)
        }
        let k = max(1, min(k, order.count))
        var groups: [String: [String]] = [:]
        for session in order {
            let r = recordings[sessions[session]![0]]
            groups["\(r.kind.rawValue)/\(r.placement)", default: []].append(session)
        }
        var random = SplitMix64(seed: seed)
        var folds = [[Int]](repeating: [], count: k)
        var next = 0
        for key in groups.keys.sorted() {
            var members = groups[key]!
            shuffle(&members, &random)
            for member in members {
                // To the fold with the fewest recordings; ties in round-robin order.
                let target = (0..<k).map { (next + $0) % k }.min { folds[$0].count < folds[$1].count }!
                folds[target] += sessions[member]!
                next += 1
            }
        }
        return folds.map { $0.sorted() }
    }

    /// Leave-one-set-out splits: for each set (with at least two sets, days of the daily-life
    /// bench aside), all its recordings held out.
    public static func setSplits(_ recordings: [LabelledRecording]) -> [(set: String, heldOut: [Int])] {
        var bySet: [String: [Int]] = [:]
        for (i, r) in recordings.enumerated() where r.set != DailyLifeBench.setName {
            bySet[r.set, default: []].append(i)
        }
        guard bySet.count >= 2 else { return [] }
        return bySet.keys.sorted().map { ($0, bySet[$0]!) }
    }

    /// Leave-one-placement-out splits: for each placement with walks (and at least two
    /// placements in all), the held-out walks of that placement; the training set is every
    /// other recording, no-walk and mixed logs of that placement included (without them the
    /// tuner could not see false steps at all).
    public static func placementSplits(_ recordings: [LabelledRecording]) -> [(
        placement: String, heldOut: [Int]
    )] {
        var byPlacement: [String: [Int]] = [:]
        for (i, r) in recordings.enumerated() where r.kind == .walk {
            byPlacement[r.placement, default: []].append(i)
        }
        guard byPlacement.count >= 2 else { return [] }
        return byPlacement.keys.sorted().map { ($0, byPlacement[$0]!) }
    }

    /// The result of one held-out split.
    public struct Split: Sendable {
        /// The fold number or the placement left out.
        public var name: String
        public var training: [Int]
        public var heldOut: [Int]
        public var tuned: DetectorConfiguration
        /// The tuned configuration's objective on the training recordings.
        public var trainingObjective: Double
        /// The held-out recordings' results with the configuration tuned without them.
        public var heldOutResults: [EvaluationResult]
    }

    /// What cross-validation found.
    public struct Report: Sendable {
        public var splits: [Split]
        /// The pooled held-out results (each recording scored once, by the configuration tuned
        /// without it).
        public var summary: EvaluationSummary
        public var evaluations: Int
    }

    /// Tunes on each split's training recordings with `budget` evaluations and scores the
    /// held-out ones. Splits run one after another, each using every core.
    public static func run(
        _ splits: [(name: String, heldOut: [Int])], tuner: Tuner, budget: Int, seed: UInt64,
        shouldStop: @Sendable () -> Bool = { false },
        progress: (_ split: Int, SearchProgress) -> Void = { _, _ in }
    ) async -> Report {
        var done: [Split] = []
        var evaluations = 0
        let all = Array(tuner.evaluator.recordings.indices)
        for (n, split) in splits.enumerated() {
            if shouldStop() { break }
            let held = Set(split.heldOut)
            let training = all.filter { !held.contains($0) }
            let result = await tuner.search(
                on: training, budget: budget, seed: seed &+ UInt64(n + 1), shouldStop: shouldStop,
                progress: { progress(n, $0) })
            evaluations += result.evaluations
            let tested = await tuner.evaluator.evaluate([result.best.configuration], on: split.heldOut)[0]
            done.append(
                Split(
                    name: split.name, training: training, heldOut: split.heldOut,
                    tuned: result.best.configuration, trainingObjective: result.bestObjective,
                    heldOutResults: tested.results))
        }
        return Report(
            splits: done, summary: EvaluationSummary(done.flatMap(\.heldOutResults)), evaluations: evaluations
        )
    }
}
