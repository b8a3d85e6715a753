/// Decides which peaks are steps by their rhythm.
///
/// Walking is regular; car bumps, typing and gestures are not. The gate keeps the most recent
/// peaks and, for each new one, the longest *rhythmic chain* ending at it: a sequence of earlier
/// peaks, each a plausible step interval after the one before, every interval within
/// `tolerance` of the chain's mean interval or of the interval two links back (left and right
/// steps often differ, so the same foot is the fairer comparison). Peaks that fit no chain —
/// echoes of a footfall, a bump — are simply left out of it. When a chain reaches
/// `stepsToConfirm` peaks the walk is confirmed and its peaks are credited all at once.
///
/// While walking, the gate follows the step period (the mean of the last two intervals, half a
/// stride). A peak that arrives about one period after the last step is the next step; one at
/// about two periods is a step whose partner faded below the threshold and counts as two when
/// `fillsMissedSteps` is set; earlier peaks are echoes and are skipped; a longer pause ends the
/// walk.
public struct CadenceGate: Sendable {
    /// The largest `stepsToConfirm` the gate supports.
    public static let maximumHeldSteps = 16
    @usableFromInline static let capacity = 64

    /// Where the gate is.
    public enum State: Sendable, Hashable {
        /// No rhythmic chain of two or more peaks.
        case still
        /// The longest rhythmic chain has `count` peaks, fewer than needed; none counted yet.
        case confirming(count: Int)
        /// A walk is confirmed; each rhythmic peak is a step.
        case walking
    }

    @usableFromInline let minimumInterval: Int64
    @usableFromInline let maximumInterval: Int64
    @usableFromInline let tolerance: Double
    @usableFromInline let stepsToConfirm: Int
    @usableFromInline let fillsMissedSteps: Bool
    /// A walk whose peak period is at least this long, in nanoseconds, has one peak per stride.
    @usableFromInline let strideThreshold: Int64
    /// Whether the current walk has one peak per stride (two steps per peak).
    @usableFromInline var striding = false

    // Ring of recent peaks, indexed by peak number modulo `capacity`.
    @usableFromInline var times = InlineArray<64, Int64>(repeating: 0)
    /// Length of the longest rhythmic chain ending at the peak.
    @usableFromInline var chainLength = InlineArray<64, Int32>(repeating: 0)
    /// Peak number of the previous link of that chain (−1 when none).
    @usableFromInline var previous = InlineArray<64, Int>(repeating: -1)
    /// Sum of the chain's intervals, in nanoseconds.
    @usableFromInline var chainSpan = InlineArray<64, Int64>(repeating: 0)
    /// Number of peaks seen since the last reset.
    @usableFromInline var peakCount = 0
    @usableFromInline var bestChain: Int32 = 0

    @usableFromInline var walking = false
    /// Time of the last counted step and the last two intervals, in nanoseconds.
    @usableFromInline var lastStep: Int64 = 0
    @usableFromInline var interval1: Int64 = 0
    @usableFromInline var interval2: Int64 = 0
    /// The step period followed while walking, in nanoseconds.
    @usableFromInline var period: Double = 0

    /// - Parameters:
    ///   - minimumInterval: Shortest step interval, in seconds.
    ///   - maximumInterval: Longest step interval that continues a walk, in seconds.
    ///   - tolerance: Allowed relative difference between comparable intervals.
    ///   - stepsToConfirm: Rhythmic peaks needed before counting starts, 2...16.
    ///   - fillsMissedSteps: Whether an interval of about two periods counts as two steps.
    ///   - strideThreshold: A rhythm slower than this, in seconds, is one peak per stride.
    public init(
        minimumInterval: Double, maximumInterval: Double, tolerance: Double, stepsToConfirm: Int,
        fillsMissedSteps: Bool, strideThreshold: Double
    ) {
        self.strideThreshold = Int64(strideThreshold * 1e9)
        precondition(
            stepsToConfirm >= 2 && stepsToConfirm <= Self.maximumHeldSteps, "stepsToConfirm out of range")
        self.minimumInterval = Int64(minimumInterval * 1e9)
        self.maximumInterval = Int64(maximumInterval * 1e9)
        self.tolerance = tolerance
        self.stepsToConfirm = stepsToConfirm
        self.fillsMissedSteps = fillsMissedSteps
    }

    /// The gate's state.
    public var state: State {
        if walking { return .walking }
        return bestChain >= 2 ? .confirming(count: Int(bestChain)) : .still
    }

    /// The step period being followed while walking, in seconds; 0 otherwise.
    public var stepPeriod: Double { walking ? period / 1e9 : 0 }

