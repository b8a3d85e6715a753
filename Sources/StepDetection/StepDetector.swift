/// A step: the time of its peak and the running total it brings the count to.
@frozen
public struct StepEvent: Sendable, Hashable {
    /// Nanoseconds on the input's timeline: the time of the step's peak in the filtered signal.
    public var timestamp: Int64
    /// Steps counted so far, this one included.
    public var count: Int

    @inlinable
    public init(timestamp: Int64, count: Int) {
        self.timestamp = timestamp
        self.count = count
    }
}

/// Counts steps in a stream of accelerometer samples.
///
/// The pipeline, every stage a small value type:
/// 1. magnitude of the acceleration vector (orientation-free);
/// 2. ``Resampler``: average onto a uniform timeline at ``DetectorConfiguration/sampleRate``,
///    restarting across gaps;
/// 3. band-pass (``Biquad`` high-pass then low-pass): removes gravity and impact ringing;
/// 4. ``PeakDetector``: peaks above an adaptive, RMS-scaled threshold with an absolute floor;
/// 5. ``CadenceGate``: only rhythmic runs of peaks count, credited once confirmed.
///
/// The detector reads no clock and does no I/O: time comes with the samples, so a replay is
/// exactly reproducible and the live pipeline runs the same code.
public struct StepDetector: Sendable {
    /// What the samples hold.
    public enum Input: Sendable, Hashable {
        /// Total acceleration, gravity included (accelerometers, most exports): the detector
        /// works on its magnitude.
        case totalAcceleration
        /// Gravity removed (phyphox "Linear Acceleration", Sensor Logger `Accelerometer.csv`):
        /// the detector works on the acceleration along its principal axis, plus 1 g
        /// (``GravityFreeProjection``).
        case linearAcceleration
    }

    /// The configuration the detector was built with.
    public let configuration: DetectorConfiguration
    /// What the samples hold.
    public let input: Input
    @usableFromInline let projectsLinearInput: Bool
    @usableFromInline var projection = GravityFreeProjection()

    @usableFromInline var resampler: Resampler
    @usableFromInline var highPass: Biquad
    @usableFromInline var lowPass: Biquad
    @usableFromInline var peaks: PeakDetector
    @usableFromInline var gate: CadenceGate
    /// The first magnitude after a restart, subtracted so the high-pass starts without a jump.
    @usableFromInline var offset: Float = 0
    @usableFromInline var needsOffset = true
    @usableFromInline var stepCount = 0
    @usableFromInline var lastFiltered: Float = 0
    /// Recent filtered values, for the gate's periodicity tests.
    @usableFromInline var history: SignalHistory
    /// Footfall impacts against the step band, for the gate's confirmation.
    @usableFromInline var impact: ImpactMeter
    @usableFromInline let measuresImpact: Bool

    /// Steps counted so far.
    public var count: Int { stepCount }
    /// The last value of the band-passed magnitude, in g, for plots and diagnostics.
    public var filtered: Float { lastFiltered }

    /// A detector with the given configuration.
    ///
    /// - Precondition: `configuration.validate()` does not throw.
    public init(
        configuration: DetectorConfiguration = DetectorConfiguration(), input: Input = .totalAcceleration
    ) {
        self.input = input
        projectsLinearInput = input == .linearAcceleration
        do {
            try configuration.validate()
        } catch {
            preconditionFailure("invalid detector configuration: \(error)")
        }
        self.configuration = configuration
        let fs = configuration.sampleRate
        history = SignalHistory(sampleRate: fs, window: configuration.correlationWindow)
        resampler = Resampler(rate: fs, maximumGap: configuration.maximumGap)
        highPass = .highPass(cutoff: configuration.highPassCutoff, sampleRate: fs)
        lowPass = .lowPass(cutoff: configuration.lowPassCutoff, sampleRate: fs)
        peaks = PeakDetector(
            sampleRate: fs, envelopeTime: configuration.envelopeTime, ratio: configuration.peakThreshold,
            minimumHeight: configuration.minimumPeak, separation: configuration.minimumStepInterval)
        gate = CadenceGate(
            minimumInterval: configuration.minimumStepInterval,
            maximumInterval: configuration.maximumStepInterval,
            tolerance: configuration.regularityTolerance, stepsToConfirm: configuration.stepsToConfirm,
            fillsMissedSteps: configuration.fillMissedSteps, strideThreshold: configuration.strideThreshold,
            maximumSkipped: configuration.maximumSkippedPeaks, amplitudeRatio: configuration.amplitudeRatio,
            periodCorrelation: configuration.periodCorrelation,
            halfPeriodCorrelation: configuration.halfPeriodCorrelation,
            minimumBoutSteps: configuration.minimumBoutSteps,
            shortBoutCorrelation: configuration.shortBoutCorrelation,
            longChainCorrelation: configuration.longChainCorrelation, resumeTime: configuration.resumeTime,
            resumeCorrelation: configuration.resumeCorrelation,
            sinusoidCorrelation: configuration.sinusoidCorrelation,
            minimumImpactRatio: configuration.minimumImpactRatio,
            continuationCorrelation: configuration.continuationCorrelation)
        measuresImpact = configuration.minimumImpactRatio > 0
        impact = ImpactMeter(sampleRate: measuresImpact ? fs : 2 * ImpactMeter.cutoff + 1)
    }

