import Foundation
import Testing

@testable import StepDetection

@Suite("Cadence gate")
struct CadenceGateTests {
    private func gate(
        steps: Int = 6, tolerance: Double = 0.3, fill: Bool = true, maximumInterval: Double = 1.0,
        stride: Double = 0.95
    ) -> CadenceGate {
        CadenceGate(
            minimumInterval: 0.3, maximumInterval: maximumInterval, tolerance: tolerance,
            stepsToConfirm: steps,
            fillsMissedSteps: fill, strideThreshold: stride)
    }

    private func feed(_ gate: inout CadenceGate, _ times: [Double], history: SignalHistory? = nil) -> [Int64]
    {
        let history = history ?? SignalHistory(sampleRate: 25, window: 4)
        var steps: [Int64] = []
        for t in times { gate.peak(at: Int64((t * 1e9).rounded()), history: history) { steps.append($0) } }
        return steps
    }

    /// A history of `seconds` of a sine with the given period (or of noise when `nil`).
    private func history(period: Double?, seconds: Double = 8) -> SignalHistory {
        var h = SignalHistory(sampleRate: 25, window: 4)
        var state: UInt64 = 99
        for i in 0..<Int(seconds * 25) {
            if let period {
                h.append(Float(elementarySinCos(2 * Double.pi * Double(i) / 25 / period).sin))
            } else {
                state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                h.append(Float(Double(state >> 11) * 0x1p-53 - 0.5))
            }
        }
        return h
    }

    /// A history of a sine with the given period plus half as much of its second harmonic: it
    /// repeats at the period and correlates −0.6 at half of it (neither a pure oscillation nor
    /// one peak per stride).
    private func stepHistory(period: Double, seconds: Double = 8) -> SignalHistory {
        var h = SignalHistory(sampleRate: 25, window: 4)
        for i in 0..<Int(seconds * 25) {
            let phase = 2 * Double.pi * Double(i) / 25 / period
            h.append(Float(elementarySinCos(phase).sin + 0.5 * elementarySinCos(2 * phase).sin))
        }
        return h
    }

    @Test func holdsStepsBackUntilConfirmedThenCreditsThemInOrder() {
        var g = gate(steps: 6)
        let times = (0..<5).map { Double($0) * 0.5 }
        #expect(feed(&g, times).isEmpty)
        #expect(g.state == .confirming(count: 5))
        let credited = feed(&g, [2.5])
        #expect(credited == (0...5).map { Int64(Double($0) * 0.5 * 1e9) })
        #expect(g.state == .walking)
        #expect(abs(g.stepPeriod - 0.5) < 1e-9)
        #expect(feed(&g, [3.0, 3.52]) == [3_000_000_000, 3_520_000_000])
    }

    @Test func aChainConfirmsOnlyWhenTheSignalRepeatsAtItsPeriod() {
        let times = (0..<8).map { Double($0) * 0.5 }
        var strict = CadenceGate(
            minimumInterval: 0.3, maximumInterval: 1.0, tolerance: 0.3, stepsToConfirm: 6,
            fillsMissedSteps: true,
            strideThreshold: 0.95, periodCorrelation: 0.5)
        #expect(feed(&strict, times, history: history(period: nil)).isEmpty)
        var matching = strict
        matching.reset()
        #expect(feed(&matching, times, history: history(period: 0.5)).count == 8)
    }

    @Test func randomPeaksOverNoiseNeverConfirm() {
        // Peaks at random times (2 a second on average, at least 0.3 s apart) for ten minutes:
        // chance rhythms in the timing exist, but the signal does not repeat, so none counts.
        var g = CadenceGate(
            minimumInterval: 0.3, maximumInterval: 1.3, tolerance: 0.3, stepsToConfirm: 8,
            fillsMissedSteps: true,
            strideThreshold: 0.9, periodCorrelation: 0.5)
        var state: UInt64 = 12345
        var t = 0.0
        var times: [Double] = []
        while t < 600 {
            times.append(t)
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let u = Double(state >> 11) * 0x1p-53
            t += 0.3 - 0.5 * log(1 - u)
        }
        #expect(feed(&g, times, history: history(period: nil)).isEmpty)
    }

    @Test func anAlternatingRhythmIsAnAsymmetricGait() {
        // Intervals alternating 0.35 / 0.9 s are periodic by stride (1.25 s): the gate follows
        // the stride and credits two steps per stride.
        var g = gate(steps: 4, maximumInterval: 1.3, stride: 0.9)
        var t = 0.0
        var times: [Double] = []
        for i in 0..<12 {
            times.append(t)
            t += i % 2 == 0 ? 0.35 : 0.9
        }
        let counted = feed(&g, times).count
        #expect(abs(counted - 12) <= 1, "\(counted)")
    }

