import Foundation
import Glibc
import Notifications
import StepGateTestSupport
import Testing

private let tools = ["/usr/bin/setpriv", "/usr/bin/dbus-daemon", "/usr/bin/dbus-monitor"]
private let canRun = getuid() == 0 && tools.allSatisfy { FileManager.default.isExecutableFile(atPath: $0) }

/// The daemon's messenger to a user's session bus: `stepgate notify-helper` becomes the user
/// before it connects, so a user's bus only ever meets that user's credentials.
@Suite("notify-helper", .enabled(if: canRun, "needs root, setpriv, dbus-daemon and dbus-monitor"))
struct NotifyHelperTests {
    private func waitFor(_ path: String) {
        for _ in 0..<300 where !FileManager.default.fileExists(atPath: path) { usleep(10_000) }
        usleep(300_000)  // the file appears at bind(), a moment before listen()
    }

    @Test func theHelperSpeaksToAUsersBusAsThatUserAndNeverAsRoot() throws {
        let folder = try Fixtures.temporaryFolder()
        chmod(folder.path, 0o755)
        let home = folder.appendingPathComponent("nobody").path
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: false)
        let nobody = try #require(getpwnam("nobody")?.pointee)
        chown(home, nobody.pw_uid, nobody.pw_gid)
        let socket = home + "/bus"
        let bus = try BackgroundProcess(PrivateBus.command(socket: socket), asNobody: true)
        waitFor(socket)
        let monitorLog = folder.appendingPathComponent("monitor.log").path
        let monitor = try BackgroundProcess(
            [
                "/usr/bin/dbus-monitor", "--address", "unix:path=\(socket)",
                "interface='org.freedesktop.Notifications'",
            ],
            asNobody: true, output: monitorLog)
        // The monitor is listening once it printed its own NameAcquired/NameLost signals.
        for _ in 0..<300 where ((try? String(contentsOfFile: monitorLog, encoding: .utf8)) ?? "").isEmpty {
            usleep(10_000)
        }
        usleep(200_000)

        let transport = HelperTransport(executable: Fixtures.stepgateExecutable.path, deadline: .seconds(3))
        let recipient = NoticeRecipient(
            uid: nobody.pw_uid, gid: nobody.pw_gid, address: "unix:path=\(socket)")
        let notice = DesktopNotice(
            summary: "Games are shielded", body: "Walk 1200 more steps",
            actions: [.init(key: "default", label: "Walk now")], urgency: .critical)
        // Nobody serves notifications on this bus: the bus itself answers that no one owns the
        // name, which is only possible once it let the helper in as nobody.
        let error = #expect(throws: NotificationError.self) {
            _ = try transport.send(notice, to: recipient, replacing: 7)
        }
        #expect(error?.message.contains("ServiceUnknown") == true, "\(String(describing: error))")
        usleep(300_000)
        let seen = (try? String(contentsOfFile: monitorLog, encoding: .utf8)) ?? ""
        #expect(seen.contains("member=Notify"), "\(seen)")
        #expect(seen.contains("string \"Games are shielded\""))
        #expect(seen.contains("uint32 7"))
        withExtendedLifetime((bus, monitor)) {}
    }

    @Test func rootsOwnBusDoesNotLetTheHelperInAndRootIsNeverARecipient() throws {
        let folder = try Fixtures.temporaryFolder()
        chmod(folder.path, 0o755)
        let socket = folder.appendingPathComponent("root-bus").path
        let bus = try BackgroundProcess(PrivateBus.command(socket: socket))
        defer { withExtendedLifetime(bus) {} }
        waitFor(socket)
        let nobody = try #require(getpwnam("nobody")?.pointee)
        let transport = HelperTransport(executable: Fixtures.stepgateExecutable.path, deadline: .seconds(2))
        let start = ContinuousClock.now
        let refused = #expect(throws: NotificationError.self) {
            _ = try transport.send(
                DesktopNotice(summary: "x"),
                to: NoticeRecipient(uid: nobody.pw_uid, gid: nobody.pw_gid, address: "unix:path=\(socket)"),
                replacing: 0)
        }
        #expect(ContinuousClock.now - start < .seconds(3), "the helper outlived its deadline")
        // Not let in at all (a bus that let it in would have answered ServiceUnknown).
        #expect(refused?.message.contains("ServiceUnknown") == false, "\(String(describing: refused))")
        let asRoot = #expect(throws: NotificationError.self) {
            _ = try transport.send(
                DesktopNotice(summary: "x"),
                to: NoticeRecipient(uid: 0, gid: 0, address: "unix:path=\(socket)"),
                replacing: 0)
        }
        #expect(asRoot?.message.contains("never speaks to a bus as root") == true)
        // Run by hand as root with root as the user, the helper refuses too.
        let direct = try runProcess(
            Fixtures.stepgateExecutable,
            [
                "notify-helper", "--uid", "0", "--gid", "0", "--address", "unix:path=\(socket)", "--summary",
                "x",
            ])
        #expect(direct.status == 1 && direct.standardError.contains("never speaks to a bus as root"))
    }
}
