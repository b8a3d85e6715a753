import Foundation
import Testing

@testable import StepDetection

@Suite("Biquad filters")
struct BiquadTests {
    @Test(arguments: [0.5, 2.0, 3.0])
    func lowPassIsMinusThreeDecibelsAtItsCutoff(cutoff: Double) {
        let filter = Biquad.lowPass(cutoff: cutoff, sampleRate: 25)
        #expect(abs(filter.gain(at: cutoff, sampleRate: 25) - 0.5.squareRoot()) < 1e-3)
        #expect(abs(filter.gain(at: 0, sampleRate: 25) - 1) < 1e-4)
        #expect(filter.gain(at: 12, sampleRate: 25) < 0.05)
    }

    @Test func highPassBlocksGravity() {
        var filter = Biquad.highPass(cutoff: 0.6, sampleRate: 25)
        #expect(filter.gain(at: 0, sampleRate: 25) < 1e-6)
        #expect(abs(filter.gain(at: 0.6, sampleRate: 25) - 0.5.squareRoot()) < 1e-3)
        var last: Float = 1
        for _ in 0..<500 { last = filter.process(1) }  // a constant 1 g settles to 0
        #expect(abs(last) < 1e-3)
    }

    @Test func lowPassPassesAConstant() {
        var filter = Biquad.lowPass(cutoff: 2, sampleRate: 25)
        var last: Float = 0
        for _ in 0..<200 { last = filter.process(0.5) }
        #expect(abs(last - 0.5) < 1e-4)
    }

    @Test func resetForgetsHistory() {
        var filter = Biquad.lowPass(cutoff: 2, sampleRate: 25)
        let fresh = filter
        for _ in 0..<10 { _ = filter.process(1) }
        filter.reset()
        #expect(filter == fresh)
    }

    @Test func chainedRunsStagesInOrder() {
        var chain = Chained(
            Biquad.highPass(cutoff: 0.6, sampleRate: 25), Biquad.lowPass(cutoff: 2, sampleRate: 25))
        var hp = Biquad.highPass(cutoff: 0.6, sampleRate: 25)
        var lp = Biquad.lowPass(cutoff: 2, sampleRate: 25)
        for i in 0..<50 {
            let x = Float(i % 7) * 0.1
            #expect(chain.process(x) == lp.process(hp.process(x)))
        }
    }

    @Test func elementaryFunctionsMatchKnownValues() {
        #expect(abs(elementaryExp(1) - 2.718_281_828_459_045) < 1e-14)
        #expect(abs(elementaryExp(-3.5) - 0.030_197_383_422_318_5) < 1e-15)
        #expect(abs(elementaryTan(Double.pi / 4) - 1) < 1e-14)
        let (s, c) = elementarySinCos(2)
        #expect(abs(s - 0.909_297_426_825_681_7) < 1e-14)
        #expect(abs(c + 0.416_146_836_547_142_4) < 1e-14)
        let (s2, c2) = elementarySinCos(-7.5)
        #expect(abs(s2 - -0.937_999_976_774_738_9) < 1e-13)
        #expect(abs(c2 - 0.346_635_317_835_025_8) < 1e-13)
    }
}

@Suite("Resampler")
struct ResamplerTests {
    private func run(_ resampler: inout Resampler, _ input: [(Int64, Float)]) -> [Resampler.Event] {
        var events: [Resampler.Event] = []
        for (t, v) in input { resampler.push(time: t, value: v) { events.append($0) } }
        return events
    }

