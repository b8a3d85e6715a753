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

    /// The formula with these weights, for reports.
    public var formula: String {
        "walks MAPE + \(short(falseStepWeight)) × false steps/h + \(short(mixedWeight)) × mixed-log error"
            + " + \(short(placementWeight)) × worst placement MAPE"
    }
}

func short(_ value: Double) -> String {
    value == value.rounded() && abs(value) < 1e9 ? String(Int(value)) : "\(value)"
}
