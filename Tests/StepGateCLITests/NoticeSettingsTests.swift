import Foundation
import Notifications
import StepGateTestSupport
import Testing
import UnlockPolicy

@testable import StepGateCLI
@testable import StepGateDaemon

@Suite("Desktop notice settings and texts")
struct NoticeSettingsTests {
    private func load(_ notifications: String) throws -> DaemonConfiguration {
        let folder = try Fixtures.temporaryFolder()
        let path = folder.appendingPathComponent("config.json").path
        try """
        {"input": {"replay": "walk.csv"},
         "policy": {"stores": {"games": {"selection": {"domains": ["example.com"]},
                    "gate": {"goals": [{"steps": 50, "minutes": 1}]}}}},
         "notifications": \(notifications)}
        """.write(toFile: path, atomically: true, encoding: .utf8)
        return try DaemonConfiguration.load(path: path)
    }

    @Test func readsTheSectionAndChoosesNoticesPerStore() throws {
        let settings = try load(
            #"{"busAddress": "unix:path=/tmp/x/bus-%u", "minimumIntervalSeconds": 5, "stores": {"games": ["denied"]}}"#
        ).notifications
        #expect(settings.address(uid: 1000) == "unix:path=/tmp/x/bus-1000")
        #expect(settings.minimumIntervalSeconds == 5)
        #expect(settings.wants("denied", store: "games") && !settings.wants("unlocked", store: "games"))
        #expect(settings.wants("unlocked", store: "other"))
        #expect(try load("{}").notifications == NoticeSettings())
    }

    @Test(arguments: [
        (#"{"busAddress": "/run/user/%u/bus"}"#, "notifications.busAddress: expected \"unix:path=/"),
        (#"{"minimumIntervalSeconds": 0}"#, "notifications.minimumIntervalSeconds: expected seconds from 1"),
        (#"{"stores": {"nosuch": []}}"#, "notifications.stores.nosuch: no store named"),
        (#"{"stores": {"games": ["fireworks"]}}"#, "notifications.stores.games[0]: expected one of denied"),
        (#"{"colour": "red"}"#, "notifications.colour: unknown key"),
        (#"[]"#, "notifications: expected an object"),
    ])
    func badSettingsAreRefusedWithThePath(text: String, message: String) {
        do {
            _ = try load(text)
            Issue.record("accepted \(text)")
        } catch {
            #expect("\(error)".contains(message), "\(error)")
        }
    }

    @Test func policyNoticesBecomeDesktopTextsInThePolicysZone() {
        let notices = DesktopNotices(settings: NoticeSettings(), log: Logger(level: .error))
        let until = Date(timeIntervalSince1970: 1_764_610_800)  // 2025-12-01T17:40:00Z
        let unlocked = notices.desktopNotice(
            for: PolicyNotice(
                kind: .ownerRemoved, store: "games", owner: "gate", until: until, reason: "goal met"),
            zone: "Europe/Berlin")
        #expect(unlocked?.kind == "unlocked")
        #expect(unlocked?.1.summary == "games unlocked until 18:40")
        let relocked = notices.desktopNotice(
            for: PolicyNotice(kind: .ownerAdded, store: "games", owner: "gate", reason: "window over"),
            zone: "UTC")
        #expect(relocked?.kind == "relocked" && relocked?.1.summary == "games is shielded again")
        let emergency = notices.desktopNotice(
            for: PolicyNotice(kind: .emergencyStarted, store: "games", until: until, reason: "used by uid 0"),
            zone: "UTC")
        #expect(
            emergency?.1.summary == "games: emergency unlock until 17:40" && emergency?.1.urgency == .critical
        )
        #expect(
            notices.desktopNotice(for: PolicyNotice(kind: .clockJumped, reason: "jumped"), zone: "UTC") == nil
        )
    }
}
