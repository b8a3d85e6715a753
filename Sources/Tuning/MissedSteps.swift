import Foundation

/// Where in a walk a true step falls, for telling which steps a detector misses.
public enum WalkPhase: String, Sendable, Hashable, CaseIterable {
    /// The first three steps, from standing.
    case start
    /// Steps inside the U-turn (when the set gives its times).
    case turn
    /// The last three steps into the stop (before the walk's end, when the set gives it).
    case stop
    /// Steps after the walk's end: shuffles and repositioning once stopped.
    case after
    /// Every other step.
    case middle
}

/// Times a set gives for one trial, beside its per-step truth: the U-turn and the end of the
/// walk, nanoseconds on the recording's clock.
public struct WalkLandmarks: Sendable, Hashable {
    public var turn: ClosedRange<Int64>?
    public var end: Int64?

    public init(turn: ClosedRange<Int64>? = nil, end: Int64? = nil) {
        self.turn = turn
        self.end = end
    }

    /// Landmarks by recording name from a `detail.csv` beside a manifest, read from its columns
    /// `path`, `uturn_start_s`, `uturn_end_s` and `trial_end_s` (seconds on the file's clock, as
    /// the ipol-waist set gives them); empty when there is no such file or it has none of them.
    public static func read(besideManifest manifest: String) throws(LabelledSetError) -> [String:
        WalkLandmarks]
    {
        let path = LabelledSet.directory(of: manifest) + "detail.csv"
        guard manifest.lowercased().hasSuffix(".csv"), let data = FileManager.default.contents(atPath: path)
        else { return [:] }
        let lines = String(decoding: data, as: UTF8.self).split(whereSeparator: { $0 == "\n" || $0 == "\r\n" }
        )
        guard let header = lines.first else { return [:] }
        let columns = LabelledSet.splitCSV(String(header)).map { $0.trimmingSpaces().lowercased() }
        guard let name = columns.firstIndex(of: "path") else { return [:] }
        let turnStart = columns.firstIndex(of: "uturn_start_s")
        let turnEnd = columns.firstIndex(of: "uturn_end_s")
        let end = columns.firstIndex(of: "trial_end_s")
        guard (turnStart != nil && turnEnd != nil) || end != nil else { return [:] }
        var landmarks: [String: WalkLandmarks] = [:]
        for (offset, line) in lines.enumerated().dropFirst() {
            let cells = LabelledSet.splitCSV(String(line)).map { $0.trimmingSpaces() }
            func time(_ column: Int?) throws(LabelledSetError) -> Int64? {
                guard let column else { return nil }
                guard column < cells.count, let seconds = Double(cells[column]), seconds.isFinite,
                    seconds >= 0
                else {
                    throw LabelledSetError(
                        path: path, line: offset + 1,
                        message:
                            "column '\(columns[column])': expected seconds ≥ 0, found '\(column < cells.count ? cells[column] : "")'"
                    )
                }
                return Int64((seconds * 1e9).rounded())
            }
            guard name < cells.count else { continue }
            var trial = WalkLandmarks(end: try time(end))
            if let start = try time(turnStart), let stop = try time(turnEnd) {
                guard start <= stop else {
                    throw LabelledSetError(
                        path: path, line: offset + 1, message: "the U-turn ends before it starts")
                }
                trial.turn = start...stop
            }
            landmarks[cells[name]] = trial
        }
        return landmarks
    }

    /// The phase of each of `truth` (sorted step times): the first three are `start`; after the
    /// end, `after`; the last three before the end (or of all, without an end) `stop`; inside
    /// the U-turn `turn`; the rest `middle`.
    public func phases(of truth: [Int64]) -> [WalkPhase] {
        let walked = end.map { end in truth.filter { $0 <= end }.count } ?? truth.count
        return truth.indices.map { i in
            if i < 3 { return .start }
            if i >= walked { return .after }
            if i >= walked - 3 { return .stop }
            if let turn, turn.contains(truth[i]) { return .turn }
            return .middle
        }
    }
}

/// One recording's true steps, matched and missed, by phase.
public struct MissedSteps: Sendable, Hashable {
    public var name: String
    public var truth: Int
    public var counted: Int
    /// The detector's lag behind the truth, nanoseconds.
    public var lag: Int64
    /// True steps and those missed, by phase.
    public var steps: [WalkPhase: Int] = [:]
    public var missed: [WalkPhase: Int] = [:]

    /// Counted steps matched to no true step.
    public var extra: Int { counted - (truth - missed.values.reduce(0, +)) }

    /// Matches `counted` step times, less their lag (``StepMatch/lag(detected:truth:reach:)``),
    /// to the `truth` of one recording (``StepMatch/matchedTruth(detected:truth:tolerance:)``).
    public init(
        name: String, truth: [Int64], counted: [Int64], landmarks: WalkLandmarks, tolerance: Int64
    ) {
        self.name = name
        self.truth = truth.count
        self.counted = counted.count
        let lag = StepMatch.lag(detected: counted, truth: truth)
        self.lag = lag
        let found = StepMatch.matchedTruth(
            detected: counted.map { $0 - lag }, truth: truth, tolerance: tolerance)
        for (phase, hit) in zip(landmarks.phases(of: truth), found) {
            steps[phase, default: 0] += 1
            if !hit { missed[phase, default: 0] += 1 }
        }
    }
}
