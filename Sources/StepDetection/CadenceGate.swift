/// Decides which peaks are steps by their rhythm.
///
/// Walking is regular; car bumps, typing and gestures are not. The gate keeps the most recent
/// peaks and, for each new one, the longest *rhythmic chain* ending at it: a sequence of earlier
/// peaks, each a plausible interval after the one before, every interval within `tolerance` of
/// the chain's mean interval or of the interval two links back (left and right steps often
/// differ, so the same foot is the fairer comparison), with at most `maximumSkipped` peaks left
/// out between two links (an echo of a footfall, the weaker step at the wrist) and, when
/// `amplitudeRatio` is set, heights that stay within that ratio of each other. When a chain
/// reaches `stepsToConfirm` peaks the walk is confirmed and its peaks not yet counted are
/// credited all at once.
///
/// At confirmation the gate decides whether the chain has one peak per step or one per stride
/// (two steps): a chain slower than `strideThreshold` cannot be a walking step rhythm, and a
/// signal that correlates with itself at half the chain's period (`halfPeriodCorrelation`)
/// shows that the peaks skip every other step. From then on it follows the *step* period: a
/// peak about n step periods after the last counted one brings n steps (n up to 2, or 4 when
/// striding, with `fillsMissedSteps`), placed evenly; earlier peaks are echoes and are skipped;
/// a longer pause ends the walk — unless the signal over the pause still repeats at the walk's
/// stride (`continuationCorrelation`): then the peaks lost the rhythm, not the walker.
public struct CadenceGate: Sendable {
    /// The largest `stepsToConfirm` the gate supports.
    public static let maximumHeldSteps = 16
    @usableFromInline static let capacity = 64

    /// The ring slot of peak number `k` (`k ≥ 0`): `k % capacity` as a mask, which the compiler
    /// knows to lie in the ring, so the subscripts need no bounds checks (a signed remainder
    /// costs five instructions and may be negative, as far as the compiler can tell).
    @inlinable @inline(__always)
    static func slot(_ k: Int) -> Int { k & (capacity &- 1) }

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
    /// A chain whose peak period is at least this long, in nanoseconds, has one peak per stride.
    @usableFromInline let strideThreshold: Int64
    @usableFromInline let maximumSkipped: Int
    @usableFromInline let amplitudeRatio: Float
    /// Whether a chain may bridge one missing peak (an interval of two chain periods).
    @usableFromInline let bridgesGaps: Bool
    @usableFromInline let periodCorrelation: Float
    @usableFromInline let halfPeriodCorrelation: Float
    /// The shortest chain that may confirm a walk, with `shortBoutCorrelation`.
    @usableFromInline let minimumBoutSteps: Int
    @usableFromInline let shortBoutCorrelation: Float
    /// The periodicity a chain of 2 × `stepsToConfirm` or more needs.
    @usableFromInline let longChainCorrelation: Float
    /// A stride-period chain whose signal correlates less than this at half its period is a
    /// pure oscillation, not a walk.
    @usableFromInline let sinusoidCorrelation: Float
    /// A chain confirms only when the impact ratio (``ImpactMeter``) is at least this.
    @usableFromInline let minimumImpactRatio: Float
    /// How long after a walk's last step a chain at its rhythm resumes it, in nanoseconds.
    @usableFromInline let resumeTime: Int64
    /// The periodicity a resuming chain needs.
    @usableFromInline let resumeCorrelation: Float
    /// The periodicity at the walk's stride, over a pause in its peaks, that carries the walk
    /// across the pause.
    @usableFromInline let continuationCorrelation: Float
    /// A stride before a chain whose filtered signal has less than this share of the chain's RMS
    /// is stillness, not a walked stride, however well it correlates (see `stridesWalked`).
    @usableFromInline static var quietStride: Float { 0.25 }
    /// The periodicity a chain needs once it has held its rhythm for twice the correlation
    /// window, where footfalls are judged (see `footfallChainRequirement`). 0.55, not the 0.45
    /// first tried: at 0.45 (and 0.5) a non-walking activity at the wrist can hold such a chain
    /// and pass as a long false walk, and a false step unlocks what was not earned.
    @usableFromInline static var footfallChainCorrelation: Float { 0.55 }
    /// Until when the last walk may resume, and its peak period.
    @usableFromInline var resumeUntil: Int64 = .min
    @usableFromInline var resumePeakPeriod: Double = 0
    /// Whether the last walk had one peak per stride, and its step period.
    @usableFromInline var resumeStriding = false
    @usableFromInline var resumeStepPeriod: Double = 0
    /// Whether the last interval while walking was filled with a missed step.
    @usableFromInline var filledLastInterval = false
    /// Whether the current walk has one peak per stride (two steps per peak).
    @usableFromInline var striding = false

