/// Every tunable parameter of ``StepDetector``, in seconds, hertz or g — never in samples — so
/// one configuration serves a 12.5 Hz watch log, a 100 Hz board and a 400 Hz phone.
///
/// Encodes to and decodes from JSON with the property names as keys. Keys that are absent take
/// their default; unknown keys are rejected, so a misspelt parameter is never silently ignored.
public struct DetectorConfiguration: Sendable, Hashable, Codable {
    /// Rate of the internal uniform timeline, in hertz. Input at any rate, regular or not, is
    /// resampled to it by averaging over each period.
    public var sampleRate: Double = 25
    /// A gap between two samples longer than this, in seconds, restarts the detector: the signal
    /// is not interpolated across it and an unconfirmed run of steps is dropped.
    public var maximumGap: Double = 1.0
    /// High-pass cut-off of the band-pass filter, in hertz: removes gravity and slow posture
    /// changes.
    public var highPassCutoff: Double = 0.6
    /// Low-pass cut-off of the band-pass filter, in hertz: removes impact ringing and jitter.
    public var lowPassCutoff: Double = 2.39
    /// Time constant, in seconds, of the running RMS that scales the adaptive peak threshold.
    public var envelopeTime: Double = 0.8
    /// A peak must rise above this multiple of the running RMS of the filtered signal.
    public var peakThreshold: Double = 0.561
    /// A peak must also rise above this absolute height, in g (the activity gate).
    public var minimumPeak: Double = 0.072
    /// Shortest plausible interval between two steps, in seconds (a cadence of 3.3 steps/s); also the
    /// window within which only the highest of several peaks is kept.
    public var minimumStepInterval: Double = 0.3
    /// Longest interval between two peaks of a rhythmic chain, in seconds: a slow step, or a
    /// stride when the peaks come once per stride (at the wrist).
    public var maximumStepInterval: Double = 1.3
    /// How much an interval may differ, as a fraction, from the one one or two steps back and
    /// still count as rhythmic.
    public var regularityTolerance: Double = 0.325
    /// How many rhythmic steps (chain periods; one missing peak may be bridged) confirm a walk;
    /// the chain's steps are then credited all at once.
    public var stepsToConfirm: Int = 7
    /// While walking, an interval of about two step periods counts as two steps (the weaker
    /// foot's peak faded below the threshold); a confirming chain may bridge one such gap.
    public var fillMissedSteps: Bool = true
    /// A rhythm of peaks slower than this, in seconds, is taken as one peak per stride (two
    /// steps), as at the wrist, where the arm swing can dominate the footfalls. Human walking
    /// cadence rarely falls below about 67 steps a minute (0.9 s a step).
    public var strideThreshold: Double = 0.9
    /// Most peaks a rhythmic chain may leave out between two of its links (echoes of a footfall,
    /// the weaker step at the wrist). Random bumps need many left out to look rhythmic.
    public var maximumSkippedPeaks: Int = 63
    /// Largest ratio between the heights of two linked peaks of a chain; 0 accepts any.
    public var amplitudeRatio: Double = 0
    /// A chain of peaks confirms a walk only if the filtered signal over the last
    /// `correlationWindow` correlates at least this much (normalised autocorrelation, −1...1)
    /// with itself one chain period or two chain periods earlier: walking repeats stride after
    /// stride, bumps in a car do not.
    public var periodCorrelation: Double = 0.631
    /// A rhythm whose filtered signal correlates at least this much with itself at half the
    /// peak period has one peak per stride (the peaks skip every other step).
    public var halfPeriodCorrelation: Double = 0.55
    /// The shortest rhythmic chain, in steps, that may confirm a walk when its periodicity is
    /// strong: a bout of a few steps at home is walking if the signal repeats step after step.
    /// Equal to `stepsToConfirm`: off.
    public var minimumBoutSteps: Int = 5
    /// The periodicity (as `periodCorrelation`) a chain of `minimumBoutSteps` must show; chains
    /// between it and `stepsToConfirm` need a proportionally interpolated value: the shorter
    /// the chain, the stronger the evidence it needs.
    public var shortBoutCorrelation: Double = 0.95
    /// The periodicity a chain of twice `stepsToConfirm` steps (or longer) must show, reached
    /// linearly from `periodCorrelation` at `stepsToConfirm`: a long rhythmic chain is evidence
    /// in itself, so an irregular walker's signal needs to repeat less.
    public var longChainCorrelation: Double = 0.631
    /// For this long after a walk's last step, in seconds, a chain at the walk's rhythm resumes
    /// it with `resumeCorrelation` (and at least `minimumBoutSteps` steps): the rhythm is
    /// already known, so a turn, a stumble or a few faint steps do not need a fresh walk's
    /// evidence. 0: off.
    public var resumeTime: Double = 10
    /// The periodicity a chain resuming a walk must show.
    public var resumeCorrelation: Double = 0.3
    /// While walking, a pause in the peaks longer than the gate follows ends the walk, unless
    /// the filtered signal over the pause (at most `correlationWindow` long) correlates at least
    /// this much with itself one stride earlier: the peaks lost the rhythm (the arm doing
    /// something else), the walker did not. The pause's steps are credited at the walk's step
    /// period. Above 1: off.
    public var continuationCorrelation: Double = 0.75
    /// A chain slower than `strideThreshold` whose signal correlates less than this at half
    /// its period (−1 is a pure sine) is not a walk: footfalls put steps between the stride
    /// peaks, a hand waved up and down does not. −1: off.
    public var sinusoidCorrelation: Double = -0.8
    /// A chain confirms a walk only if the acceleration magnitude's content above 4 Hz (the
    /// impacts of footfalls) is at least this fraction of its content in the step band (RMS
    /// ratio, both over about 2 s). A swinging arm or a waved hand moves smoothly; feet landing
    /// jolt the whole body, the wrist included. 0: off.
    public var minimumImpactRatio: Double = 0.15
    /// Length of signal, in seconds, over which those correlations are measured (at most 6.4 s
    /// at the default rate: the history holds 256 internal samples, and the lag needs room too).
    public var correlationWindow: Double = 4