    @Test func anAsymmetricGaitConfirmsByComparingTheSameFoot() {
        // Left 0.66 s, right 0.42 s: consecutive intervals differ by 57 %, strides not at all.
        var g = gate(steps: 8, tolerance: 0.3, maximumInterval: 1.3, stride: 0.9)
        var t = 0.0
        var times: [Double] = []
        for i in 0..<20 {
            times.append(t)
            t += i % 2 == 0 ? 0.66 : 0.42
        }
        let counted = feed(&g, times).count
        #expect(abs(counted - 20) <= 1, "\(counted)")
    }

    @Test func anEchoBetweenStepsIsSkipped() {
        var g = gate(steps: 4)
        #expect(feed(&g, [0, 0.5, 1.0, 1.5]).count == 4)
        // An echo 0.32 s after a step, then steps resume on the beat.
        #expect(feed(&g, [1.82, 2.0, 2.5]) == [2_000_000_000, 2_500_000_000])
    }

    @Test func aMissedStepIsFilledAndAPauseEndsTheWalk() {
        var g = gate(steps: 4)
        _ = feed(&g, [0, 0.5, 1.0, 1.5])
        #expect(feed(&g, [2.5]) == [2_000_000_000, 2_500_000_000])
        #expect(g.state == .walking)
        #expect(feed(&g, [6.0]).isEmpty)
        #expect(g.state != .walking)
    }

    @Test func theStridesBeforeAChainThatRepeatLikeTheWalkAreCreditedBack() {
        // A chain of steps every 0.5 s from 5 s, over a signal that has repeated every stride
        // (1 s) for the 8 s of history: the strides before the chain's first peak were walked.
        func gate() -> CadenceGate {
            CadenceGate(
                minimumInterval: 0.3, maximumInterval: 1.3, tolerance: 0.3, stepsToConfirm: 4,
                fillsMissedSteps: true, strideThreshold: 0.9, periodCorrelation: 0.5,
                halfPeriodCorrelation: 0.55, continuationCorrelation: 0.75)
        }
        let chain = [5.0, 5.5, 6.0, 6.5]
        var g = gate()
        let steps = feed(&g, chain, history: history(period: 1.0))
        // Back to where the history ends (each stride is tested against the one before it):
        // five strides, ten steps at the step period, then the chain's four.
        #expect(steps.count == 14)
        #expect(steps.first == 0)
        #expect(steps == steps.sorted())
        // Off (above 1): the chain's steps only.
        var off = CadenceGate(
            minimumInterval: 0.3, maximumInterval: 1.3, tolerance: 0.3, stepsToConfirm: 4,
            fillsMissedSteps: true, strideThreshold: 0.9, periodCorrelation: 0.5,
            halfPeriodCorrelation: 0.55, continuationCorrelation: 2)
        #expect(feed(&off, chain, history: history(period: 1.0)).count == 4)
    }

    @Test func quietStridesBeforeAChainAreNotCreditedBackHoweverWellTheyRepeat() {
        // The same chain and stride rhythm as above, but before 2 s the signal is a tenth as
        // strong: the stillness before a walk (or a drive's hum), which repeats as well as the
        // walk — correlation ignores scale — but carries none of its energy.
        var h = SignalHistory(sampleRate: 25, window: 4)
        for i in 0..<200 {
            // Sample i is at i / 25 − 1.5 s (the newest, at 6.5 s, is the chain's last peak).
            let level: Float = Double(i) / 25 - 1.5 < 2 ? 0.1 : 1
            h.append(level * Float(elementarySinCos(2 * Double.pi * Double(i) / 25).sin))
        }
        var g = CadenceGate(
            minimumInterval: 0.3, maximumInterval: 1.3, tolerance: 0.3, stepsToConfirm: 4,
            fillsMissedSteps: true, strideThreshold: 0.9, periodCorrelation: 0.5,
            halfPeriodCorrelation: 0.55, continuationCorrelation: 0.75)
        let steps = feed(&g, [5.0, 5.5, 6.0, 6.5], history: h)
        // Two strides back (from 3 s; the one from 2 s is compared with the quiet one before
        // it), then the chain's four steps.
        #expect(steps.count == 8)
        #expect(steps.first == 3_000_000_000)
    }

