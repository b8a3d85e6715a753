/// A second-order IIR section (transposed direct form II), designed from frequencies in hertz.
///
/// The design uses the bilinear transform with frequency pre-warping, so the cut-off is exact at
/// the sample rate the section runs at. Coefficients are computed once, in `Double`; the
/// per-sample work is five multiplications in `Float`.
public struct Biquad: SignalStage, Sendable, Equatable {
    @usableFromInline let b0: Float
    @usableFromInline let b1: Float
    @usableFromInline let b2: Float
    @usableFromInline let a1: Float
    @usableFromInline let a2: Float
    @usableFromInline var s1: Float = 0
    @usableFromInline var s2: Float = 0

    /// A section with the given normalised coefficients (`a0` = 1).
    public init(b0: Double, b1: Double, b2: Double, a1: Double, a2: Double) {
        self.b0 = Float(b0)
        self.b1 = Float(b1)
        self.b2 = Float(b2)
        self.a1 = Float(a1)
        self.a2 = Float(a2)
    }

    /// A Butterworth low-pass section (Q = 1/√2).
    ///
    /// - Precondition: `0 < cutoff < sampleRate / 2`.
    public static func lowPass(cutoff: Double, sampleRate: Double, q: Double = 0.5.squareRoot()) -> Biquad {
        precondition(cutoff > 0 && cutoff < sampleRate / 2, "low-pass cut-off must lie in (0, fs/2)")
        let k = elementaryTan(Double.pi * cutoff / sampleRate)
        let norm = 1 / (1 + k / q + k * k)
        let b0 = k * k * norm
        return Biquad(b0: b0, b1: 2 * b0, b2: b0, a1: 2 * (k * k - 1) * norm, a2: (1 - k / q + k * k) * norm)
    }

    /// A Butterworth high-pass section (Q = 1/√2).
    ///
    /// - Precondition: `0 < cutoff < sampleRate / 2`.
    public static func highPass(cutoff: Double, sampleRate: Double, q: Double = 0.5.squareRoot()) -> Biquad {
        precondition(cutoff > 0 && cutoff < sampleRate / 2, "high-pass cut-off must lie in (0, fs/2)")
        let k = elementaryTan(Double.pi * cutoff / sampleRate)
        let norm = 1 / (1 + k / q + k * k)
        return Biquad(
            b0: norm, b1: -2 * norm, b2: norm, a1: 2 * (k * k - 1) * norm, a2: (1 - k / q + k * k) * norm)
    }

    /// The magnitude of the frequency response at `frequency`, for tests and documentation.
    public func gain(at frequency: Double, sampleRate: Double) -> Double {
        let (s, c) = elementarySinCos(2 * Double.pi * frequency / sampleRate)
        let (s2, c2) = elementarySinCos(4 * Double.pi * frequency / sampleRate)
        // H(e^{-jw}) = (b0 + b1 e^{-jw} + b2 e^{-2jw}) / (1 + a1 e^{-jw} + a2 e^{-2jw})
        let nr = Double(b0) + Double(b1) * c + Double(b2) * c2
        let ni = -(Double(b1) * s + Double(b2) * s2)
        let dr = 1 + Double(a1) * c + Double(a2) * c2
        let di = -(Double(a1) * s + Double(a2) * s2)
        return ((nr * nr + ni * ni) / (dr * dr + di * di)).squareRoot()
    }

    @inlinable @inline(__always)
    public mutating func process(_ x: Float) -> Float {
        let y = b0 * x + s1
        s1 = b1 * x - a1 * y + s2
        s2 = b2 * x - a2 * y
        return y
    }

    /// ``process(_:)`` for a section whose `b2` equals `b0`, as every Butterworth section
    /// ``lowPass(cutoff:sampleRate:q:)`` and ``highPass(cutoff:sampleRate:q:)`` design has:
    /// `b2 · x` is then `b0 · x`, the same product of the same two values, worked out once. The
    /// same result, one multiplication (and a load) less.
    @inlinable @inline(__always)
    mutating func processSymmetric(_ x: Float) -> Float {
        assert(b2 == b0, "processSymmetric needs b2 == b0")
        let b0x = b0 * x
        let y = b0x + s1
        s1 = b1 * x - a1 * y + s2
        s2 = b0x - a2 * y
        return y
    }

    @inlinable
    public mutating func reset() {
        s1 = 0
        s2 = 0
    }
}
