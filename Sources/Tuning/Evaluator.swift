import Foundation
public import StepDetection

/// Counts steps for many configurations over recordings held in memory, on all cores.
///
/// Work is split into (configuration × recording) items run by a task group of `jobs` tasks,
/// each with its own fresh, value-type detector; results land in fixed slots, so the outcome
/// does not depend on `jobs` or on scheduling.
///
/// The detector's first stages (magnitude, resampling, high-pass) depend on three parameters
/// the tuner rarely varies (``ResampledInput``): each recording runs through them once per
/// combination of those, and every configuration sharing it starts from there. The counts are
/// the same as from the samples.
public struct Evaluator: Sendable {
    public let recordings: [TuningRecording]
    /// Concurrent tasks.
    public var jobs: Int
    /// The recordings' first stages, shared by copies of the evaluator.
    let prepared = PreparedRecordings()

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
        let prepared = await prepare(configurations, on: subset)
        await withTaskGroup(of: (Int, Int, Int).self) { group in
            var next = 0
            func start() {
                let c = next / perConfiguration
                let i = order[next % perConfiguration]
                let configuration = configurations[c]
                let recording = subset[i]
                let samples = recordings[recording].samples
                let input = recordings[recording].input
                let first = prepared[PreparedRecordings.Key(configuration, input: input)]?[recording]
                next += 1
                group.addTask {
                    if let first {
                        return (c, i, StepDetector.countSteps(in: first, configuration: configuration))
                    }
                    return (
                        c, i, StepDetector.countSteps(in: samples, configuration: configuration, input: input)
                    )
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

    /// The first stages of `recordings` for the configurations' first-stage parameters, made
    /// (on `jobs` tasks) where not made before; a combination beyond
    /// ``PreparedRecordings/maximumKeys`` is left out (its configurations count from the samples).
    func prepare(_ configurations: [DetectorConfiguration], on recordings: [Int]) async
        -> [PreparedRecordings.Key: [Int: ResampledInput]]
    {
        let inputs = Set(recordings.map { self.recordings[$0].input })
        var wanted: [PreparedRecordings.Key: DetectorConfiguration] = [:]
        for configuration in configurations {
            for input in inputs {
                let key = PreparedRecordings.Key(configuration, input: input)
                if wanted[key] == nil { wanted[key] = configuration }
            }
        }
        var missing: [(PreparedRecordings.Key, DetectorConfiguration, Int)] = []
        for (key, configuration) in wanted where prepared.reserve(key) {
            for recording in recordings
            where self.recordings[recording].input == key.input && !prepared.has(key, recording) {
                missing.append((key, configuration, recording))
            }
        }
        if !missing.isEmpty {
            let all = self.recordings
            await withTaskGroup(of: (PreparedRecordings.Key, Int, ResampledInput).self) { group in
                var next = 0
                func start() {
                    let (key, configuration, recording) = missing[next]
                    next += 1
                    group.addTask {
                        let samples = all[recording].samples
                        return (
                            key, recording,
                            ResampledInput(samples, configuration: configuration, input: key.input)
                        )
                    }
                }
                while next < min(jobs, missing.count) { start() }
                while let (key, recording, input) = await group.next() {
                    prepared.store(input, key, recording)
                    if next < missing.count { start() }
                }
            }
        }
        return prepared.inputs(for: Set(wanted.keys))
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

/// Recordings run through the detector's first stages, by the parameters those depend on;
/// shared by an evaluator's copies, safe to use from any task.
final class PreparedRecordings: @unchecked Sendable {
    /// What the first stages depend on.
    struct Key: Hashable, Sendable {
        var sampleRate: Double
        var maximumGap: Double
        var highPassCutoff: Double
        var input: StepDetector.Input

        init(_ configuration: DetectorConfiguration, input: StepDetector.Input) {
            sampleRate = configuration.sampleRate
            maximumGap = configuration.maximumGap
            highPassCutoff = configuration.highPassCutoff
            self.input = input
        }
    }

    /// Most combinations of first-stage parameters kept (per kind of input): each holds about
    /// twice the memory of the recordings; a search over the sample rate or the high-pass
    /// cut-off counts from the samples instead.
    static let maximumKeys = 4

    private let lock = NSLock()
    private var inputs: [Key: [Int: ResampledInput]] = [:]

    func has(_ key: Key, _ recording: Int) -> Bool {
        lock.withLock { inputs[key]?[recording] != nil }
    }

    /// Whether inputs for `key` are kept, making room for them when there is some.
    func reserve(_ key: Key) -> Bool {
        lock.withLock {
            if inputs[key] != nil { return true }
            guard inputs.count < Self.maximumKeys else { return false }
            inputs[key] = [:]
            return true
        }
    }

    func store(_ input: ResampledInput, _ key: Key, _ recording: Int) {
        lock.withLock { inputs[key, default: [:]][recording] = input }
    }

    func inputs(for keys: Set<Key>) -> [Key: [Int: ResampledInput]] {
        lock.withLock { inputs.filter { keys.contains($0.key) } }
    }
}
