import Counting
import Foundation
import SensorInput
import Shields
import StepDetection
import StepGateTestSupport
import Synchronization
import Testing
import UnlockPolicy

@testable import StepGateDaemon

/// The daemon's loop run in the test process: a clock the test moves, requests made in process,
/// a shield that records what it is asked, and a recorded walk as the input. No sockets, no
/// child processes, no real waiting for an unlock window to pass.
@Suite("Daemon loop") struct DaemonLoopTests {
    @Test("a walk read through the loop unlocks the store, and the clock moving on relocks it")
    func aWalkUnlocksAndTheClockRelocks() async throws {
        try await withLoop(goal: 50, minutes: 30, stores: ["games"]) { loop in
            _ = try await loop.waitForStatus {
                store($0, "games")?["shielded"] as? Bool == false && $0["stepsSinceStart"] as? Int == 100
            }
            try await eventually { loop.shield.calls.contains("remove games") }
            let applies = loop.shield.calls.filter { $0 == "apply games" }.count
            #expect(applies >= 1, "shielded at start, before the walk")

            loop.clock.advance(by: .seconds(29 * 60))
            try await Task.sleep(for: .milliseconds(200))
            let still = try await loop.status()
            #expect(store(still, "games")?["shielded"] as? Bool == false, "29 of 30 minutes: still open")

            loop.clock.advance(by: .seconds(61))
            _ = try await loop.waitForStatus { store($0, "games")?["shielded"] as? Bool == true }
            try await eventually { loop.shield.calls.filter { $0 == "apply games" }.count == applies + 1 }
        }
    }

    @Test("a store whose shield fails stays locked and says why; the other store is shielded all the same")
    func oneFailingShieldDoesNotLeaveAnotherStoreOpen() async throws {
        try await withLoop(goal: 10_000, minutes: 30, stores: ["games", "video"], failing: ["games"]) {
            loop in
            let status = try await loop.waitForStatus {
                (store($0, "games")?["shieldHealth"] as? String)?.contains("test failure") == true
            }
            #expect(store(status, "games")?["shielded"] as? Bool == true)
            #expect(store(status, "video")?["shieldHealth"] as? String == "ok")
            try await eventually { loop.shield.applied["video"] != nil }
        }
    }

    @Test("only an administrator changes the policy; anyone may ask for the status")
    func requestsAreAnsweredByRights() async throws {
        try await withLoop(goal: 50, minutes: 30, stores: ["games"]) { loop in
            _ = try await loop.waitForStatus { store($0, "games")?["shielded"] as? Bool == false }
            let lock = #"{"command":"lock","store":"games","minutes":60}"#
            let gated = PeerCredentials(pid: 1, uid: 1000, gid: 1000)
            let refused = try parse(await loop.endpoint.send(lock, peer: gated, isAdmin: false))
            #expect(refused["ok"] as? Bool == false)
            #expect((refused["error"] as? String)?.contains("permission denied") == true)
            #expect(store(try await loop.status(), "games")?["shielded"] as? Bool == false)

            let root = PeerCredentials(pid: 1, uid: 0, gid: 0)
            let locked = try parse(await loop.endpoint.send(lock, peer: root, isAdmin: true))
            #expect(locked["ok"] as? Bool == true)
            // Answered once the shield has done it.
            #expect(loop.shield.calls.last == "apply games")
            #expect(store(try await loop.status(), "games")?["shielded"] as? Bool == true)
        }
    }

    @Test("stopping saves the state, and a new loop on it starts where the old one stopped")
    func aStopSavesTheStateForTheNextLoop() async throws {
        let folder = try Fixtures.temporaryFolder()
        try await withLoop(goal: 50, minutes: 30, stores: ["games"], folder: folder) { loop in
            _ = try await loop.waitForStatus { store($0, "games")?["shielded"] as? Bool == false }
        }
        #expect(FileManager.default.fileExists(atPath: folder.path + "/state/state.json"))
        // The same boot: the unlock goes on without a step.
        try await withLoop(goal: 50, minutes: 30, stores: ["games"], folder: folder, walk: false) { loop in
            let status = try await loop.waitForStatus { $0["samples"] as? Int == 0 }
            #expect(store(status, "games")?["shielded"] as? Bool == false)
            #expect(!loop.shield.calls.contains("apply games"))
        }
    }
}

