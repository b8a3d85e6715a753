import Foundation
import StepGateTestSupport
import Testing

@testable import StepDetection

/// The jolt of a foot landing, `dt` seconds after the step's crest: a 20 ms exponential decay
/// of `height` g, gone after 100 ms. Footfalls reach the wrist as such short bursts.
private func heelStrike(_ dt: Double, height: Double) -> Double {
    dt >= 0 && dt < 0.1 ? height * exp(-dt / 0.02) : 0
}

/// Synthetic walks built here, in the test, so the detector's own code cannot shape them: a
/// smooth bump per step (left and right feet differ) with the jolt of the foot landing on it.
private func walk(
    steps: Int, cadence: Double = 1.8, rate: Double = 100, jitter: Double = 0.02, amplitude: Double = 0.25,
    stillBefore: Double = 3, stillAfter: Double = 3, start: Int64 = 5_000_000_000, seed: UInt64 = 7,
    impact: Double = 2.5
) -> [AccelerationSample] {
    var state = seed
    func unit() -> Double {
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return Double(state >> 11) * 0x1p-53
    }
    let duration = stillBefore + Double(steps) / cadence + stillAfter
    return (0..<Int(duration * rate)).map { i in
        let t = (Double(i) + jitter * (unit() - 0.5)) / rate
        var v = 0.01 * (unit() - 0.5)
        let phase = (t - stillBefore) * cadence
        if phase >= 0 && phase < Double(steps) {
            let foot = amplitude * (Int(phase) % 2 == 0 ? 1 : 0.8)
            v += foot * -cos(2 * Double.pi * phase)
            v += heelStrike((phase - Double(Int(phase)) - 0.5) / cadence, height: impact * foot)
        }
        return AccelerationSample(
            timestamp: start + Int64(t * 1e9), x: 0.02, y: Float(0.1 * v), z: Float(1 + v))
    }
}

@Suite("Step detector")
struct StepDetectorTests {
    @Test(arguments: [(100.0, 0.02), (12.5, 0.25), (400.0, 0.3), (50.0, 0.0)])
    func countsASyntheticWalkAtAnyRate(rate: Double, jitter: Double) {
        let n = StepDetector.countSteps(in: walk(steps: 120, rate: rate, jitter: jitter))
        #expect(abs(n - 120) <= 2, "counted \(n) at \(rate) Hz")
    }

    @Test(arguments: [1.3, 1.8, 2.4])
    func countsAcrossTheWalkingCadences(cadence: Double) {
        let n = StepDetector.countSteps(in: walk(steps: 100, cadence: cadence))
        #expect(abs(n - 100) <= 2, "counted \(n) at \(cadence) steps/s")
    }

    @Test func countsNothingWhenStill() {
        #expect(StepDetector.countSteps(in: walk(steps: 0, stillBefore: 60, stillAfter: 0)) == 0)
    }

    @Test func aBoutBelowTheShortestChainIsNotCounted() {
        #expect(StepDetector.countSteps(in: walk(steps: 3)) == 0)
    }

    @Test(arguments: [5, 6])
    func aShortRhythmicBoutCountsWhenItsPeriodicityIsStrong(steps: Int) {
        // Over ten noise realisations: a stray echo can break a chain this short, but most
        // bouts count, and without the short-bout rule (the shortest chain is the full
        // confirmation count) none does.
        var fixed = DetectorConfiguration()
        fixed.minimumBoutSteps = fixed.stepsToConfirm
        var counted = 0
        for seed in 1...10 {
            let samples = walk(steps: steps, seed: UInt64(seed))
            let n = StepDetector.countSteps(in: samples)
            #expect(n == 0 || abs(n - steps) <= 1, "counted \(n) of \(steps)")
            if abs(n - steps) <= 1 { counted += 1 }
            #expect(StepDetector.countSteps(in: samples, configuration: fixed) == 0)
        }
        #expect(counted >= 6, "\(counted) of 10 bouts of \(steps) steps counted")
    }