    @Test func aWalkFollowedAsStridesIsNotHalvedAgainWhenItsStepPeriodDrifts() {
        // Peaks every 1 s (past the 0.9 s stride threshold): strides of 0.5 s steps. Then the
        // peaks come one a step and slow down, 0.6 s to 1 s apart: one step each, the step
        // period drifting past 0.9 s. (`pbl-25673` walk 4 was halved a second time there and
        // counted its last 19 s double.)
        var g = gate(steps: 4, maximumInterval: 1.3, stride: 0.9)
        #expect(feed(&g, [0, 1, 2, 3]).count == 7)
        var t = 3.0
        var slowing: [Double] = []
        for d in [0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0, 1.0, 1.0] {
            t += d
            slowing.append(t)
        }
        #expect(feed(&g, slowing).count == 11)
        #expect(g.stepPeriod > 0.9)
        // Five more peaks a second apart: five steps, not ten.
        #expect(feed(&g, (1...5).map { t + Double($0) }).count == 5)
        #expect(g.state == .walking)
    }

    @Test func aPauseInThePeaksWhoseSignalStillRepeatsAtTheStrideIsWalked() {
        // Steps every 0.5 s over a signal that repeats every stride (1 s), then a peak 1.5 s
        // later: longer than the gate follows, but the signal over the pause still repeats at
        // the stride, so the walk goes on with the pause's three steps.
        func gate(_ continuation: Double) -> CadenceGate {
            CadenceGate(
                minimumInterval: 0.3, maximumInterval: 1.3, tolerance: 0.3, stepsToConfirm: 4,
                fillsMissedSteps: true, strideThreshold: 0.9, periodCorrelation: 0.5,
                halfPeriodCorrelation: 0.55, continuationCorrelation: continuation)
        }
        let walk = (0..<6).map { Double($0) * 0.5 }
        var g = gate(0.75)
        // The history holds 8 s of the stride rhythm, so the five strides before the first peak
        // that it reaches are credited back too (see the back-credit test): 10 + 6 steps.
        #expect(feed(&g, walk, history: history(period: 1.0)).count == 16)
        #expect(
            feed(&g, [4.0], history: history(period: 1.0)) == [3_000_000_000, 3_500_000_000, 4_000_000_000])
        #expect(g.state == .walking)
        // A signal that does not repeat over the pause (the walker stopped): the walk ends.
        var stopped = gate(0.75)
        _ = feed(&stopped, walk, history: history(period: 1.0))
        #expect(feed(&stopped, [4.0], history: history(period: nil)).isEmpty)
        #expect(stopped.state != .walking)
        // A pause longer than the correlation window is not judged.
        var long = gate(0.75)
        _ = feed(&long, walk, history: history(period: 1.0))
        #expect(feed(&long, [7.0], history: history(period: 1.0)).isEmpty)
        // Off (above 1): the pause ends the walk as before.
        var off = gate(2)
        _ = feed(&off, walk, history: history(period: 1.0))
        #expect(feed(&off, [4.0], history: history(period: 1.0)).isEmpty)
        #expect(off.state != .walking)
    }

    @Test func aResumingChainJustPastTheStrideThresholdKeepsTheWalksSteps() {
        // A walk with one peak per step at 0.8 s pauses (3 s), then resumes with peaks 0.92 s
        // apart: within the tolerance of its rhythm, past the stride threshold (0.9 s), and the
        // signal does not repeat at half that period. Those are the walk's steps a little
        // slower — one step per peak, at the walk's step period — not strides of 0.46 s steps
        // (nine steps for five peaks).
        func gate() -> CadenceGate {
            CadenceGate(
                minimumInterval: 0.3, maximumInterval: 1.3, tolerance: 0.325, stepsToConfirm: 7,
                fillsMissedSteps: true, strideThreshold: 0.9, periodCorrelation: 0.631,
                halfPeriodCorrelation: 0.55, minimumBoutSteps: 5, shortBoutCorrelation: 0.95,
                resumeTime: 10, resumeCorrelation: 0.3, sinusoidCorrelation: -0.8)
        }
        var g = gate()
        let walk = (0..<11).map { Double($0) * 0.8 }
        #expect(feed(&g, walk, history: stepHistory(period: 0.8)).count == 11)
        #expect(abs(g.stepPeriod - 0.8) < 0.01)
        let resume = (0..<5).map { 11.0 + Double($0) * 0.92 }
        let credited = feed(&g, resume, history: stepHistory(period: 0.92))
        #expect(g.state == .walking)
        #expect(credited == resume.map { Int64(($0 * 1e9).rounded()) })
        #expect(abs(g.stepPeriod - 0.8) < 0.01)
        // A fresh chain at 0.92 s with nothing to resume is taken as strides, as before.
        var fresh = gate()
        let alone = (0..<7).map { Double($0) * 0.92 }
        #expect(feed(&fresh, alone, history: stepHistory(period: 0.92)).count == 13)
    }

    @Test func aChainHeldLongerThanTheWindowNeedsLessPeriodicityWhereFootfallsAreJudged() {
        // Peaks every 0.48 s over a signal that is the step rhythm plus as much again of noise
        // (an arm doing something else than swing): it repeats at r 0.56 at most, below the
        // 0.631 a chain needs over the 4 s window. Where the impact meter judges the input, a
        // chain that has held its rhythm for longer than the window needs less, 0.55 at two
        // windows; where it cannot (input below 16 Hz: an infinite ratio), nothing changes.
        var h = SignalHistory(sampleRate: 25, window: 4)
        var state: UInt64 = 99
        for i in 0..<300 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let noise = Double(state >> 11) * 0x1p-53 - 0.5
            h.append(Float(elementarySinCos(2 * Double.pi * Double(i) / 12).sin + 3.6 * noise))
        }
        let r = max(h.correlation(atLag: 480_000_000), h.correlation(atLag: 960_000_000))
        #expect(r > 0.55 && r < 0.631)
        func gate() -> CadenceGate {
            CadenceGate(
                minimumInterval: 0.3, maximumInterval: 1.3, tolerance: 0.325, stepsToConfirm: 7,
                fillsMissedSteps: true, strideThreshold: 0.9, periodCorrelation: 0.631,
                halfPeriodCorrelation: 0.55, minimumBoutSteps: 5, shortBoutCorrelation: 0.95,
                sinusoidCorrelation: -0.8, minimumImpactRatio: 0.15)
        }
        func feed(_ g: inout CadenceGate, peaks: Range<Int>, impact: Float) -> [Int64] {
            var steps: [Int64] = []
            for k in peaks {
                g.peak(at: Int64(k) * 480_000_000, history: h, impact: impact) { steps.append($0) }
            }
            return steps
        }
        // Judged: confirmed once the chain spans about 7.7 s (its 17th peak, where it needs
        // 0.557), every peak a step.
        var judged = gate()
        #expect(feed(&judged, peaks: 0..<16, impact: 0.5).isEmpty)
        #expect(feed(&judged, peaks: 16..<17, impact: 0.5).count == 17)
        #expect(feed(&judged, peaks: 17..<20, impact: 0.5).count == 3)
        #expect(judged.state == .walking)
        // Not judged (too slow an input for impacts): the full requirement, never confirmed.
        var unjudged = gate()
        #expect(feed(&unjudged, peaks: 0..<20, impact: .infinity).isEmpty)
        #expect(unjudged.state != .walking)
    }

    @Test func withoutFillingAMissedStepEndsTheWalk() {
        var g = gate(steps: 4, fill: false)
        _ = feed(&g, [0, 0.5, 1.0, 1.5])
        #expect(feed(&g, [2.5]).isEmpty)
    }

    @Test func aSlowRhythmCountsAsStrides() {
        // One peak every 1.1 s (arm swing at the wrist): two steps per peak.
        var g = gate(steps: 4, maximumInterval: 1.3, stride: 0.95)
        let steps = feed(&g, (0..<10).map { Double($0) * 1.1 })
        #expect(steps.count == 19)
        #expect(steps == steps.sorted())
    }

    @Test func resetDropsHeldSteps() {
        var g = gate(steps: 4)
        _ = feed(&g, [0, 0.5, 1.0])
        g.reset()
        #expect(g.state == .still)
        #expect(feed(&g, [1.5]).isEmpty)
    }

    @Test func aChainWhoseLinksAllMissAPeakHasHalfThePeriod() {
        // Two start-up peaks 0.4 s apart, then a walk at 0.77 s: the chain first locks on to
        // 0.4 s, and every later link looks like a "missed step". It must not count double.
        var g = gate(steps: 7, maximumInterval: 1.3, stride: 0.879)
        let times = [2.98, 3.40] + (0..<24).map { 3.80 + Double($0) * 0.77 }
        let steps = feed(&g, times)
        // (The start-up peaks themselves are peaks of the chain and count: a few steps too many at
        // most, where a chain followed at half the period would count every step twice.)
        #expect(
            steps.count >= times.count - 2 && steps.count <= times.count + 3,
            "\(steps.count) steps for \(times.count) peaks")
        #expect(steps == steps.sorted())
    }

    @Test func twoFilledIntervalsInARowRelearnThePeriod() {
        // Walking at 0.5 s, then the walker slows to 1.0 s steps (within the stride threshold):
        // the first long interval may be a missed step, the second says the period changed.
        var g = gate(steps: 4, maximumInterval: 1.3, stride: 1.2)
        let fast = (0..<6).map { Double($0) * 0.5 }
        let slow = (1...10).map { 2.5 + Double($0) * 1.0 }
        let steps = feed(&g, fast + slow)
        #expect(steps.count <= fast.count + slow.count + 1, "\(steps.count)")
        #expect(steps.count >= fast.count + slow.count - 1, "\(steps.count)")
    }
}