// MARK: - The loop's surroundings

/// A clock that moves only when the test says so (the boot clock and the wall clock together).
final class TestClock: DaemonClock {
    private let state = Mutex<(wall: Date, boot: Duration)>(
        (Date(timeIntervalSince1970: 1_790_000_000), .seconds(1_000)))

    func now() -> Instant {
        let (wall, boot) = state.withLock { $0 }
        return Instant(wall: wall, monotonic: boot, bootID: "test-boot", clockSynchronized: true)
    }

    func bootTime() -> Duration { state.withLock { $0.boot } }
    func zoneIdentifier() -> String { "UTC" }
    /// A short real pause, whatever was asked: the test moves the time.
    func sleep(for duration: Duration) async throws { try await Task.sleep(for: .milliseconds(2)) }

    func advance(by duration: Duration) {
        state.withLock {
            $0.wall += Double(duration.components.seconds)
            $0.boot += duration
        }
    }
}

/// A shield that enforces every kind and records each call as "apply STORE" or "remove STORE".
final class RecordingShield: Shield, Sendable {
    let name = "test"
    let kinds = Set(Target.Kind.allCases)
    private let failing: Set<String>
    private let state = Mutex<(calls: [String], inForce: [String: Set<Target>])>(([], [:]))

    init(failing: Set<String>) { self.failing = failing }

    var calls: [String] { state.withLock { $0.calls } }
    var applied: [String: Set<Target>] { state.withLock { $0.inForce } }

    func apply(_ targets: [Target], context: ShieldContext) throws(ShieldError) {
        state.withLock { $0.calls.append("apply \(context.store)") }
        if failing.contains(context.store) { throw ShieldError(shield: name, message: "test failure") }
        state.withLock { $0.inForce[context.store] = Set(targets) }
    }

    func remove(_ targets: [Target], context: ShieldContext) throws(ShieldError) {
        state.withLock {
            $0.calls.append("remove \(context.store)")
            $0.inForce[context.store] = nil
        }
    }

    func inForce() throws(ShieldError) -> [String: Set<Target>] { applied }
}

struct Loop {
    let clock: TestClock
    let shield: RecordingShield
    let endpoint: LocalControlEndpoint
    /// Stops the loop as SIGTERM does.
    var handle: DaemonHandle?

