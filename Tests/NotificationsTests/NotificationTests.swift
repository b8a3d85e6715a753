import Foundation
import Glibc
import Notifications
import Synchronization
import Testing

private let shieldNotice = DesktopNotice(
    summary: "Games are shielded", body: "Walk 1200 more steps to unlock them (next unlock 18:40).",
    actions: [.init(key: "default", label: "Walk now"), .init(key: "close", label: "Close")],
    urgency: .critical,
    expireTimeout: 10_000, category: "x-stepgate.shield")

/// Notices on a real private session bus (`dbus-daemon --session`) with a notification server
/// written with sd-bus.
@Suite(
    "Desktop notifications on a private session bus",
    .enabled(if: dbusDaemonAvailable, "needs dbus-daemon (scripts/install-deps.sh installs it)"),
    .timeLimit(.minutes(4)))
struct NotificationTests {
    @Test func notifyCarriesSummaryBodyActionsUrgencyAndReplacesThePreviousOne() throws {
        let bus = try PrivateSessionBus()
        let server = try TestNotificationServer(address: bus.address)
        defer { server.shutDown() }
        let first = try SessionBus.notify(
            shieldNotice, replacing: 0, address: bus.address, timeout: .seconds(5))
        var second = shieldNotice
        second.summary = "Games unlocked until 18:40"
        second.urgency = .normal
        second.category = nil
        let replaced = try SessionBus.notify(
            second, replacing: first, address: bus.address, timeout: .seconds(5))
        #expect(replaced == first)
        let calls = server.received.withLock { $0 }
        #expect(calls.count == 2)
        #expect(
            calls.first
                == ReceivedNotice(
                    appName: "StepGate", replacesID: 0, icon: "", summary: "Games are shielded",
                    body: "Walk 1200 more steps to unlock them (next unlock 18:40).",
                    actions: ["default", "Walk now", "close", "Close"], urgency: 2,
                    category: "x-stepgate.shield",
                    expireTimeout: 10_000))
        #expect(calls.last?.replacesID == first)
        #expect(calls.last?.urgency == 1 && calls.last?.category == nil)
        #expect(calls.last?.summary == "Games unlocked until 18:40")
    }

    @Test func aLauncherRetryingInALoopGetsOneNoticeAndANewNoticeReplacesTheLast() throws {
        let bus = try PrivateSessionBus()
        let server = try TestNotificationServer(address: bus.address)
        defer { server.shutDown() }
        let clock = Mutex<Duration>(.seconds(100))
        let outcomes = Mutex<[NoticeDispatcher.Outcome]>([])
        let dispatcher = NoticeDispatcher(
            transports: [InProcessTransport(timeout: .seconds(5))], minimumInterval: .seconds(60),
            now: { clock.withLock { $0 } }, report: { outcome in outcomes.withLock { $0.append(outcome) } })
        let user = NoticeRecipient(uid: 1000, gid: 1000, address: bus.address)
        var posted: [NoticeDispatcher.Posted] = []
        for _ in 0..<20 { posted.append(dispatcher.post(shieldNotice, to: user, key: "deny:games")) }
        #expect(posted.first == .queued)
        #expect(posted.dropFirst().allSatisfy { $0 == .rateLimited })
        // Another store's denial is another key; another user is another limit.
        #expect(dispatcher.post(shieldNotice, to: user, key: "deny:social") == .queued)
        #expect(dispatcher.waitUntilIdle(timeout: .seconds(10)))
        // After the interval the same key goes out again.
        clock.withLock { $0 += .seconds(61) }
        #expect(dispatcher.post(shieldNotice, to: user, key: "deny:games") == .queued)
        #expect(dispatcher.waitUntilIdle(timeout: .seconds(10)))  // users' queues run side by side
        #expect(
            dispatcher.post(
                shieldNotice, to: NoticeRecipient(uid: 1001, gid: 1001, address: bus.address),
                key: "deny:games") == .queued)
        #expect(dispatcher.waitUntilIdle(timeout: .seconds(10)))
        let calls = server.received.withLock { $0 }
        #expect(calls.count == 4)
        // Each of user 1000's notices replaced the one before; user 1001 started afresh.
        #expect(calls.map(\.replacesID) == [0, 1, 1, 0])
        #expect(outcomes.withLock { $0 }.count == 4)
        #expect(
            outcomes.withLock { $0 }.allSatisfy {
                if case .delivered = $0 { return true }
                return false
            })
    }

    /// A gated user controls their session bus. One that never answers (a socket that accepts
    /// and stays silent, or a server that takes the call and never replies) must never hold up
    /// the caller, other users' notices, or pile up work.
    @Test func aBusThatNeverAnswersNeverHoldsUpTheCallerOrOtherUsers() throws {
        let bus = try PrivateSessionBus()
        let server = try TestNotificationServer(address: bus.address)
        defer { server.shutDown() }
        let silent = try SilentSocket(folder: bus.folder)
        let outcomes = Mutex<[NoticeDispatcher.Outcome]>([])
        let dispatcher = NoticeDispatcher(
            transports: [InProcessTransport(timeout: .milliseconds(800))], maximumPending: 3,
            report: { outcome in outcomes.withLock { $0.append(outcome) } })
        let gated = NoticeRecipient(uid: 2000, gid: 2000, address: silent.address)
        let other = NoticeRecipient(uid: 2001, gid: 2001, address: bus.address)

        let start = ContinuousClock.now
        var posted: [NoticeDispatcher.Posted] = []
        for index in 0..<10 { posted.append(dispatcher.post(shieldNotice, to: gated, key: "n\(index)")) }
        #expect(ContinuousClock.now - start < .milliseconds(100), "posting waited on the bus")
        #expect(posted.filter { $0 == .queued }.count == 3)
        #expect(posted.filter { $0 == .busy }.count == 7)

        // Another user's notice goes out while the gated user's bus is stuck.
        #expect(dispatcher.post(shieldNotice, to: other, key: nil) == .queued)
        let deadline = ContinuousClock.now + .seconds(5)
        while server.received.withLock({ $0.isEmpty }) && ContinuousClock.now < deadline { usleep(10_000) }
        #expect(ContinuousClock.now - start < .milliseconds(700), "the other user waited for the stuck bus")
        #expect(server.received.withLock { $0.count } == 1)

        // The stuck ones time out, one after another, each within the transport's deadline.
        #expect(dispatcher.waitUntilIdle(timeout: .seconds(10)))
        let elapsed = ContinuousClock.now - start
        #expect(elapsed >= .milliseconds(2400) && elapsed < .seconds(5), "\(elapsed)")
        let failures = outcomes.withLock { $0 }.compactMap { outcome -> NotificationError? in
            if case .failed(uid: 2000, _, let error) = outcome { return error }
            return nil
        }
        #expect(failures.count == 3)
        #expect(failures.allSatisfy { $0.timedOut }, "\(failures)")
    }

    @Test func aServerThatTakesTheCallAndNeverRepliesTimesOut() throws {
        let bus = try PrivateSessionBus()
        let server = try TestNotificationServer(address: bus.address, answering: false)
        defer { server.shutDown() }
        let start = ContinuousClock.now
        let error = #expect(throws: NotificationError.self) {
            _ = try SessionBus.notify(
                shieldNotice, replacing: 0, address: bus.address, timeout: .milliseconds(500))
        }
        #expect(error?.timedOut == true, "\(String(describing: error))")
        #expect(ContinuousClock.now - start < .seconds(2))
        #expect(server.received.withLock { $0.count } == 1)
    }

    @Test func noBusAtTheAddressIsAClearError() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("no-such-bus-\(getpid())")
        let error = #expect(throws: NotificationError.self) {
            _ = try SessionBus.notify(
                shieldNotice, replacing: 0, address: "unix:path=\(folder.path)/bus", timeout: .seconds(1))
        }
        #expect(
            error?.message.contains("cannot connect to unix:path=") == true, "\(String(describing: error))")
    }

    @Test func noticesRoundTripThroughTheHelpersArguments() throws {
        let (notice, other) = try DesktopNotice.parse(shieldNotice.arguments + ["--uid", "1000"])
        #expect(notice == shieldNotice)
        #expect(other == ["uid": "1000"])
        #expect(throws: NotificationError.self) { _ = try DesktopNotice.parse(["--urgency", "7"]) }
        #expect(throws: NotificationError.self) { _ = try DesktopNotice.parse(["--action", "=label"]) }
        let long = DesktopNotice(summary: String(repeating: "é", count: 2000) + "\0x")
        #expect(long.summary.utf8.count == DesktopNotice.maximumText)
    }
}
