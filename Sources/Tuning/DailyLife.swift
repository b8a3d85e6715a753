import Foundation
public import StepDetection

/// A day-like recording spliced from real labelled recordings, with exact truth: walking bouts
/// of known count between real no-walk segments.
public struct DailyLifeDay: Sendable {
    /// One walking bout, on the day's timeline.
    public struct Bout: Sendable, Hashable {
        /// Nanoseconds: the first and last instant of the bout's signal.
        public var start: Int64
        public var end: Int64
        /// Its true number of steps.
        public var truth: Int
        /// The recording it was cut from.
        public var source: String
        public var placement: String

        public init(start: Int64, end: Int64, truth: Int, source: String, placement: String) {
            self.start = start
            self.end = end
            self.truth = truth
            self.source = source
            self.placement = placement
        }
    }

    /// A no-walk segment, on the day's timeline.
    public struct Pause: Sendable, Hashable {
        public var start: Int64
        public var end: Int64
        public var source: String
    }

    /// The spliced signal, in time order, without gaps between segments.
    public var samples: [AccelerationSample]
    public var bouts: [Bout]
    public var pauses: [Pause]
    /// The seed it was built from.
    public var seed: UInt64

    /// The day's true number of steps.
    public var truth: Int { bouts.reduce(0) { $0 + $1.truth } }

    /// Length, in hours.
    public var hours: Double {
        samples.count > 1 ? Double(samples[samples.count - 1].timestamp &- samples[0].timestamp) / 3.6e12 : 0
    }
}

/// Builds day-like recordings from labelled walks and no-walk logs.
///
/// A day alternates real no-walk segments (drives, desk, train, still, hand movements: cut from
/// the no-walk logs) with walking bouts whose lengths follow everyday life: many bouts of 4–30
/// steps (moving about at home or in an office), some of 30–250, a few long walks. A bout of
/// `n` steps is cut from a walk with per-step truth (the Oxford foot switches) between the
/// midpoints around `n` consecutive true steps, so its count is exact; a bout may also be a
/// whole walk of that length without per-step truth (the wrist sets' short walks), whose count
/// is the recording's own truth. Every segment is rescaled by its recording's mean magnitude
/// (devices differ by a few percent in calibration, which would otherwise put a step into the
/// magnitude at each splice) and laid end to end at the recording's own sample interval.
public struct DailyLifeBench: Sendable {
    /// The set name of days added to a tuning run as recordings.
    public static let setName = "daily-life"

    /// Days as recordings for the tuner: kind `mixed`, in set ``setName``, one session each.
    public func recordings(days: Int, seed: UInt64) -> [TuningRecording] {
        (0..<UInt64(max(0, days))).map { n in
            let day = self.day(seed: seed &+ n)
            let labelled = LabelledRecording(
                path: "daily-life/\(seed &+ n)", name: "daily-life day \(seed &+ n)", format: nil,
                placement: "day", kind: .mixed, truth: day.truth, set: Self.setName,
                session: "daily-life/\(seed &+ n)")
            return TuningRecording(labelled: labelled, samples: day.samples)
        }
    }

    /// Bout-length classes reported, in steps (inclusive bounds).
    public static let lengthClasses: [ClosedRange<Int>] = [4...7, 8...20, 21...50, 51...200, 201...100_000]

    struct Source: Sendable {
        var name: String
        var placement: String
        var samples: [AccelerationSample]
        /// 1 / mean magnitude.
        var scale: Float
        /// Median sample interval, in nanoseconds.
        var interval: Int64
        var stepTimes: [Int64]
        var truth: Int
    }

    var cutWalks: [Source] = []
    var wholeWalks: [Source] = []
    var noWalks: [Source] = []
    /// Cumulative lengths of the no-walk logs, for picking by time.
    var noWalkWeights: [Double] = []
    /// Bouts in a day.
    public var boutsPerDay: Int