    // Ring of recent peaks, indexed by peak number modulo `capacity`.
    @usableFromInline var times = InlineArray<64, Int64>(repeating: 0)
    @usableFromInline var heights = InlineArray<64, Float>(repeating: 0)
    /// Length of the longest rhythmic chain ending at the peak.
    @usableFromInline var chainLength = InlineArray<64, Int32>(repeating: 0)
    /// Peak number of the previous link of that chain (−1 when none).
    @usableFromInline var previous = InlineArray<64, Int>(repeating: -1)
    /// Sum of the chain's intervals, in nanoseconds.
    @usableFromInline var chainSpan = InlineArray<64, Int64>(repeating: 0)
    /// How many chain periods the link into the peak spans (2: a peak in between is missing).
    @usableFromInline var linkUnits = InlineArray<64, Int32>(repeating: 1)
    /// Number of peaks seen since the last reset.
    @usableFromInline var peakCount = 0
    @usableFromInline var bestChain: Int32 = 0

    @usableFromInline var walking = false
    /// Time of the last counted step, in nanoseconds.
    @usableFromInline var lastStep: Int64 = 0
    /// Steps at or before this time have been counted.
    @usableFromInline var creditedUntil: Int64 = .min
    /// The step period followed while walking, in nanoseconds.
    @usableFromInline var period: Double = 0

    /// - Parameters:
    ///   - minimumInterval: Shortest interval between two peaks of a chain, in seconds.
    ///   - maximumInterval: Longest interval between two peaks of a chain, in seconds.
    ///   - tolerance: Allowed relative difference between comparable intervals.
    ///   - stepsToConfirm: Rhythmic peaks needed before counting starts, 2...16.
    ///   - fillsMissedSteps: Whether an interval of about two periods counts as two steps.
    ///   - strideThreshold: A rhythm slower than this, in seconds, is one peak per stride.
    ///   - maximumSkipped: Most peaks left out between two links of a chain.
    ///   - amplitudeRatio: Largest ratio of the heights of two linked peaks; 0 for any.
    ///   - continuationCorrelation: While walking, a pause in the peaks longer than the gate
    ///     follows ends the walk unless the signal over it correlates at least this much at the
    ///     walk's stride; above 1: off.
    public init(
        minimumInterval: Double, maximumInterval: Double, tolerance: Double, stepsToConfirm: Int,
        fillsMissedSteps: Bool, strideThreshold: Double, maximumSkipped: Int = 63, amplitudeRatio: Double = 0,
        periodCorrelation: Double = -1, halfPeriodCorrelation: Double = 2, minimumBoutSteps: Int? = nil,
        shortBoutCorrelation: Double? = nil, longChainCorrelation: Double? = nil, resumeTime: Double = 0,
        resumeCorrelation: Double? = nil, sinusoidCorrelation: Double = -1, minimumImpactRatio: Double = 0,
        continuationCorrelation: Double = 2
    ) {
        self.continuationCorrelation = Float(continuationCorrelation)
        self.minimumImpactRatio = Float(minimumImpactRatio)
        self.sinusoidCorrelation = Float(sinusoidCorrelation)
        self.resumeTime = Int64(resumeTime * 1e9)
        self.resumeCorrelation = Float(resumeCorrelation ?? periodCorrelation)
        self.periodCorrelation = Float(periodCorrelation)
        self.minimumBoutSteps = min(stepsToConfirm, max(2, minimumBoutSteps ?? stepsToConfirm))
        self.shortBoutCorrelation = Float(shortBoutCorrelation ?? periodCorrelation)
        self.longChainCorrelation = Float(longChainCorrelation ?? periodCorrelation)
        self.bridgesGaps = fillsMissedSteps
        self.halfPeriodCorrelation = Float(halfPeriodCorrelation)
        self.strideThreshold = Int64(strideThreshold * 1e9)
        precondition(
            stepsToConfirm >= 2 && stepsToConfirm <= Self.maximumHeldSteps, "stepsToConfirm out of range")
        self.minimumInterval = Int64(minimumInterval * 1e9)
        self.maximumInterval = Int64(maximumInterval * 1e9)
        self.tolerance = tolerance
        self.stepsToConfirm = stepsToConfirm
        self.fillsMissedSteps = fillsMissedSteps
        self.maximumSkipped = maximumSkipped
        self.amplitudeRatio = Float(amplitudeRatio)
    }

