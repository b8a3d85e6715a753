public import StepDetection

/// Counts steps for many configurations over recordings held in memory, on all cores.
///
/// Work is split into (configuration × recording) items run by a task group of `jobs` tasks,
/// each with its own fresh, value-type detector; results land in fixed slots, so the outcome
/// does not depend on `jobs` or on scheduling.
public struct Evaluator: Sendable {
    public let recordings: [TuningRecording]
    /// Concurrent tasks.
    public var jobs: Int

    public init(recordings: [TuningRecording], jobs: Int) {
        self.recordings = recordings
        self.jobs = max(1, jobs)
    }

    /// Total samples held.
    public var sampleCount: Int { recordings.reduce(0) { $0 + $1.samples.count } }

    /// Step counts: `result[c][i]` is configuration `c`'s count on `recordings[subset[i]]`.
    public func counts(_ configurations: [DetectorConfiguration], on subset: [Int]) async -> [[Int]] {
        let perConfiguration = subset.count
        let total = configurations.count * perConfiguration
        var counts = [[Int]](
            repeating: [Int](repeating: 0, count: perConfiguration), count: configurations.count)
        guard total > 0 else { return counts }
        // Longest recordings first within each configuration, so the group's tail is short.
        let recordings = recordings
        let order = subset.indices.sorted {
            recordings[subset[$0]].samples.count > recordings[subset[$1]].samples.count
        }
        await withTaskGroup(of: (Int, Int, Int).self) { group in
            var next = 0
            func start() {
                let c = next / perConfiguration
                let i = order[next % perConfiguration]
                let configuration = configurations[c]
                let samples = recordings[subset[i]].samples
                let input = recordings[subset[i]].input
                next += 1
                group.addTask {
                    (c, i, StepDetector.countSteps(in: samples, configuration: configuration, input: input))
                }
            }
            while next < min(jobs, total) { start() }
            while let (c, i, count) = await group.next() {
                counts[c][i] = count
                if next < total { start() }
            }
        }
        return counts
    }

    /// Scored results of one configuration's counts on `subset`.
    public func results(_ counts: [Int], on subset: [Int]) -> [EvaluationResult] {
        zip(subset, counts).map { recordings[$0].result(counted: $1) }
    }

    /// Evaluates configurations on `subset`: summaries in the configurations' order.
    public func evaluate(_ configurations: [DetectorConfiguration], on subset: [Int]) async -> [Evaluated] {
        let all = await counts(configurations, on: subset)
        return zip(configurations, all).map { configuration, counts in
            let results = results(counts, on: subset)
            return Evaluated(
                configuration: configuration, results: results, summary: EvaluationSummary(results))
        }
    }

    /// A configuration with its results.
    public struct Evaluated: Sendable {
        public var configuration: DetectorConfiguration
        public var results: [EvaluationResult]
        public var summary: EvaluationSummary
    }
}