    /// The recordings that can be used: walks with per-step truth (cut into bouts), whole walks
    /// of at most 300 steps without it, and no-walk logs.
    public init(recordings: [TuningRecording], boutsPerDay: Int = 60) {
        self.boutsPerDay = boutsPerDay
        // Days are total acceleration; gravity-removed recordings would not splice with it.
        for recording in recordings where recording.samples.count > 1 && recording.input == .totalAcceleration
        {
            let samples = recording.samples
            var sum: Double = 0
            for s in samples { sum += Double(s.magnitude) }
            let mean = sum / Double(samples.count)
            var intervals = (1..<min(samples.count, 2001)).map {
                samples[$0].timestamp &- samples[$0 - 1].timestamp
            }
            intervals.sort()
            let source = Source(
                name: recording.labelled.name, placement: recording.labelled.placement, samples: samples,
                scale: mean > 0.5 && mean < 2 ? Float(1 / mean) : 1,
                interval: max(1, intervals[intervals.count / 2]), stepTimes: recording.stepTimes ?? [],
                truth: recording.labelled.truth)
            switch recording.labelled.kind {
            case .walk:
                if let times = recording.stepTimes, times.count >= 10 {
                    cutWalks.append(source)
                } else if recording.stepTimes == nil && recording.labelled.truth <= 300 {
                    wholeWalks.append(source)
                }
            case .nowalk: noWalks.append(source)
            case .mixed: break
            }
        }
        var total = 0.0
        for source in noWalks {
            total += Double(source.samples[source.samples.count - 1].timestamp &- source.samples[0].timestamp)
            noWalkWeights.append(total)
        }
    }

    func pickWeighted(_ cumulative: [Double], _ u: Double) -> Int {
        let target = u * (cumulative.last ?? 0)
        return min(cumulative.count - 1, cumulative.firstIndex { $0 > target } ?? cumulative.count - 1)
    }

    /// Whether days can be built: some walks with per-step truth and some no-walk logs.
    public var isUsable: Bool { !cutWalks.isEmpty && !noWalks.isEmpty }

    /// What the bench draws from.
    public var sourceCounts: (cutWalks: Int, wholeWalks: Int, noWalks: Int) {
        (cutWalks.count, wholeWalks.count, noWalks.count)
    }

    /// An everyday bout length: 45 % 4–12 steps, 25 % 13–30, 15 % 31–80, 10 % 81–250, 5 % long
    /// walks of 250–600.
    static func boutLength(_ random: inout SplitMix64) -> Int {
        let u = random.nextUnit()
        let range: ClosedRange<Int> =
            u < 0.45 ? 4...12 : u < 0.70 ? 13...30 : u < 0.85 ? 31...80 : u < 0.95 ? 81...250 : 250...600
        return range.lowerBound + Int(random.nextUnit() * Double(range.count))
    }