    /// The gate's state.
    public var state: State {
        if walking { return .walking }
        return bestChain >= 2 ? .confirming(count: Int(bestChain)) : .still
    }

    /// Whether a walk is confirmed.
    @inlinable
    public var isWalking: Bool { walking }

    /// The step period being followed while walking, in seconds; 0 otherwise.
    public var stepPeriod: Double { walking ? period / 1e9 : 0 }

    @inlinable
    func near(_ a: Double, _ b: Double) -> Bool { b > 0 && abs(a - b) <= tolerance * b }

    /// Feeds one peak; calls `emit` with the time of every step it confirms (held-back steps
    /// first, in order).
    ///
    /// - Parameters:
    ///   - time: The peak's time, in nanoseconds.
    ///   - height: The peak's height, in g.
    ///   - history: The recent filtered signal, for the periodicity tests.
    ///   - impact: The impact ratio now (``ImpactMeter/ratio``); walks are confirmed only at or
    ///     above `minimumImpactRatio`.
    /// - Complexity: O(1): at most 64 recent peaks are examined; no allocation.
    @inlinable
    public mutating func peak(
        at time: Int64, height: Float = 1, history: borrowing SignalHistory, now: Int64? = nil,
        impact: Float = .infinity, _ emit: (Int64) -> Void
    ) {
        if walking {
            let d = Double(time &- lastStep)
            let p = period
            let n = (d / p).rounded()
            let most: Double = fillsMissedSteps ? (striding ? 4 : 2) : (striding ? 2 : 1)
            if n >= 1 && n <= most && abs(d - n * p) <= tolerance * p {
                var steps = Int(n)
                var correctedPeriod = false
                if !striding && steps >= 2 {
                    // Missed steps are exceptions: two fills in a row mean the period followed is
                    // a fraction of the real one. Count this interval as one step and re-learn it.
                    if filledLastInterval {
                        steps = 1
                        correctedPeriod = true
                    }
                    filledLastInterval = !correctedPeriod
                } else {
                    filledLastInterval = false
                }
                let base = lastStep
                let span = time &- lastStep
                var k = 1
                while k < steps {
                    emit(base &+ span * Int64(k) / Int64(steps))
                    k &+= 1
                }
                emit(time)
                if correctedPeriod {
                    period = d
                } else {
                    period += 0.25 * (d / n - p)
                }
                lastStep = time
                creditedUntil = time
                // A step period too slow for walking, or a signal that repeats at half of it:
                // the peaks come once a stride. Once: a walk already followed as strides follows
                // its step period, and that drifting past the threshold is the steps slowing
                // (or its peaks back at one a step), not peaks once every two strides.
                var halve = period >= Double(strideThreshold) && !striding
                if !halve && !striding && halfPeriodCorrelation <= 1 {
                    halve = history.correlation(atLag: Int64(period * 0.5), atLeast: halfPeriodCorrelation)
                }
                if halve {
                    period *= 0.5
                    striding = true
                }
            } else if d > (most + tolerance) * p {
                if continues(until: now ?? time, pause: d, history: history) {
                    // The peaks lost the rhythm, the signal did not: one step per period.
                    let steps = Int64((d / p).rounded())
                    var k: Int64 = 1
                    while k < steps {
                        emit(lastStep &+ (time &- lastStep) * k / steps)
                        k &+= 1
                    }
                    emit(time)
                    lastStep = time
                    creditedUntil = time
                } else {
                    walking = false
                    // Remember the walk: a chain at its rhythm soon after is the same walk resuming.
                    resumeUntil = lastStep &+ resumeTime
                    resumePeakPeriod = striding ? 2 * p : p
                    resumeStriding = striding
                    resumeStepPeriod = p
                }
            }
            // Otherwise an echo or a stray peak: skipped.
        }
        link(time, height)
        // Without footfall impacts the rhythm is an arm moving on its own, not a walk.
        if !walking && bestChain >= minimumBoutSteps && impact >= minimumImpactRatio {
            confirm(history, now: now ?? time, footfallsJudged: impact.isFinite, emit)
        }
    }

