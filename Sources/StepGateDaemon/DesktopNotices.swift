package import Counting
import Formatting
package import Foundation
@preconcurrency import Glibc
package import Notifications
package import Shields
package import TypedJSON
package import UnlockPolicy

/// The `notifications` section of the daemon's configuration:
///
/// ```json
/// "notifications": {
///   "busAddress": "unix:path=/run/user/%u/bus",
///   "minimumIntervalSeconds": 60,
///   "stores": { "games": ["denied", "unlocked", "warning", "relocked"] }
/// }
/// ```
///
/// `%u` is the user's id. A store not listed gets every kind; `[]` turns its notices off.
package struct NoticeSettings: Equatable {
    /// Which notices exist: a denied launch, an unlock (goal reached, extended), the warnings 5
    /// minutes and 1 minute before a timed unlock relocks, the store shielded again, a schedule
    /// starting, a skipped occurrence, an emergency unlock.
    package static let kinds: Set<String> = [
        "denied", "unlocked", "warning", "relocked", "schedule", "skipped", "emergency",
    ]

    package var busAddress = "unix:path=/run/user/%u/bus"
    package var minimumIntervalSeconds = 60.0
    package var stores: [String: Set<String>] = [:]

    package func wants(_ kind: String, store: String?) -> Bool {
        guard let store, let chosen = stores[store] else { return true }
        return chosen.contains(kind)
    }

    package func address(uid: UInt32) -> String {
        busAddress.replacingOccurrences(of: "%u", with: String(uid))
    }

    package static func parse(_ value: JSONValue?, policy: PolicyConfiguration) throws -> NoticeSettings {
        var settings = NoticeSettings()
        guard let value else { return settings }
        guard case .object(let list) = value else {
            throw JSONPathError(path: "notifications", message: "expected an object")
        }
        for (key, member) in list {
            let at = "notifications.\(key)"
            switch (key, member) {
            case ("busAddress", .string(let text)):
                guard text.hasPrefix("unix:path=/"), text.contains("%u") else {
                    throw JSONPathError(
                        path: at, message: "expected \"unix:path=/…%u…\" (%u is the user's id)")
                }
                settings.busAddress = text
            case ("minimumIntervalSeconds", .number(let seconds, _)):
                guard seconds >= 1, seconds <= 86_400 else {
                    throw JSONPathError(
                        path: at, message: "expected seconds from 1 to 86400, found \(seconds)")
                }
                settings.minimumIntervalSeconds = seconds
            case ("stores", .object(let stores)):
                for (store, list) in stores {
                    let storePath = "\(at).\(store)"
                    guard policy.store(named: store) != nil else {
                        throw JSONPathError(
                            path: storePath, message: "no store named \"\(store)\" in the policy")
                    }
                    guard case .array(let names) = list else {
                        throw JSONPathError(path: storePath, message: "expected a list of notice kinds")
                    }
                    var chosen: Set<String> = []
                    for (index, name) in names.enumerated() {
                        guard case .string(let kind) = name, NoticeSettings.kinds.contains(kind) else {
                            throw JSONPathError(
                                path: "\(storePath)[\(index)]",
                                message:
                                    "expected one of \(NoticeSettings.kinds.sorted().joined(separator: ", "))"
                            )
                        }
                        chosen.insert(kind)
                    }
                    settings.stores[store] = chosen
                }
            case ("busAddress", _), ("minimumIntervalSeconds", _), ("stores", _):
                throw JSONPathError(path: at, message: "wrong type")
            default:
                throw JSONPathError(
                    path: at, message: "unknown key; expected busAddress, minimumIntervalSeconds or stores")
            }
        }
        return settings
    }
}