    @Test func theEvidenceAChainNeedsScalesWithItsLength() {
        // Irregular steps (step periods ±15 % at random): a long walk still counts.
        func irregular(_ steps: Int) -> [AccelerationSample] {
            var state: UInt64 = 11
            var samples: [AccelerationSample] = []
            var t = 0.0
            let rate = 50.0
            var stepStart = 3.0
            var k = 0
            var period = 0.55
            while t < stepStart + 3 || k < steps {
                var v = 0.005 * sin(t * 13)
                if t >= stepStart && k < steps {
                    let phase = (t - stepStart) / period
                    if phase >= 1 {
                        stepStart += period
                        k += 1
                        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                        period = 0.55 * (0.85 + 0.3 * Double(state >> 11) * 0x1p-53)
                        continue
                    }
                    v += 0.25 * -cos(2 * Double.pi * phase)
                    v += heelStrike((phase - 0.5) * period, height: 2.5 * 0.25)
                }
                samples.append(
                    AccelerationSample(timestamp: Int64(t * 1e9), x: 0.02, y: Float(0.1 * v), z: Float(1 + v))
                )
                t += 1 / rate
                if k >= steps && t > stepStart + 3 { break }
            }
            return samples
        }
        let long = StepDetector.countSteps(in: irregular(60))
        #expect(abs(long - 60) <= 4, "long walk: \(long)")
        let c = DetectorConfiguration()
        var g = CadenceGate(
            minimumInterval: 0.3, maximumInterval: 1.3, tolerance: 0.3, stepsToConfirm: c.stepsToConfirm,
            fillsMissedSteps: true, strideThreshold: 0.879, periodCorrelation: c.periodCorrelation,
            minimumBoutSteps: c.minimumBoutSteps, shortBoutCorrelation: c.shortBoutCorrelation,
            longChainCorrelation: 0.4)
        // The evidence ramp: shorter chains need more, longer ones less.
        #expect(g.requiredCorrelation(chainLength: c.minimumBoutSteps) == Float(c.shortBoutCorrelation))
        #expect(g.requiredCorrelation(chainLength: c.stepsToConfirm) == Float(c.periodCorrelation))
        #expect(g.requiredCorrelation(chainLength: 2 * c.stepsToConfirm) == Float(0.4))
        #expect(g.requiredCorrelation(chainLength: 5 * c.stepsToConfirm) == Float(0.4))
        g.reset()
    }

    @Test func aHandWavedUpAndDownAtStrideRateIsNotAWalk() {
        // A smooth 0.9 Hz oscillation of ±0.5 g for 20 s: rhythmic and periodic, slower than the
        // stride threshold, with nothing between its peaks.
        let samples = (0..<(20 * 50)).map { i in
            let t = Double(i) / 50
            let v = 0.5 * sin(2 * Double.pi * 0.9 * t)
            return AccelerationSample(timestamp: Int64(t * 1e9), x: 0.05, y: 0.1, z: Float(1 + v))
        }
        #expect(StepDetector.countSteps(in: samples) == 0)
        // The sinusoid guard alone (the input has no impacts either, so that guard is off here).
        var sinusoidOnly = DetectorConfiguration()
        sinusoidOnly.minimumImpactRatio = 0
        #expect(StepDetector.countSteps(in: samples, configuration: sinusoidOnly) == 0)
        var off = sinusoidOnly
        off.sinusoidCorrelation = -1
        #expect(StepDetector.countSteps(in: samples, configuration: off) > 20)
    }

    @Test func aWalkResumesAfterAFewFaintStepsWithoutAFreshConfirmation() {
        // 40 steps, 3 faint ones (below the activity gate), 40 more: the second part resumes
        // the walk at its known rhythm, so only the faint steps may be lost.
        var samples = walk(steps: 40, stillAfter: 0)
        let resumeAt = samples.last!.timestamp
        let faint = walk(
            steps: 3, amplitude: 0.02, stillBefore: 0, stillAfter: 0, start: resumeAt + 10_000_000)
        let again = walk(steps: 40, stillBefore: 0, start: faint.last!.timestamp + 10_000_000)
        samples += faint + again
        let n = StepDetector.countSteps(in: samples)
        #expect(n >= 78 && n <= 84, "counted \(n) of 80 (+3 faint)")
    }

