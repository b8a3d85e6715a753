/// A walking bout: a run of counted steps without a pause longer than the detector's own
/// `resumeTime` (after a walk's last step, a chain at its rhythm resumes the same walk for that
/// long), so a bout is what the detector treats as one walk, turns and short halts included.
public struct WalkingBout: Sendable, Hashable {
    /// Nanoseconds on the input's timeline: the first and last step's peak.
    public var start: Int64
    public var end: Int64
    /// Steps counted in it.
    public var steps: Int

    public init(start: Int64, end: Int64, steps: Int) {
        self.start = start
        self.end = end
        self.steps = steps
    }

    /// Steps per minute between the first and the last step (0 for a single step).
    public var cadence: Double {
        end > start && steps > 1 ? Double(steps - 1) / (Double(end - start) / 6e10) : 0
    }
}

/// Groups a detector's step events into walking bouts, as they come (live or replayed).
public struct BoutTracker: Sendable {
    /// The longest pause within a bout, in nanoseconds.
    public let maximumPause: Int64
    private var current: WalkingBout?
    private var lastCount = 0

    /// A tracker whose bouts end after the pause `configuration` allows a walk to resume within
    /// (`resumeTime`; two of the longest step intervals when resuming is off).
    public init(configuration: DetectorConfiguration) {
        let seconds =
            configuration.resumeTime > 0 ? configuration.resumeTime : 2 * configuration.maximumStepInterval
        maximumPause = Int64(seconds * 1e9)
    }

    /// Adds a step event; returns the bout it ended, when it starts a new one.
    public mutating func add(_ event: StepEvent) -> WalkingBout? {
        let steps = max(1, event.count - lastCount)
        lastCount = event.count
        if var bout = current, event.timestamp - bout.end <= maximumPause {
            bout.end = max(bout.end, event.timestamp)
            bout.steps += steps
            current = bout
            return nil
        }
        let ended = current
        current = WalkingBout(start: event.timestamp, end: event.timestamp, steps: steps)
        return ended
    }

    /// Ends the input: returns the bout under way, if any.
    public mutating func finish() -> WalkingBout? {
        defer { current = nil }
        return current
    }
}