    /// Whether a walk goes on across a pause of `d` nanoseconds in its peaks: the signal over
    /// the pause (all of it within the correlation window) still repeats at the walk's stride.
    /// Peaks lose the rhythm when the arm does something else for a few strides; the body's
    /// bounce, which repeats every stride, is still in the signal. A walker who stops leaves
    /// nothing that repeats.
    @inlinable
    func continues(until now: Int64, pause d: Double, history: borrowing SignalHistory) -> Bool {
        guard continuationCorrelation <= 1, d <= history.duration else { return false }
        let stride = Int64(2 * period)
        return history.correlation(
            atLag: stride, span: max(stride, now &- lastStep), atLeast: continuationCorrelation)
    }

    /// Records a peak and the longest rhythmic chain ending at it.
    @inlinable
    mutating func link(_ time: Int64, _ height: Float) {
        let index = peakCount
        let slot = Self.slot(index)
        var bestLength: Int32 = 1
        var bestPrevious = -1
        var bestSpan: Int64 = 0
        var bestUnits: Int32 = 1
        var k = index &- 1
        let oldest = max(0, index &- Self.capacity &+ 1, index &- 1 &- maximumSkipped)
        // The most chain periods a link spans: a link into a peak whose chain has `length` peaks
        // makes one of at most `length + mostUnits`.
        let mostUnits: Int32 = bridgesGaps ? 2 : 1
        while k >= oldest {
            let s = Self.slot(k)
            let d = time &- times[s]
            if d > maximumInterval { break }
            let length = chainLength[s]
            // A chain no longer than the best found cannot replace it, whatever its tests say:
            // they are skipped. (Going back, the earlier peaks' chains are mostly shorter.)
            if d >= minimumInterval && length &+ mostUnits > bestLength {
                var fits: Bool
                var units: Int32 = 1
                if length <= 1 {
                    fits = true
                } else {
                    let mean = Double(chainSpan[s]) / Double(length &- 1)
                    // The interval two links back: same foot as the new one.
                    let p = previous[s]
                    let pp = p >= oldest ? previous[Self.slot(p)] : -1
                    let twoBack =
                        pp >= oldest && linkUnits[Self.slot(p)] == 1
                        ? Double(times[Self.slot(p)] &- times[Self.slot(pp)]) : 0
                    fits = near(Double(d), mean) || near(Double(d), twoBack)
                    if !fits && bridgesGaps && abs(Double(d) - 2 * mean) <= tolerance * mean {
                        // One peak of the rhythm missing (the weaker step faded).
                        fits = true
                        units = 2
                    }
                }
                if fits && amplitudeRatio > 0 {
                    let h = heights[s]
                    fits = height <= amplitudeRatio * h && h <= amplitudeRatio * height
                }
                if fits && length &+ units > bestLength {
                    bestLength = length &+ units
                    bestPrevious = k
                    bestSpan = chainSpan[s] &+ d
                    bestUnits = units
                }
            }
            k &-= 1
        }
        times[slot] = time
        heights[slot] = height
        chainLength[slot] = bestLength
        previous[slot] = bestPrevious
        chainSpan[slot] = bestSpan
        linkUnits[slot] = bestUnits
        peakCount &+= 1
        bestChain = bestLength
    }

    /// The periodicity a chain of `length` steps needs to confirm a walk: the evidence scales
    /// with the length. `periodCorrelation` at `stepsToConfirm`, rising linearly to
    /// `shortBoutCorrelation` at `minimumBoutSteps`, falling linearly to `longChainCorrelation`
    /// at twice `stepsToConfirm`.
    @inlinable
    func requiredCorrelation(chainLength length: Int) -> Float {
        if length < stepsToConfirm {
            let span = Float(max(1, stepsToConfirm &- minimumBoutSteps))
            return periodCorrelation + Float(stepsToConfirm &- length) / span
                * (shortBoutCorrelation - periodCorrelation)
        }
        let f = min(1, Float(length &- stepsToConfirm) / Float(stepsToConfirm))
        return periodCorrelation + f * (longChainCorrelation - periodCorrelation)
    }

