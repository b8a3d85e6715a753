import Foundation
import StepDetection
import StepGateTestSupport
import Testing

@testable import Tuning

@Suite("Daily-life bench")
struct DailyLifeTests {
    /// A synthetic 300-step walk with its true step times, and a still log.
    static func recordings(cadence: Double = 1.8) -> [TuningRecording] {
        var walk = SyntheticWalk()
        walk.cadence = cadence
        walk.stillBefore = 2
        walk.stillAfter = 2
        let steps = 300
        let times = (0..<steps).map { Int64((2 + (Double($0) + 0.5) / cadence) * 1e9) }
        var still = SyntheticWalk()
        still.stillBefore = 600
        let walkRecording = LabelledRecording(
            path: "walk/accelerometer.csv", name: "walk", format: nil, placement: "hand", kind: .walk,
            truth: steps)
        let stillRecording = LabelledRecording(
            path: "still.csv", name: "still", format: nil, placement: "wrist", kind: .nowalk, truth: 0)
        return [
            TuningRecording(labelled: walkRecording, samples: walk.samples(steps: steps), stepTimes: times),
            TuningRecording(labelled: stillRecording, samples: still.samples(steps: 0)),
        ]
    }

    @Test func boutsCarryTheTrueStepsOfTheirCutAndTheTimelineHasNoGaps() throws {
        let bench = DailyLifeBench(recordings: Self.recordings(), boutsPerDay: 40)
        #expect(bench.isUsable)
        let day = bench.day(seed: 7)
        #expect(day.bouts.count == 40)
        #expect(day.pauses.count == 41)
        #expect(day.truth == day.bouts.reduce(0) { $0 + $1.truth })
        for pair in zip(day.samples, day.samples.dropFirst()) {
            #expect(pair.1.timestamp > pair.0.timestamp)
            #expect(pair.1.timestamp - pair.0.timestamp < 1_000_000_000)
        }
        let period = 1e9 / 1.8
        for bout in day.bouts {
            #expect((4...600).contains(bout.truth))
            // A cut spans its steps: n periods mid-walk, or up to 1.5 s of standing at one end.
            let span = Double(bout.end - bout.start)
            #expect(span >= (Double(bout.truth) - 0.1) * period - 2e7)
            #expect(span <= (Double(bout.truth) - 0.5) * period + 1.5e9 + 2e7)
        }
        // Many short bouts, a few long ones.
        #expect(day.bouts.filter { $0.truth <= 30 }.count > day.bouts.count / 2)
    }

    @Test func daysRepeatForASeedAndDifferAcrossSeeds() {
        let bench = DailyLifeBench(recordings: Self.recordings())
        let a = bench.day(seed: 1)
        let b = bench.day(seed: 1)
        let c = bench.day(seed: 2)
        #expect(a.samples == b.samples)
        #expect(a.bouts == b.bouts)
        #expect(a.bouts != c.bouts)
    }

    @Test func scoringSplitsStepsIntoBoutsAndFalseSteps() {
        let bench = DailyLifeBench(recordings: Self.recordings(), boutsPerDay: 10)
        let day = bench.day(seed: 3)
        // Every true step credited once, and two steps in the first pause.
        var times = [day.pauses[0].start + 1_000_000_000, day.pauses[0].start + 2_000_000_000]
        for bout in day.bouts {
            for k in 0..<bout.truth {
                times.append(bout.start + (bout.end - bout.start) * Int64(k) / Int64(bout.truth))
            }
        }
        times.sort()
        var score = DailyLifeScore()
        score.add(day, stepTimes: times)
        #expect(score.days[0].falseSteps == 2)
        #expect(score.days[0].counted == day.truth + 2)
        for c in score.classes where c.bouts > 0 { #expect(c.recall == 100) }
        #expect(abs(score.pooledError - 200 / Double(day.truth)) < 1e-9)
    }

    @Test func theDetectorCountsTheSyntheticDay() {
        let bench = DailyLifeBench(recordings: Self.recordings(), boutsPerDay: 20)
        let score = DailyLifeScore.evaluate([bench.day(seed: 5)], configuration: DetectorConfiguration())
        #expect(score.days[0].falseSteps == 0)
        #expect(abs(score.pooledError) < 10, "day error \(score.pooledError) %")
        #expect((score.recall(boutLength: 100) ?? 0) > 90)
    }
}
