/// Measures how much of the acceleration magnitude's motion is impact: the RMS of its content
/// above ``cutoff`` (4 Hz; a fourth-order Butterworth high-pass, so a smooth 1.6 Hz swing leaks
/// through at under 3 %) relative to the RMS of the step band the peaks are found in.
///
/// Walking lands a foot on the ground at every step, and the jolt reaches every part of the
/// body, the wrist included, as a short burst well above the step rate. An arm swung at the
/// side or a hand waved up and down moves smoothly: the same rhythm in the step band, but
/// almost nothing above it. Over whole recordings of the Pebble wrist set every walk and run
/// has a ratio of at least 0.27, the clip of arms swung at one's side 0.09 (and of a hand moved
/// up and down 0.13).
///
/// Impacts need bandwidth: an input sampled below ``minimumInputRate`` (16 Hz: its Nyquist
/// frequency at least an octave above the cut-off) cannot show them — a 12.5 Hz watch log has
/// little above 4 Hz even while walking — so for such input the meter gives no verdict
/// (``ratio`` is infinite). The input rate is followed from the share of internal periods that
/// bring a new input sample (a 12.5 Hz log brings one every second period at 25 Hz); the
/// internal rate itself must be at least ``minimumInputRate``.
///
/// The detector feeds it only while no walk is being followed: its verdict matters only when a
/// chain is to confirm one, and a walk in progress costs nothing more. When a walk ends the
/// averages still hold its last seconds and follow the new signal from there.
///
/// Both powers are exponential averages over ``timeConstant``; the ratio is taken only when the
/// gate asks for it (a few times a second), so an internal period costs two biquads and a few
/// multiply-adds — and only a counter and one average for input too slow to judge.
public struct ImpactMeter: Sendable {
    /// The high-pass cut-off that separates impacts from the step band, in hertz.
    public static let cutoff = 4.0
    /// Time constant of the two power averages, in seconds.
    public static let timeConstant = 2.0
    /// Input slower than this, in hertz, carries too little above ``cutoff`` to judge.
    public static let minimumInputRate = 4 * cutoff

    @usableFromInline var highPass1: Biquad
    @usableFromInline var highPass2: Biquad
    @usableFromInline let alpha: Float
    @usableFromInline var impactPower: Float = 0
    @usableFromInline var bandPower: Float = 0
    /// Time of the input sample seen at the last internal period, and the running share of
    /// periods with a new one.
    @usableFromInline var lastInputTime: Int64 = .min
    @usableFromInline var samplesPerPeriod: Float = 0
    @usableFromInline let rateAlpha: Float
    /// Share of internal periods with a new input sample needed for a verdict.
    @usableFromInline let neededSamplesPerPeriod: Float

    /// - Parameter sampleRate: Rate of the signal, in hertz; above twice ``cutoff``.
    public init(sampleRate: Double) {
        // A fourth-order Butterworth high-pass as two sections (Q = 1/(2 cos(π/8)), 1/(2 cos(3π/8))).
        highPass1 = .highPass(cutoff: Self.cutoff, sampleRate: sampleRate, q: 0.541_196_100_146_197)
        highPass2 = .highPass(cutoff: Self.cutoff, sampleRate: sampleRate, q: 1.306_562_964_876_377)
        alpha = Float(1 - elementaryExp(-1 / (sampleRate * Self.timeConstant)))
        rateAlpha = Float(1 - elementaryExp(-1 / (sampleRate * 0.5)))
        neededSamplesPerPeriod = Float(Self.minimumInputRate / sampleRate)
    }

    /// Feeds one sample: `raw`, the magnitude (any offset; the high-pass removes it), and
    /// `band`, the same sample band-passed to the step band, and `inputTime`, the time of the
    /// latest input sample; one call per internal period.
    @inlinable @inline(__always)
    public mutating func add(raw: Float, band: Float, inputTime: Int64) {
        samplesPerPeriod += rateAlpha * ((inputTime != lastInputTime ? 1 : 0) - samplesPerPeriod)
        lastInputTime = inputTime
        // Input too slow to judge: the filters would only cost time. (They restart from rest
        // when it speeds up; the 2 s averages settle before a chain of five steps is formed.)
        if samplesPerPeriod < 0.98 * neededSamplesPerPeriod { return }
        let h = highPass2.process(highPass1.process(raw))
        impactPower += alpha * (h * h - impactPower)
        bandPower += alpha * (band * band - bandPower)
    }

    /// RMS above the cut-off over RMS in the step band; infinite when the input is too slow
    /// to tell (below ``minimumInputRate``).
    @inlinable
    public var ratio: Float {
        // 2 % slack: a nominal 16 Hz log with jitter still counts as 16 Hz.
        if samplesPerPeriod < 0.98 * neededSamplesPerPeriod { return .infinity }
        return (impactPower / max(bandPower, 1e-12)).squareRoot()
    }

    /// Forgets all history.
    public mutating func reset() {
        highPass1.reset()
        highPass2.reset()
        impactPower = 0
        bandPower = 0
        lastInputTime = .min
        samplesPerPeriod = 0
    }
}