    @Test func constantInputGivesConstantOutputOnTheGrid() {
        var r = Resampler(rate: 25, maximumGap: 1)
        // Irregular input, 3–17 ms apart, always 1.0.
        var t: Int64 = 1_000_000_000
        var input: [(Int64, Float)] = []
        for i in 0..<500 {
            input.append((t, 1))
            t += Int64(3_000_000 + (i * 7919 % 14) * 1_000_000)
        }
        let events = run(&r, input)
        var times: [Int64] = []
        for case .value(let v, let time) in events {
            #expect(abs(v - 1) < 1e-6)
            times.append(time)
        }
        #expect(times.count > 100)
        for (a, b) in zip(times, times.dropFirst()) { #expect(b - a == 40_000_000) }
    }

    @Test func averagesALinearRampExactly() {
        var r = Resampler(rate: 10, maximumGap: 1)
        // v = t (in seconds), sampled every 30 ms: the mean over [0.1k, 0.1k+0.1] is 0.1k + 0.05.
        let input = (0..<100).map { (Int64($0) * 30_000_000, Float($0) * 0.03) }
        let events = run(&r, input)
        var k = 0
        for case .value(let v, let time) in events {
            #expect(abs(v - (Float(k) * 0.1 + 0.05)) < 1e-4)
            #expect(time == Int64(k) * 100_000_000 + 50_000_000)
            k += 1
        }
        #expect(k == 29)
    }

    @Test func downsamplingRemovesAFastOscillation() {
        // 400 Hz samples of a 100 Hz tone average to ~0 over each 40 ms period.
        var r = Resampler(rate: 25, maximumGap: 1)
        let input = (0..<4000).map { i -> (Int64, Float) in
            (Int64(i) * 2_500_000, [0, 1, 0, -1][i % 4])
        }
        let values = run(&r, input).compactMap { event -> Float? in
            if case .value(let v, _) = event { v } else { nil }
        }
        // 10 s of input: 250 periods of 40 ms (the last one still open).
        #expect(values.count == 249)
        #expect(values.allSatisfy { abs($0) < 0.02 })
    }

    @Test func aGapOrABackwardStepIsADiscontinuity() {
        var r = Resampler(rate: 25, maximumGap: 0.5)
        let events = run(
            &r, [(0, 1), (40_000_000, 1), (2_000_000_000, 1), (1_000_000_000, 1), (1_040_000_000, 1)])
        #expect(events.filter { $0 == .discontinuity }.count == 2)
        // Nothing is interpolated across the gap: 1 value before, 1 after the backward restart.
        #expect(events.count == 4)
    }

    @Test func equalTimestampsDoNotDivideByZero() {
        var r = Resampler(rate: 25, maximumGap: 1)
        let events = run(&r, [(0, 1), (0, 2), (0, 3), (80_000_000, 3)])
        let values = events.compactMap { event -> Float? in
            if case .value(let v, _) = event { v } else { nil }
        }
        // Two whole periods, both values: the line from (0, 3) to (80 ms, 3) is 3 throughout.
        #expect(values == [3, 3])
        #expect(events.count == 2)
    }

    /// A restart after a gap starts a fresh period: nothing accumulated before the gap leaks
    /// into the first value after it.
    @Test func theFirstValueAfterAGapIsOnlyTheNewInput() {
        var r = Resampler(rate: 25, maximumGap: 0.5)
        // 30 ms of 1.0 (a partial period), a 2 s gap, then 5.0 for 100 ms.
        var input: [(Int64, Float)] = [(0, 1), (10_000_000, 1), (20_000_000, 1), (30_000_000, 1)]
        for i in 0...10 { input.append((2_000_000_000 + Int64(i) * 10_000_000, 5)) }
        let events = run(&r, input)
        #expect(events.first == .discontinuity)
        #expect(events.dropFirst().first == .value(5, time: 2_020_000_000))
        #expect(events.count == 3)
    }

    /// A backward step restarts too, and the period after it is centred on the new timeline.
    @Test func theFirstValueAfterABackwardStepIsOnTheNewTimeline() {
        var r = Resampler(rate: 25, maximumGap: 1)
        let events = run(
            &r,
            [(1_000_000_000, 2), (1_030_000_000, 2), (500_000_000, 4), (520_000_000, 4), (540_000_000, 4)])
        #expect(events == [.discontinuity, .value(4, time: 520_000_000)])
    }
}

@Suite("Peak detector")
struct PeakDetectorTests {
    @Test func oneSineCycleIsOnePeak() {
        var detector = PeakDetector(
            sampleRate: 25, envelopeTime: 1.5, ratio: 0.7, minimumHeight: 0.05, separation: 0.3)
        var peaks: [PeakDetector.Peak] = []
        for i in 0..<(25 * 20) {
            let t = Double(i) / 25
            let (s, _) = elementarySinCos(2 * Double.pi * 1.5 * t)
            if let p = detector.process(Float(0.3 * s), time: Int64(t * 1e9)) { peaks.append(p) }
        }
        #expect(peaks.count >= 29 && peaks.count <= 30)
        for p in peaks { #expect(abs(p.height - 0.3) < 0.02) }
    }

    @Test func signalsBelowTheActivityGateGiveNoPeaks() {
        var detector = PeakDetector(
            sampleRate: 25, envelopeTime: 1.5, ratio: 0.7, minimumHeight: 0.05, separation: 0.3)
        var count = 0
        for i in 0..<1000 {
            let (s, _) = elementarySinCos(Double(i) * 0.4)
            if detector.process(Float(0.02 * s), time: Int64(i) * 40_000_000) != nil { count += 1 }
        }
        #expect(count == 0)
    }

    @Test func ofTwoCloseCrestsOnlyTheHigherIsReported() {
        var detector = PeakDetector(
            sampleRate: 25, envelopeTime: 1.5, ratio: 0, minimumHeight: 0.05, separation: 0.3)
        // Crests 0.12 s apart (0.2 then 0.5), then silence.
        let signal: [Float] = [0, 0.1, 0.2, 0.05, 0.3, 0.5, 0.2, 0, -0.1, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        var peaks: [PeakDetector.Peak] = []
        for (i, y) in signal.enumerated() {
            if let p = detector.process(y, time: Int64(i) * 40_000_000) { peaks.append(p) }
        }
        #expect(peaks == [PeakDetector.Peak(time: 5 * 40_000_000, height: 0.5)])
    }

    /// A later, lower crest within the separation never replaces the pending higher one.
    @Test func aLowerCrestAfterAHigherOneDoesNotReplaceIt() {
        var detector = PeakDetector(
            sampleRate: 25, envelopeTime: 1.5, ratio: 0, minimumHeight: 0.05, separation: 0.3)
        // Crests 0.08 s apart, 0.5 then 0.4, each standing out by more than 0.05.
        let signal: [Float] = [0, 0.5, 0.3, 0.4, 0.1, 0, -0.1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        var peaks: [PeakDetector.Peak] = []
        for (i, y) in signal.enumerated() {
            if let p = detector.process(y, time: Int64(i) * 40_000_000) { peaks.append(p) }
        }
        #expect(peaks == [PeakDetector.Peak(time: 40_000_000, height: 0.5)])
    }

    /// A crest below the zero line is not a step peak, however prominent; the same wave lifted
    /// above zero is.
    @Test func crestsBelowTheZeroLineAreNotPeaks() {
        func peaks(offset: Float) -> Int {
            var detector = PeakDetector(
                sampleRate: 25, envelopeTime: 1.5, ratio: 0, minimumHeight: 0.05, separation: 0.3)
            var count = 0
            for i in 0..<200 {
                // Crests at offset − 0.1, valleys at offset − 0.5, every 0.4 s.
                let y: Float = (i % 10 < 5 ? -0.5 : -0.1) + offset
                if detector.process(y, time: Int64(i) * 40_000_000) != nil { count += 1 }
            }
            return count
        }
        #expect(peaks(offset: 0) == 0)
        #expect(peaks(offset: 0.3) >= 18)
    }

    /// The valley side of the prominence: after a peak, the signal must climb out of its valley
    /// by the prominence before the next crest can count. A crest rising less than that from the
    /// valley is part of the same wave.
    @Test func aCrestMustRiseFromItsValleyByTheProminence() {
        func peaks(_ signal: [Float]) -> [PeakDetector.Peak] {
            var detector = PeakDetector(
                sampleRate: 25, envelopeTime: 1.5, ratio: 0, minimumHeight: 0.1, separation: 0.04)
            var found: [PeakDetector.Peak] = []
            for (i, y) in signal.enumerated() {
                if let p = detector.process(y, time: Int64(i) * 40_000_000) { found.append(p) }
            }
            return found
        }
        // Peak 0.5, valley 0.3 (a fall of 0.2 ≥ 0.1 confirms it), then 0.38: 0.08 above the
        // valley, less than the prominence, so no second peak, however far it falls afterwards.
        let shallow: [Float] = [0, 0.2, 0.5, 0.35, 0.3, 0.34, 0.38, 0.2, 0, -0.2, 0, 0, 0, 0]
        #expect(peaks(shallow) == [PeakDetector.Peak(time: 2 * 40_000_000, height: 0.5)])
        // The same, but climbing 0.15 out of the valley (≥ 0.1): a second peak.
        let deep: [Float] = [0, 0.2, 0.5, 0.35, 0.3, 0.38, 0.45, 0.2, 0, -0.2, 0, 0, 0, 0]
        #expect(
            peaks(deep) == [
                PeakDetector.Peak(time: 2 * 40_000_000, height: 0.5),
                PeakDetector.Peak(time: 6 * 40_000_000, height: 0.45),
            ])
    }
}

@Suite("Signal history")
struct SignalHistoryTests {
    /// The correlation of `values` (oldest first) over the last `n` with the `lag` before,
    /// every other sample, as `SignalHistory` defines it (summed in another order).
    private func reference(_ values: [Float], lag: Int, n: Int, skip: Int = 0) -> Float {
        var xy = 0.0
        var xx = 0.0
        var yy = 0.0
        var i = values.count - skip - n
        while i < values.count - skip {
            let a = Double(values[i])
            let b = Double(values[i - lag])
            xy += a * b
            xx += a * a
            yy += b * b
            i += 2
        }
        return Float(xy / max((xx * yy).squareRoot(), 1e-12))
    }

    @Test func correlationsReadTheRingAcrossItsWrap() {
        var history = SignalHistory(sampleRate: 25, window: 4)
        var values: [Float] = []
        var state: UInt64 = 3
        for i in 0..<1337 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let noise = Float(Double(state >> 11) * 0x1p-53 - 0.5)
            let value = Float(sin(Double(i) * 2 * Double.pi / 23)) + 0.3 * noise
            values.append(value)
            history.append(value)
            guard i > 400, i % 7 == 0 else { continue }
            for lag in [3, 12, 23, 46, 101] {
                let got = history.correlation(atLag: Int64(lag) * 40_000_000)
                #expect(abs(got - reference(values, lag: lag, n: 100)) < 1e-5, "at \(i), lag \(lag)")
                let skipped = history.correlation(
                    atLag: Int64(lag) * 40_000_000, span: 1_000_000_000, endingAgo: 2_000_000_000)
                #expect(abs(skipped - reference(values, lag: lag, n: 25, skip: 50)) < 1e-5)
            }
        }
    }

    @Test func copiesKeepTheirOwnValues() {
        var history = SignalHistory(sampleRate: 25, window: 4)
        for i in 0..<600 { history.append(Float(sin(Double(i) * 2 * Double.pi / 25))) }
        let copy = history
        let before = copy.correlation(atLag: 1_000_000_000)
        #expect(before > 0.99)
        var other = history
        for i in 0..<300 { history.append(Float(i % 3)) }
        other.makeUnique()
        for i in 0..<300 { other.appendAssumingUnique(Float(i % 5)) }
        #expect(copy.correlation(atLag: 1_000_000_000) == before)
        #expect(history.correlation(atLag: 1_000_000_000) != before)
        #expect(other.correlation(atLag: 1_000_000_000) != history.correlation(atLag: 1_000_000_000))
    }
}
