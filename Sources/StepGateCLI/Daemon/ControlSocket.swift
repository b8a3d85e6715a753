import Foundation
@preconcurrency import Glibc
import Synchronization

/// Who is on the other end of a control connection, from the kernel (`SO_PEERCRED`).
struct PeerCredentials: Sendable, Equatable {
    var pid: Int32
    var uid: UInt32
    var gid: UInt32
}

/// One control request waiting for the daemon's answer.
final class ControlRequest: Sendable {
    /// The request object, as parsed from its JSON line.
    let command: String
    let fields: [String: String]
    let peer: PeerCredentials
    /// Whether the peer may change the policy (root or the admin group).
    let isAdmin: Bool
    private let reply = Mutex<String?>(nil)
    private let answered = DispatchSemaphore(value: 0)

    init(command: String, fields: [String: String], peer: PeerCredentials, isAdmin: Bool) {
        self.command = command
        self.fields = fields
        self.peer = peer
        self.isAdmin = isAdmin
    }

    /// Sends the answer (one JSON object) back to the client.
    func respond(_ json: String) {
        reply.withLock { $0 = json }
        answered.signal()
    }

    /// Waits for the answer; `nil` after `timeout` seconds.
    func wait(timeout: Double) -> String? {
        guard answered.wait(timeout: .now() + timeout) == .success else { return nil }
        return reply.withLock { $0 }
    }
}

/// A control socket error: what failed and why.
struct ControlSocketError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}

/// The daemon's Unix control socket: one JSON request line per connection, one JSON answer
/// line back. Any local user may connect (the socket is mode 0666); what they may do is decided
/// by the peer's credentials, which the kernel vouches for.
final class ControlServer: Sendable {
    let path: String
    private let fd: Int32
    private let stopped = Atomic<Bool>(false)
    private let adminGroupID: UInt32?