    /// The defaults.
    public init() {}

    /// Checks every parameter against its valid range.
    public func validate() throws(ConfigurationError) {
        func check(_ ok: Bool, _ key: String, _ expected: String, _ value: some CustomStringConvertible)
            throws(ConfigurationError)
        {
            if !ok { throw ConfigurationError(key: key, expected: expected, found: value.description) }
        }
        try check(
            sampleRate.isFinite && sampleRate >= 5 && sampleRate <= 1000, "sampleRate",
            "a rate in 5...1000 Hz", sampleRate)
        try check(
            maximumGap.isFinite && maximumGap > 1 / sampleRate && maximumGap <= 60, "maximumGap",
            "seconds, longer than one sample period and at most 60", maximumGap)
        try check(
            highPassCutoff.isFinite && highPassCutoff > 0 && highPassCutoff < sampleRate / 2,
            "highPassCutoff", "hertz in (0, sampleRate/2)", highPassCutoff)
        try check(
            lowPassCutoff.isFinite && lowPassCutoff > highPassCutoff && lowPassCutoff < sampleRate / 2,
            "lowPassCutoff", "hertz above highPassCutoff and below sampleRate/2", lowPassCutoff)
        try check(
            envelopeTime.isFinite && envelopeTime > 0 && envelopeTime <= 60, "envelopeTime",
            "seconds in (0, 60]", envelopeTime)
        try check(
            peakThreshold.isFinite && peakThreshold >= 0 && peakThreshold <= 10, "peakThreshold",
            "a multiple of the RMS in 0...10", peakThreshold)
        try check(
            minimumPeak.isFinite && minimumPeak >= 0 && minimumPeak <= 8, "minimumPeak", "g in 0...8",
            minimumPeak)
        try check(
            minimumStepInterval.isFinite && minimumStepInterval > 0
                && minimumStepInterval < maximumStepInterval,
            "minimumStepInterval", "seconds above 0 and below maximumStepInterval", minimumStepInterval)
        try check(
            maximumStepInterval.isFinite && maximumStepInterval <= 10, "maximumStepInterval",
            "seconds up to 10", maximumStepInterval)
        try check(
            regularityTolerance.isFinite && regularityTolerance >= 0 && regularityTolerance <= 1,
            "regularityTolerance", "a fraction in 0...1", regularityTolerance)
        try check(
            strideThreshold.isFinite && strideThreshold > minimumStepInterval, "strideThreshold",
            "seconds above minimumStepInterval", strideThreshold)
        try check(
            maximumSkippedPeaks >= 0 && maximumSkippedPeaks <= 63, "maximumSkippedPeaks", "a count in 0...63",
            maximumSkippedPeaks)
        try check(
            amplitudeRatio.isFinite && (amplitudeRatio == 0 || amplitudeRatio >= 1), "amplitudeRatio",
            "0 (off) or a ratio of at least 1", amplitudeRatio)
        try check(
            periodCorrelation.isFinite && periodCorrelation >= -1 && periodCorrelation <= 1,
            "periodCorrelation", "a correlation in -1...1", periodCorrelation)
        try check(
            halfPeriodCorrelation.isFinite && halfPeriodCorrelation >= -1 && halfPeriodCorrelation <= 2,
            "halfPeriodCorrelation", "a correlation in -1...1 (above 1: off)", halfPeriodCorrelation)
        try check(
            correlationWindow.isFinite && correlationWindow * sampleRate >= 4
                && correlationWindow * sampleRate + 2 * maximumStepInterval * sampleRate <= 512,
            "correlationWindow",
            "seconds, at least 4 samples, and with two maximumStepInterval lags at most 512 samples",
            correlationWindow)
        try check(
            stepsToConfirm >= 2 && stepsToConfirm <= CadenceGate.maximumHeldSteps, "stepsToConfirm",
            "a count in 2...\(CadenceGate.maximumHeldSteps)", stepsToConfirm)
        try check(
            minimumBoutSteps >= 2 && minimumBoutSteps <= stepsToConfirm, "minimumBoutSteps",
            "a count in 2...stepsToConfirm", minimumBoutSteps)
        try check(
            shortBoutCorrelation.isFinite && shortBoutCorrelation >= -1 && shortBoutCorrelation <= 1,
            "shortBoutCorrelation", "a correlation in -1...1", shortBoutCorrelation)
        try check(
            resumeTime.isFinite && resumeTime >= 0 && resumeTime <= 600, "resumeTime", "seconds in 0...600",
            resumeTime)
        try check(
            resumeCorrelation.isFinite && resumeCorrelation >= -1 && resumeCorrelation <= 1,
            "resumeCorrelation", "a correlation in -1...1", resumeCorrelation)
        try check(
            continuationCorrelation.isFinite && continuationCorrelation >= -1 && continuationCorrelation <= 2,
            "continuationCorrelation", "a correlation in -1...1 (above 1: off)", continuationCorrelation)
        try check(
            sinusoidCorrelation.isFinite && sinusoidCorrelation >= -1 && sinusoidCorrelation <= 1,
            "sinusoidCorrelation", "a correlation in -1...1", sinusoidCorrelation)
        try check(
            minimumImpactRatio.isFinite && minimumImpactRatio >= 0 && minimumImpactRatio <= 10
                && (minimumImpactRatio == 0 || sampleRate >= ImpactMeter.minimumInputRate),
            "minimumImpactRatio",
            "a ratio in 0...10 (0: off), and above 0 only with sampleRate at least \(ImpactMeter.minimumInputRate) Hz",
            minimumImpactRatio)
        try check(
            longChainCorrelation.isFinite && longChainCorrelation >= -1 && longChainCorrelation <= 1,
            "longChainCorrelation", "a correlation in -1...1", longChainCorrelation)
    }
}

