import Foundation
import SensorInput
import StepDetection
import StepGateTestSupport
import Synchronization
import Testing
import UnlockPolicy

@testable import StepGateDaemon

#if canImport(Glibc)
    import Glibc
#endif

/// `status` says why the input delivers nothing: what, since when, and what the daemon does
/// about it, for each problem an input can have.
@Suite("Input problems in status") struct InputProblemTests {
    /// The time the test clock starts at, as `status` writes it.
    let start = ISO8601DateFormatter().string(from: TestClock().now().wall)

    func problem(_ status: [String: Any]) -> [String: Any]? { status["inputProblem"] as? [String: Any] }

    @Test("a replay whose file is missing: missing file, not retried")
    func aMissingReplayFile() async throws {
        let folder = try Fixtures.temporaryFolder()
        let missing = folder.path + "/walk.csv"
        try await withLoop(
            goal: 50, minutes: 30, stores: ["games"], input: #"{"replay": "\#(missing)"}"#
        ) { loop in
            let status = try await loop.waitForStatus { problem($0) != nil }
            let reported = try #require(problem(status))
            #expect(reported["kind"] as? String == "missing-file")
            #expect(reported["action"] as? String == "not retried")
            #expect(reported["since"] as? String == start)
            #expect((reported["message"] as? String)?.contains(missing) == true, "\(reported)")
        }
    }

    @Test(
        "no IIO device at all: no device, retrying",
        .enabled(if: access("/sys/bus/iio", F_OK) != 0, "this machine has IIO devices"))
    func noDeviceAtAll() async throws {
        try await withLoop(
            goal: 50, minutes: 30, stores: ["games"], input: #"{"device": "lis3dh"}"#,
            open: DaemonSystem.machine.source
        ) { loop in
            let status = try await loop.waitForStatus { problem($0) != nil }
            #expect(status["input"] as? String == "IIO lis3dh at 100.0 Hz")
            let reported = try #require(problem(status))
            #expect(reported["kind"] as? String == "no-device")
            #expect(reported["action"] as? String == "retrying every 5 s")
            #expect(reported["since"] as? String == start)
            #expect((reported["message"] as? String)?.contains("no IIO devices on this machine") == true)
        }
    }

    @Test("a device the user may not open: no permission, retrying")
    func noPermission() async throws {
        try await withLoop(
            goal: 50, minutes: 30, stores: ["games"], input: #"{"device": "lis3dh"}"#,
            open: refusing(IIOError(code: EACCES, operation: "iio_create_local_context"))
        ) { loop in
            let reported = try #require(problem(try await loop.waitForStatus { problem($0) != nil }))
            #expect(reported["kind"] as? String == "no-permission")
            #expect(reported["action"] as? String == "retrying every 5 s")
            #expect((reported["message"] as? String)?.contains("udev/60-stepgate-iio.rules") == true)
        }
    }

    @Test("a device lost while reading: device lost since then, reconnecting; gone once it is back")
    func aLostDevice() async throws {
        let source = InterruptibleSource()
        try await withLoop(
            goal: 50, minutes: 30, stores: ["games"], input: #"{"device": "lis3dh"}"#,
            open: opening(source)
        ) { loop in
            _ = try await loop.waitForStatus { $0["ok"] as? Bool == true && source.opened }
            #expect(problem(try await loop.status()) == nil)
            let lost = 1_790_000_100.0
            source.interrupt(
                SourceInterruption(reason: "iio_buffer_refill: No such device (errno 19)", since: lost))
            let reported = try #require(problem(try await loop.status()))
            #expect(reported["kind"] as? String == "device-lost")
            #expect(reported["action"] as? String == "reconnecting")
            #expect(
                reported["since"] as? String
                    == ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: lost)))
            #expect(reported["message"] as? String == "iio_buffer_refill: No such device (errno 19)")
            source.interrupt(nil)
            #expect(problem(try await loop.status()) == nil)
        }
    }

    @Test("the status line names the problem, since when and what is done")
    func theLine() {
        let problem = InputProblem(
            kind: "no-device", message: "no IIO devices", since: "2026-09-21T14:13:20Z",
            action: "retrying every 5 s")
        #expect(problem.line == "no device since 2026-09-21T14:13:20Z (retrying every 5 s): no IIO devices")
    }
}

/// Fails to open the input with `error`.
func refusing(_ error: IIOError) -> Opener { { _, _ in throw error } }

/// A source that delivers nothing and can be marked interrupted, as ``IIOAccelerometer`` is
/// while it reconnects a lost device.
final class InterruptibleSource: SampleSource, Sendable {
    let name = "interruptible"
    private let state = Mutex<(opened: Bool, interruption: SourceInterruption?)>((false, nil))
    var opened: Bool { state.withLock { $0.opened } }
    var interruption: SourceInterruption? { state.withLock { $0.interruption } }
    func interrupt(_ interruption: SourceInterruption?) { state.withLock { $0.interruption = interruption } }

    func samples() -> AsyncThrowingStream<AccelerationSample, any Error> {
        state.withLock { $0.opened = true }
        return AsyncThrowingStream { continuation in continuation.onTermination = { _ in } }
    }
}
