/// Finds step peaks in the band-passed acceleration magnitude.
///
/// A peak is a local maximum that stands out from the valleys on both sides by at least the
/// adaptive *prominence* — `ratio` times the running RMS of the signal, but never less than
/// `minimumHeight` g (the activity gate) — and lies above the signal's zero line. It is reported
/// as soon as the signal has fallen that far after it. Unlike a zero-crossing detector, this
/// separates two steps that ride on one arm-swing wave (the wrist's step-versus-stride trap).
public struct PeakDetector: Sendable, Equatable {
    /// A detected peak: the time of its highest sample and its height, in g.
    public struct Peak: Sendable, Equatable {
        public var time: Int64
        public var height: Float

        @inlinable
        public init(time: Int64, height: Float) {
            self.time = time
            self.height = height
        }
    }

    @usableFromInline let envelopeAlpha: Float
    @usableFromInline let ratio: Float
    @usableFromInline let minimumHeight: Float
    @usableFromInline var meanSquare: Float = 0
    /// Whether the detector is climbing towards a peak (else descending towards a valley).
    @usableFromInline var rising = true
    @usableFromInline var extreme: Float = 0
    @usableFromInline var extremeTime: Int64 = 0
    /// Non-maximum suppression: a found peak waits here until no higher one can replace it.
    @usableFromInline let separation: Int64
    @usableFromInline var pending: Peak? = nil
    /// Whether found peaks wait out the separation (else they are reported at once).
    public var holdsPeaks = true

    /// - Parameters:
    ///   - sampleRate: Rate of the signal, in hertz.
    ///   - envelopeTime: Time constant of the running RMS, in seconds.
    ///   - ratio: Required prominence as a multiple of the running RMS.
    ///   - minimumHeight: Smallest prominence, in g.
    ///   - separation: Of two peaks closer than this, in seconds, only the higher is reported.
    public init(
        sampleRate: Double, envelopeTime: Double, ratio: Double, minimumHeight: Double, separation: Double
    ) {
        self.separation = Int64(separation * 1e9)
        envelopeAlpha = Float(1 - elementaryExp(-1 / (sampleRate * envelopeTime)))
        self.ratio = Float(ratio)
        self.minimumHeight = Float(minimumHeight)
    }

    /// The current prominence a peak needs, in g.
    @inlinable
    public var threshold: Float { max(minimumHeight, ratio * meanSquare.squareRoot()) }

    /// Feeds one filtered sample; returns a peak once the signal has fallen far enough after it
    /// and no higher peak followed within the separation.
    ///
    /// - Complexity: O(1), no allocation.
    @inlinable @inline(__always)
    public mutating func process(_ y: Float, time: Int64) -> Peak? {
        process(y, time: time, holdingPeaks: holdsPeaks)
    }

    /// ``process(_:time:)`` with ``holdsPeaks`` given for this sample (not stored): the
    /// detector knows it per period from its gate, without a store per period.
    @inlinable @inline(__always)
    public mutating func process(_ y: Float, time: Int64, holdingPeaks: Bool) -> Peak? {
        let result = release(at: time, holdingPeaks: holdingPeaks)
        advance(y, time: time)
        return result
    }

    /// The first half of ``process(_:time:holdingPeaks:)``: the waiting peak, if it is due at
    /// `time` (and no longer waits). Apart from ``advance(_:time:)``, so that the detector hands
    /// a due peak on at once, inside a test that is almost never true, instead of carrying an
    /// optional result through the rest of the period.
    @inlinable @inline(__always)
    mutating func release(at time: Int64, holdingPeaks: Bool) -> Peak? {
        if let p = pending, !holdingPeaks || time &- p.time >= separation {
            pending = nil
            return p
        }
        return nil
    }

    /// The second half of ``process(_:time:holdingPeaks:)``: follows the signal with `y` at
    /// `time`, after ``release(at:holdingPeaks:)`` for the same period.
    @inlinable @inline(__always)
    mutating func advance(_ y: Float, time: Int64) {
        // The threshold (a square root) is worked out only when the signal turns, not while it
        // keeps rising or falling.
        if rising {
            if y > extreme {
                extreme = y
                extremeTime = time
            } else if y < extreme - threshold {
                if extreme > 0 {
                    if let p = pending, p.height >= extreme {
                        // The earlier, higher peak stands.
                    } else {
                        pending = Peak(time: extremeTime, height: extreme)
                    }
                }
                rising = false
                extreme = y
            }
        } else {
            if y < extreme {
                extreme = y
            } else if y > extreme + threshold {
                rising = true
                extreme = y
                extremeTime = time
            }
        }
        meanSquare += envelopeAlpha * (y * y - meanSquare)
    }

    /// Forgets all history.
    public mutating func reset() {
        meanSquare = 0
        rising = true
        extreme = 0
        pending = nil
    }
}