/// A detector parameter outside its valid range, or an unknown or mistyped key.
public struct ConfigurationError: Error, Hashable, CustomStringConvertible {
    /// The parameter's JSON key.
    public var key: String
    /// What the parameter must be.
    public var expected: String
    /// What was found.
    public var found: String

    public init(key: String, expected: String, found: String) {
        self.key = key
        self.expected = expected
        self.found = found
    }

    public var description: String { "'\(key)': expected \(expected), found \(found)" }
}

extension DetectorConfiguration {
    private enum Key: String, CodingKey, CaseIterable {
        case sampleRate, maximumGap, highPassCutoff, lowPassCutoff, envelopeTime, peakThreshold
        case minimumPeak, minimumStepInterval, maximumStepInterval, regularityTolerance
        case stepsToConfirm, fillMissedSteps, strideThreshold, maximumSkippedPeaks, amplitudeRatio
        case periodCorrelation, halfPeriodCorrelation, minimumBoutSteps, shortBoutCorrelation
        case longChainCorrelation, resumeTime, resumeCorrelation, continuationCorrelation
        case sinusoidCorrelation, minimumImpactRatio, correlationWindow
    }

    private struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// The JSON keys, in declaration order.
    public static var keys: [String] { Key.allCases.map(\.rawValue) }