    /// The day for `seed`: `boutsPerDay` bouts, each after a pause of 10 s to 10 min
    /// (log-uniform), and a last pause.
    public func day(seed: UInt64) -> DailyLifeDay {
        precondition(isUsable, "the daily-life bench needs walks with per-step truth and no-walk logs")
        var random = SplitMix64(seed: seed)
        var day = DailyLifeDay(samples: [], bouts: [], pauses: [], seed: seed)
        var clock: Int64 = 0
        func pick<T>(_ items: [T]) -> T { items[Int(random.nextUnit() * Double(items.count))] }
        func append(_ source: Source, from: Int, to: Int) -> (start: Int64, end: Int64) {
            let offset = clock &- source.samples[from].timestamp
            for i in from..<to {
                let s = source.samples[i]
                day.samples.append(
                    AccelerationSample(
                        timestamp: s.timestamp &+ offset, x: s.x * source.scale, y: s.y * source.scale,
                        z: s.z * source.scale))
            }
            let start = clock
            let end = source.samples[to - 1].timestamp &+ offset
            clock = end &+ source.interval
            return (start, end)
        }
        func pause() {
            let seconds = 10 * pow(2, random.nextUnit() * 5.9)  // 10 s ... 10 min
            // No-walk time is drawn in proportion to the logs' lengths: the day's pauses are the
            // pooled no-walk data, not dominated by many short clips.
            let source = noWalks[pickWeighted(noWalkWeights, random.nextUnit())]
            let first = source.samples[0].timestamp
            let span = source.samples[source.samples.count - 1].timestamp &- first
            let length = min(span, Int64(seconds * 1e9))
            let startTime = first &+ Int64(random.nextUnit() * Double(span &- length))
            let from = firstIndex(source.samples, atOrAfter: startTime)
            let to = max(
                from + 2,
                min(source.samples.count, firstIndex(source.samples, atOrAfter: startTime &+ length)))
            let (start, end) = append(source, from: from, to: to)
            day.pauses.append(DailyLifeDay.Pause(start: start, end: end, source: source.name))
        }
        for _ in 0..<boutsPerDay {
            pause()
            let length = Self.boutLength(&random)
            let whole = wholeWalks.filter { abs($0.truth - length) <= max(5, length / 5) }
            if !whole.isEmpty && random.nextUnit() < 0.4 {
                let source = pick(whole)
                let (start, end) = append(source, from: 0, to: source.samples.count)
                day.bouts.append(
                    DailyLifeDay.Bout(
                        start: start, end: end, truth: source.truth, source: source.name,
                        placement: source.placement))
                continue
            }
            let candidates = cutWalks.filter { $0.stepTimes.count >= length + 2 }
            let source =
                candidates.isEmpty
                ? cutWalks.max { $0.stepTimes.count < $1.stepTimes.count }! : pick(candidates)
            let times = source.stepTimes
            let n = min(length, times.count - 2)
            // A third of the bouts start from standing (the walk's real first steps), a third end
            // in standing (its real last steps), a third are cut from the middle of the walk;
            // cuts fall midway between true steps, or 1.5 s before the first / after the last.
            let place = random.nextUnit()
            let first =
                place < 1.0 / 3
                ? 0
                : place < 2.0 / 3 ? times.count - n : 1 + Int(random.nextUnit() * Double(times.count - n - 1))
            let last = first + n - 1
            let cutStart =
                first == 0 ? times[0] - 1_500_000_000 : times[first] - (times[first] - times[first - 1]) / 2
            let cutEnd =
                last == times.count - 1
                ? times[last] + 1_500_000_000 : times[last] + (times[last + 1] - times[last]) / 2
            let from = firstIndex(source.samples, atOrAfter: cutStart)
            let to = firstIndex(source.samples, atOrAfter: cutEnd)
            guard to - from >= 2 else { continue }
            let (start, end) = append(source, from: from, to: to)
            day.bouts.append(
                DailyLifeDay.Bout(
                    start: start, end: end, truth: n, source: source.name, placement: source.placement))
        }
        pause()
        return day
    }

    func firstIndex(_ samples: [AccelerationSample], atOrAfter time: Int64) -> Int {
        var low = 0
        var high = samples.count
        while low < high {
            let mid = (low + high) / 2
            if samples[mid].timestamp < time { low = mid + 1 } else { high = mid }
        }
        return low
    }
}

/// How a detector did on daily-life days.
public struct DailyLifeScore: Sendable {
    /// One bout-length class.
    public struct LengthClass: Sendable, Hashable {
        public var range: ClosedRange<Int>
        public var bouts = 0
        /// Bouts with at least one step counted in them.
        public var boutsFound = 0
        public var trueSteps = 0
        /// Steps counted inside the class's bouts, at most each bout's truth.
        public var recalledSteps = 0
        /// Steps counted inside the class's bouts, uncapped.
        public var countedSteps = 0

        /// Recalled steps over true steps, in percent.
        public var recall: Double? { trueSteps > 0 ? Double(recalledSteps) / Double(trueSteps) * 100 : nil }
    }

    /// One day's totals.
    public struct Day: Sendable, Hashable {
        public var seed: UInt64
        public var hours: Double
        public var bouts: Int
        public var truth: Int
        public var counted: Int
        /// Steps counted outside every bout.
        public var falseSteps: Int
        public var pauseHours: Double

