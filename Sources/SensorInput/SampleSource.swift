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
}

extension SampleSource {
    public var input: StepDetector.Input { .totalAcceleration }
}
