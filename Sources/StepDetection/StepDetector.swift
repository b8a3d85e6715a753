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
    /// ``filtered`` while the history is empty (after a restart, the last value before it): the
    /// newest value is the history's own, with no store of its own per period.
    @usableFromInline var lastFiltered: Float = 0
    /// Recent filtered values, for the gate's periodicity tests.
    @usableFromInline var history: SignalHistory
    /// Footfall impacts against the step band, for the gate's confirmation.
    @usableFromInline var impact: ImpactMeter
    @usableFromInline let measuresImpact: Bool
    /// `measuresImpact && !gate.isWalking`, updated where the gate's walking changes (it does
    /// only when fed a peak or reset): one flag tested per period instead of two.
    @usableFromInline var meterRuns: Bool

    /// Steps counted so far.
    public var count: Int { stepCount }
    /// The last value of the band-passed magnitude, in g, for plots and diagnostics.
    public var filtered: Float { history.count > 0 ? history.newest : lastFiltered }

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
        meterRuns = measuresImpact
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
        feed(sample, projecting: projectsLinearInput, historyIsOwn: false, onStep)
    }

    /// ``process(_:_:)``; with `historyIsOwn`, the history's ring is known to be this detector's
    /// own (``SignalHistory/makeUnique()``), so appending skips the uniqueness check;
    /// `projecting` is ``projectsLinearInput``, passed in so that a loop can test it once.
    @inlinable @inline(always)
    mutating func feed(
        _ sample: AccelerationSample, projecting: Bool, historyIsOwn: Bool, _ onStep: (StepEvent) -> Void
    ) {
        let value = projecting ? projection.value(sample) : sample.magnitude
        switch resampler.add(sample.timestamp, value: value) {
        case .within: break
        case .restarted: restartFilters()
        case .segment(var segment):
            while let tick = resampler.nextValue(&segment) {
                step(
                    magnitude: tick.value, time: tick.time, inputTime: resampler.lastTime,
                    historyIsOwn: historyIsOwn, onStep)
            }
        }
    }

    /// Feeds the samples of a buffer, in order.
    @inlinable
    public mutating func process(
        _ samples: UnsafeBufferPointer<AccelerationSample>, _ onStep: (StepEvent) -> Void
    ) {
        // Nothing can copy the detector while it runs (`onStep` cannot reach it), so the
        // history stays its own: one uniqueness check for the buffer, not one per period.
        history.makeUnique()
        // One loop for each kind of input: the kind is tested once, not once per sample.
        if projectsLinearInput {
            for i in samples.indices { feed(samples[i], projecting: true, historyIsOwn: true, onStep) }
        } else {
            for i in samples.indices { feed(samples[i], projecting: false, historyIsOwn: true, onStep) }
        }
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

    /// One internal period: `magnitude`, the resampled value at `time`; `inputTime`, the time of
    /// the latest input sample then (for the impact meter's rate).
    @inlinable @inline(__always)
    mutating func step(
        magnitude: Float, time: Int64, inputTime: Int64, historyIsOwn: Bool, _ onStep: (StepEvent) -> Void
    ) {
        if needsOffset {
            offset = magnitude
            needsOffset = false
        }
        let x = magnitude - offset
        step(
            raw: x, highPassed: highPass.processSymmetric(x), time: time, inputTime: inputTime,
            historyIsOwn: historyIsOwn, onStep)
    }

    /// The rest of an internal period, from the high-passed value on (what ``ResampledInput``
    /// holds precomputed): `raw`, the magnitude less its offset; `highPassed`, it high-passed.
    @inlinable @inline(__always)
    mutating func step(
        raw x: Float, highPassed: Float, time: Int64, inputTime: Int64, historyIsOwn: Bool,
        _ onStep: (StepEvent) -> Void
    ) {
        // Both sections are Butterworth designs: `b2 == b0`.
        let y = lowPass.processSymmetric(highPassed)
        // Impacts matter only for confirming a walk: while one is followed the meter rests
        // (and keeps the walk's last two seconds for a resume).
        if meterRuns { impact.add(raw: x, band: y, inputTime: inputTime) }
        if historyIsOwn { history.appendAssumingUnique(y) } else { history.append(y) }
        // `peaks.process(y, …)` in two halves, the gate fed in between: it reads the history
        // (with `y`), not the peak detector, and the detector's rest of the period does not
        // depend on the gate. The common period then tests one flag, with no optional peak
        // carried through it.
        if let peak = peaks.release(at: time, holdingPeaks: !gate.isWalking) {
            feedGate(peak, now: time, onStep)
        }
        peaks.advance(y, time: time)
    }

    /// Hands a peak to the gate. Out of line: a peak comes every few periods, and inlined into
    /// the per-sample loop the gate's code kept the loop's own values from staying in registers.
    @usableFromInline @inline(never)
    mutating func feedGate(_ peak: PeakDetector.Peak, now time: Int64, _ onStep: (StepEvent) -> Void) {
        var count = stepCount
        let ratio = measuresImpact ? impact.ratio : .infinity
        gate.peak(at: peak.time, height: peak.height, history: history, now: time, impact: ratio) {
            stepTime in
            count &+= 1
            onStep(StepEvent(timestamp: stepTime, count: count))
        }
        stepCount = count
        meterRuns = measuresImpact && !gate.isWalking
    }

    @usableFromInline
    mutating func restartFilters() {
        lastFiltered = filtered
        highPass.reset()
        lowPass.reset()
        peaks.reset()
        gate.reset()
        meterRuns = measuresImpact
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

    /// Counts the steps in a recording's resampled, high-passed signal with a fresh detector:
    /// the same count as ``countSteps(in:configuration:input:)`` on the recording's samples,
    /// without repeating the stages that do not depend on the rest of the configuration.
    ///
    /// - Precondition: `prepared` was made for `configuration` (``ResampledInput/fits(_:)``).
    @inlinable
    public static func countSteps(in prepared: ResampledInput, configuration: DetectorConfiguration) -> Int {
        precondition(prepared.fits(configuration), "resampled input made for another configuration")
        var detector = StepDetector(configuration: configuration, input: prepared.input)
        detector.process(prepared) { _ in }
        return detector.count
    }

    /// Feeds a whole resampled input to a fresh detector (see ``countSteps(in:configuration:)``).
    @inlinable
    mutating func process(_ prepared: ResampledInput, _ onStep: (StepEvent) -> Void) {
        let n = prepared.times.count
        guard n > 0 else { return }
        history.makeUnique()
        prepared.raw.withUnsafeBufferPointer { raw in
            prepared.highPassed.withUnsafeBufferPointer { highPassed in
                prepared.times.withUnsafeBufferPointer { times in
                    prepared.inputTimes.withUnsafeBufferPointer { inputTimes in
                        var restarts = prepared.restarts.makeIterator()
                        var nextRestart = restarts.next() ?? n
                        for i in 0..<n {
                            if i == nextRestart {
                                restartFilters()
                                nextRestart = restarts.next() ?? n
                            }
                            step(
                                raw: raw[i], highPassed: highPassed[i], time: times[i],
                                inputTime: inputTimes[i], historyIsOwn: true, onStep)
                        }
                    }
                }
            }
        }
    }
}

/// A recording after the detector's first stages — magnitude (or projection), resampling, the
/// offset and the high-pass — which depend only on ``DetectorConfiguration/sampleRate``,
/// ``DetectorConfiguration/maximumGap``, ``DetectorConfiguration/highPassCutoff`` and the kind
/// of input. Tuning counts one recording under many configurations that share these; it
/// prepares the recording once and runs only the later stages per configuration
/// (``StepDetector/countSteps(in:configuration:)``), with the same result.
public struct ResampledInput: Sendable {
    public let sampleRate: Double
    public let maximumGap: Double
    public let highPassCutoff: Double
    public let input: StepDetector.Input
    /// Per internal period: the magnitude less its offset, it high-passed, the period's time and
    /// the time of the latest input sample then.
    @usableFromInline var raw: [Float] = []
    @usableFromInline var highPassed: [Float] = []
    @usableFromInline var times: [Int64] = []
    @usableFromInline var inputTimes: [Int64] = []
    /// Periods before which the detector restarts (after a gap or a backward timestamp),
    /// ascending.
    @usableFromInline var restarts: [Int] = []

    /// Runs the first stages of a detector with `configuration` over `samples`.
    public init(
        _ samples: [AccelerationSample], configuration: DetectorConfiguration,
        input: StepDetector.Input = .totalAcceleration
    ) {
        sampleRate = configuration.sampleRate
        maximumGap = configuration.maximumGap
        highPassCutoff = configuration.highPassCutoff
        self.input = input
        var detector = StepDetector(configuration: configuration, input: input)
        let expected =
            Int(Double(samples.count) * 1.05 * configuration.sampleRate / Self.rate(of: samples)) + 16
        raw.reserveCapacity(expected)
        highPassed.reserveCapacity(expected)
        times.reserveCapacity(expected)
        inputTimes.reserveCapacity(expected)
        var restartPending = false
        for sample in samples {
            let value = detector.projectsLinearInput ? detector.projection.value(sample) : sample.magnitude
            if !detector.resampler.add(time: sample.timestamp, value: value) {
                // As the detector does: restart the filters (the offset too) before this sample's
                // periods. Restarts without a period in between are one restart.
                detector.highPass.reset()
                detector.needsOffset = true
                restartPending = true
            }
            while let tick = detector.resampler.nextValue() {
                if restartPending { restarts.append(times.count) }
                restartPending = false
                if detector.needsOffset {
                    detector.offset = tick.value
                    detector.needsOffset = false
                }
                let x = tick.value - detector.offset
                raw.append(x)
                highPassed.append(detector.highPass.process(x))
                times.append(tick.time)
                inputTimes.append(detector.resampler.lastTime)
            }
        }
    }

    /// Mean input rate of `samples`, in hertz (1 when it cannot be told), to reserve storage.
    static func rate(of samples: [AccelerationSample]) -> Double {
        guard let first = samples.first, let last = samples.last, last.timestamp > first.timestamp else {
            return 1
        }
        return max(1, Double(samples.count - 1) / (Double(last.timestamp &- first.timestamp) / 1e9))
    }

    /// Whether this input was prepared with the first-stage parameters of `configuration`.
    @inlinable
    public func fits(_ configuration: DetectorConfiguration) -> Bool {
        configuration.sampleRate == sampleRate && configuration.maximumGap == maximumGap
            && configuration.highPassCutoff == highPassCutoff
    }

    /// Number of internal periods.
    public var count: Int { times.count }
}
