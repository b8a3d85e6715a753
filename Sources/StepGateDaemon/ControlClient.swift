import Formatting
package import Foundation
@preconcurrency import Glibc

/// A `sockaddr_un` for `path` (a leading NUL byte selects the abstract namespace).
package func unixAddress(_ path: String) throws -> sockaddr_un {
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

/// Reads one line from a blocking socket (the client side).
private func readLine(_ fd: Int32, limit: Int = 1 << 20) -> String? {
    var data: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while data.count < limit {
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n < 0 && errno == EINTR { continue }
        if n <= 0 { break }
        if let newline = buffer[0..<n].firstIndex(of: 0x0A) {
            data += buffer[0..<newline]
            return String(decoding: data, as: UTF8.self)
        }
        data += buffer[0..<n]
    }
    return data.isEmpty ? nil : String(decoding: data, as: UTF8.self)
}

/// Writes a line without ever raising SIGPIPE; best effort on a non-blocking socket.
func sendLine(_ fd: Int32, _ text: String) {
    var line = text + "\n"
    line.withUTF8 { bytes in
        var offset = 0
        while offset < bytes.count {
            let n = send(fd, bytes.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            offset += n
        }
    }
}

/// The client side: send one request, read one answer.
package enum ControlClient {
    /// Why a client must not talk to a socket served by `serverUID`: only root's daemon, or one
    /// the client's own user runs, is believed — except for `status`, which changes nothing and
    /// is answered with whose daemon it is (root asking a daemon a user runs to try StepGate).
    package static func refusal(
        serverUID: UInt32, clientUID: UInt32, path: String, command: ControlCommand? = nil
    ) -> String? {
        guard serverUID != 0, serverUID != clientUID else { return nil }
        if case .status = command { return nil }
        return "the socket \(path) is served by uid \(serverUID), not by root: not the StepGate daemon; "
            + "refusing to talk to it (check who can write its folder)"
    }

    /// Sends `request` and returns the answer object.
    package static func send(_ command: ControlCommand, socket path: String, timeout: Double = 35) throws
        -> ControlAnswer
    {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else {
            throw ControlSocketError(message: "socket: \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var seconds = timeval(tv_sec: Int(timeout), tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &seconds, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &seconds, socklen_t(MemoryLayout<timeval>.size))
        var address = try unixAddress(path)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else {
            let code = errno
            let reason = String(cString: strerror(code))
            if code == EACCES || code == EPERM {
                throw ControlSocketError(
                    message:
                        "cannot reach the StepGate daemon at \(path): permission denied (the socket or its "
                        + "folder does not let this user in; ask the daemon's administrator)")
            }
            throw ControlSocketError(
                message:
                    "cannot reach the StepGate daemon at \(path): \(reason) (is 'stepgate daemon' running?)")
        }
        // Only root's daemon (or one this user runs) may be believed: a socket another user
        // bound in its place would swallow locks and answer status with anything.
        guard let server = peerCredentials(fd) else {
            throw ControlSocketError(
                message: "cannot tell who serves \(path) (SO_PEERCRED failed); not sending")
        }
        if let refusal = ControlClient.refusal(
            serverUID: server.uid, clientUID: getuid(), path: path, command: command)
        {
            throw ControlSocketError(message: refusal)
        }
        sendLine(fd, command.requestLine)
        guard let line = readLine(fd) else {
            throw ControlSocketError(message: "no answer from the daemon at \(path)")
        }
        do {
            var answer = try ControlAnswer(line: line)
            answer.serverUID = server.uid
            return answer
        } catch {
            throw ControlSocketError(
                message: "the daemon at \(path) answered with something that is not JSON: \(error)")
        }
    }
}
