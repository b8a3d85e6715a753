/// Turns irregularly timed samples into a uniform timeline by averaging.
///
/// The input is taken as piecewise linear between samples; each output value is the mean of
/// that line over one output period. So a 400 Hz phone log is box-filtered down (anti-aliased)
/// and a jittery 12.5 Hz watch log is interpolated up, by the same rule. A gap longer than
/// `maximumGap`, or a timestamp that goes backwards, is not bridged: the resampler reports a
/// discontinuity and starts a new timeline at the next sample.
///
/// Feed a sample with ``add(time:value:)``, then drain the periods it completed with
/// ``nextValue()``. No closures and no allocation, so the per-sample path stays cheap.
public struct Resampler: Sendable, Equatable {
    /// Output period, in nanoseconds.
    public let period: Int64
    /// Longest interval between two input samples that is still interpolated, in nanoseconds.
    public let maximumGap: Int64
    /// 1 / `period`: a multiplication per output value instead of a division (the result,
    /// rounded to Float, is the same but where the two differ in the last bit of a Double).
    @usableFromInline let inversePeriod: Double
    /// `period / 2`, the offset from a period's end to its centre.
    @usableFromInline let halfPeriod: Int64
    /// The smallest span, as a `UInt64`, that breaks the timeline: `maximumGap + 1` (0 when
    /// `maximumGap` is negative: every span does), so that a negative span breaks it too.
    @usableFromInline let gapLimit: UInt64

    @usableFromInline var lastTime: Int64 = 0
    @usableFromInline var lastValue: Double = 0
    @usableFromInline var hasLast = false
    /// End of the output period being accumulated.
    @usableFromInline var binEnd: Int64 = 0
    /// Integral of the input over the current period so far, in value × nanoseconds.
    @usableFromInline var accumulated: Double = 0
    /// The segment ``nextValue()`` is draining, from the previous sample to (lastTime,
    /// lastValue); nil when there is none.
    @usableFromInline var draining: Segment? = nil

    /// A resampler to `rate` hertz that bridges gaps up to `maximumGap` seconds.
    public init(rate: Double, maximumGap: Double) {
        period = Int64((1e9 / rate).rounded())
        inversePeriod = 1 / Double(period)
        halfPeriod = period / 2
        self.maximumGap = Int64((maximumGap * 1e9).rounded())
        gapLimit = self.maximumGap < 0 ? 0 : UInt64(self.maximumGap) + 1
    }

    /// A completed output period: the mean value and the time of the period's centre.
    public struct Tick: Sendable, Equatable {
        public var value: Float
        public var time: Int64

        @inlinable
        public init(value: Float, time: Int64) {
            self.value = value
            self.time = time
        }
    }

    /// Feeds one input sample. Returns `false` when the timeline broke before it (a gap or a
    /// backward step): forget history downstream. Then call ``nextValue()`` until it returns
    /// `nil`.
    ///
    /// - Complexity: O(1), no allocation.
    @inlinable @inline(__always)
    public mutating func add(time: Int64, value: Float) -> Bool {
        switch add(time, value: value) {
        case .within: return true
        case .restarted: return false
        case .segment(let segment):
            draining = segment
            return true
        }
    }

    /// The next output period completed by the last sample, or `nil` when there are no more.
    ///
    /// - Complexity: O(1), no allocation.
    @inlinable @inline(__always)
    public mutating func nextValue() -> Tick? {
        guard var segment = draining else { return nil }
        let tick = nextValue(&segment)
        draining = tick == nil ? nil : segment
        return tick
    }

    /// The stretch of input from the previous sample to the newest, while its periods are
    /// drained by ``nextValue(_:)``: held by the caller, in local values (the detector's buffer
    /// loop), or stored for the two-call form (``add(time:value:)``, ``nextValue()``), which
    /// calls the same two functions.
    @usableFromInline
    struct Segment: Sendable, Equatable {
        /// Where the part not yet drained starts.
        @usableFromInline var time: Int64
        @usableFromInline var value: Double
        @usableFromInline let slope: Double

        @inlinable
        init(time: Int64, value: Double, slope: Double) {
            self.time = time
            self.value = value
            self.slope = slope
        }
    }

    /// What ``add(_:value:)`` made of a sample.
    @usableFromInline
    enum Added {
        /// The sample stays within the current period (or starts the first timeline).
        case within
        /// The timeline broke before the sample, as ``add(time:value:)`` returning `false`.
        case restarted
        /// The sample completes at least one period: drain it with ``nextValue(_:)`` until that
        /// returns `nil`.
        case segment(Segment)
    }

    /// ``add(time:value:)`` for a caller that drains the periods itself (``nextValue(_:)``),
    /// with the same values in the same order.
    @inlinable @inline(__always)
    mutating func add(_ time: Int64, value: Float) -> Added {
        let v = Double(value)
        guard hasLast else {
            start(time: time, value: v)
            return .within
        }
        let span = time &- lastTime
        if UInt64(bitPattern: span) >= gapLimit {
            start(time: time, value: v)
            return .restarted
        }
        if time < binEnd {
            accumulated += Double(span) * 0.5 * (lastValue + v)
            lastTime = time
            lastValue = v
            return .within
        }
        let segment = Segment(time: lastTime, value: lastValue, slope: (v - lastValue) / Double(span))
        lastTime = time
        lastValue = v
        return .segment(segment)
    }

    /// ``nextValue()`` for a sample ``add(_:value:)`` returned `segment` for: the next period
    /// it completes, or `nil` (the rest of the segment accumulated) when there are no more.
    @inlinable @inline(__always)
    mutating func nextValue(_ segment: inout Segment) -> Tick? {
        if binEnd <= lastTime {
            let v1 = segment.value + segment.slope * Double(binEnd &- segment.time)
            accumulated += Double(binEnd &- segment.time) * 0.5 * (segment.value + v1)
            let tick = Tick(value: Float(accumulated * inversePeriod), time: binEnd &- halfPeriod)
            accumulated = 0
            segment.time = binEnd
            segment.value = v1
            binEnd &+= period
            return tick
        }
        accumulated += Double(lastTime &- segment.time) * 0.5 * (segment.value + lastValue)
        return nil
    }

    /// What one input sample produced, for ``push(time:value:_:)``.
    public enum Event: Sendable, Equatable {
        /// One output value, the mean over the period centred on `time`.
        case value(Float, time: Int64)
        /// The timeline broke before this sample (a gap or a backward step); forget history.
        case discontinuity
    }

    /// Feeds one input sample and calls `emit` for a discontinuity and for each completed
    /// output period: ``add(time:value:)`` and ``nextValue()`` in one call.
    @inlinable
    public mutating func push(time: Int64, value: Float, _ emit: (Event) -> Void) {
        if !add(time: time, value: value) { emit(.discontinuity) }
        while let tick = nextValue() { emit(.value(tick.value, time: tick.time)) }
    }

    @usableFromInline
    mutating func start(time: Int64, value: Double) {
        hasLast = true
        lastTime = time
        lastValue = value
        binEnd = time &+ period
        accumulated = 0
        draining = nil
    }

    /// Forgets all history.
    public mutating func reset() {
        hasLast = false
        accumulated = 0
        draining = nil
    }
}
