import Formatting
import Foundation
@preconcurrency import Glibc
package import Synchronization

/// Who is on the other end of a control connection, from the kernel (`SO_PEERCRED`).
package struct PeerCredentials: Sendable, Equatable {
    package var pid: Int32
    package var uid: UInt32
    package var gid: UInt32
}

/// The control socket's limits, in one place. Any local user may connect, so every resource a
/// connection holds is bounded: time, bytes, and connections per user and in all.
package struct ControlLimits: Sendable {
    /// Longest request line, in bytes.
    package var maximumRequest = 16_384
    /// From accepting a connection to its complete request line (one deadline, not per byte).
    package var requestDeadline: Duration = .seconds(5)
    /// How long a client waits for the loop's answer before it is told the daemon is busy.
    package var answerDeadline: Duration = .seconds(30)
    /// For writing the answer back.
    package var writeDeadline: Duration = .seconds(5)
    /// Open connections per user. One more closes that user's oldest connection that has not
    /// sent its request yet (so a user's own idle connections never lock that user out).
    package var perUser = 8
    /// Open connections in all; past it the oldest idle connection is closed.
    package var total = 128
    /// After `accept` fails for want of descriptors, how long the listening socket rests.
    package var acceptBackoff: Duration = .milliseconds(100)

    package static let standard = ControlLimits()
}

/// One control request waiting for the daemon's answer. Answering never blocks: the answer is
/// handed to the server's thread, which writes it when the client can take it.
package final class ControlRequest: Sendable {
    /// What was asked, checked.
    package let command: ControlCommand
    package let peer: PeerCredentials
    /// Whether the peer may change the policy (root or the admin group).
    package let isAdmin: Bool
    /// Who asked, for the policy's record and the journal: `uid N` on the control socket,
    /// `mqtt PREFIX/command` from the broker.
    package let origin: String
    private let deliver: @Sendable (String) -> Void
    private let answered = Atomic<Bool>(false)

    package init(
        command: ControlCommand, peer: PeerCredentials, isAdmin: Bool, origin: String? = nil,
        deliver: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.command = command
        self.peer = peer
        self.isAdmin = isAdmin
        self.origin = origin ?? "uid \(peer.uid)"
        self.deliver = deliver
    }

    /// Sends the answer (one JSON object) back to the client; only the first answer counts.
    package func respond(_ json: String) {
        guard !answered.exchange(true, ordering: .acquiringAndReleasing) else { return }
        deliver(json)
    }
}

