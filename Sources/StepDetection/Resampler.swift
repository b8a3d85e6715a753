/// Turns irregularly timed samples into a uniform timeline by averaging.
///
/// The input is taken as piecewise linear between samples; each output value is the mean of
/// that line over one output period. So a 400 Hz phone log is box-filtered down (anti-aliased)
/// and a jittery 12.5 Hz watch log is interpolated up, by the same rule. A gap longer than
/// `maximumGap`, or a timestamp that goes backwards, is not bridged: the resampler reports a
/// discontinuity and starts a new timeline at the next sample.
public struct Resampler: Sendable, Equatable {
    /// Output period, in nanoseconds.
    public let period: Int64
    /// Longest interval between two input samples that is still interpolated, in nanoseconds.
    public let maximumGap: Int64

    @usableFromInline var lastTime: Int64 = 0
    @usableFromInline var lastValue: Double = 0
    @usableFromInline var hasLast = false
    /// End of the output period being accumulated.
    @usableFromInline var binEnd: Int64 = 0
    /// Integral of the input over the current period so far, in value × nanoseconds.
    @usableFromInline var accumulated: Double = 0

    /// A resampler to `rate` hertz that bridges gaps up to `maximumGap` seconds.
    public init(rate: Double, maximumGap: Double) {
        period = Int64((1e9 / rate).rounded())
        self.maximumGap = Int64((maximumGap * 1e9).rounded())
    }

    /// What one input sample produced.
    public enum Event: Sendable, Equatable {
        /// One output value, the mean over the period centred on `time`.
        case value(Float, time: Int64)
        /// The timeline broke before this sample (a gap or a backward step); forget history.
        case discontinuity
    }

    /// Feeds one input sample; calls `emit` for each completed output period.
    ///
    /// - Complexity: O(1) per output period, no allocation.
    @inlinable
    public mutating func push(time: Int64, value: Float, _ emit: (Event) -> Void) {
        let v = Double(value)
        guard hasLast else {
            start(time: time, value: v)
            return
        }
        let span = time &- lastTime
        if span < 0 || span > maximumGap {
            emit(.discontinuity)
            start(time: time, value: v)
            return
        }
        if span == 0 {
            lastValue = v
            return
        }
        let slope = (v - lastValue) / Double(span)
        var t0 = lastTime
        var v0 = lastValue
        while binEnd <= time {
            let v1 = v0 + slope * Double(binEnd &- t0)
            accumulated += Double(binEnd &- t0) * 0.5 * (v0 + v1)
            emit(.value(Float(accumulated / Double(period)), time: binEnd &- period / 2))
            accumulated = 0
            t0 = binEnd
            v0 = v1
            binEnd &+= period
        }
        accumulated += Double(time &- t0) * 0.5 * (v0 + v)
        lastTime = time
        lastValue = v
    }

    @usableFromInline
    mutating func start(time: Int64, value: Double) {
        hasLast = true
        lastTime = time
        lastValue = value
        binEnd = time &+ period
        accumulated = 0
    }

    /// Forgets all history.
    public mutating func reset() {
        hasLast = false
        accumulated = 0
    }
}