    public init(from decoder: any Decoder) throws {
        let any = try decoder.container(keyedBy: AnyKey.self)
        for key in any.allKeys where Key(rawValue: key.stringValue) == nil {
            throw DecodingError.dataCorruptedError(
                forKey: key, in: any,
                debugDescription:
                    "unknown key '\(key.stringValue)'; expected one of: \(Self.keys.joined(separator: ", "))")
        }
        let c = try decoder.container(keyedBy: Key.self)
        var d = DetectorConfiguration()
        d.sampleRate = try c.decodeIfPresent(Double.self, forKey: .sampleRate) ?? d.sampleRate
        d.maximumGap = try c.decodeIfPresent(Double.self, forKey: .maximumGap) ?? d.maximumGap
        d.highPassCutoff = try c.decodeIfPresent(Double.self, forKey: .highPassCutoff) ?? d.highPassCutoff
        d.lowPassCutoff = try c.decodeIfPresent(Double.self, forKey: .lowPassCutoff) ?? d.lowPassCutoff
        d.envelopeTime = try c.decodeIfPresent(Double.self, forKey: .envelopeTime) ?? d.envelopeTime
        d.peakThreshold = try c.decodeIfPresent(Double.self, forKey: .peakThreshold) ?? d.peakThreshold
        d.minimumPeak = try c.decodeIfPresent(Double.self, forKey: .minimumPeak) ?? d.minimumPeak
        d.minimumStepInterval =
            try c.decodeIfPresent(Double.self, forKey: .minimumStepInterval) ?? d.minimumStepInterval
        d.maximumStepInterval =
            try c.decodeIfPresent(Double.self, forKey: .maximumStepInterval) ?? d.maximumStepInterval
        d.regularityTolerance =
            try c.decodeIfPresent(Double.self, forKey: .regularityTolerance) ?? d.regularityTolerance
        d.stepsToConfirm = try c.decodeIfPresent(Int.self, forKey: .stepsToConfirm) ?? d.stepsToConfirm
        d.fillMissedSteps = try c.decodeIfPresent(Bool.self, forKey: .fillMissedSteps) ?? d.fillMissedSteps
        d.strideThreshold = try c.decodeIfPresent(Double.self, forKey: .strideThreshold) ?? d.strideThreshold
        d.maximumSkippedPeaks =
            try c.decodeIfPresent(Int.self, forKey: .maximumSkippedPeaks) ?? d.maximumSkippedPeaks
        d.amplitudeRatio = try c.decodeIfPresent(Double.self, forKey: .amplitudeRatio) ?? d.amplitudeRatio
        d.periodCorrelation =
            try c.decodeIfPresent(Double.self, forKey: .periodCorrelation) ?? d.periodCorrelation
        d.halfPeriodCorrelation =
            try c.decodeIfPresent(Double.self, forKey: .halfPeriodCorrelation) ?? d.halfPeriodCorrelation
        d.minimumBoutSteps = try c.decodeIfPresent(Int.self, forKey: .minimumBoutSteps) ?? d.minimumBoutSteps
        d.shortBoutCorrelation =
            try c.decodeIfPresent(Double.self, forKey: .shortBoutCorrelation) ?? d.shortBoutCorrelation
        d.longChainCorrelation =
            try c.decodeIfPresent(Double.self, forKey: .longChainCorrelation) ?? d.longChainCorrelation
        d.resumeTime = try c.decodeIfPresent(Double.self, forKey: .resumeTime) ?? d.resumeTime
        d.resumeCorrelation =
            try c.decodeIfPresent(Double.self, forKey: .resumeCorrelation) ?? d.resumeCorrelation
        d.continuationCorrelation =
            try c.decodeIfPresent(Double.self, forKey: .continuationCorrelation) ?? d.continuationCorrelation
        d.sinusoidCorrelation =
            try c.decodeIfPresent(Double.self, forKey: .sinusoidCorrelation) ?? d.sinusoidCorrelation
        d.minimumImpactRatio =
            try c.decodeIfPresent(Double.self, forKey: .minimumImpactRatio) ?? d.minimumImpactRatio
        d.correlationWindow =
            try c.decodeIfPresent(Double.self, forKey: .correlationWindow) ?? d.correlationWindow
        self = d
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        try c.encode(sampleRate, forKey: .sampleRate)
        try c.encode(maximumGap, forKey: .maximumGap)
        try c.encode(highPassCutoff, forKey: .highPassCutoff)
        try c.encode(lowPassCutoff, forKey: .lowPassCutoff)
        try c.encode(envelopeTime, forKey: .envelopeTime)
        try c.encode(peakThreshold, forKey: .peakThreshold)
        try c.encode(minimumPeak, forKey: .minimumPeak)
        try c.encode(minimumStepInterval, forKey: .minimumStepInterval)
        try c.encode(maximumStepInterval, forKey: .maximumStepInterval)
        try c.encode(regularityTolerance, forKey: .regularityTolerance)
        try c.encode(stepsToConfirm, forKey: .stepsToConfirm)
        try c.encode(fillMissedSteps, forKey: .fillMissedSteps)
        try c.encode(strideThreshold, forKey: .strideThreshold)
        try c.encode(maximumSkippedPeaks, forKey: .maximumSkippedPeaks)
        try c.encode(amplitudeRatio, forKey: .amplitudeRatio)
        try c.encode(periodCorrelation, forKey: .periodCorrelation)
        try c.encode(halfPeriodCorrelation, forKey: .halfPeriodCorrelation)
        try c.encode(minimumBoutSteps, forKey: .minimumBoutSteps)
        try c.encode(shortBoutCorrelation, forKey: .shortBoutCorrelation)
        try c.encode(longChainCorrelation, forKey: .longChainCorrelation)
        try c.encode(resumeTime, forKey: .resumeTime)
        try c.encode(resumeCorrelation, forKey: .resumeCorrelation)
        try c.encode(continuationCorrelation, forKey: .continuationCorrelation)
        try c.encode(sinusoidCorrelation, forKey: .sinusoidCorrelation)
        try c.encode(minimumImpactRatio, forKey: .minimumImpactRatio)
        try c.encode(correlationWindow, forKey: .correlationWindow)
    }
}
