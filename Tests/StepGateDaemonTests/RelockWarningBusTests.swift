import Foundation
import Glibc
import Notifications
import StepGateTestSupport
import Testing

@testable import StepGateDaemon

private let tools = ["/usr/bin/dbus-daemon", "/usr/bin/dbus-monitor"]
private let canRun = tools.allSatisfy { FileManager.default.isExecutableFile(atPath: $0) }

/// A child process, killed at the end.
private final class Child {
    let process = Process()

    init(_ arguments: [String], output: String? = nil) throws {
        process.executableURL = URL(fileURLWithPath: arguments[0])
        process.arguments = Array(arguments.dropFirst())
        if let output {
            _ = FileManager.default.createFile(atPath: output, contents: nil)
            process.standardOutput = FileHandle(forWritingAtPath: output)
        } else {
            process.standardOutput = FileHandle.nullDevice
        }
        process.standardError = FileHandle.nullDevice
        try process.run()
    }

    deinit {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}

/// The warnings before relock, from the daemon's loop to a real session bus: a private
/// `dbus-daemon --session` of the test's own user, watched by `dbus-monitor`, gets the Notify
/// calls 5 minutes and 1 minute before the unlock ends (the loop's clock is moved by the test).
@Suite("Relock warnings on a session bus", .enabled(if: canRun, "needs dbus-daemon and dbus-monitor"))
struct RelockWarningBusTests {
    @Test func theWarningsReachTheUsersBus() async throws {
        let folder = try Fixtures.temporaryFolder()
        let uid = geteuid()
        let socket = folder.appendingPathComponent("bus-\(uid)").path
        let bus = try Child([
            "/usr/bin/dbus-daemon", "--session", "--nofork", "--nopidfile", "--address=unix:path=\(socket)",
        ])
        for _ in 0..<300 where !FileManager.default.fileExists(atPath: socket) { usleep(10_000) }
        usleep(300_000)  // the file appears at bind(), a moment before listen()
        let monitorLog = folder.appendingPathComponent("monitor.log").path
        let monitor = try Child(
            [
                "/usr/bin/dbus-monitor", "--address", "unix:path=\(socket)",
                "interface='org.freedesktop.Notifications'",
            ],
            output: monitorLog)
        func seen() -> String { (try? String(contentsOfFile: monitorLog, encoding: .utf8)) ?? "" }
        for _ in 0..<300 where seen().isEmpty { usleep(10_000) }
        func calls(_ text: String) -> Int { seen().components(separatedBy: text).count - 1 }

        // This process calls the bus itself, as the one session user.
        let notices: @Sendable (NoticeSettings, Logger) -> DesktopNotices = { settings, log in
            DesktopNotices(
                settings: settings, log: log, transports: [DirectTransport(timeout: .seconds(3))],
                sessionUsers: { [uid] })
        }
        try await withLoop(
            goal: 50, minutes: 30, stores: ["games"],
            notifications: #"{"busAddress": "unix:path=\#(folder.path)/bus-%u"}"#,
            shields: #"{"exec": {"enabled": true, "running": {"games": "stop", "*": "terminate"}}}"#,
            notices: notices
        ) { loop in
            _ = try await loop.waitForStatus { store($0, "games")?["shielded"] as? Bool == false }
            // The test clock stands still while the walk is read: the unlock ends 30 minutes
            // after its start, 2026-09-21 14:13:20 UTC.
            try await eventually { calls("games unlocked until 14:43") == 1 }
            // A user's notices go out in order: the one of the start (the gate holding) is there.
            let shieldedAgain = calls("games is shielded again")
            #expect(shieldedAgain == 1, "\(seen())")
            loop.clock.advance(by: .seconds(24 * 60 + 59))
            try await Task.sleep(for: .milliseconds(300))
            #expect(calls("relock in") == 0, "warned early: \(seen())")

            loop.clock.advance(by: .seconds(1))
            try await eventually { calls("string \"games relock in 5 minutes, at 14:43\"") == 1 }
            loop.clock.advance(by: .seconds(4 * 60))
            try await eventually { calls("string \"games relock in 1 minute, at 14:43\"") == 1 }
            // What happens to the store's running programs then, from the exec shield's `running`.
            #expect(calls("string \"Running games will be paused until the next unlock.\"") == 2)
            loop.clock.advance(by: .seconds(60))
            _ = try await loop.waitForStatus { store($0, "games")?["shielded"] as? Bool == true }
            try await eventually { calls("games is shielded again") == shieldedAgain + 1 }
            #expect(calls("relock in") == 2, "\(seen())")
        }
        _ = bus
        _ = monitor
    }
}
