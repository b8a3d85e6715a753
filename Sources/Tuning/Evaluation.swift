/// How one labelled recording scored.
public struct EvaluationResult: Sendable, Hashable {
    public var recording: LabelledRecording
    /// Steps the detector counted.
    public var counted: Int
    /// Length of the recording, in hours.
    public var hours: Double
    /// Samples read.
    public var samples: Int

    public init(recording: LabelledRecording, counted: Int, hours: Double, samples: Int) {
        self.recording = recording
        self.counted = counted
        self.hours = hours
        self.samples = samples
    }

    /// Signed error in percent of the truth; `nil` when the truth is 0.
    public var percentError: Double? {
        recording.truth > 0 ? Double(counted - recording.truth) / Double(recording.truth) * 100 : nil
    }

    /// Steps counted beyond the truth (for no-walk logs, the false steps).
    public var excessSteps: Int { max(0, counted - recording.truth) }
}

/// The three figures a detector is judged by, plus the walk error per placement.
///
/// - Walks: mean absolute percentage error (MAPE) of the total count.
/// - No-walk logs: false steps (counted beyond the truth) per hour, pooled over all logs.
/// - Mixed logs: mean absolute percentage error.
public struct EvaluationSummary: Sendable, Hashable {
    /// Walks MAPE, in percent; `nil` without walks.
    public var walkMAPE: Double?
    public var walkCount = 0
    /// False steps per hour on no-walk logs; `nil` without them.
    public var falseStepsPerHour: Double?
    public var falseSteps = 0
    public var noWalkHours = 0.0
    public var noWalkCount = 0
    /// Mixed-log mean absolute percentage error, in percent; `nil` without mixed logs.
    public var mixedError: Double?
    public var mixedCount = 0
    /// Walks MAPE per placement, sorted by placement.
    public var placements: [PlacementScore] = []
    /// Mean absolute error of the daily-life days among the results, in percent; `nil` without.
    public var dailyLifeError: Double?

    /// The walk error of one carrying position.
    public struct PlacementScore: Sendable, Hashable {
        public var placement: String
        public var mape: Double
        public var count: Int
    }

    public init(_ results: [EvaluationResult]) {
        var walkErrors: [Double] = []
        var mixedErrors: [Double] = []
        var byPlacement: [String: [Double]] = [:]
        for result in results where result.recording.set != DailyLifeBench.setName {
            switch result.recording.kind {
            case .walk:
                guard let error = result.percentError else { continue }
                walkErrors.append(abs(error))
                byPlacement[result.recording.placement, default: []].append(abs(error))
            case .mixed:
                if let error = result.percentError { mixedErrors.append(abs(error)) }
            case .nowalk:
                falseSteps += result.excessSteps
                noWalkHours += result.hours
                noWalkCount += 1
            }
        }
        dailyLifeError = mean(
            results.filter { $0.recording.set == DailyLifeBench.setName }.compactMap {
                $0.percentError.map(abs)
            })
        walkCount = walkErrors.count
        walkMAPE = mean(walkErrors)
        mixedCount = mixedErrors.count
        mixedError = mean(mixedErrors)
        if noWalkCount > 0 && noWalkHours > 0 { falseStepsPerHour = Double(falseSteps) / noWalkHours }
        placements = byPlacement.keys.sorted().map { key in
            PlacementScore(placement: key, mape: mean(byPlacement[key]!) ?? 0, count: byPlacement[key]!.count)
        }
    }
}

func mean(_ values: [Double]) -> Double? {
    values.isEmpty ? nil : values.reduce(0, +) / Double(values.count)
}
