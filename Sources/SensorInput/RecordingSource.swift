public import StepDetection

/// A recording read as a live source: its samples paced to the wall clock (`speed` times real
/// time), so the daemon and `stepgate run` read a recorded walk through the same loop as an
/// IIO accelerometer.
public final class RecordingSource: SampleSource {
    public let name: String
    public let path: String
    /// Times real time: 1 plays the walk as it was recorded, 10 ten times faster.
    public let speed: Double
    /// What the recording holds (total or gravity-removed acceleration), known once it is
    /// opened.
    public let input: StepDetector.Input

    /// Opens the recording; its errors (missing file, unknown format) are the reader's.
    public init(path: String, speed: Double = 1) throws(RecordingError) {
        precondition(speed > 0, "a replay speed must be positive")
        self.path = path
        self.speed = speed
        name = "recording \(path)"
        input = try RecordingReader(path: path).gravityIncluded ? .totalAcceleration : .linearAcceleration
    }

    /// Pulled one sample at a time (the reader runs only as fast as the consumer takes), so a
    /// fast replay of a day-long recording never queues it in memory.
    public func samples() -> AsyncThrowingStream<AccelerationSample, any Error> {
        let playback = Playback(path: path, speed: speed)
        return AsyncThrowingStream { try await playback.next() }
    }
}

/// The reading position of one replay. The stream calls `next()` for one element at a time,
/// never concurrently, which is what makes the unchecked sendability sound.
private final class Playback: @unchecked Sendable {
    private let path: String
    private let speed: Double
    private var reader: RecordingReader?
    private var start = ContinuousClock.now
    private var origin: Int64?

    init(path: String, speed: Double) {
        self.path = path
        self.speed = speed
    }

    func next() async throws -> AccelerationSample? {
        if reader == nil {
            reader = try RecordingReader(path: path)
            start = .now
        }
        guard let sample = try reader?.next() else { return nil }
        try Task.checkCancellation()
        let first = origin ?? sample.timestamp
        origin = first
        let due = start + .nanoseconds(Int64(Double(sample.timestamp &- first) / speed))
        // Samples due within 20 ms go out at once, so a fast replay is not a sleep per sample.
        if due > ContinuousClock.now + .milliseconds(20) {
            try await Task.sleep(until: due, clock: .continuous)
        }
        return sample
    }
}
