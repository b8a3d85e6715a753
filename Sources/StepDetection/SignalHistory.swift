/// The most recent filtered samples, for the autocorrelation tests of ``CadenceGate``.
///
/// A fixed ring of 512 values, allocated once with the history (none per sample); the
/// correlation is computed on demand, only when a peak is linked into a walk, in O(window).
///
/// The ring is stored twice over (every value is written at its slot and 512 slots later), so
/// any stretch of up to 512 recent values is contiguous in memory: the correlation loops read
/// it without wrapping indices. It lives on the heap, shared between copies until one of them
/// appends (copy-on-write): the history is handed to the gate at every peak, and as an inline
/// 2 KiB value each hand-over, and each call that borrowed it, copied all of it.
public struct SignalHistory: Sendable {
    public static let capacity = 512

    /// The ring's memory: `2 × capacity` values, the second half a mirror of the first.
    @usableFromInline
    final class Ring: @unchecked Sendable {
        @usableFromInline let base: UnsafeMutablePointer<Float>

        @usableFromInline
        init() {
            base = .allocate(capacity: 2 * SignalHistory.capacity)
            base.initialize(repeating: 0, count: 2 * SignalHistory.capacity)
        }

        @usableFromInline
        func copy() -> Ring {
            let ring = Ring()
            ring.base.update(from: base, count: 2 * SignalHistory.capacity)
            return ring
        }

        deinit { base.deallocate() }
    }

    @usableFromInline var ring: Ring
    /// `ring.base`, kept here so that an append stores without a load through the ring. It
    /// changes only with `ring` (``makeUnique()``); the memory is the ring's, whose lifetime
    /// `ring` holds.
    @usableFromInline nonisolated(unsafe) var base: UnsafeMutablePointer<Float>
    @usableFromInline var count = 0
    @usableFromInline let samplePeriod: Double
    @usableFromInline let window: Int

    /// - Parameters:
    ///   - sampleRate: Rate of the signal, in hertz.
    ///   - window: Length of signal over which correlations are measured, in seconds.
    public init(sampleRate: Double, window: Double) {
        samplePeriod = 1e9 / sampleRate
        ring = Ring()
        base = ring.base
        self.window = max(1, Int((window * sampleRate).rounded()))
    }

    /// The length of the correlation window, in nanoseconds.
    @inlinable
    public var duration: Double { Double(window) * samplePeriod }

    /// How far back the history reaches, in nanoseconds.
    @inlinable
    public var reach: Int64 { Int64(Double(min(count, Self.capacity)) * samplePeriod) }

    /// The newest sample; only while the history holds one (`count > 0`).
    @inlinable
    var newest: Float { base[(count &- 1) & 511] }

    /// Appends one sample.
    @inlinable @inline(__always)
    public mutating func append(_ y: Float) {
        makeUnique()
        appendAssumingUnique(y)
    }

    /// Makes the ring this history's own (copies it when shared), for
    /// ``appendAssumingUnique(_:)``.
    @inlinable @inline(__always)
    public mutating func makeUnique() {
        if !isKnownUniquelyReferenced(&ring) {
            ring = ring.copy()
            base = ring.base
        }
    }

    /// Appends one sample to a ring known to be this history's own: after ``makeUnique()``,
    /// with no copy of the history made since. The uniqueness check is a call into the
    /// runtime; a loop over many samples makes it once.
    @inlinable @inline(__always)
    public mutating func appendAssumingUnique(_ y: Float) {
        let slot = count & 511
        base[slot] = y
        base[slot &+ 512] = y
        count &+= 1
    }

    /// The normalised autocorrelation (−1...1) of the last `window` samples with the samples
    /// `lag` nanoseconds earlier; 0 when the history is too short. Every other sample is used:
    /// the band-passed signal has little above a few hertz, so this halves the cost for free.
    @inlinable
    public func correlation(atLag lagTime: Int64) -> Float {
        correlation(atLag: lagTime, over: window)
    }

    /// The correlation at `lagTime` over the last `span` nanoseconds (at most the configured
    /// window, at least two samples).
    @inlinable
    public func correlation(atLag lagTime: Int64, span: Int64) -> Float {
        let samples = roundedToInt(Double(span) / samplePeriod)
        return correlation(atLag: lagTime, over: min(window, max(2, samples)))
    }

    /// The correlation at `lagTime` over `span` nanoseconds that ended `ago` nanoseconds before
    /// the newest sample (the whole stretch, lag included, within the history); 0 when the
    /// history does not reach that far back.
    @inlinable
    public func correlation(atLag lagTime: Int64, span: Int64, endingAgo ago: Int64) -> Float {
        let samples = max(2, roundedToInt(Double(span) / samplePeriod))
        let skip = max(0, roundedToInt(Double(ago) / samplePeriod))
        return correlation(atLag: lagTime, over: samples, skipping: skip)
    }

    @inlinable
    func correlation(atLag lagTime: Int64, over n: Int, skipping skip: Int = 0) -> Float {
        let lag = roundedToInt(Double(lagTime) / samplePeriod)
        let count = self.count &- skip
        guard lag > 0, skip >= 0, count >= n &+ lag, n &+ lag &+ skip <= Self.capacity else { return 0 }
        let (xy, xx, yy) = sums(lag: lag, over: n, ending: count, cross: true, powers: true)
        return xy / max((xx * yy).squareRoot(), 1e-12)
    }

