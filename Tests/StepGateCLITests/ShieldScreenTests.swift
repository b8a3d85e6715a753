import CLinux
import Foundation
import Glibc
import StepGateTestSupport
import Testing

private let tools = ["/usr/bin/setpriv", "/usr/bin/dbus-daemon", "/usr/bin/dbus-monitor"]
private let canRun = getuid() == 0 && tools.allSatisfy { FileManager.default.isExecutableFile(atPath: $0) }

/// `setpriv` as nobody, for a command or a long-running process.
private func asNobody(_ arguments: [String]) -> [String] {
    ["/usr/bin/setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"] + arguments
}

/// The shield screen: a launch the exec shield denies puts a notice on the desktop of the user
/// who tried, through the daemon, on that user's own session bus.
@Suite("Shield screen on a denied launch", .enabled(if: canRun, "needs root (fanotify), setpriv and dbus"))
struct ShieldScreenTests {
    @Test func aDeniedLaunchNotifiesTheUserOnceAndASilentBusNeverSlowsTheGate() throws {
        let folder = try Fixtures.temporaryFolder()
        chmod(folder.path, 0o755)
        let game = folder.appendingPathComponent("game").path
        try FileManager.default.copyItem(atPath: "/bin/true", toPath: game)
        chmod(game, 0o755)
        let home = folder.appendingPathComponent("nobody").path
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: false)
        let nobody = try #require(getpwnam("nobody")?.pointee)
        chown(home, nobody.pw_uid, nobody.pw_gid)
        let busPath = "\(home)/bus-\(nobody.pw_uid)"
        let config = """
            {
              "input": {"replay": "\(Fixtures.samples.appendingPathComponent("drive-wrist-0.csv").path)", "speed": 1},
              "policy": {"stores": {"games": {
                 "selection": {"executables": ["\(game)"]},
                 "gate": {"goals": [{"steps": 500, "minutes": 1}]}}}},
              "stateDirectory": "\(folder.appendingPathComponent("state").path)",
              "controlSocket": "\(folder.appendingPathComponent("control.sock").path)",
              "shields": {"exec": {"enabled": true}},
              "messages": {"games": {"title": "Games are shielded", "subtitle": "Walk to unlock them."}},
              "notifications": {"busAddress": "unix:path=\(home)/bus-%u", "minimumIntervalSeconds": 2}
            }
            """
        let daemon = try TestDaemon(folder: folder, config: config)
        defer { daemon.kill(SIGTERM) }
        func launchAsNobody() throws -> (status: Int32, seconds: Double) {
            let start = Date()
            let result = try runProcess(
                URL(fileURLWithPath: "/usr/bin/setpriv"),
                Array(asNobody(["/bin/sh", "-c", game]).dropFirst()))
            return (result.status, Date().timeIntervalSince(start))
        }

        // 1. The gated user's "bus" accepts and never answers: every launch is still denied at
        //    once, and the daemon answers status at once.
        // Closed once, below: a second close here would close whatever descriptor another
        // test of the same process had opened under the number meanwhile.
        let silent = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, byte) in busPath.utf8.enumerated() { raw[i] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(silent, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        #expect(bound == 0 && listen(silent, 64) == 0)
        chmod(busPath, 0o777)
        // A notice gives up after 3 s (DesktopNotices): a gate that waited on the bus would
        // take at least that long. 2 s leaves room for starting setpriv and a shell on a
        // loaded 2-core machine (a full parallel run has measured 1.06 s).
        for _ in 0..<3 {
            let (status, seconds) = try launchAsNobody()
            #expect(status == 126, "the launch was not denied")
            #expect(seconds < 2, "a denied launch took \(seconds) s")
            let start = Date()
            _ = try daemon.status()
            #expect(Date().timeIntervalSince(start) < 2, "status waited on the user's bus")
        }
        close(silent)
        unlink(busPath)

        // 2. A real session bus of the user's, watched by dbus-monitor: a launcher retrying in
        //    a loop puts exactly one shield screen there.
        let bus = try BackgroundProcess(PrivateBus.command(socket: busPath), asNobody: true)
        for _ in 0..<300 where !FileManager.default.fileExists(atPath: busPath) { usleep(10_000) }
        usleep(300_000)  // the file appears at bind(), a moment before listen()
        let monitorLog = folder.appendingPathComponent("monitor.log").path
        let monitor = try BackgroundProcess(
            [
                "/usr/bin/dbus-monitor", "--address", "unix:path=\(busPath)",
                "interface='org.freedesktop.Notifications'",
            ],
            asNobody: true, output: monitorLog)
        defer { withExtendedLifetime((bus, monitor)) {} }
        func seen() -> String { (try? String(contentsOfFile: monitorLog, encoding: .utf8)) ?? "" }
        for _ in 0..<300 where seen().isEmpty { usleep(10_000) }
        usleep(3_200_000)  // past the rate limit (2 s) of the first phase's notice
        for _ in 0..<5 {
            // 126: the shell could not execute the game. Anything else is worth its number (a
            // stray SIGTERM to a reused pid showed as 15 once: see TestDaemon.kill).
            let status = try launchAsNobody().status
            #expect(status == 126, "a launch in the second phase ended with status \(status)")
        }
        let deadline = Date().addingTimeInterval(15)
        while !seen().contains("Walk now") && Date() < deadline { usleep(50_000) }
        usleep(500_000)
        let log = seen()
        #expect(log.components(separatedBy: "member=Notify").count - 1 == 1, "\(log)\n\(daemon.log)")
        #expect(log.contains("string \"Games are shielded\""))
        #expect(log.contains("Walk to unlock them."))
        #expect(log.contains("500 steps to go."))
        #expect(daemon.log.contains("launch of \(game) denied to uid \(nobody.pw_uid)"))
    }
}
