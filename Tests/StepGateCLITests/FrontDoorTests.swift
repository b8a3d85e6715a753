import CoreCommands
import Foundation
import StepGateTestSupport
import Testing

/// `stepgate` is a front door without Foundation: `run`, `replay` and `--version` run in it,
/// everything else in `stepgate-full` beside it, which it starts with the same arguments. To the
/// user it is one program: the same output, messages and exit statuses either way.
@Suite("Front door")
struct FrontDoorTests {
    private var frontDoor: URL { Fixtures.stepgateExecutable }
    private var fullProgram: URL { Fixtures.fullProgramExecutable }

    private func sample(_ name: String) -> String { Fixtures.samples.appendingPathComponent(name).path }

    /// Runs `arguments` through the front door and in the full program directly; both results.
    private func both(_ arguments: [String], input: String? = nil) throws -> (ProcessResult, ProcessResult) {
        (
            try runProcess(frontDoor, arguments, input: input),
            try runProcess(fullProgram, arguments, input: input)
        )
    }

    private func expectSame(_ arguments: [String], input: String? = nil) throws {
        let (door, full) = try both(arguments, input: input)
        #expect(door.status == full.status, "\(arguments)")
        #expect(door.standardOutput == full.standardOutput, "\(arguments)")
        #expect(door.standardError == full.standardError, "\(arguments)")
    }

    @Test func routesOnlyRunReplayAndTheVersionToItself() {
        #expect(FrontDoor.route(["--version"]) == .version)
        #expect(FrontDoor.route(["run", "--json"]) == .run)
        #expect(FrontDoor.route(["replay", "a.csv"]) == .replay)
        #expect(FrontDoor.route(["replay", "--help"]) == .replay)
        // Usage errors are the replay's own, printed by the front door as the full program would.
        #expect(FrontDoor.route(["replay", "--nope"]) == .replay)
        for options in [["--policy", "p.json"], ["--start", "2026-01-01T00:00:00Z"], ["--zone=UTC"]] {
            #expect(FrontDoor.route(["replay", "a.csv"] + options) == .fullProgram, "\(options)")
        }
        for arguments in [
            [], ["--help"], ["help", "run"], ["status"], ["daemon"], ["exec", "--", "x"], ["bogus"],
        ] {
            #expect(FrontDoor.route(arguments) == .fullProgram, "\(arguments)")
        }
    }

    @Test func fullProgramCommandsPrintTheSameThroughTheFrontDoor() throws {
        for arguments in [
            [], ["--help"], ["help"], ["help", "status"], ["help", "--man"], ["status", "--help"],
            ["tune", "--help"], ["completions", "bash"], ["bogus"], ["status", "--nope"],
            [
                "replay", "--policy", "/nonexistent.json", "--start", "2026-01-01T00:00:00Z",
                sample("walk-wrist-100.csv"),
            ],
            ["replay", "--zone", "Nowhere/City", "x.csv"], ["replay", "--start", "yesterday", "x.csv"],
        ] {
            try expectSame(arguments)
        }
    }

    @Test func frontDoorCommandsPrintWhatTheFullProgramPrints() throws {
        let walk = sample("walk-wrist-100.csv")
        for arguments in [
            ["--version"], ["run", "--help"], ["replay", "--help"], ["replay", walk],
            ["replay", "--json", "--events", walk, sample("drive-wrist-0.csv")], ["replay"],
            ["replay", "--nope"],
            ["replay", "/nonexistent.csv"], ["replay", walk, "/nonexistent.csv"], ["run", "--rate", "fast"],
            ["run", "extra"], ["replay", "--config", "/nonexistent.json", walk],
        ] {
            try expectSame(arguments)
        }
    }

    @Test func standardInputOutputAndExitStatusPassThrough() throws {
        let config = Fixtures.packageRoot.appendingPathComponent(
            "Tests/UnlockPolicyTests/Scenarios/configs/gate.json"
        )
        .path
        let passing = #"{"at": "2025-03-01T09:00:00Z", "tick": true}"#
        let failing = passing + "\n" + #"{"after": 1, "expect": {"open": ["games"]}}"#
        let (ok, _) = try both(["simulate", "--config", config, "-"], input: passing)
        #expect(ok.status == 0, "\(ok.standardError)")
        try expectSame(["simulate", "--config", config, "-"], input: passing)
        let (failed, _) = try both(["simulate", "--config", config, "-"], input: failing)
        #expect(failed.status == 1)
        #expect(failed.standardError.contains("<stdin>:2:"), "\(failed.standardError)")
        try expectSame(["simulate", "--config", config, "-"], input: failing)
    }