    /// Whether ``correlation(atLag:)`` is at least `threshold`: the same answer, for less work
    /// when the signal does not repeat at the lag. With a positive threshold, a cross sum that
    /// is not positive (or not a number) decides it at once — the correlation, that sum over a
    /// positive (or NaN) norm, is then at most 0 (or NaN), below the threshold either way — and
    /// only a positive one needs the two power sums. Each sum is accumulated in the same order
    /// as in ``correlation(atLag:)``, so the value compared, when it is needed, is the same.
    @inlinable
    public func correlation(atLag lagTime: Int64, atLeast threshold: Float) -> Bool {
        correlation(atLag: lagTime, over: window, atLeast: threshold)
    }

    /// ``correlation(atLag:atLeast:)`` for ``correlation(atLag:span:)``.
    @inlinable
    public func correlation(atLag lagTime: Int64, span: Int64, atLeast threshold: Float) -> Bool {
        let samples = roundedToInt(Double(span) / samplePeriod)
        return correlation(atLag: lagTime, over: min(window, max(2, samples)), atLeast: threshold)
    }

    @inlinable
    func correlation(atLag lagTime: Int64, over n: Int, atLeast threshold: Float) -> Bool {
        guard threshold > 0 else { return correlation(atLag: lagTime, over: n) >= threshold }
        let lag = roundedToInt(Double(lagTime) / samplePeriod)
        // Too short a history: the correlation is 0, below the threshold.
        guard lag > 0, count >= n &+ lag, n &+ lag <= Self.capacity else { return false }
        let xy = sums(lag: lag, over: n, ending: count, cross: true, powers: false).0
        guard xy > 0 else { return false }
        let (_, xx, yy) = sums(lag: lag, over: n, ending: count, cross: false, powers: true)
        return xy / max((xx * yy).squareRoot(), 1e-12) >= threshold
    }

    /// The sums of the correlation of the `n` samples that end before sample number `count`
    /// with those `lag` samples earlier (every other sample): the cross sum (with `cross`) and
    /// the two power sums (with `powers`; those not asked for are 0). Each sum is accumulated in
    /// the same order whatever else is asked for.
    @inlinable @inline(__always)
    func sums(lag: Int, over n: Int, ending count: Int, cross: Bool, powers: Bool) -> (Float, Float, Float) {
        // Four independent partial sums break the add-latency chain (4× faster than one). Lane
        // k of each sum takes the samples i + 2k of every block of eight: the even half of the
        // eight contiguous values at i (the mirrored ring never wraps within 512 values).
        var sxy = SIMD4<Float>()
        var sxx = SIMD4<Float>()
        var syy = SIMD4<Float>()
        let start = count &- n &- lag  // the oldest sample read, lag included
        // Offsets from `start`, in values: x from `lag`, y from 0; up to n + lag ≤ 512, and a
        // block of eight reads one value past the last it uses, still inside the 1024.
        let values = ring.base + (start & 511)
        let px = UnsafeRawPointer(values + lag)
        let py = UnsafeRawPointer(values)
        // Blocks of eight whose first value is within the last seven of the span (x + 6 < end,
        // x = lag + 8 j). One a turn: with two a turn, written out, the compiler multiplied the
        // whole eight-value vectors and shuffled the products into lanes, 2–3× the instructions
        // of the shuffle, multiply and add it makes of this loop (which it unrolls itself).
        let blocks = (n &+ 1) &>> 3
        var j = 0
        while j < blocks {
            let a = px.loadUnaligned(fromByteOffset: j &<< 5, as: SIMD8<Float>.self).evenHalf
            let b = py.loadUnaligned(fromByteOffset: j &<< 5, as: SIMD8<Float>.self).evenHalf
            if cross { sxy += a * b }
            if powers {
                sxx += a * a
                syy += b * b
            }
            j &+= 1
        }
        var x = lag &+ blocks &<< 3
        let end = n &+ lag
        var xy = cross ? sxy.sum() : 0
        var xx = powers ? sxx.sum() : 0
        var yy = powers ? syy.sum() : 0
        while x < end {
            let a = values[x]
            let b = values[x &- lag]
            if cross { xy += a * b }
            if powers {
                xx += a * a
                yy += b * b
            }
            x &+= 2
        }
        return (xy, xx, yy)
    }

    /// The root mean square of the `span` nanoseconds that ended `ago` nanoseconds before the
    /// newest sample (at most what the history holds); 0 when none of it is held.
    @inlinable
    public func rms(span: Int64, endingAgo ago: Int64) -> Float {
        let skip = max(0, roundedToInt(Double(ago) / samplePeriod))
        let held = min(count, Self.capacity) &- skip
        let n = min(held, max(1, roundedToInt(Double(span) / samplePeriod)))
        guard n > 0 else { return 0 }
        let values = ring.base + ((count &- skip &- n) & 511)
        var sum: Float = 0
        var i = 0
        while i < n {
            let v = values[i]
            sum += v * v
            i &+= 1
        }
        return (sum / Float(n)).squareRoot()
    }

    /// Forgets all history.
    public mutating func reset() { count = 0 }
}

/// `Int(x.rounded())` (to nearest, halves away from zero), without the call to libm's `round`
/// that `rounded()` compiles to on baseline x86-64. Exact: for |x| < 2⁵², `x - trunc(x)` is
/// representable; above that `x` is whole. Traps where `Int(x.rounded())` does (NaN, out of range).
@inlinable @inline(__always)
func roundedToInt(_ x: Double) -> Int {
    let whole = Int(x)
    let fraction = x - Double(whole)
    return fraction >= 0.5 ? whole &+ 1 : fraction <= -0.5 ? whole &- 1 : whole
}
