import CSystemd
import Foundation
import Glibc
import Notifications
import StepGateTestSupport
import Synchronization

/// Whether a private session bus can be started here.
let dbusDaemonAvailable = FileManager.default.isExecutableFile(atPath: "/usr/bin/dbus-daemon")

struct FixtureError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A private session bus (``PrivateBus``) on a socket in a temporary folder.
final class PrivateSessionBus {
    let folder: URL
    let process = Process()
    var socketPath: String { folder.appendingPathComponent("bus").path }
    var address: String { "unix:path=\(socketPath)" }

    init() throws {
        folder = try TemporaryFolders.make("bus")
        let command = try PrivateBus.command(socket: socketPath)
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        for _ in 0..<200 where !FileManager.default.fileExists(atPath: socketPath) { usleep(10_000) }
        // The file appears at bind(), before listen(): ready once a connection is accepted.
        for _ in 0..<300 where !PrivateSessionBus.accepts(socketPath) { usleep(10_000) }
        guard PrivateSessionBus.accepts(socketPath) else {
            throw FixtureError("dbus-daemon does not accept connections on \(socketPath)")
        }
    }

    static func accepts(_ path: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, byte) in path.utf8.enumerated() { raw[i] = byte }
        }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        } == 0
    }

    deinit {
        // SIGKILL: the bus may inherit a blocked SIGTERM from the test runner.
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        TemporaryFolders.remove(folder)
    }
}

/// One Notify call as the server received it.
struct ReceivedNotice: Sendable, Equatable {
    var appName: String
    var replacesID: UInt32
    var icon: String
    var summary: String
    var body: String
    var actions: [String]
    var urgency: UInt8?
    var category: String?
    var expireTimeout: Int32
}

/// A small notification server on a bus, written with sd-bus: owns
/// `org.freedesktop.Notifications`, records every Notify call and answers with an id (the
/// replaced one, or a new one), or never answers when `answering` is false.
final class TestNotificationServer: @unchecked Sendable {
    let received = Mutex<[ReceivedNotice]>([])
    let answering: Bool
    private let nextID = Mutex<UInt32>(1)
    private let stop = Atomic<Bool>(false)
    private var bus: OpaquePointer?
    private var slot: OpaquePointer?
    private var thread: Thread?
    private let stopped = DispatchSemaphore(value: 0)

    init(address: String, answering: Bool = true) throws {
        self.answering = answering
        try check(sd_bus_new(&bus), "sd_bus_new")
        try check(sd_bus_set_address(bus, address), "set_address")
        try check(sd_bus_set_bus_client(bus, 1), "set_bus_client")
        try check(sd_bus_start(bus), "start")
        try check(sd_bus_request_name(bus, "org.freedesktop.Notifications", 0), "request_name")
        let me = Unmanaged.passUnretained(self).toOpaque()
        try check(
            sd_bus_add_object(bus, &slot, "/org/freedesktop/Notifications", serverCallback, me), "add_object")
        let thread = Thread { [self] in
            while !stop.load(ordering: .acquiring) {
                let r = sd_bus_process(bus, nil)
                if r > 0 { continue }
                if r < 0 { break }
                _ = sd_bus_wait(bus, 50_000)
            }
            stopped.signal()
        }
        self.thread = thread
        thread.start()
    }

    func shutDown() {
        stop.store(true, ordering: .releasing)
        stopped.wait()
        sd_bus_slot_unref(slot)
        sd_bus_flush_close_unref(bus)
    }