        /// Signed error of the day's count, in percent of the truth.
        public var percentError: Double { truth > 0 ? Double(counted - truth) / Double(truth) * 100 : 0 }
    }

    public var days: [Day] = []
    /// False steps by the recording the no-walk segment holding them was cut from.
    public var falseStepsBySource: [String: Int] = [:]
    /// False steps within 5 s after the end of a bout (the walk's rhythm carried on).
    public var falseStepsAfterBouts = 0
    public var classes: [LengthClass] = DailyLifeBench.lengthClasses.map { LengthClass(range: $0) }

    public init() {}

    /// Pooled error over all days, in percent of the true steps.
    public var pooledError: Double {
        let truth = days.reduce(0) { $0 + $1.truth }
        let counted = days.reduce(0) { $0 + $1.counted }
        return truth > 0 ? Double(counted - truth) / Double(truth) * 100 : 0
    }

    /// Mean absolute day error, in percent.
    public var meanAbsoluteDayError: Double {
        days.isEmpty ? 0 : days.reduce(0) { $0 + abs($1.percentError) } / Double(days.count)
    }

    /// False steps per hour of no-walk segments, pooled.
    public var falseStepsPerHour: Double {
        let hours = days.reduce(0) { $0 + $1.pauseHours }
        return hours > 0 ? Double(days.reduce(0) { $0 + $1.falseSteps }) / hours : 0
    }

    /// Recall of the class holding `length`, in percent.
    public func recall(boutLength length: Int) -> Double? {
        classes.first { $0.range.contains(length) }?.recall
    }

    /// Adds one day, given the times of the steps the detector counted on it. A step belongs to a
    /// bout when it lies within the bout's signal or up to `lag` after it (the band-pass delays
    /// the peaks a little); other steps are false.
    public mutating func add(_ day: DailyLifeDay, stepTimes: [Int64], lag: Int64 = 400_000_000) {
        var inBout = [Int](repeating: 0, count: day.bouts.count)
        var falseSteps = 0
        var b = 0
        var p = 0
        for t in stepTimes {
            while b < day.bouts.count && day.bouts[b].end &+ lag < t { b += 1 }
            if b < day.bouts.count && t >= day.bouts[b].start {
                inBout[b] += 1
                continue
            }
            falseSteps += 1
            if b > 0 && t <= day.bouts[b - 1].end &+ 5_000_000_000 { falseStepsAfterBouts += 1 }
            while p < day.pauses.count - 1 && day.pauses[p].end < t { p += 1 }
            if p < day.pauses.count { falseStepsBySource[day.pauses[p].source, default: 0] += 1 }
        }
        for (i, bout) in day.bouts.enumerated() {
            guard let c = classes.firstIndex(where: { $0.range.contains(bout.truth) }) else { continue }
            classes[c].bouts += 1
            if inBout[i] > 0 { classes[c].boutsFound += 1 }
            classes[c].trueSteps += bout.truth
            classes[c].recalledSteps += min(inBout[i], bout.truth)
            classes[c].countedSteps += inBout[i]
        }
        let pauseHours = day.pauses.reduce(0.0) { $0 + Double($1.end &- $1.start) / 3.6e12 }
        days.append(
            Day(
                seed: day.seed, hours: day.hours, bouts: day.bouts.count, truth: day.truth,
                counted: stepTimes.count,
                falseSteps: falseSteps, pauseHours: pauseHours))
    }

    /// Runs a fresh detector over each day and scores it.
    public static func evaluate(_ days: [DailyLifeDay], configuration: DetectorConfiguration)
        -> DailyLifeScore
    {
        var score = DailyLifeScore()
        for day in days {
            var detector = StepDetector(configuration: configuration)
            var times: [Int64] = []
            detector.process(day.samples) { times.append($0.timestamp) }
            score.add(day, stepTimes: times)
        }
        return score
    }
}
