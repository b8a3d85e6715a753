public import StepDetection

/// Latin-hypercube samples of the unit cube: `count` points in `dimensions` dimensions, each
/// dimension's `count` equal strata holding exactly one point.
public func latinHypercube(count: Int, dimensions: Int, random: inout SplitMix64) -> [[Double]] {
    guard count > 0 else { return [] }
    var points = [[Double]](repeating: [Double](repeating: 0, count: dimensions), count: count)
    for d in 0..<dimensions {
        var strata = Array(0..<count)
        shuffle(&strata, &random)
        for i in 0..<count {
            points[i][d] = (Double(strata[i]) + random.nextUnit()) / Double(count)
        }
    }
    return points
}

/// Fisher–Yates with our own generator, so a seed gives the same order on every platform.
func shuffle<T>(_ values: inout [T], _ random: inout SplitMix64) {
    guard values.count > 1 else { return }
    for i in stride(from: values.count - 1, to: 0, by: -1) {
        let j = Int(random.next() % UInt64(i + 1))
        values.swapAt(i, j)
    }
}

/// How far a search has come, for progress bars.
public struct SearchProgress: Sendable {
    public var evaluations: Int
    public var budget: Int
    public var best: Double
}

/// What a search found.
public struct SearchResult: Sendable {
    /// The best configuration and its evaluation (the starting configuration when nothing beat it).
    public var best: Evaluator.Evaluated
    public var bestObjective: Double
    /// The starting configuration's evaluation.
    public var start: Evaluator.Evaluated
    public var startObjective: Double
    /// The objective of every evaluation, in order.
    public var objectives: [Double]
    /// Whether the search stopped early (interrupted or out of time) rather than finishing.
    public var interrupted: Bool
    /// Why the search ended, for reports.
    public var ending: String
    /// The chosen configuration's mean objective over itself and its neighbours, when the
    /// robust choice ran.
    public var robustObjective: Double?

    public var evaluations: Int { objectives.count }
}

/// The search: the starting configuration, then a Latin-hypercube design, then coordinate
/// refinement (a compass / pattern search) from the best point.
///
/// Why this and not Nelder–Mead or CMA-ES: step counts are integers, so the objective is
/// piecewise constant with plateaus and small jumps; simplex methods stall on plateaus and
/// need sequential evaluations, while a compass search makes `2 × dimensions` independent
/// proposals per round — one parallel batch — and only needs to compare values. The Latin
/// hypercube covers every parameter's range evenly first, so the refinement starts in the
/// right basin rather than at the starting configuration's.
///
/// Determinism: the design and the proposals depend only on the seed and on earlier results;
/// every batch is evaluated completely and reduced in order (ties go to the earlier proposal),
/// so a seed gives the same result with any number of jobs. Only `shouldStop` (Ctrl-C, a time
/// limit) can end a search at a point that depends on speed.
public struct Tuner: Sendable {
    public var space: ParameterSpace
    public var start: DetectorConfiguration
    public var objective: Objective
    public var evaluator: Evaluator
    /// Share of the budget spent on the Latin-hypercube design.
    public var designShare = 0.4
    /// Proposals evaluated between checks of `shouldStop`.
    public var batchSize = 16
    /// Whether the result is chosen for a good neighbourhood rather than for the single best
    /// value: see ``search(on:budget:seed:shouldStop:progress:)``.
    public var robustSelection = true
    /// Share of the budget kept for the robust choice.
    public var robustShare = 0.2
    /// Most candidates the robust choice compares.
    public var robustCandidates = 6
    /// Distance of the neighbours the robust choice evaluates, as a fraction of each range.
    public var neighbourhood = 1.0 / 32

    public init(
        space: ParameterSpace, start: DetectorConfiguration, objective: Objective, evaluator: Evaluator
    ) {
        self.space = space
        self.start = start
        self.objective = objective
        self.evaluator = evaluator
    }

