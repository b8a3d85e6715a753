import CLinux
import Foundation
import StepGateTestSupport
import Testing

/// Plays systemd's side of `$NOTIFY_SOCKET`: readiness messages and the file descriptor store.
private final class FakeSystemd {
    let path: String
    let fd: Int32
    /// Descriptors received with `FDSTORE=1`.
    private(set) var stored: [Int32] = []
    private(set) var messages: [String] = []

    init(path: String) throws {
        self.path = path
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in path.utf8.enumerated() { raw[i] = b }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0 else { throw TestFailure("bind \(path): \(String(cString: strerror(errno)))") }
        var timeout = timeval(tv_sec: 0, tv_usec: 200_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit {
        close(fd)
        for descriptor in stored { close(descriptor) }
    }

    /// Forgets the messages read so far (not the stored descriptors).
    func forgetMessages() { messages = [] }

    /// Reads messages until one contains `needle` (true) or `seconds` pass (false).
    func wait(for needle: String, seconds: Double) -> Bool {
        if messages.contains(where: { $0.contains(needle) }) { return true }
        let deadline = Date().addingTimeInterval(seconds)
        var buffer = [CChar](repeating: 0, count: 4096)
        var fds = [Int32](repeating: -1, count: 8)
        while Date() < deadline {
            var count: Int32 = 0
            let n = stepgate_receive_with_fds(fd, &buffer, buffer.count - 1, &fds, 8, &count)
            guard n >= 0 else { continue }
            let text = String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            messages.append(text)
            if text.contains("FDSTORE=1") {
                stored += fds[0..<Int(count)]
            } else {
                for descriptor in fds[0..<Int(count)] { close(descriptor) }
            }
            if text.contains(needle) { return true }
        }
        return false
    }
}

/// Starts `stepgate daemon` as systemd would: `NOTIFY_SOCKET`, and the stored descriptor (if
/// any) passed as descriptor 3 with `LISTEN_FDS`, `LISTEN_FDNAMES` and this child's
/// `LISTEN_PID` (set by a shell that then execs the daemon, keeping its pid).
private func spawnDaemon(config: String, notify: String, passing stored: Int32?, log: String) throws -> pid_t
{
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0o644)
    posix_spawn_file_actions_adddup2(&actions, 1, 2)
    var environment = ["NOTIFY_SOCKET=\(notify)", "PATH=/usr/sbin:/usr/bin:/sbin:/bin"]
    if let stored {
        posix_spawn_file_actions_adddup2(&actions, stored, 3)
        environment += ["LISTEN_FDS=1", "LISTEN_FDNAMES=stepgate-exec"]
    }
    let arguments = [
        "/bin/sh", "-c", #"LISTEN_PID=$$; export LISTEN_PID; exec "$0" "$@""#,
        Fixtures.stepgateExecutable.path, "daemon", "--config", config,
    ]
    let argv = arguments.map { strdup($0) } + [nil]
    let envp = environment.map { strdup($0) } + [nil]
    defer { for pointer in argv + envp { free(pointer) } }
    var pid: pid_t = 0
    let result = posix_spawn(&pid, "/bin/sh", &actions, nil, argv, envp)
    guard result == 0 else { throw TestFailure("posix_spawn: \(String(cString: strerror(result)))") }
    return pid
}

@Suite("restart gap", .timeLimit(.minutes(4)))
struct RestartGapTests {
    /// A crash (or a restart on upgrade) must not open the exec shield: with the fanotify group
    /// in systemd's file descriptor store, the marks outlive the daemon, an open of the shielded
    /// program waits, and the next instance takes the group over and denies it.
    @Test(
        .enabled(if: getuid() == 0, "fanotify needs root"),
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"), "needs setpriv"))
    func aCrashOrRestartLeavesNoGapInTheExecShield() throws {
        let folder = try Fixtures.temporaryFolder()
        chmod(folder.path, 0o755)
        let game = folder.appendingPathComponent("game").path
        try FileManager.default.copyItem(atPath: "/bin/true", toPath: game)
        try "127.0.0.1 localhost\n".write(
            toFile: folder.appendingPathComponent("hosts").path, atomically: true, encoding: .utf8)
        let config = folder.appendingPathComponent("config.json").path
        try """
        {
          "input": {"replay": "\(Fixtures.samples.appendingPathComponent("drive-wrist-0.csv").path)", "speed": 1},
          "policy": {"stores": {"games": {"selection": {"executables": ["\(game)"]},
             "gate": {"goals": [{"steps": 50, "minutes": 1}]}}}},
          "stateDirectory": "\(folder.appendingPathComponent("state").path)",
          "controlSocket": "\(folder.appendingPathComponent("control.sock").path)",
          "shields": {"exec": {"enabled": true}}
        }
        """.write(toFile: config, atomically: true, encoding: .utf8)
        let log = folder.appendingPathComponent("daemon.log").path
        let systemd = try FakeSystemd(path: folder.appendingPathComponent("notify.sock").path)
        func daemonLog() -> String { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }
        func asNobody(_ command: String) -> Process {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            process.arguments = [
                "--reuid=nobody", "--regid=nogroup", "--clear-groups", "/bin/sh", "-c", command,
            ]
            process.standardOutput = Pipe()
            process.standardError = FileHandle.nullDevice
            return process
        }

        let first = try spawnDaemon(config: config, notify: systemd.path, passing: nil, log: log)
        var running = [first]
        defer {
            for pid in running {
                kill(pid, SIGKILL)
                var status: Int32 = 0
                waitpid(pid, &status, 0)
            }
        }
        try #require(systemd.wait(for: "READY=1", seconds: 20), "the daemon did not start: \(daemonLog())")
        try #require(systemd.stored.count == 1, "no descriptor stored: \(systemd.messages)")
        #expect(try runProcess(URL(fileURLWithPath: "/bin/sh"), ["-c", game]).status == 126)

        // The crash: the shield's own descriptor goes, the stored one keeps the marks.
        kill(first, SIGKILL)
        var status: Int32 = 0
        waitpid(first, &status, 0)
        running = []
        let attempt = asNobody("cat '\(game)' > /dev/null && echo OPENED")
        try attempt.run()
        defer { if attempt.isRunning { attempt.terminate() } }
        usleep(1_000_000)
        #expect(attempt.isRunning, "the shielded program was opened while no daemon ran")

        systemd.forgetMessages()
        let second = try spawnDaemon(
            config: config, notify: systemd.path, passing: systemd.stored[0], log: log)
        running = [second]
        try #require(
            systemd.wait(for: "READY=1", seconds: 20),
            "the daemon did not restart: \(daemonLog())")
        let deadline = Date().addingTimeInterval(10)
        while attempt.isRunning && Date() < deadline { usleep(20_000) }
        #expect(!attempt.isRunning, "the waiting open was never answered")
        let output = (attempt.standardOutput as? Pipe)?.fileHandleForReading.readDataToEndOfFile() ?? Data()
        #expect(!String(decoding: output, as: UTF8.self).contains("OPENED"))
        #expect(attempt.terminationStatus != 0)
        #expect(daemonLog().contains("took over the previous instance's marks"))
        #expect(try runProcess(URL(fileURLWithPath: "/bin/sh"), ["-c", game]).status == 126)
    }
}
