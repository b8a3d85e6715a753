import Counting
import Foundation
import Glibc
import Notifications
import StepGateTestSupport
import Testing

@testable import StepGateDaemon

private let tools = ["/usr/bin/dbus-daemon", "/usr/bin/dbus-monitor"]
private let canRun = tools.allSatisfy { FileManager.default.isExecutableFile(atPath: $0) }

/// A private `dbus-daemon --session` of the test's own user, watched by `dbus-monitor`, and
/// the desktop notices that reach it (this process calls the bus itself, as the one session
/// user).
private final class TestBus {
    let folder: URL
    private let bus: BackgroundProcess
    private let monitor: BackgroundProcess
    private let monitorLog: String

    init() throws {
        folder = try Fixtures.temporaryFolder()
        let socket = folder.appendingPathComponent("bus-\(geteuid())").path
        bus = try BackgroundProcess(PrivateBus.command(socket: socket))
        for _ in 0..<300 where !FileManager.default.fileExists(atPath: socket) { usleep(10_000) }
        usleep(300_000)  // the file appears at bind(), a moment before listen()
        monitorLog = folder.appendingPathComponent("monitor.log").path
        monitor = try BackgroundProcess(
            [
                "/usr/bin/dbus-monitor", "--address", "unix:path=\(socket)",
                "interface='org.freedesktop.Notifications'",
            ],
            output: monitorLog)
        for _ in 0..<300 where seen().isEmpty { usleep(10_000) }
    }

    /// The `notifications` section for the loop's configuration.
    var settings: String { #"{"busAddress": "unix:path=\#(folder.path)/bus-%u"}"# }

    let notices: @Sendable (NoticeSettings, Logger) -> DesktopNotices = { settings, log in
        let uid = geteuid()
        return DesktopNotices(
            settings: settings, log: log, transports: [DirectTransport(timeout: .seconds(3))],
            sessionUsers: { [uid] })
    }

    /// What the monitor saw.
    func seen() -> String { (try? String(contentsOfFile: monitorLog, encoding: .utf8)) ?? "" }

    /// How often `text` was seen.
    func calls(_ text: String) -> Int { seen().components(separatedBy: text).count - 1 }
}

/// The warnings before relock, from the daemon's loop to a real session bus: the Notify calls
/// 5 minutes and 1 minute before the unlock ends (the loop's clock is moved by the test).
@Suite("Relock warnings on a session bus", .enabled(if: canRun, "needs dbus-daemon and dbus-monitor"))
struct RelockWarningBusTests {
    private let exec = #"{"exec": {"enabled": true, "running": {"games": "stop", "*": "terminate"}}}"#

    @Test func theWarningsReachTheUsersBus() async throws {
        let bus = try TestBus()
        try await withLoop(
            goal: 50, minutes: 30, stores: ["games"], notifications: bus.settings, shields: exec,
            notices: bus.notices
        ) { loop in
            _ = try await loop.waitForStatus { store($0, "games")?["shielded"] as? Bool == false }
            // The test clock stands still while the walk is read: the unlock ends 30 minutes
            // after its start, 2026-09-21 14:13:20 UTC.
            try await eventually { bus.calls("games unlocked until 14:43") == 1 }
            // A user's notices go out in order: the one of the start (the gate holding) is there.
            let shieldedAgain = bus.calls("games is shielded again")
            #expect(shieldedAgain == 1, "\(bus.seen())")
            loop.clock.advance(by: .seconds(24 * 60 + 59))
            try await Task.sleep(for: .milliseconds(300))
            #expect(bus.calls("relock in") == 0, "warned early: \(bus.seen())")

            loop.clock.advance(by: .seconds(1))
            try await eventually { bus.calls("string \"games relock in 5 minutes, at 14:43\"") == 1 }
            loop.clock.advance(by: .seconds(4 * 60))
            try await eventually { bus.calls("string \"games relock in 1 minute, at 14:43\"") == 1 }
            // What happens to the store's running programs then, from the exec shield's `running`.
            #expect(bus.calls("string \"Running games will be paused until the next unlock.\"") == 2)
            loop.clock.advance(by: .seconds(60))
            _ = try await loop.waitForStatus { store($0, "games")?["shielded"] as? Bool == true }
            try await eventually { bus.calls("games is shielded again") == shieldedAgain + 1 }
            #expect(bus.calls("relock in") == 2, "\(bus.seen())")
        }
    }

    @Test func aRestartBetweenTheWarningsNeitherRepeatsNorLosesOne() async throws {
        let bus = try TestBus()
        let folder = try Fixtures.temporaryFolder()
        let clock = TestClock()
        try await withLoop(
            goal: 50, minutes: 30, stores: ["games"], folder: folder, notifications: bus.settings,
            shields: exec, clock: clock, notices: bus.notices
        ) { loop in
            _ = try await loop.waitForStatus { store($0, "games")?["shielded"] as? Bool == false }
            loop.clock.advance(by: .seconds(25 * 60))
            try await eventually { bus.calls("string \"games relock in 5 minutes, at 14:43\"") == 1 }
            loop.clock.advance(by: .seconds(60))
        }
        // The daemon restarts within the boot, at 26 minutes: the same clock goes on.
        try await withLoop(
            goal: 50, minutes: 30, stores: ["games"], folder: folder, walk: false,
            notifications: bus.settings,
            shields: exec, clock: clock, notices: bus.notices
        ) { loop in
            let status = try await loop.waitForStatus { $0["ok"] as? Bool == true }
            #expect(store(status, "games")?["shielded"] as? Bool == false)
            try await Task.sleep(for: .milliseconds(300))
            #expect(
                bus.calls("relock in") == 1, "the 5-minute warning again after the restart: \(bus.seen())")
            loop.clock.advance(by: .seconds(3 * 60))
            try await eventually { bus.calls("string \"games relock in 1 minute, at 14:43\"") == 1 }
            loop.clock.advance(by: .seconds(60))
            _ = try await loop.waitForStatus { store($0, "games")?["shielded"] as? Bool == true }
            #expect(bus.calls("relock in") == 2, "\(bus.seen())")
        }
    }
}