    fileprivate func handle(_ message: OpaquePointer?) -> Int32 {
        guard let member = sd_bus_message_get_member(message), String(cString: member) == "Notify" else {
            return 0
        }
        func string() -> String {
            var pointer: UnsafePointer<CChar>?
            guard sd_bus_message_read_basic(message, CChar(UInt8(ascii: "s")), &pointer) > 0, let pointer
            else {
                return "<unreadable>"
            }
            return String(cString: pointer)
        }
        var notice = ReceivedNotice(
            appName: "", replacesID: 0, icon: "", summary: "", body: "", actions: [], urgency: nil,
            category: nil,
            expireTimeout: 0)
        notice.appName = string()
        sd_bus_message_read_basic(message, CChar(UInt8(ascii: "u")), &notice.replacesID)
        notice.icon = string()
        notice.summary = string()
        notice.body = string()
        sd_bus_message_enter_container(message, CChar(UInt8(ascii: "a")), "s")
        while true {
            var pointer: UnsafePointer<CChar>?
            guard sd_bus_message_read_basic(message, CChar(UInt8(ascii: "s")), &pointer) > 0, let pointer
            else {
                break
            }
            notice.actions.append(String(cString: pointer))
        }
        sd_bus_message_exit_container(message)
        sd_bus_message_enter_container(message, CChar(UInt8(ascii: "a")), "{sv}")
        while sd_bus_message_enter_container(message, CChar(UInt8(ascii: "e")), "sv") > 0 {
            let key = string()
            var type: CChar = 0
            var contents: UnsafePointer<CChar>?
            sd_bus_message_peek_type(message, &type, &contents)
            let signature = contents.map { String(cString: $0) } ?? ""
            sd_bus_message_enter_container(message, CChar(UInt8(ascii: "v")), signature)
            if key == "urgency" && signature == "y" {
                var byte: UInt8 = 0
                sd_bus_message_read_basic(message, CChar(UInt8(ascii: "y")), &byte)
                notice.urgency = byte
            } else if key == "category" && signature == "s" {
                notice.category = string()
            } else {
                sd_bus_message_skip(message, signature)
            }
            sd_bus_message_exit_container(message)
            sd_bus_message_exit_container(message)
        }
        sd_bus_message_exit_container(message)
        sd_bus_message_read_basic(message, CChar(UInt8(ascii: "i")), &notice.expireTimeout)
        received.withLock { $0.append(notice) }
        guard answering else { return 1 }  // handled, never answered
        var id = notice.replacesID
        if id == 0 {
            id = nextID.withLock { next in
                defer { next += 1 }
                return next
            }
        }
        var reply: OpaquePointer?
        guard sd_bus_message_new_method_return(message, &reply) >= 0 else { return -1 }
        defer { sd_bus_message_unref(reply) }
        sd_bus_message_append_basic(reply, CChar(UInt8(ascii: "u")), &id)
        sd_bus_send(sd_bus_message_get_bus(message), reply, nil)
        return 1
    }

    private func check(_ result: Int32, _ what: String) throws {
        if result < 0 { throw FixtureError("\(what): \(String(cString: strerror(-result)))") }
    }
}

private let serverCallback: sd_bus_message_handler_t = { message, userdata, _ in
    guard let userdata else { return 0 }
    return Unmanaged<TestNotificationServer>.fromOpaque(userdata).takeUnretainedValue().handle(message)
}

/// A Unix socket that accepts connections into its backlog and never says a word: a session bus
/// a gated user could put at /run/user/UID/bus.
final class SilentSocket {
    let path: String
    private let fd: Int32

    init(folder: URL) throws {
        path = folder.appendingPathComponent("silent-bus").path
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, byte) in path.utf8.enumerated() { raw[i] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0, listen(fd, 64) == 0 else { throw FixtureError("cannot listen on \(path)") }
    }

    var address: String { "unix:path=\(path)" }

    deinit { close(fd) }
}

/// Calls the bus from this process whatever uid the recipient has (the tests' stand-in for the
/// helper, which changes uid).
struct InProcessTransport: NoticeTransport {
    var timeout: Duration

    func send(_ notice: DesktopNotice, to recipient: NoticeRecipient, replacing: UInt32)
        throws(NotificationError)
        -> UInt32
    {
        try SessionBus.notify(notice, replacing: replacing, address: recipient.address, timeout: timeout)
    }
}
