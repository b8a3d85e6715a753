import StepDetection
import Testing

/// Walking bouts from step events: a pause longer than the detector's resumeTime ends a bout.
@Suite("Walking bouts")
struct BoutTrackerTests {
    @Test func aPauseLongerThanResumeTimeEndsABout() {
        var configuration = DetectorConfiguration()
        configuration.resumeTime = 10
        var tracker = BoutTracker(configuration: configuration)
        var bouts: [WalkingBout] = []
        let second: Int64 = 1_000_000_000
        var count = 0
        // 20 steps at 0.5 s, a 9.5 s halt (a traffic light: the same walk), 10 steps, then a
        // 12 s pause and 6 steps; one event carrying two steps (a filled missed step).
        var times = (0..<20).map { Int64($0) * second / 2 }
        times += (0..<10).map { 19 * second + Int64($0) * second / 2 }
        times += (0..<6).map { 35 * second + Int64($0) * second / 2 }
        for (index, time) in times.enumerated() {
            count += index == 25 ? 2 : 1
            if let bout = tracker.add(StepEvent(timestamp: time, count: count)) { bouts.append(bout) }
        }
        if let bout = tracker.finish() { bouts.append(bout) }
        #expect(
            bouts == [
                WalkingBout(start: 0, end: 23 * second + second / 2, steps: 31),
                WalkingBout(start: 35 * second, end: 37 * second + second / 2, steps: 6),
            ])
        #expect(bouts[1].cadence == 120)
        #expect(tracker.finish() == nil)
    }

    /// With resuming off, a bout ends after two of the longest step intervals.
    @Test func withoutResumingTwoLongestIntervalsEndABout() {
        var configuration = DetectorConfiguration()
        configuration.resumeTime = 0
        #expect(
            BoutTracker(configuration: configuration).maximumPause
                == Int64(2 * configuration.maximumStepInterval * 1e9))
    }
}
