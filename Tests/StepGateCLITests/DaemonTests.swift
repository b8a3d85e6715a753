import Foundation
import StepGateTestSupport
import Testing
import TypedJSON

/// A daemon started for a test, with its files in a temporary folder.
final class TestDaemon {
    let folder: URL
    let process = Process()
    var socket: String { folder.appendingPathComponent("control.sock").path }
    var hosts: String { folder.appendingPathComponent("hosts").path }

    init(folder: URL, config: String) throws {
        self.folder = folder
        let configPath = folder.appendingPathComponent("config.json").path
        try config.write(toFile: configPath, atomically: true, encoding: .utf8)
        process.executableURL = Fixtures.stepgateExecutable
        process.arguments = ["daemon", "--config", configPath]
        let logPath = folder.appendingPathComponent("daemon.log").path
        if !FileManager.default.fileExists(atPath: logPath) {
            guard FileManager.default.createFile(atPath: logPath, contents: nil) else {
                throw TestFailure("cannot create \(logPath)")
            }
        }
        guard let log = FileHandle(forWritingAtPath: logPath) else {
            throw TestFailure("cannot open \(logPath)")
        }
        log.seekToEndOfFile()
        process.standardOutput = log
        process.standardError = log
        try process.run()
        // Ready once the control socket answers.
        for _ in 0..<100 {
            if (try? status()) != nil { return }
            usleep(100_000)
        }
        throw TestFailure("the daemon did not start: \(self.log)")
    }

    deinit {
        // A test that failed half-way must not leave its daemon running.
        if process.isRunning { kill(SIGKILL) }
    }

    var log: String {
        (try? String(contentsOf: folder.appendingPathComponent("daemon.log"), encoding: .utf8)) ?? ""
    }

    func client(_ arguments: [String]) throws -> ProcessResult {
        try runProcess(Fixtures.stepgateExecutable, arguments + ["--socket", socket])
    }

    func status() throws -> [String: Any] {
        let result = try client(["status", "--json"])
        guard result.status == 0,
            let object = try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8))
                as? [String: Any]
        else { throw TestFailure("status failed: \(result.standardError)") }
        return object
    }

    func store(_ name: String) throws -> [String: Any] {
        let stores = try status()["stores"] as? [[String: Any]] ?? []
        guard let store = stores.first(where: { $0["name"] as? String == name }) else {
            throw TestFailure("no store \(name)")
        }
        return store
    }

    /// Waits until `condition` holds, polling status; fails after `seconds`.
    func wait(_ seconds: Double, for what: String, _ condition: ([String: Any]) throws -> Bool) throws {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if let store = try? store("games"), try condition(store) { return }
            usleep(200_000)
        }
        throw TestFailure("timed out waiting for \(what); log:\n\(log)")
    }

    var hostsBlocked: Bool {
        ((try? String(contentsOfFile: hosts, encoding: .utf8)) ?? "").contains("0.0.0.0 example.com")
    }

    /// Whether the hosts file comes to block the test domain (or to let it go) within `seconds`:
    /// the control socket answers before the first shields are applied (on the shields' own
    /// queues), so a test that looks at once can lose the race on a loaded machine.
    func hostsBecome(blocked: Bool, within seconds: Double = 15) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while hostsBlocked != blocked && Date() < deadline { usleep(50_000) }
        return hostsBlocked == blocked
    }

    /// Sends `signal` to the daemon if it still runs, and waits for it to end. Never to a daemon
    /// already reaped: its pid may by then be another test's process (pids wrap at 32,768 here,
    /// and the shield suites start thousands), and a stray SIGTERM from a second `kill` in a
    /// test's `defer` ended another test's launch (status 15 in `ShieldScreenTests`).
    func kill(_ signal: Int32) {
        if process.isRunning { Glibc.kill(process.processIdentifier, signal) }
        process.waitUntilExit()
    }
}

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