    @Test func weakShakingBelowTheActivityGateIsNotCounted() {
        #expect(StepDetector.countSteps(in: walk(steps: 100, amplitude: 0.02)) == 0)
    }

    @Test func eventsAreInOrderWithConsecutiveCountsAndNeverInTheFuture() {
        var detector = StepDetector()
        var events: [StepEvent] = []
        for sample in walk(steps: 60) {
            detector.process(sample) { event in
                #expect(event.timestamp <= sample.timestamp)
                events.append(event)
            }
        }
        #expect(events.map(\.count) == Array(1...events.count))
        #expect(events.map(\.timestamp) == events.map(\.timestamp).sorted())
        #expect(detector.count == events.count)
    }

    @Test func stepsAreEmittedWithin300msOfTheirPeak() {
        // Raised-cosine steps at 1.8 steps/s, 100 Hz; each raw peak is in the middle of a step.
        let cadence = 1.8
        let rawPeaks = (0..<120).map { 2 + (Double($0) + 0.5) / cadence }
        var detector = StepDetector()
        var latencies: [Double] = []
        for i in 0..<Int((4 + 120 / cadence) * 100) {
            let t = Double(i) / 100
            let phase = (t - 2) * cadence
            var v = 0.0
            if phase >= 0 && phase < 120 {
                let foot = 0.25 * (Int(phase) % 2 == 0 ? 1 : 0.8)
                v = foot * (1 - cos(2 * Double.pi * phase)) / 2
                v += heelStrike((phase - Double(Int(phase)) - 0.5) / cadence, height: 2.5 * foot)
            }
            var emitted = 0
            detector.process(AccelerationSample(timestamp: Int64(t * 1e9), x: 0, y: 0, z: Float(1 + v))) {
                _ in
                emitted += 1
            }
            // Steps reported one by one (not the run credited when the walk is confirmed).
            if emitted == 1, let peak = rawPeaks.last(where: { $0 <= t }) { latencies.append(t - peak) }
        }
        #expect(detector.count >= 118 && detector.count <= 121)
        #expect(latencies.count > 100)
        #expect((latencies.max() ?? 1) <= 0.3, "latencies: \(latencies)")
    }

    @Test func aLongGapRestartsTheDetector() {
        // Two walks of 40 steps separated by a 10 s hole in the data.
        let first = walk(steps: 40, stillAfter: 0)
        let second = walk(steps: 40, stillBefore: 0, start: first.last!.timestamp + 10_000_000_000)
        let n = StepDetector.countSteps(in: first + second)
        #expect(abs(n - 80) <= 4)
    }

    @Test func copiesAreIndependent() {
        let samples = walk(steps: 50)
        var a = StepDetector()
        a.process(samples.prefix(samples.count / 2)) { _ in }
        var b = a
        a.process(samples.suffix(from: samples.count / 2)) { _ in }
        b.process(samples.suffix(from: samples.count / 2)) { _ in }
        #expect(a.count == b.count)
        // Arrays take the buffer loop, which checks once that the history is its own: a copy
        // fed something else meanwhile must not change what the other one remembers.
        // Split before the walk is confirmed: confirming it reads the history of its first steps.
        let firstHalf = Array(samples.prefix(600))
        let secondHalf = Array(samples.suffix(from: 600))
        var c = StepDetector()
        c.process(firstHalf) { _ in }
        var d = c
        c.process(
            walk(steps: 0, stillBefore: 30, stillAfter: 0, start: firstHalf.last!.timestamp + 10_000_000)
        ) {
            _ in
        }
        d.process(secondHalf) { _ in }
        var e = StepDetector()
        e.process(firstHalf) { _ in }
        e.process(secondHalf) { _ in }
        #expect(d.count == e.count && d.count == a.count)
    }

