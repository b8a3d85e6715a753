import Counting
import Foundation
import Notifications
import Shields
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

    @Test func relockWarningsSayWhenAndWhatHappensToRunningPrograms() throws {
        let notices = DesktopNotices(
            settings: NoticeSettings(), log: Logger(level: .error), sessionUsers: { [] })
        let relock = Date(timeIntervalSince1970: 1_764_610_800)  // 2025-12-01T17:40:00Z, 18:40 in Berlin
        let warning = PolicyNotice(
            kind: .relockWarning, store: "games", owner: "gate", until: relock,
            reason: "the unlock ends in 5 min; shielded again then")
        func text(before seconds: Double, _ running: RunningProgramAction?) throws -> DesktopNotice {
            let found = try #require(
                notices.desktopNotice(
                    for: warning, zone: "Europe/Berlin", now: relock.addingTimeInterval(-seconds),
                    running: running))
            #expect(found.kind == "warning")
            return found.1
        }
        let five = try text(before: 300, .terminate)
        #expect(five.summary == "games relock in 5 minutes, at 18:40")
        #expect(five.body == "Running games will be closed.")
        #expect(five.urgency == .normal)
        // Delivered a moment late, it still reads 5 minutes.
        #expect(try text(before: 298.5, .terminate).summary == "games relock in 5 minutes, at 18:40")
        let one = try text(before: 60, .stop)
        #expect(one.summary == "games relock in 1 minute, at 18:40")
        #expect(one.body == "Running games will be paused until the next unlock.")
        #expect(one.urgency == .critical)
        #expect(try text(before: 60, .leave).body == "Running games will be left running.")
        #expect(try text(before: 60, nil).body == "Save what you are doing.")
        // On by default; a store's list without "warning" turns them off.
        #expect(NoticeSettings().wants("warning", store: "games"))
        let chosen = try load(#"{"stores": {"games": ["unlocked", "relocked"]}}"#).notifications
        #expect(!chosen.wants("warning", store: "games"))
        #expect(
            try load(#"{"stores": {"games": ["warning"]}}"#).notifications.wants("warning", store: "games"))
    }
}
