import Foundation
import Testing

@testable import StepDetection

@Suite("Impact meter")
struct ImpactMeterTests {
    /// `seconds` of a 1.6 Hz oscillation at 25 Hz through the detector's band-pass, with a
    /// 20 ms jolt of `jolt` g at every crest, and one input sample per internal period unless
    /// `inputEvery` says otherwise; returns the meter's ratio at the end.
    private func ratio(jolt: Double, seconds: Double = 10, inputEvery: Int = 1) -> Float {
        let fs = 25.0
        var meter = ImpactMeter(sampleRate: fs)
        var high = Biquad.highPass(cutoff: 0.6, sampleRate: fs)
        var low = Biquad.lowPass(cutoff: 2.39, sampleRate: fs)
        for i in 0..<Int(seconds * fs) {
            let t = Double(i) / fs
            let phase = t * 1.6
            let sinceCrest = (phase - phase.rounded(.down)) / 1.6
            var x = 0.3 * cos(2 * Double.pi * phase)
            if sinceCrest < 0.1 { x += jolt * exp(-sinceCrest / 0.02) }
            // A new input sample every `inputEvery` internal periods.
            let inputTime = Int64(i / inputEvery)
            meter.add(raw: Float(x), band: low.process(high.process(Float(x))), inputTime: inputTime)
        }
        return meter.ratio
    }

    @Test func aSmoothSwingHasLittleImpactAndFootfallsHaveMuch() {
        let smooth = ratio(jolt: 0)
        let walking = ratio(jolt: 0.75)
        #expect(smooth < 0.1, "smooth swing: \(smooth)")
        #expect(walking > 0.2, "with footfalls: \(walking)")
        #expect(smooth < Float(DetectorConfiguration().minimumImpactRatio))
        #expect(walking > Float(DetectorConfiguration().minimumImpactRatio))
    }

    @Test func inputTooSlowToShowImpactsGivesNoVerdict() {
        // One input sample every second internal period: 12.5 Hz, below the 16 Hz needed.
        #expect(ratio(jolt: 0, inputEvery: 2) == .infinity)
        #expect(ratio(jolt: 0, inputEvery: 1).isFinite)
    }

    @Test func resetForgetsTheInputRateAndThePowers() {
        var meter = ImpactMeter(sampleRate: 25)
        for i in 0..<200 { meter.add(raw: 0.1, band: 0.1, inputTime: Int64(i)) }
        #expect(meter.ratio.isFinite)
        meter.reset()
        #expect(meter.ratio == .infinity)
    }

    /// A smooth bump per step, with or without the jolt of the foot landing, at `rate` Hz.
    private func swing(steps: Int, rate: Double, jolt: Double) -> [AccelerationSample] {
        let cadence = 1.6
        let still = 3.0
        return (0..<Int((2 * still + Double(steps) / cadence) * rate)).map { i in
            let t = Double(i) / rate
            let phase = (t - still) * cadence
            var v = 0.0
            if phase >= 0 && phase < Double(steps) {
                v = 0.3 * -cos(2 * Double.pi * phase)
                let sinceCrest = (phase - phase.rounded(.down) - 0.5) / cadence
                if sinceCrest >= 0 && sinceCrest < 0.1 { v += jolt * exp(-sinceCrest / 0.02) }
            }
            return AccelerationSample(timestamp: Int64(t * 1e9), x: 0.05, y: 0.1, z: Float(1 + v))
        }
    }

    @Test func anArmSwungWithoutFootfallsIsNotAWalk() {
        // The rhythm of a walk, smooth: an arm swung at one's side while standing.
        let smooth = swing(steps: 60, rate: 25, jolt: 0)
        #expect(StepDetector.countSteps(in: smooth) == 0)
        var off = DetectorConfiguration()
        off.minimumImpactRatio = 0
        #expect(StepDetector.countSteps(in: smooth, configuration: off) >= 55)
        // The same rhythm with footfalls is a walk.
        let n = StepDetector.countSteps(in: swing(steps: 60, rate: 25, jolt: 0.75))
        #expect(abs(n - 60) <= 2, "counted \(n)")
    }

    @Test func aSlowLogIsNotJudgedByImpacts() {
        // At 12.5 Hz nothing above 4 Hz survives; a smooth walk there is still counted.
        let n = StepDetector.countSteps(in: swing(steps: 60, rate: 12.5, jolt: 0))
        #expect(abs(n - 60) <= 3, "counted \(n)")
    }

    @Test func theImpactGuardNeedsARateThatCanShowImpacts() {
        var c = DetectorConfiguration()
        c.sampleRate = 12.5
        c.lowPassCutoff = 2.39
        #expect(throws: ConfigurationError.self) { try c.validate() }
        c.minimumImpactRatio = 0
        #expect(throws: Never.self) { try c.validate() }
    }
}