    @Test func theFullProgramIsNamedStepgateWhileItRuns() throws {
        let config = Fixtures.packageRoot.appendingPathComponent(
            "Tests/UnlockPolicyTests/Scenarios/configs/gate.json"
        )
        .path
        // `simulate -` waits for its script on standard input: long enough to read its name.
        let result = try runProcess(
            URL(fileURLWithPath: "/bin/bash"),
            [
                "-c", "sleep 4 | \"$0\" simulate --config \"$1\" - & sleep 2; cat /proc/$!/comm; wait",
                frontDoor.path, config,
            ])
        #expect(result.standardOutput == "stepgate\n", "\(result.standardOutput)")
    }

    /// A folder with a copy of the front door and, if asked, of the full program.
    private func install(_ folder: URL, full: Bool) throws -> String {
        chmod(folder.path, 0o755)
        let door = folder.appendingPathComponent("stepgate").path
        try FileManager.default.copyItem(atPath: frontDoor.path, toPath: door)
        if full {
            try FileManager.default.copyItem(
                atPath: fullProgram.path, toPath: folder.appendingPathComponent("stepgate-full").path)
        }
        return door
    }

    /// A `stepgate-full` that only says it ran.
    private func impostor(in folder: URL) throws -> String {
        let path = folder.appendingPathComponent("stepgate-full").path
        try "#!/bin/sh\necho impostor ran\n".write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o755)
        return path
    }

    @Test func withoutTheFullProgramItSaysWhatIsMissing() throws {
        try withTemporaryFolder { folder in
            let door = try install(folder, full: false)
            let status = try runProcess(URL(fileURLWithPath: door), ["status"])
            #expect(status.status == 127)
            #expect(status.standardOutput.isEmpty)
            #expect(
                status.standardError.hasPrefix(
                    "stepgate: the full program \(folder.path)/stepgate-full is missing (No such file or directory)"
                ),
                "\(status.standardError)")
            #expect(status.standardError.contains("Reinstall the stepgate package"))
            // What the front door runs itself still works.
            let replay = try runProcess(URL(fileURLWithPath: door), ["replay", sample("walk-wrist-100.csv")])
            #expect(replay.status == 0, "\(replay.standardError)")
            #expect(
                try runProcess(URL(fileURLWithPath: door), ["--version"]).standardOutput == StepGateVersion
                    .version + "\n")
        }
    }

    @Test(
        .enabled(
            if: FileManager.default.isExecutableFile(atPath: "/lib64/ld-linux-x86-64.so.2"),
            "needs the x86-64 dynamic loader at /lib64"))
    func startedThroughTheDynamicLoaderItSaysSo() throws {
        let loader = "/lib64/ld-linux-x86-64.so.2"
        let result = try runProcess(URL(fileURLWithPath: loader), [frontDoor.path, "status"])
        #expect(result.status == 127)
        #expect(
            result.standardError.hasPrefix("stepgate: started through the dynamic loader ("),
            "\(result.standardError)")
        #expect(!result.standardError.contains("missing"))
        // What the front door runs itself is unaffected.
        #expect(try runProcess(URL(fileURLWithPath: loader), [frontDoor.path, "--version"]).status == 0)
        // The decision alone, for any loader name.
        guard case .failure(let problem) = FrontDoor.fullProgram(besides: "/usr/lib/ld-linux-aarch64.so.1")
        else {
            Issue.record("a loader's folder was searched for the full program")
            return
        }
        #expect(problem.status == 127)
    }

    /// `setpriv` keeps root's capabilities until it starts the front door, so a user can be
    /// started from a folder they may not enter; the full program beside it is then there but
    /// out of their reach, which is not "missing".
    @Test(
        .enabled(
            if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"),
            "needs root and setpriv"))
    func aFullProgramOutOfTheUsersReachIsNotCalledMissing() throws {
        try withTemporaryFolder { folder in
            let closed = folder.appendingPathComponent("closed")
            let open = closed.appendingPathComponent("open")
            try FileManager.default.createDirectory(at: open, withIntermediateDirectories: true)
            chmod(closed.path, 0o700)
            chmod(open.path, 0o755)
            let door = try Fixtures.copyExecutables(into: open)
            let result = try runProcess(
                URL(fileURLWithPath: "/usr/bin/setpriv"),
                ["--reuid=nobody", "--regid=nogroup", "--clear-groups", door.path, "status"])
            #expect(result.status == 126)
            #expect(
                result.standardError.hasPrefix(
                    "stepgate: cannot reach the full program \(open.path)/stepgate-full: Permission denied"),
                "\(result.standardError)")
        }
    }

    @Test func neitherPathNorArgv0NorALinkChoosesTheFullProgram() throws {
        try withTemporaryFolder { folder in
            let home = folder.appendingPathComponent("door")
            let elsewhere = folder.appendingPathComponent("elsewhere")
            try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
            try FileManager.default.createDirectory(at: elsewhere, withIntermediateDirectories: true)
            chmod(elsewhere.path, 0o755)
            let door = try install(home, full: false)
            _ = try impostor(in: elsewhere)
            // $PATH and argv[0] name the impostor's folder; the front door looks only beside itself.
            let fooled = try runProcess(
                URL(fileURLWithPath: "/usr/bin/env"),
                [
                    "PATH=\(elsewhere.path):/usr/bin:/bin", "/bin/bash", "-c", "exec -a \"$0\" \"$1\" status",
                    elsewhere.path + "/stepgate", door,
                ])
            #expect(!fooled.standardOutput.contains("impostor"), "\(fooled.standardOutput)")
            #expect(fooled.status == 127, "\(fooled.standardError)")
            // A link to the front door from the impostor's folder resolves to the front door's own.
            let link = elsewhere.appendingPathComponent("stepgate").path
            try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: door)
            let linked = try runProcess(URL(fileURLWithPath: link), ["status"])
            #expect(!linked.standardOutput.contains("impostor"))
            #expect(
                linked.standardError.contains("\(home.path)/stepgate-full is missing"),
                "\(linked.standardError)")
        }
    }

    @Test func aFullProgramOthersMayChangeIsNotStarted() throws {
        try withTemporaryFolder { folder in
            let door = try install(folder, full: false)
            let fake = try impostor(in: folder)
            chmod(fake, 0o777)
            let writable = try runProcess(URL(fileURLWithPath: door), ["status"])
            #expect(writable.status == 126)
            #expect(!writable.standardOutput.contains("impostor"))
            #expect(
                writable.standardError.hasPrefix("stepgate: not starting \(fake)"),
                "\(writable.standardError)")
            chmod(fake, 0o755)
            // A link to a program, even one protected like the front door, is not followed.
            let target = fake + ".real"
            try FileManager.default.moveItem(atPath: fake, toPath: target)
            try FileManager.default.createSymbolicLink(atPath: fake, withDestinationPath: target)
            let linked = try runProcess(URL(fileURLWithPath: door), ["status"])
            #expect(linked.status == 126)
            #expect(!linked.standardOutput.contains("impostor"))
            try FileManager.default.removeItem(atPath: fake)
            try FileManager.default.moveItem(atPath: target, toPath: fake)
            // Protected like the front door, the same owner: started.
            let started = try runProcess(URL(fileURLWithPath: door), ["status"])
            #expect(started.standardOutput == "impostor ran\n")
            if getuid() == 0 {
                chown(fake, 65534, 65534)
                let foreign = try runProcess(URL(fileURLWithPath: door), ["status"])
                #expect(foreign.status == 126)
                #expect(!foreign.standardOutput.contains("impostor"))
            }
        }
    }

    @Test func theFrontDoorLinksNoFoundation() throws {
        let result = try runProcess(URL(fileURLWithPath: "/usr/bin/readelf"), ["-d", frontDoor.path])
        #expect(result.status == 0)
        #expect(result.standardOutput.contains("libc.so"))
        #expect(!result.standardOutput.contains("Foundation"), "\(result.standardOutput)")
        // The full program (a debug build links Swift's libraries dynamically) does.
        let full = try runProcess(URL(fileURLWithPath: "/usr/bin/readelf"), ["-d", fullProgram.path])
        #expect(full.standardOutput.contains("libFoundation"))
    }
}
