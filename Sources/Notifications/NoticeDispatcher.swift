import Dispatch
import Glibc
import Synchronization

/// Who a notice is for: a user and the bus their desktop listens on.
public struct NoticeRecipient: Sendable, Hashable {
    public var uid: UInt32
    public var gid: UInt32
    /// The D-Bus address of the user's session bus.
    public var address: String

    public init(uid: UInt32, gid: UInt32, address: String? = nil) {
        self.uid = uid
        self.gid = gid
        self.address = address ?? SessionBus.userBusAddress(uid: uid)
    }
}

/// A way to put a notice on a user's screen. It may block up to its own deadline; the
/// dispatcher calls it off the caller's thread.
public protocol NoticeTransport: Sendable {
    /// Delivers `notice` and returns the server's id for it.
    func send(_ notice: DesktopNotice, to recipient: NoticeRecipient, replacing: UInt32)
        throws(NotificationError)
        -> UInt32
}

/// Notices to users' desktops, off the caller's path: ``post(_:to:key:)`` only queues (it
/// never waits on a bus), each user has a queue of their own (a user whose bus never answers
/// delays only their own notices, each by at most the transport's deadline), at most
/// ``maximumPending`` wait per user, and a notice with a key goes out at most once per
/// ``minimumInterval`` for that user and key (a launcher retrying in a loop gets one). Each
/// new notice replaces the user's previous StepGate notice (`replaces_id`) instead of stacking.
public final class NoticeDispatcher: Sendable {
    /// What became of a posted notice at once.
    public enum Posted: Sendable, Equatable {
        case queued
        /// The same key went to this user less than ``minimumInterval`` ago.
        case rateLimited
        /// Too many of this user's notices are still waiting (their bus is slow or stuck).
        case busy
    }

    /// What became of a queued notice in the end.
    public enum Outcome: Sendable, Equatable {
        case delivered(uid: UInt32, id: UInt32, summary: String)
        case failed(uid: UInt32, summary: String, NotificationError)
    }

    public let minimumInterval: Duration
    public let maximumPending: Int
    private let transports: [any NoticeTransport]
    private let now: @Sendable () -> Duration
    private let report: @Sendable (Outcome) -> Void

    private struct RateKey: Hashable {
        var uid: UInt32
        var key: String
    }
    private struct State {
        var lastPosted: [RateKey: Duration] = [:]
        var lastID: [UInt32: UInt32] = [:]
        var pending: [UInt32: Int] = [:]
        var queues: [UInt32: DispatchQueue] = [:]
    }
    private struct RefusedPost: Error {
        var reason: Posted
    }
    private let state = Mutex(State())
    private let group = DispatchGroup()

    /// - Parameters:
    ///   - transports: Tried in order; the next one only when a transport is unavailable (it
    ///     could not start), never after a bus was reached or timed out.
    ///   - now: A monotonic clock (injected in tests).
    ///   - report: Told every outcome (for the log), on the user's queue.
    public init(
        transports: [any NoticeTransport], minimumInterval: Duration = .seconds(60), maximumPending: Int = 4,
        now: @escaping @Sendable () -> Duration = NoticeDispatcher.monotonicNow,
        report: @escaping @Sendable (Outcome) -> Void = { _ in }
    ) {
        self.transports = transports
        self.minimumInterval = minimumInterval
        self.maximumPending = maximumPending
        self.now = now
        self.report = report
    }

    /// `CLOCK_MONOTONIC`.
    public static let monotonicNow: @Sendable () -> Duration = {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return .seconds(spec.tv_sec) + .nanoseconds(spec.tv_nsec)
    }

    /// Queues `notice` for `recipient`; returns at once. `key` (e.g. `deny:games`) rate-limits
    /// repeats; `nil` never limits.
    @discardableResult
    public func post(_ notice: DesktopNotice, to recipient: NoticeRecipient, key: String?) -> Posted {
        let uid = recipient.uid
        let time = now()
        let decision: Result<DispatchQueue, RefusedPost> = state.withLock { s in
            let rateKey = key.map { RateKey(uid: uid, key: $0) }
            if let rateKey, let last = s.lastPosted[rateKey], time - last < minimumInterval {
                return .failure(RefusedPost(reason: .rateLimited))
            }
            guard s.pending[uid, default: 0] < maximumPending else {
                return .failure(RefusedPost(reason: .busy))
            }
            if let rateKey {
                if s.lastPosted.count >= 4096 {
                    let interval = minimumInterval
                    s.lastPosted = s.lastPosted.filter { time - $0.value < interval }
                }
                s.lastPosted[rateKey] = time
            }
            s.pending[uid, default: 0] += 1
            if let queue = s.queues[uid] { return .success(queue) }
            let queue = DispatchQueue(label: "stepgate.notices.\(uid)")
            s.queues[uid] = queue
            return .success(queue)
        }
        let queue: DispatchQueue
        switch decision {
        case .success(let found): queue = found
        case .failure(let refused): return refused.reason
        }
        queue.async(group: group) { [self] in
            let replacing = state.withLock { $0.lastID[uid] ?? 0 }
            var outcome = Outcome.failed(
                uid: uid, summary: notice.summary, NotificationError("no way to reach the desktop"))
            for transport in transports {
                do throws(NotificationError) {
                    let id = try transport.send(notice, to: recipient, replacing: replacing)
                    state.withLock { $0.lastID[uid] = id }
                    outcome = .delivered(uid: uid, id: id, summary: notice.summary)
                    break
                } catch {
                    outcome = .failed(uid: uid, summary: notice.summary, error)
                    if !(error.message.hasPrefix(NoticeDispatcher.unavailable)) { break }
                }
            }
            state.withLock { $0.pending[uid, default: 1] -= 1 }
            report(outcome)
        }
        return .queued
    }

    /// The prefix of an error meaning "this transport cannot be used here, try the next".
    public static let unavailable = "unavailable: "

    /// Waits until every queued notice is done (for tests and a clean stop); false on timeout.
    public func waitUntilIdle(timeout: Duration) -> Bool {
        let (seconds, attoseconds) = timeout.components
        let deadline =
            DispatchTime.now() + .nanoseconds(Int(seconds * 1_000_000_000 + attoseconds / 1_000_000_000))
        return group.wait(timeout: deadline) == .success
    }
}

/// Calls the user's bus from this process (a daemon running as that user, and tests).
public struct DirectTransport: NoticeTransport {
    public var timeout: Duration

    public init(timeout: Duration = .seconds(3)) { self.timeout = timeout }

    public func send(_ notice: DesktopNotice, to recipient: NoticeRecipient, replacing: UInt32)
        throws(NotificationError) -> UInt32
    {
        if geteuid() != recipient.uid {
            throw NotificationError(
                NoticeDispatcher.unavailable + "this process is uid \(geteuid()), not \(recipient.uid)")
        }
        return try SessionBus.notify(
            notice, replacing: replacing, address: recipient.address, timeout: timeout)
    }
}