    /// Searches on the recordings `subset` with at most `budget` evaluations.
    public func search(
        on subset: [Int], budget: Int, seed: UInt64,
        shouldStop: @Sendable () -> Bool = { false },
        progress: (SearchProgress) -> Void = { _ in }
    ) async -> SearchResult {
        let budget = max(1, budget)
        var random = SplitMix64(seed: seed)
        var objectives: [Double] = []
        var seen: [DetectorConfiguration: Double] = [:]
        var evaluatedBy: [DetectorConfiguration: Evaluator.Evaluated] = [:]
        var order: [(point: [Double], configuration: DetectorConfiguration, objective: Double)] = []
        let first = await evaluator.evaluate([start], on: subset)[0]
        let startObjective = objective.value(first.results)
        objectives.append(startObjective)
        seen[start] = startObjective
        evaluatedBy[start] = first
        order.append((space.point(of: start), start, startObjective))
        var best = first
        var bestObjective = startObjective
        var bestPoint = space.point(of: start)
        progress(SearchProgress(evaluations: 1, budget: budget, best: bestObjective))
        var interrupted = false

        /// Evaluates the new configurations among `points` (in order, within the budget) and
        /// returns them with their objectives; keeps the best so far.
        func run(_ points: [[Double]], limit: Int) async -> [(point: [Double], objective: Double)] {
            var candidates: [(point: [Double], configuration: DetectorConfiguration)] = []
            for point in points {
                let configuration = space.configuration(at: point, base: start)
                guard seen[configuration] == nil, (try? configuration.validate()) != nil else { continue }
                guard objectives.count + candidates.count < limit else { break }
                if candidates.contains(where: { $0.configuration == configuration }) { continue }
                candidates.append((point, configuration))
            }
            guard !candidates.isEmpty else { return [] }
            let evaluated = await evaluator.evaluate(candidates.map(\.configuration), on: subset)
            var out: [(point: [Double], objective: Double)] = []
            for (candidate, result) in zip(candidates, evaluated) {
                let value = objective.value(result.results)
                objectives.append(value)
                seen[candidate.configuration] = value
                evaluatedBy[candidate.configuration] = result
                order.append((candidate.point, candidate.configuration, value))
                out.append((candidate.point, value))
                if value < bestObjective - 1e-12 {
                    bestObjective = value
                    best = result
                    bestPoint = candidate.point
                }
            }
            progress(SearchProgress(evaluations: objectives.count, budget: budget, best: bestObjective))
            return out
        }

        // 1. Latin-hypercube design.
        var starts: [(point: [Double], objective: Double)] = [(bestPoint, startObjective)]
        let dimensions = max(1, space.count)
        let reserve =
            robustSelection && budget >= 40 ? Int(Double(budget) * robustShare) : 0
        let searchLimit = budget - reserve
        let designCount = max(0, min(searchLimit - 1, Int((Double(budget) * designShare).rounded())))
        let design = latinHypercube(count: designCount, dimensions: space.count, random: &random)
        var offset = 0
        while offset < design.count && objectives.count < searchLimit {
            if shouldStop() {
                interrupted = true
                break
            }
            starts += await run(
                Array(design[offset..<min(design.count, offset + batchSize)]), limit: searchLimit)
            offset += batchSize
        }

        // 2. Coordinate refinement: from the best design point, try ± step along every
        // parameter, move to the best improvement, else halve the step; when the step is below
        // 1/64 of every range, start again from the next-best design point (multi-start), so the
        // whole budget is used and a second basin gets its chance.
        let startOrder = starts.indices.sorted { (starts[$0].objective, $0) < (starts[$1].objective, $1) }
        let smallest = 1.0 / 64
        var ending = "budget used"
        var nextStart = 0
        var refinements = 0
        search: while !interrupted && objectives.count < searchLimit {
            guard nextStart < startOrder.count else {
                ending = "converged from every start"
                break
            }
            var center = starts[startOrder[nextStart]]
            nextStart += 1
            refinements += 1
            var step = 0.25
            while step >= smallest {
                if shouldStop() {
                    interrupted = true
                    break search
                }
                if objectives.count >= searchLimit { break search }
                var proposals: [[Double]] = []
                for (d, bounds) in space.parameters.enumerated() {
                    // Integer parameters move by at least one.
                    let unitStep =
                        bounds.isInteger && bounds.maximum > bounds.minimum
                        ? max(step, 1 / (bounds.maximum - bounds.minimum)) : step
                    for sign in [1.0, -1.0] {
                        var point = center.point
                        point[d] = min(1, max(0, point[d] + sign * unitStep))
                        if point[d] != center.point[d] { proposals.append(point) }
                    }
                }
                let results = await run(proposals, limit: searchLimit)
                // The best proposal; ties go to the earlier one.
                var move: (point: [Double], objective: Double)?
                for r in results where r.objective < (move?.objective ?? center.objective) - 1e-12 {
                    move = r
                }
                if let move {
                    center = move
                } else {
                    step /= 2
                }
            }
        }
        if refinements > 1 && ending == "budget used" {
            ending = "budget used, \(refinements) refinement starts"
        }

        // 3. Robust choice: the best few distinct configurations get their neighbours (± 1/32
        // of every range, ± 1 for integers) evaluated, and the one with the lowest mean
        // objective over itself and its neighbours wins. A value that is best only at the edge
        // of a cliff (one parameter a hair away from doubling the wrist's count) loses to a
        // slightly worse value on a plateau, which is what carries over to new recordings.
        var robustObjective: Double?
        if reserve > 0 && !interrupted && !shouldStop() {
            let ranked = order.indices.sorted { (order[$0].objective, $0) < (order[$1].objective, $1) }
            let count = max(1, min(robustCandidates, reserve / (2 * dimensions)))
            var chosen: (index: Int, smoothed: Double)?
            for index in ranked.prefix(count) {
                let center = order[index]
                var neighbours: [[Double]] = []
                for (d, bounds) in space.parameters.enumerated() {
                    let unitStep =
                        bounds.isInteger && bounds.maximum > bounds.minimum
                        ? max(neighbourhood, 1 / (bounds.maximum - bounds.minimum)) : neighbourhood
                    for sign in [1.0, -1.0] {
                        var point = center.point
                        point[d] = min(1, max(0, point[d] + sign * unitStep))
                        if point[d] != center.point[d] { neighbours.append(point) }
                    }
                }
                _ = await run(neighbours, limit: budget)
                var values = [center.objective]
                for point in neighbours {
                    let configuration = space.configuration(at: point, base: start)
                    if configuration != center.configuration, let value = seen[configuration] {
                        values.append(value)
                    }
                }
                let smoothed = values.reduce(0, +) / Double(values.count)
                if smoothed < (chosen?.smoothed ?? .infinity) - 1e-12 { chosen = (index, smoothed) }
            }
            if let chosen, let result = evaluatedBy[order[chosen.index].configuration] {
                best = result
                bestObjective = order[chosen.index].objective
                robustObjective = chosen.smoothed
            }
        }
        if interrupted { ending = "stopped early" }
        return SearchResult(
            best: best, bestObjective: bestObjective, start: first, startObjective: startObjective,
            objectives: objectives, interrupted: interrupted, ending: ending, robustObjective: robustObjective
        )
    }
}