    func status() async throws -> [String: Any] {
        try parse(
            await endpoint.send(
                #"{"command":"status"}"#, peer: PeerCredentials(pid: 1, uid: 1000, gid: 1000), isAdmin: false)
        )
    }

    /// Asks for the status until `condition` holds (in real time; generous, as a loaded test run
    /// can keep the loop's tasks waiting for a thread).
    func waitForStatus(_ condition: ([String: Any]) -> Bool) async throws -> [String: Any] {
        let deadline = ContinuousClock.now + .seconds(900)
        var last: [String: Any] = [:]
        while ContinuousClock.now < deadline {
            last = try await status()
            if condition(last) { return last }
            try await Task.sleep(for: .milliseconds(10))
        }
        Issue.record("the status never got there; last: \(last)")
        throw CancellationError()
    }
}

/// Runs a daemon loop on `stores` (each selecting one program, unlocked for `minutes` after
/// `goal` steps), fed the bundled 100-step wrist walk at 1000 × speed (or nothing), runs
/// `body`, then stops the loop and waits for it to return. `notifications` and `shields` are the
/// config's sections of those names (JSON; the shields used are the test's all the same),
/// `notices` how the loop makes its desktop notices; `clock` one that goes on from an earlier
/// loop (a restart within the boot); `input` the config's input (JSON) instead of the walk,
/// `open` how the loop opens it (by default the walk, or nothing).
func withLoop(
    goal: Int, minutes: Int, stores: [String], failing: Set<String> = [], folder: URL? = nil,
    walk: Bool = true, notifications: String? = nil, shields: String? = nil, clock: TestClock? = nil,
    mqtt: String? = nil, input: String? = nil,
    open: (@Sendable (DaemonConfiguration.Input, Logger) throws -> any SampleSource)? = nil,
    notices: (@Sendable (NoticeSettings, Logger) -> DesktopNotices)? = nil,
    _ body: (Loop) async throws -> Void
) async throws {
    let folder = try folder ?? Fixtures.temporaryFolder()
    let storesJSON = stores.map { name in
        """
        "\(name)": { "selection": { "executables": ["/opt/\(name)"] },
                     "gate": { "goals": [{ "steps": \(goal), "minutes": \(minutes) }] } }
        """
    }.joined(separator: ",")
    let recording = Fixtures.samples.appendingPathComponent("walk-wrist-100.csv").path
    let config = """
        { "input": \(input ?? #"{ "replay": "\#(recording)", "speed": 1000 }"#),
          "policy": { "stores": { \(storesJSON) } },
          "stateDirectory": "\(folder.path)/state", "controlSocket": "\(folder.path)/unused.sock"
          \(notifications.map { ", \"notifications\": \($0)" } ?? "")
          \(shields.map { ", \"shields\": \($0)" } ?? "")
          \(mqtt.map { ", \"mqtt\": \($0)" } ?? "") }
        """
    let path = folder.path + "/stepgate.json"
    try config.write(toFile: path, atomically: true, encoding: .utf8)
    let configuration = try DaemonConfiguration.load(path: path)

    var loop = Loop(
        clock: clock ?? TestClock(), shield: RecordingShield(failing: failing),
        endpoint: LocalControlEndpoint())
    var system = DaemonSystem(
        clock: loop.clock, control: { [endpoint = loop.endpoint] _ in endpoint },
        shields: { [shield = loop.shield] _, _, _ in ShieldSet([shield]) },
        source: { input, log in
            if let open { return try open(input, log) }
            guard walk, case .replay(let path, let speed) = input else { return Silence() }
            return try RecordingSource(path: path, speed: speed)
        },
        isMachine: false)
    // No desktop notices unless the test asks for them (never to the machine's users).
    system.notices = notices ?? { DesktopNotices(settings: $0, log: $1, sessionUsers: { [] }) }
    let daemon = try Daemon(
        configuration: configuration, configPath: path, log: Logger(level: .error), system: system)
    let handle = daemon.handle
    loop.handle = handle
    let running = Task { try await daemon.run() }
    do {
        _ = try await loop.waitForStatus { $0["ok"] as? Bool == true }
        try await body(loop)
    } catch {
        handle.stop()
        _ = await running.result
        throw error
    }
    handle.stop()
    try await running.value
}

/// How a test's loop opens its input.
typealias Opener = @Sendable (DaemonConfiguration.Input, Logger) throws -> any SampleSource

/// Opens `source`, whatever the configuration says.
func opening(_ source: any SampleSource) -> Opener { { _, _ in source } }

/// An input that never produces a sample.
struct Silence: SampleSource {
    let name = "silence"
    func samples() -> AsyncThrowingStream<AccelerationSample, any Error> {
        AsyncThrowingStream { continuation in continuation.onTermination = { _ in } }
    }
}

/// Waits for `condition` (the shields work on queues of their own), 900 s at most: in a full
/// test run, suites that block the shared threads can hold the loop's tasks for minutes.
func eventually(_ condition: () -> Bool, sourceLocation: SourceLocation = #_sourceLocation) async throws {
    let deadline = ContinuousClock.now + .seconds(900)
    while !condition() {
        guard ContinuousClock.now < deadline else {
            Issue.record("never came true", sourceLocation: sourceLocation)
            return
        }
        try await Task.sleep(for: .milliseconds(10))
    }
}

func parse(_ line: String) throws -> [String: Any] {
    try #require(
        JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "not an object: \(line)")
}

func store(_ status: [String: Any], _ name: String) -> [String: Any]? {
    (status["stores"] as? [[String: Any]])?.first { $0["name"] as? String == name }
}
