import Counting
import Foundation
import Household
import SensorInput
import StepDetection
import StepGateTestSupport
import StepHistoryStore
import Synchronization
import Testing
import Tuning

@testable import StepGateDaemon

/// Stops and kills of the daemon's loop at random points of a walk (seeded, so a failure comes
/// back with the same points), with the walk fed by the test and the loop's clock moved by it:
/// after a stop the history on disk is exactly what was counted, and the gate's count with it;
/// after a kill (the files as they are on disk at that instant) it lacks at most the steps of
/// the last save interval, and the next start removes what unfinished writes left.
@Suite("Daemon stops and kills") struct StopDurabilityTests {
    static let walk: [AccelerationSample] = {
        guard
            var reader = try? RecordingReader(
                path: Fixtures.samples.appendingPathComponent("walk-wrist-100.csv").path),
            let samples = try? reader.readAll()
        else { return [] }
        return samples
    }()

    /// The walk in one-second pieces, by the samples' own time.
    static let seconds: [[AccelerationSample]] = {
        guard let first = walk.first?.timestamp else { return [] }
        var pieces: [[AccelerationSample]] = []
        for sample in walk {
            let index = Int((sample.timestamp - first) / 1_000_000_000)
            while pieces.count <= index { pieces.append([]) }
            pieces[index].append(sample)
        }
        return pieces
    }()

    /// What the detector counts in the first `count` samples of the walk.
    static func counted(_ count: Int) -> Int {
        var detector = StepDetector(configuration: DetectorConfiguration(), input: .totalAcceleration)
        for sample in walk.prefix(count) { detector.process(sample) { _ in } }
        return detector.count
    }

    @Test(
        "a stop at any point of a walk writes what was counted: the history and the gate agree",
        arguments: 0..<8)
    func aStopWritesEverythingCounted(trial: Int) async throws {
        var random = SplitMix64(seed: 26_000 + UInt64(trial))
        let stopAt = Int.random(in: 1..<Self.walk.count, using: &random)
        // Half the trials stop while samples are still being counted.
        let settled = trial.isMultiple(of: 2)
        let folder = try Fixtures.temporaryFolder()
        let source = FedSource()
        try await withLoop(
            goal: 100_000, minutes: 30, stores: ["games"], folder: folder, open: opening(source)
        ) { loop in
            source.feed(Self.walk.prefix(stopAt))
            if settled { try await eventually { source.isIdle } }
            loop.handle?.stop()
        }
        let expected = Self.counted(source.taken)
        #expect(!settled || source.taken == stopAt)
        let state = folder.path + "/state"
        #expect(try stepsOnDisk(state) == expected, "stopped after \(source.taken) samples")
        #expect(try leftovers(state).isEmpty)
        // The next start has the day's steps in the history and in the gate alike.
        try await withLoop(goal: 100_000, minutes: 30, stores: ["games"], folder: folder, walk: false) {
            loop in
            let status = try await loop.status()
            #expect(todayInHistory(status) == expected)
            #expect(store(status, "games")?["steps"] as? Int == expected)
        }
    }

    @Test("a kill at any point of a walk loses at most the steps of the save interval", arguments: 0..<8)
    func aKillLosesAtMostTheSaveInterval(trial: Int) async throws {
        var random = SplitMix64(seed: 26_100 + UInt64(trial))
        // Past the walk's end too: once the interval has passed, a kill loses nothing.
        let interval = Int(Daemon.historySaveInterval.components.seconds)
        let killAt = Int.random(in: 0..<(Self.seconds.count + interval + 3), using: &random)
        let folder = try Fixtures.temporaryFolder()
        let killed = try Fixtures.temporaryFolder()
        let source = FedSource()
        var counts: [Int] = []
        try await withLoop(
            goal: 100_000, minutes: 30, stores: ["games"], folder: folder, open: opening(source)
        ) { loop in
            for second in 0...killAt {
                source.feed(second < Self.seconds.count ? Self.seconds[second] : [])
                try await eventually { source.isIdle }
                counts.append(try await loop.status()["stepsSinceStart"] as? Int ?? -1)
                loop.clock.advance(by: .seconds(1))
                try await loop.settle()
            }
            // What a SIGKILL leaves: the files as they are now. A write cut off half-way left
            // its temporary file too.
            try FileManager.default.copyItem(atPath: folder.path + "/state", toPath: killed.path + "/state")
        }
        let state = killed.path + "/state"
        let onDisk = try stepsOnDisk(state)
        let last = counts[killAt]
        let dueBefore = killAt >= interval - 1 ? counts[killAt - (interval - 1)] : 0
        #expect(onDisk <= last)
        #expect(
            onDisk >= dueBefore,
            "killed \(killAt + 1) s into the walk: \(onDisk) steps on disk, \(last) counted, \(dueBefore) of them \(interval) s before"
        )
        if killAt >= Self.seconds.count + interval - 1 {
            #expect(onDisk == last, "the walk ended over \(interval) s before")
        }