    /// The periodicity a chain longer than `stepsToConfirm` needs when the impact meter judges
    /// the input (``ImpactMeter/ratio`` finite, so footfalls are there): the evidence of a
    /// rhythm held for longer than the correlation window adds to what the window shows. From
    /// `required` at a chain spanning one window (4 s) it falls linearly to
    /// `footfallChainCorrelation` (0.55) at two windows and beyond; never above `required`.
    ///
    /// At the wrist a walker whose arm does something else than swing (a glance at the watch, a
    /// hand held still) still lands a foot at every step: the peaks keep the rhythm, chain after
    /// chain of 15–20 of them, while the waveform over 4 s repeats at r 0.4–0.6 and the walk is
    /// not confirmed. The rhythm held for twice the window is evidence the window does not see,
    /// and the impact guard has checked that the peaks come with footfalls. Without a verdict
    /// (input slower than 16 Hz, such as a 12.5 Hz watch log, whose drives form long chains from
    /// the car's bounce) the full requirement stays.
    @inlinable
    func footfallChainRequirement(_ required: Float, span: Int64, window: Double) -> Float {
        let f = Float(min(1, max(0, Double(span) / window - 1)))
        return min(required, required + f * (Self.footfallChainCorrelation - required))
    }

    /// Credits the uncounted peaks of the chain ending at the newest peak and starts walking.
    /// `footfallsJudged`: the impact meter gave a verdict (see `footfallChainRequirement`).
    @inlinable
    mutating func confirm(
        _ history: borrowing SignalHistory, now: Int64, footfallsJudged: Bool = false,
        _ emit: (Int64) -> Void
    ) {
        let newest = peakCount &- 1
        let slot = Self.slot(newest)
        let length = Int(chainLength[slot])
        let chainPeriod = Double(chainSpan[slot]) / Double(max(1, length &- 1))
        // Same-foot periodicity: one chain period, or two when the peaks are steps (left and
        // right steps often differ, the stride always repeats).
        var required = requiredCorrelation(chainLength: length)
        if footfallsJudged && length > stepsToConfirm {
            required = footfallChainRequirement(required, span: chainSpan[slot], window: history.duration)
        }
        // What a fresh walk of this chain needs; a resuming chain may pass with less.
        let fresh = required
        let resuming = times[slot] <= resumeUntil && near(chainPeriod, resumePeakPeriod)
        if resuming {
            // The walk that just ended, resuming after a stumble, a turn or a few faint steps:
            // its rhythm is known, so a short chain at that rhythm needs less periodicity.
            required = min(required, resumeCorrelation)
        }
        // A chain shorter than `stepsToConfirm` is measured on its own signal: from its first
        // peak (shifted by the lag) to now. The configured window, longer than a short bout,
        // would mix in the stillness around it, which no bout could pass; longer chains keep
        // the configured window.
        let first = length < stepsToConfirm ? times[slot] &- chainSpan[slot] : Int64.min / 2
        let lag1 = Int64(chainPeriod)
        var rhythm = history.correlation(atLag: lag1, span: now &- first &- lag1)
        if rhythm < fresh {
            let lag2 = Int64(chainPeriod * 2)
            rhythm = max(rhythm, history.correlation(atLag: lag2, span: now &- first &- lag2))
        }
        if rhythm < required { return }
        var members = InlineArray<64, Int64>(repeating: 0)
        var units = InlineArray<64, Int32>(repeating: 1)
        var k = newest
        var n = 0
        let oldest = max(0, peakCount &- Self.capacity)
        // Newest first; one more (already counted or the chain's start) for the first interval.
        while k >= oldest && n < 64 {
            let t = times[Self.slot(k)]
            members[n] = t
            units[n] = linkUnits[Self.slot(k)]
            n &+= 1
            if t <= creditedUntil { break }
            k = previous[Self.slot(k)]
        }
        // A chain most of whose links bridge a "missing" peak has half the real period (a start-up
        // transient or an echo set it): every link is one period of the real rhythm.
        var period = chainPeriod
        var bridged = 0
        for m in 0..<max(0, n &- 1) where units[m] == 2 { bridged &+= 1 }
        if bridged * 2 > n &- 1 {
            for m in 0..<n { units[m] = 1 }
            period = chainPeriod * 2
        }
        let half = history.correlation(atLag: Int64(period * 0.5))
        if period >= Double(strideThreshold) && half < sinusoidCorrelation {
            // One peak a stride, but nothing of the footfalls between them: the signal is one
            // smooth oscillation (a hand waved up and down), not a walk.
            return
        }
        striding = period >= Double(strideThreshold) || half >= halfPeriodCorrelation
        var stepPeriod = striding ? period / 2 : period
        if resuming && striding && !resumeStriding && half < halfPeriodCorrelation {
            // The walk resuming had one peak per step, and this chain is at its rhythm: a chain
            // that drifted past the stride threshold is the same steps a little slower, not
            // strides, unless the signal repeats at half its period. Taking it as strides would
            // follow a step period about half the walk's and count every peak twice or more.
            striding = false
            stepPeriod = resumeStepPeriod
        }
        // The chain starts where its peaks fell into a rhythm, which at the wrist can be many
        // strides after the walk did. Stride after stride before the chain's first peak, while
        // the signal still repeats at the walk's stride as a walk in progress must to go on
        // (`continuationCorrelation`), those strides were walked: two steps each, at the step
        // period, back to where the signal stops repeating (or the history, or the last counted
        // step). A stride is credited only when the one before it looks the same and both carry
        // a walk's energy, so the stillness before a walk stays out. A chain that resumes a walk
        // on less periodicity than a fresh walk needs may not bridge a stride that does not
        // repeat: the walk ended in that gap once already.
        let oldestMember = members[max(0, n &- 1)]
        let backSteps =
            n > 0 && oldestMember > creditedUntil
            ? stridesWalked(
                before: oldestMember, stepPeriod: stepPeriod, history, now: now,
                bridging: !resuming || rhythm >= fresh) * 2 : 0
        var b = backSteps
        while b > 0 {
            let t = oldestMember &- Int64((Double(b) * stepPeriod).rounded())
            if t > creditedUntil { emit(t) }
            b &-= 1
        }
        var i = n
        while i > 0 {
            i &-= 1
            let t = members[i]
            if i < n &- 1 {
                // Steps between two members: one per chain period, two when striding.
                let steps = Int64(units[i]) * (striding ? 2 : 1)
                let t0 = members[i &+ 1]
                var j: Int64 = 1
                while j < steps {
                    let mid = t0 &+ (t &- t0) * j / steps
                    if mid > creditedUntil { emit(mid) }
                    j &+= 1
                }
            }
            if t > creditedUntil { emit(t) }
        }
        self.period = stepPeriod
        lastStep = members[0]
        creditedUntil = members[0]
        walking = true
        filledLastInterval = false
    }

