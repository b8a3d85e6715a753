/// The most recent filtered samples, for the autocorrelation tests of ``CadenceGate``.
///
/// A fixed ring of 512 values (no allocation); the correlation is computed on demand, only when
/// a peak is linked into a walk, in O(window).
public struct SignalHistory: Sendable {
    public static let capacity = 512
    @usableFromInline var values = InlineArray<512, Float>(repeating: 0)
    @usableFromInline var count = 0
    @usableFromInline let samplePeriod: Double
    @usableFromInline let window: Int

    /// - Parameters:
    ///   - sampleRate: Rate of the signal, in hertz.
    ///   - window: Length of signal over which correlations are measured, in seconds.
    public init(sampleRate: Double, window: Double) {
        samplePeriod = 1e9 / sampleRate
        self.window = max(1, Int((window * sampleRate).rounded()))
    }

    /// The length of the correlation window, in nanoseconds.
    @inlinable
    public var duration: Double { Double(window) * samplePeriod }

    /// How far back the history reaches, in nanoseconds.
    @inlinable
    public var reach: Int64 { Int64(Double(min(count, Self.capacity)) * samplePeriod) }

    /// Appends one sample.
    @inlinable @inline(__always)
    public mutating func append(_ y: Float) {
        values[count & 511] = y
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
        let samples = Int((Double(span) / samplePeriod).rounded())
        return correlation(atLag: lagTime, over: min(window, max(2, samples)))
    }

    /// The correlation at `lagTime` over `span` nanoseconds that ended `ago` nanoseconds before
    /// the newest sample (the whole stretch, lag included, within the history); 0 when the
    /// history does not reach that far back.
    @inlinable
    public func correlation(atLag lagTime: Int64, span: Int64, endingAgo ago: Int64) -> Float {
        let samples = max(2, Int((Double(span) / samplePeriod).rounded()))
        let skip = max(0, Int((Double(ago) / samplePeriod).rounded()))
        return correlation(atLag: lagTime, over: samples, skipping: skip)
    }

    @inlinable
    func correlation(atLag lagTime: Int64, over n: Int, skipping skip: Int = 0) -> Float {
        let lag = Int((Double(lagTime) / samplePeriod).rounded())
        let count = self.count &- skip
        guard lag > 0, skip >= 0, count >= n &+ lag, n &+ lag &+ skip <= Self.capacity else { return 0 }
        // Four independent partial sums break the add-latency chain (4× faster than one).
        var sxy = SIMD4<Float>()
        var sxx = SIMD4<Float>()
        var syy = SIMD4<Float>()
        let ring = values.span  // borrow the ring: indexing the InlineArray here copied all 2 KiB
        var i = count &- n
        while i &+ 6 < count {
            let a = SIMD4(ring[i & 511], ring[(i &+ 2) & 511], ring[(i &+ 4) & 511], ring[(i &+ 6) & 511])
            let j = i &- lag
            let b = SIMD4(ring[j & 511], ring[(j &+ 2) & 511], ring[(j &+ 4) & 511], ring[(j &+ 6) & 511])
            sxy += a * b
            sxx += a * a
            syy += b * b
            i &+= 8
        }
        var xy = sxy.sum()
        var xx = sxx.sum()
        var yy = syy.sum()
        while i < count {
            let a = ring[i & 511]
            let b = ring[(i &- lag) & 511]
            xy += a * b
            xx += a * a
            yy += b * b
            i &+= 2
        }
        return xy / max((xx * yy).squareRoot(), 1e-12)
    }

    /// The root mean square of the `span` nanoseconds that ended `ago` nanoseconds before the
    /// newest sample (at most what the history holds); 0 when none of it is held.
    @inlinable
    public func rms(span: Int64, endingAgo ago: Int64) -> Float {
        let skip = max(0, Int((Double(ago) / samplePeriod).rounded()))
        let held = min(count, Self.capacity) &- skip
        let n = min(held, max(1, Int((Double(span) / samplePeriod).rounded())))
        guard n > 0 else { return 0 }
        let ring = values.span
        var sum: Float = 0
        var i = count &- skip &- n
        while i < count &- skip {
            let v = ring[i & 511]
            sum += v * v
            i &+= 1
        }
        return (sum / Float(n)).squareRoot()
    }

    /// Forgets all history.
    public mutating func reset() { count = 0 }
}