private func config(folder: URL, walk: String, speed: Double = 20, exec: String? = nil) -> String {
    let executables = exec.map { #", "executables": ["\#($0)"]"# } ?? ""
    let execShield = exec == nil ? "" : #", "exec": {"enabled": true}"#
    return """
        {
          "input": {"replay": "\(walk)", "speed": \(speed)},
          "policy": {"stores": {"games": {
             "selection": {"domains": ["example.com"]\(executables)},
             "gate": {"goals": [{"steps": 50, "minutes": 1}]}}}},
          "stateDirectory": "\(folder.appendingPathComponent("state").path)",
          "controlSocket": "\(folder.appendingPathComponent("control.sock").path)",
          "shields": {"domains": {"browserPolicies": false, "path": "\(folder.appendingPathComponent("hosts").path)"}\(execShield)}
        }
        """
}

/// The daemon end to end, with a replayed walk as input (so no sensor is needed) and real
/// shields on temporary files. The relock tests wait out a real one-minute unlock window; the
/// suites run in parallel, so that costs about a minute in all.
@Suite("stepgate daemon", .timeLimit(.minutes(4)))
struct DaemonTests {
    private func sample(_ name: String) -> String { Fixtures.samples.appendingPathComponent(name).path }

    /// Run as root, the daemon refuses state, socket and domains-file folders that another user
    /// could change, both with `--check` and at start, before it writes anything.
    @Test(.enabled(if: geteuid() == 0, "needs root: only a daemon run as root checks its folders"))
    func asRootFoldersOthersCanChangeAreRefused() throws {
        let folder = try Fixtures.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let theirs = folder.appendingPathComponent("theirs").path
        try FileManager.default.createDirectory(atPath: theirs, withIntermediateDirectories: false)
        chmod(theirs, 0o755)
        chown(theirs, 65_534, 65_534)
        let shared = folder.appendingPathComponent("shared").path
        try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: false)
        chmod(shared, 0o777)
        let own = folder.appendingPathComponent("own").path
        func attempt(state: String, socket: String, hosts: String) throws -> (
            check: ProcessResult, start: ProcessResult
        ) {
            let config = folder.appendingPathComponent("config.json").path
            try """
            {
              "input": {"replay": "\(sample("drive-wrist-0.csv"))"},
              "policy": {"stores": {"games": {"selection": {"domains": ["example.com"]},
                 "gate": {"goals": [{"steps": 50, "minutes": 1}]}}}},
              "stateDirectory": "\(state)", "controlSocket": "\(socket)",
              "shields": {"domains": {"browserPolicies": false, "path": "\(hosts)"}}
            }
            """.write(toFile: config, atomically: true, encoding: .utf8)
            return (
                try runProcess(Fixtures.stepgateExecutable, ["daemon", "--check", "--config", config]),
                // Bounded: a daemon that does not refuse would otherwise run on.
                try runProcess(
                    URL(fileURLWithPath: "/usr/bin/timeout"),
                    ["-s", "KILL", "20", Fixtures.stepgateExecutable.path, "daemon", "--config", config])
            )
        }
        let state = try attempt(
            state: theirs + "/state", socket: own + "/control.sock", hosts: own + "/hosts")
        for result in [state.check, state.start] {
            #expect(result.status == 1)
            #expect(
                result.standardError.contains(
                    "state directory: unsafe folder \(theirs)/state: \(theirs) is owned by nobody (uid 65534), mode 0755;"
                ),
                "\(result.standardError)")
        }
        #expect(!FileManager.default.fileExists(atPath: theirs + "/state"))
        #expect(!FileManager.default.fileExists(atPath: own))

        let socket = try attempt(state: own + "/state", socket: "/tmp/control.sock", hosts: own + "/hosts")
        for result in [socket.check, socket.start] {
            #expect(result.status == 1)
            #expect(
                result.standardError.contains(
                    "control socket folder: unsafe folder /tmp: /tmp is owned by root (uid 0), mode 1777;"),
                "\(result.standardError)")
        }

        let hosts = try attempt(
            state: own + "/state", socket: own + "/control.sock", hosts: shared + "/hosts")
        for result in [hosts.check, hosts.start] {
            #expect(result.status == 1)
            #expect(
                result.standardError.contains("domains file folder: unsafe folder \(shared)"),
                "\(result.standardError)")
            #expect(result.standardError.contains("mode 0777"))
        }
        #expect(!FileManager.default.fileExists(atPath: shared + "/hosts"))
    }

    @Test func walkUnlocksAndTheDeadlineSurvivesKillAndRestart() throws {
        let folder = try Fixtures.temporaryFolder()
        try "127.0.0.1 localhost\n".write(
            toFile: folder.appendingPathComponent("hosts").path, atomically: true, encoding: .utf8)
        let walkConfig = config(folder: folder, walk: sample("walk-front-pocket-303.csv"))

        // Locked at start: the domain is blocked until 50 steps are walked.
        let first = try TestDaemon(folder: folder, config: walkConfig)
        #expect(try first.store("games")["shielded"] as? Bool == true)
        #expect(first.hostsBecome(blocked: true))
        try first.wait(30, for: "the walk to unlock") { $0["shielded"] as? Bool == false }
        #expect(first.hostsBecome(blocked: false))
        let deadline = try #require(try first.store("games")["unlockedUntil"] as? String)

        // Killed inside the window and restarted (reading a drive, no steps): still open, same deadline.
        first.kill(SIGKILL)
        let driveConfig = config(folder: folder, walk: sample("drive-wrist-0.csv"), speed: 1)
        let second = try TestDaemon(folder: folder, config: driveConfig)
        #expect(try second.store("games")["shielded"] as? Bool == false)
        #expect(try second.store("games")["unlockedUntil"] as? String == deadline)

        // Killed again, restarted after the deadline: locked.
        second.kill(SIGKILL)
        let end = try #require(ISO8601DateFormatter().date(from: deadline))
        let wait = end.timeIntervalSinceNow + 1
        if wait > 0 { usleep(UInt32(wait * 1_000_000)) }
        let third = try TestDaemon(folder: folder, config: driveConfig)
        #expect(try third.store("games")["shielded"] as? Bool == true)
        #expect(third.hostsBecome(blocked: true))

        // SIGTERM: saves and exits 0.
        third.kill(SIGTERM)
        #expect(third.process.terminationStatus == 0)
        #expect(
            FileManager.default.fileExists(atPath: folder.appendingPathComponent("state/state.json").path))
        #expect(third.log.contains("stepgate: stopping: saving state"))
    }

    /// `status` never contradicts itself: today's steps are counted before the gate is given
    /// them, so "steps today" is never below the steps a gate has counted since its lock.
    @Test func stepsTodayNeverLagBehindTheGate() throws {
        let folder = try Fixtures.temporaryFolder()
        try "127.0.0.1 localhost\n".write(
            toFile: folder.appendingPathComponent("hosts").path, atomically: true, encoding: .utf8)
        let daemon = try TestDaemon(
            folder: folder,
            config: config(folder: folder, walk: sample("walk-front-pocket-303.csv"), speed: 2))
        defer { daemon.kill(SIGTERM) }
        // Only domains are selected: no word about the program shields this run does not have.
        #expect(try daemon.status()["unenforcedKinds"] == nil)
        var checked = 0
        let deadline = Date().addingTimeInterval(15)
        while Date() < deadline {
            let status = try daemon.status()
            let today = status["stepsToday"] as? Int ?? -1
            let gate = (status["stores"] as? [[String: Any]])?.first?["steps"] as? Int ?? 0
            #expect(today >= gate, "status says \(today) steps today but the gate counted \(gate)")
            if gate > 0 { checked += 1 }
            if today >= gate && gate >= 50 { break }
            usleep(20_000)
        }
        #expect(checked > 0, "the walk never reached the gate")
        // The walk is in the step history too: today, by the hour, over the control socket. Steps
        // reach the history before the gate, so it holds at least what the gate counted.
        let gateSteps = (try daemon.status()["stores"] as? [[String: Any]])?.first?["steps"] as? Int ?? 0
        let history = try daemon.client(["history", "--days", "1", "--json"])
        let answer = try #require(
            try JSONSerialization.jsonObject(with: Data(history.standardOutput.utf8)) as? [String: Any],
            "\(history.standardError)")
        let today = (answer["buckets"] as? [[String: Any]])?.last?["steps"] as? Int ?? 0
        #expect(today >= gateSteps && today > 0, "gate \(gateSteps), history: \(history.standardOutput)")
    }

    @Test func relocksOnTimeWhileRunning() throws {
        let folder = try Fixtures.temporaryFolder()
        let daemon = try TestDaemon(
            folder: folder, config: config(folder: folder, walk: sample("walk-wrist-100.csv"), speed: 20))
        defer { daemon.kill(SIGTERM) }
        try daemon.wait(30, for: "the walk to unlock") { $0["shielded"] as? Bool == false }
        let until = try #require(
            ISO8601DateFormatter().date(from: try daemon.store("games")["unlockedUntil"] as? String ?? ""))
        // Status tells what the policy requires now; the shield follows as the wake-up is handled.
        try daemon.wait(until.timeIntervalSinceNow + 10, for: "the relock") {
            $0["shielded"] as? Bool == true && daemon.hostsBlocked
        }
        #expect(Date() >= until)
        #expect(Date().timeIntervalSince(until) < 5, "relocked \(Date().timeIntervalSince(until)) s late")
    }

    @Test func controlCommandsAndRights() throws {
        let folder = try Fixtures.temporaryFolder()
        chmod(folder.path, 0o755)
        let daemon = try TestDaemon(
            folder: folder, config: config(folder: folder, walk: sample("drive-wrist-0.csv"), speed: 1))
        defer { daemon.kill(SIGTERM) }
        let lock = try daemon.client(["lock", "games", "--minutes", "5"])
        #expect(lock.status == 0, "\(lock.standardError)")
        #expect((try daemon.store("games")["owners"] as? [String] ?? []).contains { $0.hasPrefix("lock:") })
        let unknown = try daemon.client(["lock", "nosuchstore", "--minutes", "5"])
        #expect(unknown.status == 1)
        #expect(unknown.standardError.contains("no store named"))
        let emergency = try daemon.client(["unlock", "--emergency", "games"])
        #expect(emergency.status == 0, "\(emergency.standardError)")
        #expect(try daemon.store("games")["shielded"] as? Bool == false)
        let reload = try daemon.client(["reload"])
        #expect(reload.status == 0, "\(reload.standardError)")
        try "{broken".write(
            toFile: folder.appendingPathComponent("config.json").path, atomically: true, encoding: .utf8)
        let badReload = try daemon.client(["reload"])
        #expect(badReload.status == 1)
        #expect(badReload.standardError.contains("old configuration stays"))
        #expect(try daemon.status()["ok"] as? Bool == true)
    }

    @Test(
        .enabled(
            if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"),
            "needs root and setpriv"))
    func anUnprivilegedUserMayOnlyAskStatus() throws {
        let folder = try Fixtures.temporaryFolder()
        chmod(folder.path, 0o755)
        let binary = try Fixtures.copyExecutables(into: folder).path
        let daemon = try TestDaemon(
            folder: folder, config: config(folder: folder, walk: sample("drive-wrist-0.csv"), speed: 1))
        defer { daemon.kill(SIGTERM) }
        func asNobody(_ arguments: [String]) throws -> ProcessResult {
            try runProcess(
                URL(fileURLWithPath: "/usr/bin/setpriv"),
                ["--reuid=nobody", "--regid=nogroup", "--clear-groups", binary] + arguments + [
                    "--socket", daemon.socket,
                ])
        }
        let status = try asNobody(["status"])
        #expect(status.status == 0, "\(status.standardError)")
        #expect(status.standardOutput.contains("games: shielded"))
        #expect(
            status.standardOutput.contains("\n  selects: domains example.com\n"), "\(status.standardOutput)")
        #expect(status.standardOutput.contains("last 7 days: "))
        // Any local user may read the step history, as a chart and as numbers.
        let chart = try asNobody(["history", "--days", "3"])
        #expect(chart.status == 0, "\(chart.standardError)")
        #expect(
            chart.standardOutput.contains("goal 50 steps (|)") && chart.standardOutput.contains("← today"))
        let csv = try asNobody(["history", "--by", "hour", "--csv"])
        #expect(csv.status == 0 && csv.standardOutput.hasPrefix("period,steps\n"), "\(csv.standardError)")
        #expect(csv.standardOutput.split(separator: "\n").count == 25)
        for command in [
            ["lock", "games", "--minutes", "5"], ["unlock", "--emergency", "games"], ["reload"],
            ["skip", "night"],
        ] {
            let result = try asNobody(command)
            #expect(result.status == 1)
            #expect(result.standardError.contains("permission denied"), "\(command): \(result.standardError)")
        }
    }

    @Test(.enabled(if: getuid() == 0, "fanotify needs root"))
    func execShieldDeniesWhileShieldedAndSIGKILLLeavesNothingBlocked() throws {
        let folder = try Fixtures.temporaryFolder()
        let game = folder.appendingPathComponent("game").path
        let editor = folder.appendingPathComponent("editor").path
        try FileManager.default.copyItem(atPath: "/bin/true", toPath: game)
        try FileManager.default.copyItem(atPath: "/bin/true", toPath: editor)
        func run(_ path: String) throws -> Int32 {
            try runProcess(URL(fileURLWithPath: "/bin/sh"), ["-c", path]).status
        }
        let daemon = try TestDaemon(
            folder: folder,
            config: config(folder: folder, walk: sample("walk-front-pocket-303.csv"), exec: game))
        #expect(try run(game) == 126)
        #expect(try run(editor) == 0)
        // The launch guard shows the shield screen and exits 126.
        let guarded = try runProcess(
            Fixtures.stepgateExecutable, ["exec", "--socket", daemon.socket, "--", game])
        #expect(guarded.status == 126)
        #expect(guarded.standardError.contains("games is shielded"))
        try daemon.wait(30, for: "the walk to unlock") { $0["shielded"] as? Bool == false }
        // The shields work off the loop: the unlock reaches the exec shield a moment later.
        var status = try run(game)
        for _ in 0..<50 where status != 0 {
            usleep(100_000)
            status = try run(game)
        }
        #expect(status == 0)
        #expect(
            try runProcess(Fixtures.stepgateExecutable, ["exec", "--socket", daemon.socket, "--", game])
                .status == 0)
        // Relocked by hand, then the daemon is killed: the kernel allows again.
        #expect(try daemon.client(["lock", "games", "--minutes", "5"]).status == 0)
        #expect(try run(game) == 126)
        daemon.kill(SIGKILL)
        #expect(try run(game) == 0)
        // With no daemon, the launch guard fails closed.
        let orphan = try runProcess(
            Fixtures.stepgateExecutable, ["exec", "--socket", daemon.socket, "--", game])
        #expect(orphan.status == 126)
        #expect(orphan.standardError.contains("fails closed"))
    }
}