        for name in ["steps.json.tmp-0123456789abcdef", "state.json.tmp-fedcba9876543210"] {
            try "{\"half\":".write(toFile: state + "/" + name, atomically: false, encoding: .utf8)
        }
        try "not ours".write(toFile: state + "/notes.tmp-1", atomically: false, encoding: .utf8)
        try await withLoop(goal: 100_000, minutes: 30, stores: ["games"], folder: killed, walk: false) {
            loop in
            let status = try await loop.status()
            #expect(todayInHistory(status) == onDisk)
        }
        #expect(try leftovers(state).isEmpty)
        #expect(
            FileManager.default.fileExists(atPath: state + "/notes.tmp-1"), "only the writer's own names go")
    }

    @Test(
        "the steps of a walk that ended are on disk once the save interval has passed, with no step after them"
    )
    func theLastBatchIsWrittenWithoutAnotherStep() async throws {
        let folder = try Fixtures.temporaryFolder()
        let source = FedSource()
        try await withLoop(
            goal: 100_000, minutes: 30, stores: ["games"], folder: folder, open: opening(source)
        ) { loop in
            source.feed(Self.walk)
            try await eventually { source.isIdle }
            let counted = try await loop.status()["stepsSinceStart"] as? Int
            loop.clock.advance(by: Daemon.historySaveInterval - .seconds(1))
            try await loop.settle()
            #expect(
                try stepsOnDisk(folder.path + "/state") < counted ?? 0, "written in batches, not at each step"
            )
            loop.clock.advance(by: .seconds(1))
            try await loop.settle()
            #expect(try stepsOnDisk(folder.path + "/state") == counted)
        }
    }
}

/// The household's sensor side: the totals of its counting sessions (`step-sessions.json`), which
/// the gates take steps from, follow the same rule.
@Suite("Shared step sessions on disk") struct StepSessionFileTests {
    @Test("the sessions are written 5 s after steps, with no step after them, and in full at a stop")
    func theSessionsFollowTheSaveRule() async throws {
        let folder = try Fixtures.temporaryFolder()
        let file = folder.path + "/state/step-sessions.json"
        func total() throws -> Int {
            guard let bytes = try DurableFile.read(file) else { return -1 }
            return try StepSessionFile.decode(bytes).reduce(0) { $0 + $1.total }
        }
        let source = FedSource()
        // No broker answers there: the link retries in the background, and the sessions are
        // kept all the same.
        let mqtt =
            #"{"socket": "\#(folder.path)/no-broker.sock", "topicPrefix": "stepgate/test", "shareSteps": true}"#
        var counted = 0
        try await withLoop(
            goal: 100_000, minutes: 30, stores: ["games"], folder: folder, mqtt: mqtt,
            open: opening(source)
        ) { loop in
            source.feed(StopDurabilityTests.walk.prefix(500))
            try await eventually { source.isIdle }
            try await loop.settle()
            counted = try await loop.status()["stepsSinceStart"] as? Int ?? -1
            #expect(counted > 0)
            loop.clock.advance(by: .seconds(4))
            try await loop.settle()
            #expect(try total() == 0, "written in batches")
            loop.clock.advance(by: .seconds(1))
            try await loop.settle()
            #expect(try total() == counted)
            source.feed(StopDurabilityTests.walk.dropFirst(500))
            try await eventually { source.isIdle }
            counted = try await loop.status()["stepsSinceStart"] as? Int ?? -1
            loop.handle?.stop()
        }
        #expect(try total() == counted)
        #expect(try leftovers(folder.path + "/state").isEmpty)
    }
}

extension Loop {
    /// Returns once the loop has begun a turn after this call: its files written in batches
    /// are written as the clock now has them due (the first answer may come from a turn begun
    /// earlier; the second comes from a later one).
    func settle() async throws {
        _ = try await status()
        _ = try await status()
    }
}

/// Today's steps in the history (`steps.json`), as `status` shows them.
func todayInHistory(_ status: [String: Any]) -> Int? {
    (status["lastDays"] as? [[String: Any]])?.last?["steps"] as? Int
}

/// The steps in a state folder's `steps.json` (0 when there is none).
func stepsOnDisk(_ folder: String) throws -> Int {
    guard let bytes = try DurableFile.read(folder + "/steps.json") else { return 0 }
    return try StepHistory.decode(bytes).total
}

/// The temporary files of unfinished writes in a folder.
func leftovers(_ folder: String) throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: folder).filter {
        $0.contains(".tmp-") && $0 != "notes.tmp-1"
    }
}

/// A walk the test feeds: the loop's input takes the samples as they come, and the test can
/// tell when it has taken (so counted) every one fed.
final class FedSource: SampleSource, Sendable {
    let name = "fed walk"
    private struct State {
        var fed: [AccelerationSample] = []
        var taken = 0
        var waiting: CheckedContinuation<AccelerationSample?, Never>?
        var cancelled = false
    }
    private let state = Mutex(State())

    /// Samples taken by the reader.
    var taken: Int { state.withLock { $0.taken } }

    /// Whether every sample fed was taken and the reader waits for more: the counter has
    /// counted them all, and posted their steps.
    var isIdle: Bool { state.withLock { $0.taken == $0.fed.count && $0.waiting != nil } }

    func feed(_ samples: some Collection<AccelerationSample>) {
        let handed = state.withLock {
            s -> (CheckedContinuation<AccelerationSample?, Never>, AccelerationSample)? in
            s.fed += samples
            guard let waiting = s.waiting, s.taken < s.fed.count else { return nil }
            s.waiting = nil
            s.taken += 1
            return (waiting, s.fed[s.taken - 1])
        }
        if let (waiting, sample) = handed { waiting.resume(returning: sample) }
    }

    func samples() -> AsyncThrowingStream<AccelerationSample, any Error> {
        AsyncThrowingStream { [self] in await self.next() }
    }

    private func next() async -> AccelerationSample? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let ready = state.withLock { s -> AccelerationSample?? in
                    if s.cancelled { return .some(nil) }
                    if s.taken < s.fed.count {
                        s.taken += 1
                        return .some(s.fed[s.taken - 1])
                    }
                    s.waiting = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            let waiting = state.withLock { s -> CheckedContinuation<AccelerationSample?, Never>? in
                s.cancelled = true
                defer { s.waiting = nil }
                return s.waiting
            }
            waiting?.resume(returning: nil)
        }
    }
}
