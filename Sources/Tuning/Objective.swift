/// What the tuner minimises, in percentage points of walk error:
///
///     walks MAPE
///       + falseStepWeight × false steps per hour on no-walk logs
///       + mixedWeight × mixed-log absolute % error
///       + placementWeight × the worst placement's walks MAPE
///
/// A term whose recordings are absent from the set counts 0. With the defaults, 10 false steps
/// an hour cost as much as 1 point of walk MAPE, the mixed day's 38 % (short bouts the gate
/// cannot count by design) about 0.4 points, and the worst carrying position a fifth of its
/// MAPE, so no placement is sacrificed for the average.
public struct Objective: Sendable, Hashable {
    public var falseStepWeight: Double = 0.1
    public var mixedWeight: Double = 0.01
    public var placementWeight: Double = 0.2
    /// Weight of each set (by name) in the mean over sets; absent sets weigh 1.
    public var setWeights: [String: Double] = [:]
    /// Weight of the worst set's objective, on top of the weighted mean over sets.
    public var worstSetWeight: Double = 0.5
    /// Weight of the daily-life days' mean absolute error.
    public var dailyLifeWeight: Double = 0.2

    public init() {}

    public init(falseStepWeight: Double, mixedWeight: Double, placementWeight: Double) {
        self.falseStepWeight = falseStepWeight
        self.mixedWeight = mixedWeight
        self.placementWeight = placementWeight
    }

    /// The objective's value for a summary; lower is better.
    public func value(_ summary: EvaluationSummary) -> Double {
        let worst = summary.placements.map(\.mape).max() ?? 0
        return (summary.walkMAPE ?? 0) + falseStepWeight * (summary.falseStepsPerHour ?? 0)
            + mixedWeight * (summary.mixedError ?? 0) + placementWeight * worst
    }

    /// The objective of a run's results. With one set, the formula above; with several, the
    /// mean of the sets' values weighted by `setWeights`, plus `worstSetWeight` × the worst
    /// set's value. Days of the daily-life bench add `dailyLifeWeight` × their mean absolute
    /// error.
    public func value(_ results: [EvaluationResult]) -> Double {
        var bySet: [String: [EvaluationResult]] = [:]
        for r in results where r.recording.set != DailyLifeBench.setName {
            bySet[r.recording.set, default: []].append(r)
        }
        let daily = EvaluationSummary(results).dailyLifeError.map { dailyLifeWeight * $0 } ?? 0
        guard bySet.count > 1 else { return value(EvaluationSummary(results)) + daily }
        var total = 0.0
        var weights = 0.0
        var worst = 0.0
        for (name, members) in bySet {
            let v = value(EvaluationSummary(members))
            let w = setWeights[name] ?? 1
            total += w * v
            weights += w
            worst = max(worst, v)
        }
        return (weights > 0 ? total / weights : 0) + worstSetWeight * worst + daily
    }

    /// The value of each set, by name (days excluded).
    public func setValues(_ results: [EvaluationResult]) -> [(
        set: String, value: Double, summary: EvaluationSummary
    )] {
        var bySet: [String: [EvaluationResult]] = [:]
        for r in results where r.recording.set != DailyLifeBench.setName {
            bySet[r.recording.set, default: []].append(r)
        }
        return bySet.keys.sorted().map { name in
            let summary = EvaluationSummary(bySet[name]!)
            return (name, value(summary), summary)
        }
    }

    /// The formula with these weights, for reports.
    public var formula: String {
        "walks MAPE + \(short(falseStepWeight)) × false steps/h + \(short(mixedWeight)) × mixed-log error"
            + " + \(short(placementWeight)) × worst placement MAPE"
            + "; with several sets, the weighted mean over sets + \(short(worstSetWeight)) × the worst set"
            + "; + \(short(dailyLifeWeight)) × daily-life day error when days are added"
    }
}

func short(_ value: Double) -> String {
    value == value.rounded() && abs(value) < 1e9 ? String(Int(value)) : "\(value)"
}