    @inlinable
    func near(_ a: Double, _ b: Double) -> Bool { b > 0 && abs(a - b) <= tolerance * b }

    /// Feeds one peak; calls `emit` with the time of every step it confirms (held-back steps
    /// first, in order).
    ///
    /// - Complexity: O(1): at most 64 recent peaks are examined; no allocation.
    @inlinable
    public mutating func peak(at time: Int64, _ emit: (Int64) -> Void) {
        if walking {
            let d = Double(time &- lastStep)
            let p = period
            if (near(d, p) || near(d, Double(interval2))) && time &- lastStep <= maximumInterval {
                if striding { emit(lastStep &+ (time &- lastStep) / 2) }
                emit(time)
                period += 0.25 * (0.5 * (d + Double(interval1)) - p)
                advance(to: time)
            } else if fillsMissedSteps && !striding && abs(d - 2 * p) <= tolerance * p
                && time &- lastStep <= 2 &* maximumInterval
            {
                emit(lastStep &+ (time &- lastStep) / 2)
                lastStep &+= (time &- lastStep) / 2
                interval1 = Int64(p)
                emit(time)
                advance(to: time)
            } else if d >= p {
                walking = false
            }
        }
        link(time)
        if !walking && bestChain >= stepsToConfirm {
            confirm(emit)
        }
    }

    /// Records a peak and the longest rhythmic chain ending at it.
    @inlinable
    mutating func link(_ time: Int64) {
        let index = peakCount
        let slot = index % Self.capacity
        var bestLength: Int32 = 1
        var bestPrevious = -1
        var bestSpan: Int64 = 0
        var k = index &- 1
        let oldest = max(0, index &- Self.capacity &+ 1)
        while k >= oldest {
            let s = k % Self.capacity
            let d = time &- times[s]
            if d > maximumInterval { break }
            if d >= minimumInterval {
                let length = chainLength[s]
                let fits: Bool
                if length <= 2 {
                    // One interval says nothing about asymmetry yet: any plausible one fits.
                    fits = true
                } else {
                    let mean = Double(chainSpan[s]) / Double(length &- 1)
                    // The interval two links back: same foot as the new one.
                    let p = previous[s]
                    let pp = p >= oldest ? previous[p % Self.capacity] : -1
                    let twoBack =
                        pp >= oldest ? Double(times[p % Self.capacity] &- times[pp % Self.capacity]) : 0
                    fits = near(Double(d), mean) || near(Double(d), twoBack)
                }
                if fits && length &+ 1 > bestLength {
                    bestLength = length &+ 1
                    bestPrevious = k
                    bestSpan = chainSpan[s] &+ d
                }
            }
            k &-= 1
        }
        times[slot] = time
        chainLength[slot] = bestLength
        previous[slot] = bestPrevious
        chainSpan[slot] = bestSpan
        peakCount &+= 1
        bestChain = bestLength
    }

    /// Credits the chain ending at the newest peak and starts walking.
    @inlinable
    mutating func confirm(_ emit: (Int64) -> Void) {
        let newest = peakCount &- 1
        let length = Int(chainLength[newest % Self.capacity])
        var members = InlineArray<16, Int64>(repeating: 0)
        var k = newest
        var n = 0
        let oldest = max(0, peakCount &- Self.capacity)
        while k >= oldest && n < length && n < 16 {
            members[n] = times[k % Self.capacity]
            n &+= 1
            k = previous[k % Self.capacity]
        }
        striding =
            Double(chainSpan[newest % Self.capacity]) / Double(max(1, length &- 1)) >= Double(strideThreshold)
        var i = n
        while i > 0 {
            i &-= 1
            if striding && i < n &- 1 { emit(members[i &+ 1] &+ (members[i] &- members[i &+ 1]) / 2) }
            emit(members[i])
        }
        period = Double(chainSpan[newest % Self.capacity]) / Double(max(1, length &- 1))
        lastStep = members[0]
        interval1 = n > 1 ? members[0] &- members[1] : 0
        interval2 = n > 2 ? members[1] &- members[2] : 0
        walking = true
        // The credited chain must not be credited again.
        chainLength[newest % Self.capacity] = 1
        chainSpan[newest % Self.capacity] = 0
        bestChain = 1
    }

    @usableFromInline
    mutating func advance(to time: Int64) {
        interval2 = interval1
        interval1 = time &- lastStep
        lastStep = time
    }

    /// Forgets all history; unconfirmed peaks are dropped.
    public mutating func reset() {
        walking = false
        peakCount = 0
        bestChain = 0
        interval1 = 0
        interval2 = 0
        period = 0
    }
}