    /// The cadence gate's state: still, confirming a run, or walking.
    public var gateState: CadenceGate.State { gate.state }

    /// The step period being followed while walking, in seconds; 0 when not walking.
    public var stepPeriod: Double { gate.stepPeriod }

    /// The peak detector's current threshold, in g.
    public var threshold: Float { peaks.threshold }

    /// Feeds one sample; calls `onStep` for each step it confirms, in time order.
    ///
    /// Samples must come in time order; a gap longer than
    /// ``DetectorConfiguration/maximumGap`` or a backward timestamp restarts detection.
    ///
    /// - Complexity: O(1) amortised per sample, no allocation.
    @inlinable @inline(__always)
    public mutating func process(_ sample: AccelerationSample, _ onStep: (StepEvent) -> Void) {
        let value = projectsLinearInput ? projection.value(sample) : sample.magnitude
        if !resampler.add(time: sample.timestamp, value: value) { restartFilters() }
        while let tick = resampler.nextValue() { step(magnitude: tick.value, time: tick.time, onStep) }
    }

    /// Feeds the samples of a buffer, in order.
    @inlinable
    public mutating func process(
        _ samples: UnsafeBufferPointer<AccelerationSample>, _ onStep: (StepEvent) -> Void
    ) {
        for i in samples.indices { process(samples[i], onStep) }
    }

    /// Feeds the samples of an array, in order.
    @inlinable
    public mutating func process(_ samples: [AccelerationSample], _ onStep: (StepEvent) -> Void) {
        samples.withUnsafeBufferPointer { process($0, onStep) }
    }

    /// Feeds many samples.
    @inlinable
    public mutating func process(_ samples: some Sequence<AccelerationSample>, _ onStep: (StepEvent) -> Void)
    {
        for sample in samples { process(sample, onStep) }
    }

    @inlinable @inline(__always)
    mutating func step(magnitude: Float, time: Int64, _ onStep: (StepEvent) -> Void) {
        if needsOffset {
            offset = magnitude
            needsOffset = false
        }
        let x = magnitude - offset
        let y = lowPass.process(highPass.process(x))
        // Impacts matter only for confirming a walk: while one is followed the meter rests
        // (and keeps the walk's last two seconds for a resume).
        if measuresImpact && !gate.isWalking { impact.add(raw: x, band: y, inputTime: resampler.lastTime) }
        lastFiltered = y
        history.append(y)
        peaks.holdsPeaks = !gate.isWalking
        if let peak = peaks.process(y, time: time) {
            var count = stepCount
            let ratio = measuresImpact ? impact.ratio : .infinity
            gate.peak(at: peak.time, height: peak.height, history: history, now: time, impact: ratio) {
                stepTime in
                count &+= 1
                onStep(StepEvent(timestamp: stepTime, count: count))
            }
            stepCount = count
        }
    }

    @usableFromInline
    mutating func restartFilters() {
        highPass.reset()
        lowPass.reset()
        peaks.reset()
        gate.reset()
        impact.reset()
        needsOffset = true
        history.reset()
    }

    /// Counts the steps in `samples` with a fresh detector.
    @inlinable
    public static func countSteps(
        in samples: [AccelerationSample], configuration: DetectorConfiguration = DetectorConfiguration(),
        input: Input = .totalAcceleration
    ) -> Int {
        var detector = StepDetector(configuration: configuration, input: input)
        detector.process(samples) { _ in }
        return detector.count
    }

    /// Counts the steps in `samples` with a fresh detector.
    @inlinable
    public static func countSteps(
        in samples: some Sequence<AccelerationSample>,
        configuration: DetectorConfiguration = DetectorConfiguration()
    ) -> Int {
        var detector = StepDetector(configuration: configuration)
        for sample in samples { detector.process(sample) { _ in } }
        return detector.count
    }
}