    @Test(arguments: [100.0, 12.5])
    func aPreparedInputCountsAsTheSamplesDo(rate: Double) {
        // Gaps that restart the detector (one right at a tick), a backward timestamp, and input
        // with and without gravity; configurations that differ after the first stages.
        let first = walk(steps: 40, rate: rate, stillAfter: 0)
        let second = walk(steps: 30, rate: rate, stillBefore: 1, start: first.last!.timestamp + 3_000_000_000)
        let third = walk(steps: 30, rate: rate, start: second.last!.timestamp - 500_000_000)
        let samples = first + second + third
        var stricter = DetectorConfiguration()
        stricter.lowPassCutoff = 2
        stricter.stepsToConfirm = 10
        stricter.peakThreshold = 0.8
        for input in [StepDetector.Input.totalAcceleration, .linearAcceleration] {
            let prepared = ResampledInput(samples, configuration: DetectorConfiguration(), input: input)
            for configuration in [DetectorConfiguration(), stricter] {
                let expected = StepDetector.countSteps(
                    in: samples, configuration: configuration, input: input)
                #expect(StepDetector.countSteps(in: prepared, configuration: configuration) == expected)
            }
        }
        #expect(StepDetector.countSteps(in: samples) > 60)
    }
}

@Suite("Detector configuration")
struct DetectorConfigurationTests {
    @Test func roundTripsThroughJSON() throws {
        var configuration = DetectorConfiguration()
        configuration.minimumPeak = 0.07
        configuration.stepsToConfirm = 10
        configuration.fillMissedSteps = false
        let data = try JSONEncoder().encode(configuration)
        #expect(try JSONDecoder().decode(DetectorConfiguration.self, from: data) == configuration)
    }

    @Test func absentKeysTakeTheirDefaults() throws {
        let decoded = try JSONDecoder().decode(
            DetectorConfiguration.self, from: Data(#"{"minimumPeak": 0.1}"#.utf8))
        var expected = DetectorConfiguration()
        expected.minimumPeak = 0.1
        #expect(decoded == expected)
    }

    @Test func rejectsUnknownKeys() {
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(DetectorConfiguration.self, from: Data(#"{"minimumPeek": 0.1}"#.utf8))
        }
    }

    @Test func everyKeyIsEncoded() throws {
        let data = try JSONEncoder().encode(DetectorConfiguration())
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(Set(object.keys) == Set(DetectorConfiguration.keys))
    }

    @Test(arguments: [
        ("sampleRate", 2.0), ("lowPassCutoff", 20.0), ("highPassCutoff", -1.0), ("minimumStepInterval", 5.0),
        ("regularityTolerance", 2.0), ("minimumPeak", Double.nan), ("minimumBoutSteps", 9.0),
        ("shortBoutCorrelation", 1.5), ("resumeTime", -1.0), ("sinusoidCorrelation", -2.0),
        ("continuationCorrelation", 2.5),
    ])
    func validationNamesTheBadKey(key: String, value: Double) {
        var c = DetectorConfiguration()
        switch key {
        case "sampleRate": c.sampleRate = value
        case "lowPassCutoff": c.lowPassCutoff = value
        case "highPassCutoff": c.highPassCutoff = value
        case "minimumStepInterval": c.minimumStepInterval = value
        case "regularityTolerance": c.regularityTolerance = value
        case "minimumBoutSteps": c.minimumBoutSteps = Int(value)
        case "shortBoutCorrelation": c.shortBoutCorrelation = value
        case "resumeTime": c.resumeTime = value
        case "sinusoidCorrelation": c.sinusoidCorrelation = value
        case "continuationCorrelation": c.continuationCorrelation = value
        default: c.minimumPeak = value
        }
        let error = #expect(throws: ConfigurationError.self) { try c.validate() }
        #expect(error?.key == key)
    }

    @Test func theDefaultsAreValid() throws {
        try DetectorConfiguration().validate()
        #expect(DetectorConfiguration().stepsToConfirm <= CadenceGate.maximumHeldSteps)
    }

    @Test func theExampleFileMatchesTheDefaults() throws {
        let url = Fixtures.samples.appendingPathComponent("detector.example.json")
        let decoded = try JSONDecoder().decode(DetectorConfiguration.self, from: Data(contentsOf: url))
        #expect(decoded == DetectorConfiguration())
    }
}
