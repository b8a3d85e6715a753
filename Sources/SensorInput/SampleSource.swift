public import StepDetection

/// Produces accelerometer samples: an IIO device, a recording, or a test fake.
public protocol SampleSource: Sendable {
    /// Shown in logs and summaries, for example `iio:device0 (lis3dh)`.
    var name: String { get }
    /// Starts producing samples; the stream ends when the source is exhausted, fails or the
    /// consumer stops iterating (which stops the source).
    func samples() -> AsyncThrowingStream<AccelerationSample, any Error>
    /// What the samples hold: total acceleration (an accelerometer) unless the source knows
    /// better (a recording of gravity-removed acceleration).
    var input: StepDetector.Input { get }
    /// Why the source delivers no samples now though its stream goes on (a device lost and
    /// being reconnected), and since when; nil while it delivers.
    var interruption: SourceInterruption? { get }
}

extension SampleSource {
    public var input: StepDetector.Input { .totalAcceleration }
    public var interruption: SourceInterruption? { nil }
}

/// Why a running source delivers nothing, and since when.
public struct SourceInterruption: Sendable, Hashable {
    /// The error that interrupted it, as the log shows it.
    public var reason: String
    /// When it began, in seconds since 1970.
    public var since: Double

    public init(reason: String, since: Double) {
        self.reason = reason
        self.since = since
    }
}
