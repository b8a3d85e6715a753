internal import CSystemd
import Glibc

/// A call to `org.freedesktop.Notifications.Notify` on one bus, with sd-bus (libsystemd, opened
/// at the first call: ``LibSystemd``).
///
/// This runs with the credentials of the process that calls it: a bus authenticates its peer by
/// the kernel's credentials of the socket (`SO_PEERCRED`), and a user's session bus only lets
/// that user in. The daemon therefore never calls this itself for another user; it starts
/// `stepgate notify-helper`, which drops to the user before connecting (see
/// ``HelperTransport``).
public enum SessionBus {
    /// The user's session bus, where systemd-logind's `pam_systemd` and the desktop put it.
    public static func userBusAddress(uid: UInt32) -> String { "unix:path=/run/user/\(uid)/bus" }

    /// Sends `notice` to the notification server on `address` and returns the id it gave
    /// (`replacing` a previous id replaces that notification instead of adding one). Waits at
    /// most `timeout` for the connection, authentication and the answer together.
    public static func notify(
        _ notice: DesktopNotice, replacing: UInt32, address: String, timeout: Duration
    ) throws(NotificationError) -> UInt32 {
        let (seconds, attoseconds) = timeout.components
        let microseconds = UInt64(max(1, seconds * 1_000_000 + attoseconds / 1_000_000_000_000))
        let sd = try LibSystemd.load()
        var bus: OpaquePointer?
        try check(sd.new(&bus), "cannot create a bus connection")
        // Never flush on the way out: flushing waits for the authentication without a limit.
        defer { _ = sd.closeUnref(bus) }
        try check(sd.setAddress(bus, address), "invalid bus address \(address)")
        try check(sd.setBusClient(bus, 1), "cannot set up the bus connection")
        try check(sd.setMethodCallTimeout(bus, microseconds), "cannot set the timeout")
        try check(sd.start(bus), "cannot connect to \(address)")

        var message: OpaquePointer?
        try check(
            sd.newMethodCall(
                bus, &message, "org.freedesktop.Notifications", "/org/freedesktop/Notifications",
                "org.freedesktop.Notifications", "Notify"),
            "cannot build the Notify call")
        defer { _ = sd.messageUnref(message) }
        try append(sd, message, string: notice.appName)
        var replaces = replacing
        try check(sd.appendBasic(message, type("u"), &replaces), "cannot append")
        try append(sd, message, string: notice.icon)
        try append(sd, message, string: notice.summary)
        try append(sd, message, string: notice.body)
        try check(sd.openContainer(message, type("a"), "s"), "cannot append")
        for action in notice.actions {
            try append(sd, message, string: action.key)
            try append(sd, message, string: action.label)
        }
        try check(sd.closeContainer(message), "cannot append")
        try check(sd.openContainer(message, type("a"), "{sv}"), "cannot append")
        try check(sd.openContainer(message, type("e"), "sv"), "cannot append")
        try append(sd, message, string: "urgency")
        try check(sd.openContainer(message, type("v"), "y"), "cannot append")
        var urgency = notice.urgency.rawValue
        try check(sd.appendBasic(message, type("y"), &urgency), "cannot append")
        try check(sd.closeContainer(message), "cannot append")
        try check(sd.closeContainer(message), "cannot append")
        if let category = notice.category {
            try check(sd.openContainer(message, type("e"), "sv"), "cannot append")
            try append(sd, message, string: "category")
            try check(sd.openContainer(message, type("v"), "s"), "cannot append")
            try append(sd, message, string: category)
            try check(sd.closeContainer(message), "cannot append")
            try check(sd.closeContainer(message), "cannot append")
        }
        try check(sd.closeContainer(message), "cannot append")
        var expire = notice.expireTimeout
        try check(sd.appendBasic(message, type("i"), &expire), "cannot append")

        // Not sd_bus_call: it waits for the authentication without a limit (a bus that accepts
        // and never speaks would hold it for sd-bus's 25 s). The call goes out asynchronously and
        // this loop drives the connection until the answer or the deadline, whichever is first.
        let deadline = ContinuousClock.now + timeout
        let box = ReplyBox(sd)
        var slot: OpaquePointer?
        try check(
            sd.callAsync(
                bus, &slot, message, replyHandler, Unmanaged.passUnretained(box).toOpaque(), microseconds),
            "cannot send the Notify call")
        defer { _ = sd.slotUnref(slot) }
        while box.result == nil {
            let left = deadline - ContinuousClock.now
            guard left > .zero else {
                throw NotificationError(
                    "no answer from \(address) within \(microseconds / 1000) ms", timedOut: true)
            }
            let processed = sd.process(bus, nil)
            if processed < 0 {
                throw NotificationError(
                    "the connection to \(address) failed: \(String(cString: strerror(-processed)))",
                    timedOut: processed == -ETIMEDOUT)
            }
            if processed > 0 { continue }
            let (s, a) = left.components
            _ = sd.wait(bus, UInt64(max(1000, s * 1_000_000 + a / 1_000_000_000_000)))
        }
        switch box.result {
        case .success(let id): return id
        case .failure(let error):
            throw NotificationError("Notify on \(address) failed: \(error.message)", timedOut: error.timedOut)
        case nil: throw NotificationError("no answer from \(address)")
        }
    }

    private static func type(_ letter: Unicode.Scalar) -> CChar { CChar(truncatingIfNeeded: letter.value) }

    private static func append(_ sd: LibSystemd, _ message: OpaquePointer?, string: String)
        throws(NotificationError)
    {
        let result = string.withCString { sd.appendBasic(message, type("s"), $0) }
        try check(result, "cannot append a string")
    }

    private static func check(_ result: Int32, _ what: @autoclosure () -> String) throws(NotificationError) {
        guard result < 0 else { return }
        throw NotificationError(
            "\(what()): \(String(cString: strerror(-result)))", timedOut: result == -ETIMEDOUT)
    }
}

/// The answer to the Notify call, filled in by ``replyHandler``.
private final class ReplyBox {
    let sd: LibSystemd
    var result: Result<UInt32, NotificationError>?
    init(_ sd: LibSystemd) { self.sd = sd }
}

/// Reads the Notify answer (an id) or its error into the ``ReplyBox``.
private let replyHandler: sd_bus_message_handler_t = { reply, userdata, _ in
    guard let userdata else { return 0 }
    let box = Unmanaged<ReplyBox>.fromOpaque(userdata).takeUnretainedValue()
    let sd = box.sd
    if sd.isMethodError(reply, nil) != 0 {
        let error = sd.getError(reply)
        let name = error?.pointee.name.map { String(cString: $0) } ?? "error"
        let text = error?.pointee.message.map { String(cString: $0) } ?? ""
        let timedOut =
            name == "org.freedesktop.DBus.Error.Timeout" || name == "org.freedesktop.DBus.Error.NoReply"
        box.result = .failure(NotificationError("\(name): \(text)", timedOut: timedOut))
        return 1
    }
    var id: UInt32 = 0
    let read = sd.readBasic(reply, CChar(UInt8(ascii: "u")), &id)
    box.result = read > 0 ? .success(id) : .failure(NotificationError("the Notify answer is not a uint32"))
    return 1
}