/// What the gated person sees on their desktop: the shield screen for a denied launch and the
/// notices around an unlock, each also in the journal. Everything goes through a
/// ``NoticeDispatcher``, so nothing here waits on a user's bus.
package final class DesktopNotices: Sendable {
    private let dispatcher: NoticeDispatcher
    private let users: @Sendable () -> [UInt32]
    package let settings: NoticeSettings

    /// - Parameters:
    ///   - transports: How notices reach a bus; nil: the machine's (as root, the helper that
    ///     becomes the user; otherwise this process, then `notify-send`).
    ///   - sessionUsers: Who gets the policy's notices; by default every user with a runtime
    ///     folder (``sessionUsers()``).
    package init(
        settings: NoticeSettings, log: Logger, transports: [any NoticeTransport]? = nil,
        sessionUsers: @escaping @Sendable () -> [UInt32] = { DesktopNotices.sessionUsers() }
    ) {
        self.settings = settings
        users = sessionUsers
        var transports = transports ?? []
        if transports.isEmpty && geteuid() == 0 {
            // Root: speak to a user's bus only as that user, through the helper.
            transports.append(HelperTransport(executable: DesktopNotices.executable, deadline: .seconds(3)))
        } else if transports.isEmpty {
            transports.append(DirectTransport(timeout: .seconds(3)))
            transports.append(NotifySendTransport())
        }
        dispatcher = NoticeDispatcher(
            transports: transports,
            minimumInterval: .milliseconds(Int64(settings.minimumIntervalSeconds * 1000)),
            report: { outcome in
                switch outcome {
                case .delivered(let uid, let id, let summary):
                    log.debug("notice to uid \(uid) shown (id \(id)): \(summary)")
                case .failed(let uid, let summary, let error):
                    log.info("notice to uid \(uid) not shown (\(error)): \(summary)")
                }
            })
    }

    /// This program, for the helper (`/proc/self/exe` resolved, so an upgrade in place still
    /// finds a `stepgate`).
    package static var executable: String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? "/usr/bin/stepgate"
    }

    /// The shield screen for a launch the exec shield denied, to the user who tried; true when
    /// it was queued (not rate-limited, not refused).
    package func denied(
        _ denial: ExecDenial, store: String, message: DaemonConfiguration.Message?, stepsToGo: Int?,
        note: String?
    ) -> Bool {
        guard settings.wants("denied", store: store), let uid = denial.uid, uid != 0 else { return false }
        var body = message?.subtitle ?? "Walk to unlock it."
        if let stepsToGo, stepsToGo > 0 { body += "\n\(stepsToGo) steps to go." }
        if let note { body += "\n\(note)" }
        let notice = DesktopNotice(
            summary: message?.title ?? "\(store) is shielded", body: body,
            actions: [.init(key: "default", label: "Walk now"), .init(key: "close", label: "Close")],
            urgency: .normal, category: "x-stepgate.shield")
        let recipient = NoticeRecipient(uid: uid, gid: denial.gid ?? uid, address: settings.address(uid: uid))
        return dispatcher.post(notice, to: recipient, key: "denied:\(store)") == .queued
    }

    /// What a relock warning says happens to the store's running programs then (the exec
    /// shield's `running`); nil when the exec shield does not cover the store.
    package static func runningSentence(store: String, action: RunningProgramAction?) -> String? {
        switch action {
        case .terminate: "Running \(store) will be closed."
        case .stop: "Running \(store) will be paused until the next unlock."
        case .leave: "Running \(store) will be left running."
        case nil: nil
        }
    }

    /// A policy notice for the desktop, or nil when it is only for the journal. `now` (for the
    /// minutes left before a relock) and `running` (what then happens to the store's running
    /// programs, nil when the exec shield does not cover it) are for relock warnings.
    package func desktopNotice(
        for notice: PolicyNotice, zone: String, now: Date = Date(), running: RunningProgramAction? = nil
    ) -> (kind: String, DesktopNotice)? {
        guard let store = notice.store else { return nil }
        let formatter = DateFormatter()
        formatter.dateFormat = "HH:mm"
        formatter.timeZone = TimeZone(identifier: zone) ?? TimeZone(secondsFromGMT: 0)
        let until = notice.until.map { " until \(formatter.string(from: $0))" } ?? ""
        switch notice.kind {
        case .relockWarning:
            guard let relock = notice.until else { return nil }
            // Whole minutes, rounded up: a warning delivered a moment late still reads "5 minutes".
            let minutes = max(1, Int((relock.timeIntervalSince(now) / 60).rounded(.up)))
            let summary =
                "\(store) relock in \(minutes) minute\(minutes == 1 ? "" : "s"), at \(formatter.string(from: relock))"
            return (
                "warning",
                DesktopNotice(
                    summary: summary,
                    body: DesktopNotices.runningSentence(store: store, action: running)
                        ?? "Save what you are doing.",
                    urgency: minutes <= 1 ? .critical : .normal, category: "x-stepgate.relock")
            )
        case .ownerRemoved where notice.owner == "gate", .unlockExtended:
            return ("unlocked", DesktopNotice(summary: "\(store) unlocked\(until)", body: notice.reason))
        case .ownerAdded where notice.owner == "gate":
            return ("relocked", DesktopNotice(summary: "\(store) is shielded again", body: notice.reason))
        case .ownerAdded where notice.owner?.hasPrefix("schedule:") == true:
            return ("schedule", DesktopNotice(summary: "\(store): schedule starting", body: notice.reason))
        case .skipped:
            return ("skipped", DesktopNotice(summary: "\(store): skip used", body: notice.reason))
        case .emergencyStarted:
            return (
                "emergency",
                DesktopNotice(
                    summary: "\(store): emergency unlock\(until)", body: notice.reason, urgency: .critical)
            )
        default:
            return nil
        }
    }

    /// A policy notice to every user with a session bus (logged in on this machine), except
    /// root.
    package func policy(
        _ notice: PolicyNotice, zone: String, now: Date = Date(), running: RunningProgramAction? = nil
    ) {
        guard let (kind, desktop) = desktopNotice(for: notice, zone: zone, now: now, running: running),
            settings.wants(kind, store: notice.store)
        else { return }
        for uid in users() {
            let gid = getpwuid(uid)?.pointee.pw_gid ?? uid
            dispatcher.post(
                desktop, to: NoticeRecipient(uid: uid, gid: gid, address: settings.address(uid: uid)),
                key: nil)
        }
    }

    /// The users with a runtime folder (`/run/user/UID`), root excluded.
    package static func sessionUsers() -> [UInt32] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/run/user")) ?? []
        return names.compactMap(UInt32.init).filter { $0 != 0 }.sorted()
    }
}