    /// How many whole strides before `first` the signal shows were walked (see `confirm`): each
    /// correlates with the stride before it at `continuationCorrelation` or more; with
    /// `bridging`, one that does not may be bridged when the one before it does. Both strides of
    /// each comparison must hold at least `quietStride` of the RMS of the signal since `first`
    /// (the chain's): correlation ignores scale, and the stillness before a walk, or a drive's
    /// hum, at a tenth of the walk's amplitude, repeats by chance over a single stride as often
    /// as not. Stops at the last counted step and where the history ends. Out of line: it runs
    /// once per confirmation, not on the per-sample path.
    @usableFromInline @inline(never)
    func stridesWalked(
        before first: Int64, stepPeriod: Double, _ history: borrowing SignalHistory, now: Int64,
        bridging: Bool
    ) -> Int64 {
        guard continuationCorrelation <= 1 else { return 0 }
        let stride = Int64(2 * stepPeriod)
        let reach = history.reach
        let quiet = Self.quietStride * history.rms(span: now &- first, endingAgo: 0)
        var start = first
        var strides: Int64 = 0
        var bridged = false
        // Each stride's test reaches back over it and the stride before it.
        while start &- stride > creditedUntil && now &- start &+ 2 &* stride <= reach {
            guard history.rms(span: stride, endingAgo: now &- start) >= quiet,
                history.rms(span: stride, endingAgo: now &- start &+ stride) >= quiet
            else { break }
            let r = history.correlation(atLag: stride, span: stride, endingAgo: now &- start)
            if r < continuationCorrelation {
                // One stride that does not repeat (a glance at the watch) may be bridged when the
                // one before it does.
                guard bridging, !bridged, start &- 2 &* stride > creditedUntil,
                    now &- start &+ 3 &* stride <= reach,
                    history.rms(span: stride, endingAgo: now &- start &+ 2 &* stride) >= quiet,
                    history.correlation(atLag: stride, span: stride, endingAgo: now &- start &+ stride)
                        >= continuationCorrelation
                else { break }
                bridged = true
                start &-= stride
                strides &+= 1
            }
            start &-= stride
            strides &+= 1
        }
        return strides
    }

    /// Forgets all history; unconfirmed peaks are dropped.
    public mutating func reset() {
        walking = false
        peakCount = 0
        bestChain = 0
        period = 0
        creditedUntil = .min
        filledLastInterval = false
        resumeUntil = .min
    }
}
