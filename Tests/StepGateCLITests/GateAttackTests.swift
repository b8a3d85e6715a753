import Foundation
import StepGateTestSupport
import Testing

/// A raw control-socket connection, to behave as a hostile client would.
private final class RawConnection {
    let fd: Int32

    init(_ path: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in path.utf8.enumerated() { raw[i] = b }
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else {
            let message = String(cString: strerror(errno))
            close(fd)
            throw TestFailure("connect: \(message)")
        }
    }

    deinit { close(fd) }

    func send(_ text: String) {
        var copy = text
        copy.withUTF8 { _ = Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Reads until the peer closes or `seconds` pass; what arrived, and whether it closed.
    func readAll(seconds: Double) -> (text: String, closed: Bool) {
        var data: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 50) > 0 else { continue }
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { return (String(decoding: data, as: UTF8.self), true) }
            data += buffer[0..<n]
        }
        return (String(decoding: data, as: UTF8.self), false)
    }

    /// One request, one answer line.
    func request(_ line: String, seconds: Double = 5) -> String {
        send(line + "\n")
        return readAll(seconds: seconds).text
    }
}

/// A process's threads and resident memory (KiB), from `/proc/PID/status`.
private func threadsAndResident(_ pid: Int32) -> (threads: Int, residentKiB: Int) {
    let text = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
    func value(_ key: String) -> Int {
        let line = text.split(separator: "\n").first { $0.hasPrefix(key) } ?? ""
        return Int(line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first ?? "") ?? -1
    }
    return (value("Threads:"), value("VmRSS:"))
}

