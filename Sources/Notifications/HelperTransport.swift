import Glibc

/// Reaches a user's session bus as that user: starts `stepgate notify-helper`, which drops to
/// the user's uid and gid (no supplementary groups) before it connects, and kills it at the
/// deadline.
///
/// Why a process of its own rather than the daemon connecting: a session bus lets only its own
/// user in (it checks the peer's kernel credentials), so a root daemon must never present root's
/// identity there, and must not be the one that parses what comes back either. The bus at
/// `/run/user/UID/bus` belongs to the (possibly gated) user, who can replace it with anything:
/// a server that never answers, one that answers garbage, a link to another socket. The helper
/// meets all of that with only the user's own rights (it opens the path as the user, so a link
/// to a socket the user may not use fails), the daemon never waits on it (the dispatcher's
/// queue does, at most `deadline`), and a helper that hangs is killed.
public struct HelperTransport: NoticeTransport {
    /// The `stepgate` executable.
    public var executable: String
    /// How long one notice may take, start to answer; then the helper is killed.
    public var deadline: Duration

    public init(executable: String, deadline: Duration = .seconds(3)) {
        self.executable = executable
        self.deadline = deadline
    }

    public func send(_ notice: DesktopNotice, to recipient: NoticeRecipient, replacing: UInt32)
        throws(NotificationError) -> UInt32
    {
        guard recipient.uid != 0 else { throw NotificationError("StepGate never speaks to a bus as root") }
        let (seconds, attoseconds) = deadline.components
        let milliseconds = seconds * 1000 + attoseconds / 1_000_000_000_000_000
        // The helper's own timeout is shorter than the deadline, so it normally reports one.
        let arguments =
            [
                executable, "notify-helper", "--uid", String(recipient.uid), "--gid", String(recipient.gid),
                "--address", recipient.address, "--replaces", String(replacing),
                "--timeout-ms", String(max(100, milliseconds - 300)),
            ] + notice.arguments
        let result = try Spawn.run(arguments, deadline: deadline)
        if result.killed {
            throw NotificationError(
                "the notification helper for uid \(recipient.uid) did not finish within \(milliseconds) ms; killed",
                timedOut: true)
        }
        let text = result.output.trimmingWhitespace
        guard result.status == 0, let id = UInt32(text) else {
            throw NotificationError(
                text.isEmpty ? "the notification helper failed (status \(result.status))" : text,
                timedOut: text.contains("Connection timed out") || text.contains("timed out"))
        }
        return id
    }
}

/// `notify-send`, the fallback for a daemon that runs in the user's own session without the
/// helper (its bus is the one in `DBUS_SESSION_BUS_ADDRESS`).
public struct NotifySendTransport: NoticeTransport {
    public var executable: String
    public var deadline: Duration

    public init(executable: String = "/usr/bin/notify-send", deadline: Duration = .seconds(3)) {
        self.executable = executable
        self.deadline = deadline
    }

    public func send(_ notice: DesktopNotice, to recipient: NoticeRecipient, replacing: UInt32)
        throws(NotificationError) -> UInt32
    {
        guard geteuid() == recipient.uid, access(executable, X_OK) == 0 else {
            throw NotificationError(
                NoticeDispatcher.unavailable + "notify-send cannot reach uid \(recipient.uid)")
        }
        let urgency = ["low", "normal", "critical"][Int(notice.urgency.rawValue)]
        let result = try Spawn.run(
            [executable, "--app-name", notice.appName, "--urgency", urgency, notice.summary, notice.body],
            deadline: deadline, environment: ["DBUS_SESSION_BUS_ADDRESS=\(recipient.address)"])
        guard !result.killed, result.status == 0 else {
            throw NotificationError(
                "notify-send failed: \(result.output.trimmingWhitespace)", timedOut: result.killed)
        }
        return 0
    }
}

extension String {
    fileprivate var trimmingWhitespace: String {
        var scalars = Substring(self)
        while let first = scalars.first, first.isWhitespace { scalars.removeFirst() }
        while let last = scalars.last, last.isWhitespace { scalars.removeLast() }
        return String(scalars)
    }
}

/// posix_spawn with a hard deadline (SIGKILL), signals at their defaults in the child, a fixed
/// small environment, output (stdout and stderr) captured up to 16 KB.
enum Spawn {
    struct Result {
        var status: Int32
        var output: String
        var killed: Bool
    }

    static func run(_ arguments: [String], deadline: Duration, environment: [String] = [])
        throws(NotificationError) -> Result
    {
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else {
            throw NotificationError(
                NoticeDispatcher.unavailable + "pipe: \(String(cString: strerror(errno)))")
        }
        let (readEnd, writeEnd) = (ends[0], ends[1])
        // Close-on-exec, so other children never inherit this pipe and hold it open.
        _ = fcntl(readEnd, F_SETFD, FD_CLOEXEC)
        _ = fcntl(writeEnd, F_SETFD, FD_CLOEXEC)
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, writeEnd, 1)
        posix_spawn_file_actions_adddup2(&actions, writeEnd, 2)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var all = sigset_t()
        sigfillset(&all)
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))
        let argv = arguments.map { strdup($0) } + [nil]
        let envp =
            (["PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"] + environment).map { strdup($0) } + [nil]
        defer {
            for p in argv { free(p) }
            for p in envp { free(p) }
        }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, arguments[0], &actions, &attributes, argv, envp)
        close(writeEnd)
        defer { close(readEnd) }
        guard spawned == 0 else {
            throw NotificationError(
                NoticeDispatcher.unavailable
                    + "cannot start \(arguments[0]): \(String(cString: strerror(spawned)))")
        }
        _ = fcntl(readEnd, F_SETFL, fcntl(readEnd, F_GETFL) | O_NONBLOCK)
        var output: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        var status: Int32 = 0
        var killed = false
        let end = ContinuousClock.now + deadline
        while true {
            var poller = pollfd(fd: readEnd, events: Int16(POLLIN), revents: 0)
            _ = poll(&poller, 1, 10)
            while true {
                let n = buffer.withUnsafeMutableBytes { read(readEnd, $0.baseAddress, $0.count) }
                if n <= 0 { break }
                if output.count < 16_384 { output += buffer[0..<min(n, 16_384 - output.count)] }
            }
            let waited = waitpid(pid, &status, WNOHANG)
            if waited == pid { break }
            if waited < 0 && errno != EINTR { break }
            if !killed && ContinuousClock.now >= end {
                kill(pid, SIGKILL)
                killed = true
            }
        }
        let code = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        return Result(status: code, output: String(decoding: output, as: UTF8.self), killed: killed)
    }
}
