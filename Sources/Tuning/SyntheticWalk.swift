import Foundation
public import StepDetection

/// A small, fast, seedable random number generator (SplitMix64), so benchmarks, synthetic
/// recordings and property tests repeat exactly.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A uniform value in [0, 1).
    public mutating func nextUnit() -> Double { Double(next() >> 11) * 0x1p-53 }
}

/// Deterministic synthetic accelerometer signals with a known number of steps, for tests and
/// benchmarks.
public struct SyntheticWalk: Sendable {
    /// Steps per second.
    public var cadence: Double = 1.8
    /// Peak vertical acceleration of a step, in g.
    public var amplitude: Double = 0.25
    /// Relative strength of the second foot (1 = both feet alike).
    public var secondFoot: Double = 0.8
    /// Arm-swing or sway component at the stride frequency, in g.
    public var sway: Double = 0.05
    /// Height of the jolt of each foot landing, as a fraction of the step's amplitude: a 15 ms
    /// exponential decay at the step's crest, gone after 100 ms (footfalls reach the wrist as
    /// such bursts; the detector's impact guard looks for them).
    public var heelStrike: Double = 2.5
    /// Uniform noise amplitude, in g.
    public var noise: Double = 0.02
    /// Sampling rate, in hertz.
    public var rate: Double = 100
    /// Timing jitter as a fraction of the sampling period.
    public var jitter: Double = 0.02
    /// Seconds of standing still before and after the walk.
    public var stillBefore: Double = 0
    public var stillAfter: Double = 0
    /// Seed of the noise and jitter.
    public var seed: UInt64 = 42

    public init() {}

    /// The samples of a walk of `steps` steps (plus the still periods).
    public func samples(steps: Int) -> [AccelerationSample] {
        samples(duration: stillBefore + Double(steps) / cadence + stillAfter, steps: steps)
    }

    /// `duration` seconds of samples, of which `steps` steps of walking after `stillBefore`.
    public func samples(duration: Double, steps: Int) -> [AccelerationSample] {
        var random = SplitMix64(seed: seed)
        let count = Int(duration * rate)
        var samples: [AccelerationSample] = []
        samples.reserveCapacity(count)
        let walkStart = stillBefore
        let walkEnd = stillBefore + Double(steps) / cadence
        for i in 0..<count {
            let t = (Double(i) + jitter * (random.nextUnit() - 0.5)) / rate
            var vertical = noise * (random.nextUnit() - 0.5)
            var lateral = 0.0
            if t >= walkStart && t < walkEnd {
                // Each step is a raised-cosine bump; odd steps are the weaker foot.
                let phase = (t - walkStart) * cadence
                let stepIndex = Int(phase)
                let within = phase - Double(stepIndex)
                let foot = stepIndex % 2 == 0 ? 1 : secondFoot
                vertical +=
                    amplitude * foot * 0.5 * (1 - cos(2 * Double.pi * within)) - amplitude * foot * 0.5
                let sinceCrest = (within - 0.5) / cadence
                if sinceCrest >= 0 && sinceCrest < 0.1 {
                    vertical += heelStrike * amplitude * foot * exp(-sinceCrest / 0.02)
                }
                lateral = sway * sin(Double.pi * phase)
            }
            samples.append(
                AccelerationSample(
                    timestamp: Int64((t * 1e9).rounded()), x: Float(lateral), y: Float(0.1 * vertical),
                    z: Float(1 + vertical)))
        }
        return samples
    }
}