    /// Binds the socket. A live daemon already on it is an error; a stale socket file is replaced.
    init(path: String, adminGroup: String?) throws {
        self.path = path
        if let adminGroup {
            guard let group = getgrnam(adminGroup) else {
                throw ControlSocketError(message: "admin group '\(adminGroup)' does not exist")
            }
            adminGroupID = group.pointee.gr_gid
        } else {
            adminGroupID = nil
        }
        let directory = (path as NSString).deletingLastPathComponent
        if !directory.isEmpty {
            try? FileManager.default.createDirectory(
                atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        }
        if (try? ControlClient.send(["command": "ping"], socket: path, timeout: 1)) != nil {
            throw ControlSocketError(message: "another StepGate daemon is already serving \(path)")
        }
        unlink(path)
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else {
            throw ControlSocketError(message: "socket: \(String(cString: strerror(errno)))")
        }
        var address = try unixAddress(path)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0 else {
            let message = String(cString: strerror(errno))
            close(fd)
            throw ControlSocketError(message: "cannot bind \(path): \(message)")
        }
        chmod(path, 0o666)
        guard listen(fd, 16) == 0 else {
            close(fd)
            throw ControlSocketError(message: "cannot listen on \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// Serves connections on a thread of its own until ``stop()``; each request goes to
    /// `handle`, which must answer it.
    func start(_ handle: @escaping @Sendable (ControlRequest) -> Void) {
        let thread = Thread { [self] in serve(handle) }
        thread.name = "stepgate-control"
        thread.start()
    }

    func stop() {
        stopped.store(true, ordering: .relaxed)
        shutdown(fd, Int32(SHUT_RDWR))
        unlink(path)
    }

    private func serve(_ handle: @escaping @Sendable (ControlRequest) -> Void) {
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        while !stopped.load(ordering: .relaxed) {
            if poll(&poller, 1, 200) <= 0 { continue }
            let client = accept(fd, nil, nil)
            if client < 0 { continue }
            _ = fcntl(client, F_SETFD, FD_CLOEXEC)
            // Each connection gets its own short-lived thread, so a slow client cannot block others.
            let connection = Thread { [self] in
                converse(client, handle)
                close(client)
            }
            connection.start()
        }
        close(fd)
    }

    private func converse(_ client: Int32, _ handle: @Sendable (ControlRequest) -> Void) {
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        guard let peer = peerCredentials(client) else {
            writeLine(client, #"{"ok":false,"error":"cannot read the peer's credentials"}"#)
            return
        }
        guard let line = readLine(client) else {
            writeLine(client, #"{"ok":false,"error":"expected one JSON request line"}"#)
            return
        }
        guard let object = (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any],
            let command = object["command"] as? String
        else {
            writeLine(client, #"{"ok":false,"error":"expected a JSON object with a \"command\""}"#)
            return
        }
        var fields: [String: String] = [:]
        for (key, value) in object where key != "command" {
            if let text = value as? String {
                fields[key] = text
            } else if let number = value as? NSNumber {
                fields[key] = number.stringValue
            }
        }
        let request = ControlRequest(command: command, fields: fields, peer: peer, isAdmin: isAdmin(peer))
        handle(request)
        writeLine(
            client, request.wait(timeout: 30) ?? #"{"ok":false,"error":"the daemon did not answer in time"}"#)
    }

    private func isAdmin(_ peer: PeerCredentials) -> Bool {
        if peer.uid == 0 { return true }
        guard let adminGroupID else { return false }
        if peer.gid == adminGroupID { return true }
        guard let user = getpwuid(peer.uid) else { return false }
        var count: Int32 = 64
        var groups = [gid_t](repeating: 0, count: 64)
        if getgrouplist(user.pointee.pw_name, user.pointee.pw_gid, &groups, &count) < 0 { return false }
        return groups.prefix(Int(count)).contains(adminGroupID)
    }
}

/// `SO_PEERCRED`: `struct ucred { pid_t pid; uid_t uid; gid_t gid; }`.
private func peerCredentials(_ fd: Int32) -> PeerCredentials? {
    var raw = (Int32(0), UInt32(0), UInt32(0))
    var length = socklen_t(MemoryLayout.size(ofValue: raw))
    guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &raw, &length) == 0 else { return nil }
    return PeerCredentials(pid: raw.0, uid: raw.1, gid: raw.2)
}

/// A `sockaddr_un` for `path` (a leading NUL byte selects the abstract namespace).
func unixAddress(_ path: String) throws -> sockaddr_un {
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
        throw ControlSocketError(message: "socket path too long: \(path)")
    }
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        for (i, b) in bytes.enumerated() { raw[i] = b }
    }
    return address
}

private func readLine(_ fd: Int32, limit: Int = 65_536) -> String? {
    var data: [UInt8] = []
    var byte: UInt8 = 0
    while data.count < limit {
        let n = read(fd, &byte, 1)
        if n < 0 && errno == EINTR { continue }
        if n <= 0 { break }
        if byte == 0x0A { return String(decoding: data, as: UTF8.self) }
        data.append(byte)
    }
    return data.isEmpty ? nil : String(decoding: data, as: UTF8.self)
}

private func writeLine(_ fd: Int32, _ text: String) {
    var line = text + "\n"
    line.withUTF8 { _ = writeAll(fd, $0) }
}

/// The client side: send one request, read one answer.
enum ControlClient {
    /// Sends `request` and returns the answer object.
    static func send(_ request: [String: Any], socket path: String, timeout: Double = 35) throws -> [String:
        Any]
    {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else {
            throw ControlSocketError(message: "socket: \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var seconds = timeval(tv_sec: Int(timeout), tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &seconds, socklen_t(MemoryLayout<timeval>.size))
        var address = try unixAddress(path)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else {
            let reason = String(cString: strerror(errno))
            throw ControlSocketError(
                message:
                    "cannot reach the StepGate daemon at \(path): \(reason) (is 'stepgate daemon' running?)")
        }
        let data = try JSONSerialization.data(withJSONObject: request)
        writeLine(fd, String(decoding: data, as: UTF8.self))
        guard let line = readLine(fd),
            let answer = (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
        else {
            throw ControlSocketError(message: "no valid answer from the daemon at \(path)")
        }
        return answer
    }
}
