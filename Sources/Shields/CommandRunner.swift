import Foundation

/// The outcome of running a command.
public struct CommandResult: Sendable, Hashable {
    /// Exit status, or 128 + signal number when it was killed.
    public var status: Int32
    public var output: String
    /// Whether it was killed for running past its timeout.
    public var timedOut: Bool
}

/// Runs commands with a timeout, for shields that call `systemctl`, hooks and reload commands.
public struct CommandRunner: Sendable {
    /// Extra environment, added to the current one.
    public var environment: [String: String] = [:]
    /// `PATH` used to find commands given by name (defaults to the process's).
    public var searchPath: String?

    public init(environment: [String: String] = [:], searchPath: String? = nil) {
        self.environment = environment
        self.searchPath = searchPath
    }

    /// Runs `arguments[0]` with the rest as arguments; kills it after `timeout` seconds.
    ///
    /// - Throws: ``ShieldError`` when the command cannot be found or started.
    public func run(
        _ arguments: [String], extraEnvironment: [String: String] = [:], timeout: Double, shield: String
    ) throws(ShieldError) -> CommandResult {
        guard let name = arguments.first, !name.isEmpty else {
            throw ShieldError(shield: shield, message: "empty command")
        }
        guard let executable = resolve(name) else {
            throw ShieldError(shield: shield, target: name, message: "command not found (PATH=\(path))")
        }
        var env = ProcessInfo.processInfo.environment
        if let searchPath { env["PATH"] = searchPath }
        for (k, v) in environment { env[k] = v }
        for (k, v) in extraEnvironment { env[k] = v }
        return try spawnAndWait(
            executable: executable, arguments: arguments, environment: env, timeout: timeout, shield: shield)
    }

    /// posix_spawn + waitpid with a deadline: no dependence on Foundation's process monitor,
    /// which can lag behind when many children run at once.
    private func spawnAndWait(
        executable: String, arguments: [String], environment: [String: String], timeout: Double,
        shield: String
    ) throws(ShieldError) -> CommandResult {
        var pipeEnds: [Int32] = [0, 0]
        guard pipe(&pipeEnds) == 0 else {
            throw ShieldError(shield: shield, message: "pipe: \(String(cString: strerror(errno)))")
        }
        let (readEnd, writeEnd) = (pipeEnds[0], pipeEnds[1])
        // Close-on-exec, so other children never inherit this pipe and hold it open.
        _ = fcntl(readEnd, F_SETFD, FD_CLOEXEC)
        _ = fcntl(writeEnd, F_SETFD, FD_CLOEXEC)
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, writeEnd, 1)
        posix_spawn_file_actions_adddup2(&actions, writeEnd, 2)
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for p in argv { free(p) }
            for p in envp { free(p) }
        }
        // The child starts with every signal at its default action and none blocked, whatever
        // the daemon ignores (SIGPIPE, SIGTERM while it waits for its own signal sources): a
        // timed-out hook must die of the SIGTERM it is sent.
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
        var pid: pid_t = 0
        var spawned = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        // ETXTBSY: the program was being written (an update in progress, or another thread's
        // child still holds a descriptor to it open for writing); it clears within moments.
        var attempts = 0
        while spawned == ETXTBSY && attempts < 20 {
            usleep(50_000)
            attempts += 1
            spawned = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        }
        close(writeEnd)
        guard spawned == 0 else {
            close(readEnd)
            throw ShieldError(
                shield: shield, target: arguments.first,
                message: "cannot start \(executable): \(String(cString: strerror(spawned)))")
        }
        defer { close(readEnd) }
        _ = fcntl(readEnd, F_SETFL, fcntl(readEnd, F_GETFL) | O_NONBLOCK)
        var output: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        var status: Int32 = 0
        var exited = false
        var timedOut = false
        let deadline = ContinuousClock.now + .milliseconds(Int64(timeout * 1000))
        var killedAt: ContinuousClock.Instant?
        while !exited {
            var poller = pollfd(fd: readEnd, events: Int16(POLLIN), revents: 0)
            _ = poll(&poller, 1, 20)
            while true {
                let n = buffer.withUnsafeMutableBytes { read(readEnd, $0.baseAddress, $0.count) }
                if n <= 0 { break }
                if output.count < 65_536 { output += buffer[0..<min(n, 65_536 - output.count)] }
            }
            let waited = waitpid(pid, &status, WNOHANG)
            if waited == pid {
                exited = true
            } else if waited < 0 && errno != EINTR {
                break
            } else if ContinuousClock.now >= deadline {
                if killedAt == nil {
                    timedOut = true
                    kill(pid, SIGTERM)
                    killedAt = .now
                } else if let killedAt, ContinuousClock.now - killedAt > .seconds(2) {
                    kill(pid, SIGKILL)
                }
            }
        }
        // Exit code, or 128 + the signal that ended it.
        let code = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        return CommandResult(
            status: code, output: String(decoding: output, as: UTF8.self), timedOut: timedOut)
    }

    private var path: String {
        searchPath ?? ProcessInfo.processInfo.environment["PATH"] ?? "/usr/sbin:/usr/bin:/sbin:/bin"
    }

    /// The executable for `name`: itself when it contains a slash, else the first match on PATH.
    public func resolve(_ name: String) -> String? {
        if name.contains("/") { return FileManager.default.isExecutableFile(atPath: name) ? name : nil }
        for directory in path.split(separator: ":") {
            let candidate = "\(directory)/\(name)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }
}