private func openDescriptors(_ pid: Int32) -> Int {
    (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1
}

private func sample(_ name: String) -> String { Fixtures.samples.appendingPathComponent(name).path }

/// A configuration with one store that stays shielded (the input is a drive: no steps).
private func shieldedConfig(
    folder: URL, domains: [String] = ["example.com"], executables: [String] = [], hooks: String? = nil,
    extraStores: String = ""
) -> String {
    let quoted = { (list: [String]) in list.map { "\"\($0)\"" }.joined(separator: ", ") }
    let exec = executables.isEmpty ? "" : #", "exec": {"enabled": true}"#
    return """
        {
          "input": {"replay": "\(sample("drive-wrist-0.csv"))", "speed": 1},
          "policy": {"stores": {"games": {
             "selection": {"domains": [\(quoted(domains))], "executables": [\(quoted(executables))]},
             "gate": {"goals": [{"steps": 50, "minutes": 1}]}}\(extraStores)}},
          "stateDirectory": "\(folder.appendingPathComponent("state").path)",
          "controlSocket": "\(folder.appendingPathComponent("control.sock").path)",
          "shields": {"domains": {"browserPolicies": false, "path": "\(folder.appendingPathComponent("hosts").path)"}\(exec)\(hooks ?? "")}
        }
        """
}

private func makeHosts(_ folder: URL) throws {
    try "127.0.0.1 localhost\n".write(
        toFile: folder.appendingPathComponent("hosts").path, atomically: true, encoding: .utf8)
}

/// The gate tried as the person it gates would: each test is one way around it that worked once.
@Suite("gate attacks", .timeLimit(.minutes(4)))
struct GateAttackTests {
    /// A client that hangs up before the answer must not kill the daemon (SIGPIPE).
    @Test func aClientHangingUpDoesNotKillTheDaemon() throws {
        let folder = try Fixtures.temporaryFolder()
        try makeHosts(folder)
        let daemon = try TestDaemon(folder: folder, config: shieldedConfig(folder: folder))
        defer { daemon.kill(SIGTERM) }
        for _ in 0..<200 {
            let connection = try RawConnection(daemon.socket)
            connection.send(#"{"command":"status"}"# + "\n")
            shutdown(connection.fd, Int32(SHUT_RDWR))
        }
        usleep(300_000)
        #expect(daemon.process.isRunning, "the daemon died: \(daemon.log)")
        #expect(try daemon.status()["ok"] as? Bool == true)
    }

    /// Idle and drip-fed connections cannot use up the daemon: status still answers at once,
    /// descriptors come back, and a connection that never finishes its line is closed.
    @Test func heldConnectionsDoNotStarveStatus() throws {
        let folder = try Fixtures.temporaryFolder()
        try makeHosts(folder)
        let daemon = try TestDaemon(folder: folder, config: shieldedConfig(folder: folder))
        defer { daemon.kill(SIGTERM) }
        let pid = daemon.process.processIdentifier
        let before = openDescriptors(pid)
        var held: [RawConnection] = []
        for _ in 0..<500 {
            let connection = try RawConnection(daemon.socket)
            connection.send("{")  // starts a request, never finishes it
            held.append(connection)
        }
        var latencies: [Double] = []
        for _ in 0..<5 {
            let start = Date()
            let answer = try RawConnection(daemon.socket).request(#"{"command":"status"}"#)
            latencies.append(Date().timeIntervalSince(start))
            #expect(answer.contains(#""ok":true"#), "status did not answer: \(answer)")
        }
        latencies.sort()
        print("status while 500 connections are held: median \(Int(latencies[2] * 1000)) ms")
        #expect(latencies[2] < 2, "status took \(latencies[2]) s")
        // The daemon holds a bounded number of them.
        #expect(openDescriptors(pid) < before + 64, "descriptors: \(before) → \(openDescriptors(pid))")
        held.removeAll()

        // One byte every second: closed at the request deadline, not kept forever.
        let drip = try RawConnection(daemon.socket)
        let start = Date()
        var closed = false
        for byte in #"{"command":"status"#.utf8 {
            drip.send(String(UnicodeScalar(byte)))
            if drip.readAll(seconds: 1).closed {
                closed = true
                break
            }
        }
        #expect(closed, "a drip-fed connection was kept open")
        #expect(Date().timeIntervalSince(start) < 8)
        usleep(200_000)
        #expect(openDescriptors(pid) <= before + 2, "descriptors: \(before) → \(openDescriptors(pid))")
        #expect(daemon.process.isRunning)
    }

    /// Values an admin types wrong are refused with a clear error; nothing on the socket traps.
    @Test func outOfRangeValuesAreRefusedNotTrapped() throws {
        let folder = try Fixtures.temporaryFolder()
        try makeHosts(folder)
        let daemon = try TestDaemon(folder: folder, config: shieldedConfig(folder: folder))
        defer { daemon.kill(SIGTERM) }
        for minutes in ["1e300", "-5", "0", "nan", "inf", "600000"] {
            let result = try daemon.client(["lock", "games", "--minutes", minutes])
            #expect(result.status != 0, "lock --minutes \(minutes) was accepted")
            #expect(daemon.process.isRunning, "lock --minutes \(minutes) killed the daemon: \(daemon.log)")
        }
        let raw = try RawConnection(daemon.socket)
        let answer = raw.request(#"{"command":"lock","store":"games","minutes":1e308}"#)
        #expect(answer.contains(#""ok":false"#))
        for line in [
            #"{"command":"lock","store":["games"],"minutes":5}"#, #"{"command":7}"#, "[]", "\u{0}\u{1}",
            String(repeating: "x", count: 40_000),
        ] {
            _ = try RawConnection(daemon.socket).request(line, seconds: 2)
        }
        #expect(daemon.process.isRunning, "\(daemon.log)")
        #expect(try daemon.status()["ok"] as? Bool == true)
    }

    /// A reload that adds targets to a shielded store enforces them at once.
    @Test func aReloadAppliesNewTargetsOfAShieldedStore() throws {
        let folder = try Fixtures.temporaryFolder()
        try makeHosts(folder)
        let daemon = try TestDaemon(folder: folder, config: shieldedConfig(folder: folder))
        defer { daemon.kill(SIGTERM) }
        #expect(daemon.hostsBecome(blocked: true))
        try shieldedConfig(folder: folder, domains: ["example.com", "example.org"]).write(
            toFile: folder.appendingPathComponent("config.json").path, atomically: true, encoding: .utf8)
        let reload = try daemon.client(["reload"])
        #expect(reload.status == 0, "\(reload.standardError)")
        let hosts = try String(contentsOfFile: daemon.hosts, encoding: .utf8)
        #expect(hosts.contains("0.0.0.0 example.org"), "not applied after reload:\n\(hosts)")
    }

    /// One store's failing shield does not leave another store open when both relock together.
    @Test func aFailingShieldDoesNotLeaveAnotherStoreOpen() throws {
        let folder = try Fixtures.temporaryFolder()
        try makeHosts(folder)
        let hook = folder.appendingPathComponent("hook.sh").path
        // Succeeds while the file "allow" exists, fails after.
        try "#!/bin/sh\ntest -e '\(folder.path)/allow'\n".write(
            toFile: hook, atomically: true, encoding: .utf8)
        chmod(hook, 0o755)
        #expect(
            FileManager.default.createFile(atPath: folder.appendingPathComponent("allow").path, contents: nil)
        )
        // Store "a" (a failing hook) sorts before "games" (the domain), and both unlock together.
        let config = """
            {
              "input": {"replay": "\(sample("walk-wrist-100.csv"))", "speed": 20},
              "policy": {"stores": {
                "a": {"selection": {"hooks": ["fail"]}, "gate": {"goals": [{"steps": 50, "minutes": 1}]}},
                "games": {"selection": {"domains": ["example.com"]},
                          "gate": {"goals": [{"steps": 50, "minutes": 1}]}}}},
              "stateDirectory": "\(folder.appendingPathComponent("state").path)",
              "controlSocket": "\(folder.appendingPathComponent("control.sock").path)",
              "shields": {"domains": {"browserPolicies": false, "path": "\(folder.appendingPathComponent("hosts").path)"},
                          "hooks": {"fail": {"command": ["\(hook)"], "timeout": 5}}}
            }
            """
        let daemon = try TestDaemon(folder: folder, config: config)
        defer { daemon.kill(SIGTERM) }
        try daemon.wait(30, for: "the walk to unlock") { $0["shielded"] as? Bool == false }
        #expect(daemon.hostsBecome(blocked: false))
        try FileManager.default.removeItem(atPath: folder.appendingPathComponent("allow").path)
        let until = try #require(
            ISO8601DateFormatter().date(from: try daemon.store("games")["unlockedUntil"] as? String ?? ""))
        try daemon.wait(until.timeIntervalSinceNow + 10, for: "the relock of games") {
            $0["shielded"] as? Bool == true && daemon.hostsBlocked
        }
        #expect(daemon.hostsBlocked, "games relocked in the same batch as a failing store stayed open")
    }

    /// A slow hook (timeouts up to an hour are accepted) holds up neither the loop nor another
    /// shield: status answers at once and the domain block is written while the hook still runs.
    @Test func aSlowHookHoldsUpNothingElse() throws {
        let folder = try Fixtures.temporaryFolder()
        try makeHosts(folder)
        let config = """
            {
              "input": {"replay": "\(sample("drive-wrist-0.csv"))", "speed": 1},
              "policy": {"stores": {
                "a": {"selection": {"hooks": ["slow"]}, "gate": {"goals": [{"steps": 50, "minutes": 1}]}},
                "games": {"selection": {"domains": ["example.com"]},
                          "gate": {"goals": [{"steps": 50, "minutes": 1}]}}}},
              "stateDirectory": "\(folder.appendingPathComponent("state").path)",
              "controlSocket": "\(folder.appendingPathComponent("control.sock").path)",
              "shields": {"domains": {"browserPolicies": false, "path": "\(folder.appendingPathComponent("hosts").path)"},
                          "hooks": {"slow": {"command": ["/bin/sleep", "15"], "timeout": 60}}}
            }
            """
        let started = Date()
        let daemon = try TestDaemon(folder: folder, config: config)
        defer { daemon.kill(SIGTERM) }
        // TestDaemon returns once status answers; with the hook on the loop that took 20 s.
        #expect(Date().timeIntervalSince(started) < 10, "status waited for the hook")
        try daemon.wait(5, for: "the domain block while the hook runs") { _ in daemon.hostsBlocked }
        let asked = Date()
        _ = try daemon.status()
        #expect(Date().timeIntervalSince(asked) < 2)
        #expect(Date().timeIntervalSince(started) < 15)
    }

    /// The launch guard's question never makes the daemon touch a path the client chose: a path
    /// into a hung file system (a FUSE mount that never answers) must not freeze the daemon.
    @Test(.enabled(if: getuid() == 0 && access("/dev/fuse", R_OK | W_OK) == 0, "needs root and /dev/fuse"))
    func aPathIntoAHungFileSystemDoesNotFreezeTheDaemon() throws {
        let folder = try Fixtures.temporaryFolder()
        try makeHosts(folder)
        let daemon = try TestDaemon(folder: folder, config: shieldedConfig(folder: folder))
        defer { daemon.kill(SIGKILL) }  // after the mount's server closed (defers run last first)
        let hung = folder.appendingPathComponent("hung")
        try FileManager.default.createDirectory(at: hung, withIntermediateDirectories: true)
        // A FUSE mount whose server never answers: every lookup below it waits forever (until
        // the server's descriptor closes, which aborts them).
        let fuse = open("/dev/fuse", O_RDWR | O_CLOEXEC)
        #expect(fuse >= 0)
        let options = "fd=\(fuse),rootmode=40000,user_id=0,group_id=0"
        let mounted = mount("stepgate-test", hung.path, "fuse", UInt(MS_NOSUID | MS_NODEV), options)
        try #require(mounted == 0, "cannot mount FUSE: \(String(cString: strerror(errno)))")
        defer {
            close(fuse)
            umount2(hung.path, Int32(MNT_DETACH))
        }
        let path = hung.path + "/game"  // (URL would look at the file system)
        let check = try RawConnection(daemon.socket).request(
            #"{"command":"check","executable":"\#(path)","resolved":"\#(path)"}"#, seconds: 3)
        #expect(check.contains(#""shielded":false"#), "check did not answer: \(check)")
        let status = try RawConnection(daemon.socket).request(#"{"command":"status"}"#, seconds: 3)
        #expect(status.contains(#""ok":true"#), "the daemon froze: \(status)")
    }

    /// A program replaced under its name (a new inode, as an upgrade or `cp && mv` makes) is
    /// shielded again at once, and status tells the truth.
    @Test(.enabled(if: getuid() == 0, "fanotify needs root"))
    func aReplacedProgramIsShieldedAgainAtOnce() throws {
        let folder = try Fixtures.temporaryFolder()
        try makeHosts(folder)
        let game = folder.appendingPathComponent("game").path
        try FileManager.default.copyItem(atPath: "/bin/true", toPath: game)
        let daemon = try TestDaemon(
            folder: folder, config: shieldedConfig(folder: folder, executables: [game]))
        defer { daemon.kill(SIGTERM) }
        func run() throws -> Int32 { try runProcess(URL(fileURLWithPath: "/bin/sh"), ["-c", game]).status }
        #expect(try run() == 126)
        try FileManager.default.copyItem(atPath: "/bin/true", toPath: game + ".new")
        #expect(rename(game + ".new", game) == 0)
        let deadline = Date().addingTimeInterval(2)
        var status = try run()
        while status != 126 && Date() < deadline {
            usleep(50_000)
            status = try run()
        }
        #expect(status == 126, "the replaced program ran")
        #expect(try daemon.store("games")["shieldHealth"] as? String == "ok")
        // Removed: status says the shield is not in force.
        try FileManager.default.removeItem(atPath: game)
        try daemon.wait(5, for: "status to report the missing program") {
            ($0["shieldHealth"] as? String ?? "ok") != "ok"
        }
    }

    /// A user who can write the socket's folder binds a socket of their own in its place:
    /// root's clients refuse to send it anything that changes the policy (a lock would be
    /// swallowed), and its status comes with whose daemon answered; the user's own client still
    /// talks to the daemon that user runs.
    @Test(
        .enabled(if: getuid() == 0, "needs root to run a daemon as another user"),
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"), "needs setpriv"))
    func aSocketServedByAnotherUserIsRefused() throws {
        let folder = try Fixtures.temporaryFolder()
        chmod(folder.path, 0o755)
        let own = folder.appendingPathComponent("nobody")
        #expect(mkdir(own.path, 0o755) == 0 && chown(own.path, 65534, 65534) == 0)
        try makeHosts(own)
        let configPath = own.appendingPathComponent("config.json").path
        try shieldedConfig(folder: own).write(toFile: configPath, atomically: true, encoding: .utf8)
        for name in ["hosts", "config.json"] { chown(own.appendingPathComponent(name).path, 65534, 65534) }
        let socket = own.appendingPathComponent("control.sock").path
        // Copies nobody can reach (the build folder may be in a folder only root may enter).
        let programs = folder.appendingPathComponent("programs")
        try FileManager.default.createDirectory(at: programs, withIntermediateDirectories: false)
        chmod(programs.path, 0o755)
        let stepgate = try Fixtures.copyExecutables(into: programs).path
        let fake = Process()
        fake.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        fake.arguments = [
            "--reuid=nobody", "--regid=nogroup", "--clear-groups", stepgate, "daemon",
            "--config", configPath,
        ]
        fake.standardOutput = FileHandle.nullDevice
        fake.standardError = FileHandle.nullDevice
        try fake.run()
        defer {
            fake.terminate()
            fake.waitUntilExit()
        }
        var waited = 0
        while !FileManager.default.fileExists(atPath: socket) && waited < 100 {
            usleep(100_000)
            waited += 1
        }
        let asNobody = try runProcess(
            URL(fileURLWithPath: "/usr/bin/setpriv"),
            [
                "--reuid=nobody", "--regid=nogroup", "--clear-groups", stepgate,
                "status", "--socket", socket,
            ])
        #expect(asNobody.status == 0, "the user's own client: \(asNobody.standardError)")
        // Status changes nothing: root may ask (a user's trial daemon), and is told whose it is.
        let status = try runProcess(Fixtures.stepgateExecutable, ["status", "--socket", socket])
        #expect(status.status == 0, "\(status.standardError)")
        #expect(status.standardOutput.hasPrefix("note: answered by uid 65534, not by root's daemon"))
        let lock = try runProcess(
            Fixtures.stepgateExecutable, ["lock", "games", "--minutes", "60", "--socket", socket])
        #expect(lock.status != 0)
        #expect(lock.standardError.contains("refusing to talk to it"))
    }

    /// A browser's own DNS over HTTPS would skip the hosts file: while a store has domains, the
    /// daemon installs the browsers' managed policies that keep it off.
    @Test func browsersAreToldToKeepTheirOwnResolverOff() throws {
        let folder = try Fixtures.temporaryFolder()
        try makeHosts(folder)
        let root = folder.appendingPathComponent("root").path
        let config = shieldedConfig(folder: folder).replacingOccurrences(
            of: #""shields": {"domains": {"browserPolicies": false, "path": ""#,
            with: #""shields": {"domains": {"browserPolicyRoot": "\#(root)", "path": ""#)
        for program in ["usr/bin/firefox", "usr/bin/chromium"] {
            try FileManager.default.createDirectory(
                atPath: root + "/" + program, withIntermediateDirectories: true)
        }
        #expect(config.contains("browserPolicyRoot"))
        let daemon = try TestDaemon(folder: folder, config: config)
        defer { daemon.kill(SIGTERM) }
        let firefox = try String(
            contentsOfFile: root + "/etc/firefox/policies/policies.json", encoding: .utf8)
        #expect(firefox.contains("\"DNSOverHTTPS\""))
        let chromium = try String(
            contentsOfFile: root + "/etc/chromium/policies/managed/stepgate-dns.json", encoding: .utf8)
        #expect(chromium.contains("\"DnsOverHttpsMode\": \"off\""))
    }

    /// A user who can write an application folder names a desktop entry with a newline and a
    /// terminal escape: root's `status` and the daemon's log show them, never act on them.
    @Test(.enabled(if: getuid() == 0, "fanotify needs root"))
    func aFileNameCannotRewriteStatusOrTheLog() throws {
        let folder = try Fixtures.temporaryFolder()
        try makeHosts(folder)
        let applications = folder.appendingPathComponent("apps").path
        #expect(mkdir(applications, 0o755) == 0)
        let forged = applications + "/x\u{1B}[2J\ngames: open.desktop"
        #expect(FileManager.default.createFile(atPath: forged, contents: Data("[Desktop Entry]\n".utf8)))
        #expect(truncate(forged, 1 << 20) == 0)  // too large: reported with its name
        let config = """
            {
              "input": {"replay": "\(sample("drive-wrist-0.csv"))", "speed": 1},
              "policy": {"stores": {"games": {"selection": {"desktopCategories": ["Game"]},
                 "gate": {"goals": [{"steps": 50, "minutes": 1}]}}}},
              "stateDirectory": "\(folder.appendingPathComponent("state").path)",
              "controlSocket": "\(folder.appendingPathComponent("control.sock").path)",
              "shields": {"exec": {"enabled": true, "applicationDirectories": ["\(applications)"]}}
            }
            """
        let daemon = try TestDaemon(folder: folder, config: config)
        defer { daemon.kill(SIGTERM) }
        try daemon.wait(10, for: "the problem in status") { ($0["shieldHealth"] as? String ?? "ok") != "ok" }
        let text = try daemon.client(["status"]).standardOutput
        #expect(text.contains("x\\u{1B}[2J\\u{A}games: open.desktop"), "\(text)")
        #expect(!text.contains("\u{1B}"))
        let json = try daemon.client(["status", "--json"]).standardOutput
        #expect(!json.contains("\u{1B}") && json.contains("\\u001b"))
        #expect(!daemon.log.contains("\u{1B}") && daemon.log.contains("x\\u{1B}[2J\\u{A}games"))
    }
}

/// The long soak has a suite of its own: the gate-attack suite's four-minute limit would cut a
/// half-hour run short.
@Suite("soak")
struct SoakTests {
    /// Mixed hostile clients for a while (20 s here; `STEPGATE_SOAK_SECONDS=1800` for the
    /// half-hour soak): descriptors, threads and memory stay flat, and status keeps answering.
    @Test(.timeLimit(.minutes(60)))
    func soakOfHostileClients() throws {
        let seconds = Double(ProcessInfo.processInfo.environment["STEPGATE_SOAK_SECONDS"] ?? "") ?? 20
        let folder = try Fixtures.temporaryFolder()
        try makeHosts(folder)
        let daemon = try TestDaemon(folder: folder, config: shieldedConfig(folder: folder))
        defer { daemon.kill(SIGTERM) }
        let pid = daemon.process.processIdentifier
        // Warm up (first requests allocate the server's buffers), then take the baseline.
        for _ in 0..<20 { _ = try RawConnection(daemon.socket).request(#"{"command":"status"}"#) }
        usleep(500_000)
        let before = (fds: openDescriptors(pid), usage: threadsAndResident(pid))
        let end = Date().addingTimeInterval(seconds)
        var rounds = 0
        var slowest = 0.0
        while Date() < end {
            rounds += 1
            var held: [RawConnection] = []
            for kind in 0..<40 {
                guard let connection = try? RawConnection(daemon.socket) else { continue }
                switch kind % 8 {
                case 0: connection.send(#"{"command":"status"}"# + "\n")  // and hang up at once
                case 1: held.append(connection)  // idle
                case 2:
                    connection.send("{\"comm")  // half a request, held
                    held.append(connection)
                case 3: connection.send(String(repeating: "[", count: 20_000) + "\n")  // deep nesting
                case 4: connection.send(String(repeating: "x", count: 70_000))  // too long, no newline
                case 5: connection.send(#"{"command":"lock","store":"games","minutes":1e308}"# + "\n")
                case 6: connection.send("\u{FF}\u{FE}\u{0}{\"command\":\"status\"}\n")
                default: connection.send(#"{"command":"check","executable":"/proc/self/exe"}"# + "\n")
                }
                if kind % 8 != 1 && kind % 8 != 2 { shutdown(connection.fd, Int32(SHUT_WR)) }
            }
            let start = Date()
            let answer = try RawConnection(daemon.socket).request(#"{"command":"status"}"#)
            slowest = max(slowest, Date().timeIntervalSince(start))
            #expect(answer.contains(#""ok":true"#), "status failed in round \(rounds): \(answer)")
            held.removeAll()
            usleep(100_000)
        }
        sleep(6)  // past the request deadline, so nothing half-open is left
        for _ in 0..<20 { _ = try RawConnection(daemon.socket).request(#"{"command":"status"}"#) }
        let after = (fds: openDescriptors(pid), usage: threadsAndResident(pid))
        print(
            "soak \(Int(seconds)) s, \(rounds) rounds of 40 hostile clients: descriptors \(before.fds) → \(after.fds), "
                + "threads \(before.usage.threads) → \(after.usage.threads), resident "
                + "\(before.usage.residentKiB) → \(after.usage.residentKiB) KiB, slowest status \(Int(slowest * 1000)) ms"
        )
        #expect(daemon.process.isRunning, "\(daemon.log)")
        #expect(after.fds <= before.fds + 2)
        #expect(after.usage.threads <= before.usage.threads + 2)
        #expect(after.usage.residentKiB <= before.usage.residentKiB + 16_384)
    }
}