/// The daemon's Unix control socket: one JSON request line per connection, one JSON answer
/// line back. Any local user may connect (the socket is mode 0666); what they may do is decided
/// by the peer's credentials, which the kernel vouches for.
///
/// One thread serves every connection with `poll`, non-blocking: a client that hangs up, stalls
/// or floods costs at most its share of ``ControlLimits``, and the daemon's loop never waits
/// for a client (answers are queued here and written when the client can take them).
package final class ControlServer: Sendable {
    package let path: String
    package let limits: ControlLimits
    private let fd: Int32
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let stopped = Atomic<Bool>(false)
    private let adminGroupID: UInt32?
    /// Answers from the loop, by connection number, for the server thread to write.
    private let outbox = Mutex<[(id: UInt64, text: String)]>([])
    /// Connections open now (for tests and status).
    package let openConnections = Atomic<Int>(0)
    private let finished = DispatchSemaphore(value: 0)

    /// Binds the socket. A live daemon already on it is an error; a stale socket file is replaced.
    package init(path: String, adminGroup: String?, limits: ControlLimits = .standard) throws {
        self.path = path
        self.limits = limits
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
        if (try? ControlClient.send(.ping, socket: path, timeout: 1)) != nil {
            throw ControlSocketError(message: "another StepGate daemon is already serving \(path)")
        }
        unlink(path)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
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
        guard listen(fd, 64) == 0 else {
            close(fd)
            throw ControlSocketError(message: "cannot listen on \(path): \(String(cString: strerror(errno)))")
        }
        setNonBlocking(fd)
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else {
            close(fd)
            throw ControlSocketError(message: "pipe: \(String(cString: strerror(errno)))")
        }
        self.fd = fd
        (wakeRead, wakeWrite) = (ends[0], ends[1])
        for end in ends {
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
            setNonBlocking(end)
        }
    }

    /// Serves connections on a thread of its own until ``stop()``; each request goes to
    /// `handle`, which must not block and must answer it (from any thread).
    package func start(_ handle: @escaping @Sendable (ControlRequest) -> Void) {
        let thread = Thread { [self] in
            serve(handle)
            finished.signal()
        }
        thread.name = "stepgate-control"
        thread.start()
    }

    /// Stops serving, closes every connection and removes the socket file.
    package func stop() {
        guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        wake()
        _ = finished.wait(timeout: .now() + 2)
        unlink(path)
    }

    private func wake() {
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }

    // MARK: The server thread

    private struct Connection {
        package enum Phase { case reading, waiting, writing }
        package let fd: Int32
        package let id: UInt64
        package let peer: PeerCredentials
        package var phase: Phase = .reading
        package var deadline: ContinuousClock.Instant
        package var input: [UInt8] = []
        package var output: [UInt8] = []
        package var written = 0
    }

    private func serve(_ handle: @escaping @Sendable (ControlRequest) -> Void) {
        var connections: [Connection] = []
        var nextID: UInt64 = 0
        var restingUntil: ContinuousClock.Instant?
        var pollers: [pollfd] = []
        defer {
            for connection in connections { close(connection.fd) }
            openConnections.store(0, ordering: .relaxed)
            close(fd)
            close(wakeRead)
            close(wakeWrite)
        }

        /// Closes the connection at `index` (after a best-effort last line, if any).
        func drop(_ index: Int, saying text: String? = nil) {
            if let text { sendLine(connections[index].fd, text) }
            close(connections[index].fd)
            connections.remove(at: index)
        }

        /// Makes room for one more connection from `uid`: false when none can be made.
        func makeRoom(for uid: UInt32) -> Bool {
            let mine = connections.indices.filter { connections[$0].peer.uid == uid }
            if mine.count >= limits.perUser {
                guard let idle = mine.first(where: { connections[$0].phase == .reading }) else {
                    return false
                }
                drop(idle, saying: #"{"ok":false,"error":"closed: too many connections from this user"}"#)
            }
            if connections.count >= limits.total {
                guard let idle = connections.indices.first(where: { connections[$0].phase == .reading })
                else {
                    return false
                }
                drop(idle, saying: #"{"ok":false,"error":"closed: too many connections"}"#)
            }
            return true
        }

        func acceptAll() {
            while true {
                let client = accept(fd, nil, nil)
                if client < 0 {
                    switch errno {
                    case EINTR, ECONNABORTED: continue
                    case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                        // Out of descriptors: free the oldest idle connection, else rest a while
                        // (the listening socket stays readable, so polling it would spin).
                        if let idle = connections.indices.first(where: { connections[$0].phase == .reading })
                        {
                            drop(idle)
                            continue
                        }
                        restingUntil = .now + limits.acceptBackoff
                        return
                    default: return
                    }
                }
                _ = fcntl(client, F_SETFD, FD_CLOEXEC)
                setNonBlocking(client)
                guard let peer = peerCredentials(client) else {
                    sendLine(client, #"{"ok":false,"error":"cannot read the peer's credentials"}"#)
                    close(client)
                    continue
                }
                guard makeRoom(for: peer.uid) else {
                    sendLine(client, #"{"ok":false,"error":"too many requests in flight; try again"}"#)
                    close(client)
                    continue
                }
                nextID &+= 1
                connections.append(
                    Connection(fd: client, id: nextID, peer: peer, deadline: .now + limits.requestDeadline))
            }
        }

        /// Starts writing `text` to the connection at `index`.
        func answer(_ index: Int, _ text: String) {
            connections[index].phase = .writing
            connections[index].output = Array((text + "\n").utf8)
            connections[index].written = 0
            connections[index].deadline = .now + limits.writeDeadline
        }

        /// Reads what is there; true when the connection must close.
        func receive(_ index: Int) -> Bool {
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let n = buffer.withUnsafeMutableBytes {
                    recv(connections[index].fd, $0.baseAddress, $0.count, 0)
                }
                if n < 0 {
                    if errno == EINTR { continue }
                    return errno != EAGAIN && errno != EWOULDBLOCK
                }
                if n == 0 { return true }  // hung up before a whole line
                let chunk = buffer[0..<n]
                if let newline = chunk.firstIndex(of: 0x0A) {
                    connections[index].input += chunk[..<newline]
                    dispatch(index)
                    return false
                }
                connections[index].input += chunk
                if connections[index].input.count > limits.maximumRequest {
                    answer(index, #"{"ok":false,"error":"request line too long"}"#)
                    return false
                }
            }
        }

        func dispatch(_ index: Int) {
            let line = connections[index].input
            connections[index].input = []
            guard line.count <= limits.maximumRequest else {
                return answer(index, #"{"ok":false,"error":"request line too long"}"#)
            }
            switch ControlCommand.decode(line) {
            case .failure(let error):
                answer(index, "{\"ok\":false,\"error\":\(JSONLine.quoted(error.message))}")
            case .success(let command):
                let id = connections[index].id
                let peer = connections[index].peer
                connections[index].phase = .waiting
                connections[index].deadline = .now + limits.answerDeadline
                let request = ControlRequest(
                    command: command, peer: peer, isAdmin: isAdmin(peer),
                    deliver: { [self] text in
                        outbox.withLock { $0.append((id, text)) }
                        wake()
                    })
                handle(request)
            }
        }

        /// Writes what the client can take; true when the connection is done.
        func transmit(_ index: Int) -> Bool {
            while connections[index].written < connections[index].output.count {
                let c = connections[index]
                let n = c.output.withUnsafeBytes {
                    send(c.fd, $0.baseAddress! + c.written, $0.count - c.written, Int32(MSG_NOSIGNAL))
                }
                if n < 0 {
                    if errno == EINTR { continue }
                    return errno != EAGAIN && errno != EWOULDBLOCK
                }
                connections[index].written += n
            }
            return true
        }

        while !stopped.load(ordering: .acquiring) {
            let now = ContinuousClock.now
            if let until = restingUntil, now >= until { restingUntil = nil }
            pollers.removeAll(keepingCapacity: true)
            pollers.append(pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0))
            pollers.append(pollfd(fd: restingUntil == nil ? fd : -1, events: Int16(POLLIN), revents: 0))
            var nearest = now + .milliseconds(500)
            for c in connections {
                let events: Int32 =
                    switch c.phase {
                    case .reading: Int32(POLLIN)
                    case .waiting: 0  // hang-ups are reported anyway
                    case .writing: Int32(POLLOUT)
                    }
                pollers.append(pollfd(fd: c.fd, events: Int16(events), revents: 0))
                nearest = min(nearest, c.deadline)
            }
            if let until = restingUntil { nearest = min(nearest, until) }
            let wait = max(.zero, nearest - now)
            let milliseconds =
                Int32(wait.components.seconds * 1000 + wait.components.attoseconds / 1_000_000_000_000_000)
                + 1
            _ = poll(&pollers, nfds_t(pollers.count), milliseconds)
            if stopped.load(ordering: .acquiring) { break }

            // Answers from the loop.
            if pollers[0].revents != 0 {
                var sink = [UInt8](repeating: 0, count: 256)
                while sink.withUnsafeMutableBytes({ read(wakeRead, $0.baseAddress, $0.count) }) > 0 {}
            }
            let ready = outbox.withLock { box -> [(id: UInt64, text: String)] in
                defer { box.removeAll() }
                return box
            }
            // Per connection, what poll said (connections may move as others close below).
            var revents: [UInt64: Int16] = [:]
            for (offset, c) in connections.enumerated() where pollers[offset + 2].revents != 0 {
                revents[c.id] = pollers[offset + 2].revents
            }
            for (id, text) in ready {
                if let index = connections.firstIndex(where: { $0.id == id && $0.phase == .waiting }) {
                    answer(index, text)
                    revents[id, default: 0] |= Int16(POLLOUT)
                }
            }

            var index = 0
            while index < connections.count {
                let c = connections[index]
                let events = revents[c.id] ?? 0
                var done = false
                switch c.phase {
                case .reading:
                    if events != 0 { done = receive(index) }
                    if !done, connections[index].phase == .writing { done = transmit(index) }
                case .waiting:
                    // The client hung up before the answer: forget it (the answer is dropped).
                    if events & Int16(POLLHUP | POLLERR) != 0 { done = true }
                case .writing:
                    if events != 0 { done = transmit(index) }
                }
                if done {
                    drop(index)
                } else {
                    index += 1
                }
            }

            // Deadlines.
            let later = ContinuousClock.now
            index = 0
            while index < connections.count {
                guard connections[index].deadline <= later else {
                    index += 1
                    continue
                }
                switch connections[index].phase {
                case .reading:
                    drop(index, saying: #"{"ok":false,"error":"no complete request line in time"}"#)
                case .waiting:
                    answer(index, #"{"ok":false,"error":"the daemon did not answer in time"}"#)
                    if transmit(index) { drop(index) } else { index += 1 }
                case .writing:
                    drop(index)
                }
            }
            if acceptAllowed(pollers[1].revents, restingUntil) { acceptAll() }
            openConnections.store(connections.count, ordering: .relaxed)
        }
    }

    private func acceptAllowed(_ events: Int16, _ resting: ContinuousClock.Instant?) -> Bool {
        resting == nil && events & Int16(POLLIN) != 0
    }

    private func isAdmin(_ peer: PeerCredentials) -> Bool {
        if peer.uid == 0 { return true }
        guard let adminGroupID else { return false }
        if peer.gid == adminGroupID { return true }
        guard let user = getpwuid(peer.uid) else { return false }
        // Membership as the group database says (a user added to the group is an admin from
        // their next connection, without logging in again).
        var count: Int32 = 64
        var groups = [gid_t](repeating: 0, count: 64)
        if getgrouplist(user.pointee.pw_name, user.pointee.pw_gid, &groups, &count) < 0 {
            // More groups than room: `count` now says how many there are.
            groups = [gid_t](repeating: 0, count: Int(max(count, 64)))
            if getgrouplist(user.pointee.pw_name, user.pointee.pw_gid, &groups, &count) < 0 { return false }
        }
        return groups.prefix(Int(count)).contains(adminGroupID)
    }
}

private func setNonBlocking(_ fd: Int32) {
    _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
}

/// `SO_PEERCRED`: `struct ucred { pid_t pid; uid_t uid; gid_t gid; }`.
func peerCredentials(_ fd: Int32) -> PeerCredentials? {
    var raw = (Int32(0), UInt32(0), UInt32(0))
    var length = socklen_t(MemoryLayout.size(ofValue: raw))
    guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &raw, &length) == 0 else { return nil }
    return PeerCredentials(pid: raw.0, uid: raw.1, gid: raw.2)
}
