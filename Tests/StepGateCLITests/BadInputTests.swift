import Foundation
import StepGateTestSupport
import Testing

/// A bad input and the message it must give: the file, the place, what was expected.
struct BadInput: Sendable, CustomTestStringConvertible {
    /// Arguments; `FILE` is replaced by the path of a file holding `contents`, `DIR` by a
    /// folder, `SAMPLE` by the bundled 100-step walk.
    var arguments: [String]
    var contents: String = ""
    var message: String

    var testDescription: String { arguments.joined(separator: " ") + " → " + message }
}

@Suite("Bad input gives a clear error")
struct BadInputTests {
    /// Foundation and Swift debug strings a user must never see.
    static let debugStrings = [
        "NSCocoaErrorDomain", "Debug description", "fragments", "(Success)", "DecodingError",
        "The given data was not valid JSON", "codingPath",
    ]

    static let cases: [BadInput] = [
        // 12: numbers that do not fit, with the key and what was expected.
        BadInput(
            arguments: ["config", "FILE"], contents: #"{"stepsToConfirm": 7.5}"#,
            message: "FILE:1:2: stepsToConfirm: expected a whole number, found 7.5"),
        BadInput(
            arguments: ["config", "FILE"], contents: #"{"stepsToConfirm": 1e20}"#,
            message: "FILE:1:2: stepsToConfirm: expected a whole number, found 1e+20"),
        BadInput(
            arguments: ["config", "FILE"], contents: #"{"detector": {"maximumSkippedPeaks": 2.5}}"#,
            message: "FILE:1:15: detector.maximumSkippedPeaks: expected a whole number, found 2.5"),
        BadInput(
            arguments: ["replay", "SAMPLE", "--config", "FILE"], contents: #"{"fillMissedSteps": 1}"#,
            message: "FILE:1:2: fillMissedSteps: expected true or false, found 1"),
        BadInput(
            arguments: ["tune", "SAMPLE", "--space", "FILE", "--output", "DIR"],
            contents:
                #"{"minimumPeak": {"min": 0.03, "max": 0.1}, "minimumPeak": {"min": 0.03, "max": 0.1}}"#,
            message: "FILE:1:44: invalid JSON: duplicate key \"minimumPeak\""),
        BadInput(
            arguments: ["tune", "SAMPLE", "--space", "FILE", "--output", "DIR"], contents: "null",
            message:
                "FILE:1:1: expected a JSON object of parameters, e.g. {\"minimumPeak\": {\"min\": 0.03, \"max\": 0.1}}, found null"
        ),
        // 14: folders, missing files and null documents.
        BadInput(arguments: ["config", "DIR"], message: "DIR: this is a folder; expected a file"),
        BadInput(
            arguments: ["simulate", "--config", "DIR", "FILE"], contents: "\n",
            message: "DIR: this is a folder; expected a file"),
        // A policy file's errors are located too.
        BadInput(
            arguments: ["replay", "SAMPLE", "--policy", "FILE", "--start", "2026-01-01T00:00:00Z"],
            contents:
                "{\n  \"stores\": {\n    \"games\": { \"selection\": {}, \"gate\": { \"goals\": [{ \"steps\": 0, \"minutes\": 5 }] } }\n  }\n}",
            message: "FILE:3:55: stores.games.gate.goals[0].steps: expected at least 1 step"),
        BadInput(
            arguments: ["replay", "SAMPLE", "--policy", "DIR", "--start", "2026-01-01T00:00:00Z"],
            message: "DIR: this is a folder; expected a file"),
        BadInput(
            arguments: ["daemon", "--check", "--config", "DIR/missing.json"],
            message: "DIR/missing.json: cannot read the file: No such file or directory"),
        BadInput(
            arguments: ["config", "FILE"], contents: "null",
            message: "FILE: expected a JSON object at the top level, found null"),
        // 11: binary files are not recordings or manifests.
        BadInput(
            arguments: ["replay", "FILE"], contents: "\u{7F}ELF\u{2}\u{1}\u{1}\0\0\0\u{1B}[31m\n",
            message: "FILE:1: not a text recording: expected CSV text"),
        BadInput(
            arguments: ["eval", "FILE"], contents: "\u{7F}ELF\u{2}\u{1}\u{1}\0\0\0\u{1B}[31m\n",
            message: "FILE: not a text manifest"),
        BadInput(
            arguments: ["tune", "FILE", "--output", "DIR"], contents: "\u{7F}ELF\u{2}\0\0\n",
            message: "FILE: not a text manifest"),
        // A column --columns names is not in the file.
        BadInput(
            arguments: ["replay", "FILE", "--columns", "time=t:s,x=ax,y=ay,z=az,unit=g"],
            contents: "t,acc_x,ay,az\n0,0,0,1\n",
            message:
                "FILE:1: column not found: expected a column named 'ax' (x=ax in --columns), found 't,acc_x,ay,az'"
        ),
        BadInput(
            arguments: ["plot", "FILE", "--columns", "time=t:s,x=ax,y=ay,z=9,unit=g"],
            contents: "t,ax,ay,az\n0,0,0,1\n",
            message:
                "FILE:1: column not found: expected at least 9 columns (z=9 in --columns), found 4: 't,ax,ay,az'"
        ),
        // 15: a header and nothing else.
        BadInput(
            arguments: ["replay", "FILE"], contents: "time_s,x_g,y_g,z_g\n",
            message: "FILE: empty file: expected data rows after the header, found only the header"),
        // 18: the number found, and a hint for a recording given to eval.
        BadInput(
            arguments: ["simulate", "--config", "CONFIG", "FILE"],
            contents: #"{"at": "2025-03-01T09:00:00Z", "tick": true}"# + "\n"
                + #"{"after": 1e15, "tick": true}"#,
            message:
                "FILE:2: after: expected seconds in 0...10000000000 (about 317 years), found 1000000000000000"
        ),
        BadInput(
            arguments: ["eval", "SAMPLE"],
            message:
                "SAMPLE:1: missing column 'path' (found: time (ms), x, y, z); expected a manifest with the columns"
        ),
        // A manifest row naming a missing file is reported at that row.
        BadInput(
            arguments: ["eval", "FILE"],
            contents:
                "path,format,placement,device,kind,truth_steps,truth_source\nwalk.csv,stepgate,wrist,x,walk,100,count\n",
            message: "FILE:2: walk.csv: "),
        // 17: an output that cannot be written fails before the search (the set does not even
        // exist, so an error about it would mean the search started).
        BadInput(
            arguments: ["tune", "DIR/no-such-set.csv", "--output", "FILE"], contents: "a file",
            message: "FILE: '--output' must be a folder, and this is a file"),
    ]

    @Test(arguments: cases)
    func badInputSaysWhatWhereAndWhy(_ input: BadInput) throws {
        try withTemporaryFolder { folder in
            let file = folder.appendingPathComponent("input.txt").path
            try Data(input.contents.utf8).write(to: URL(fileURLWithPath: file))
            let directory = folder.appendingPathComponent("a-folder").path
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let config = Fixtures.packageRoot.appendingPathComponent(
                "Tests/UnlockPolicyTests/Scenarios/configs/gate.json"
            ).path
            func substitute(_ text: String) -> String {
                text.replacingOccurrences(of: "FILE", with: file).replacingOccurrences(
                    of: "DIR", with: directory
                )
                .replacingOccurrences(of: "CONFIG", with: config)
                .replacingOccurrences(
                    of: "SAMPLE", with: Fixtures.samples.appendingPathComponent("walk-wrist-100.csv").path)
            }
            let result = try runProcess(Fixtures.stepgateExecutable, input.arguments.map(substitute))
            #expect(result.status == 1, "\(result.standardError)")
            #expect(
                result.standardError.contains("Error: " + substitute(input.message)),
                "\(result.standardError)")
            for debug in Self.debugStrings {
                #expect(!result.standardError.contains(debug), "\(result.standardError)")
            }
            // One line, printable: no raw bytes of the input.
            #expect(result.standardError.unicodeScalars.allSatisfy { $0 == "\n" || $0.value >= 0x20 })
            #expect(result.standardError.count < 1000)
        }
    }

    /// 16: every good file is printed, the bad ones are named, and the command fails.
    @Test func replayPrintsEveryGoodFileThenFails() throws {
        try withTemporaryFolder { folder in
            let header = folder.appendingPathComponent("header.csv").path
            try Data("time_s,x_g,y_g,z_g\n".utf8).write(to: URL(fileURLWithPath: header))
            let good = Fixtures.samples.appendingPathComponent("walk-wrist-100.csv").path
            let missing = folder.appendingPathComponent("missing.csv").path
            let result = try runProcess(Fixtures.stepgateExecutable, ["replay", good, missing, header])
            #expect(result.status == 1)
            let lines = result.standardOutput.split(separator: "\n")
            #expect(lines.count == 1 && lines[0].hasPrefix(good) && lines[0].contains(" 100 steps"))
            #expect(result.standardError.contains("Error: \(missing): cannot open"))
            #expect(result.standardError.contains("Error: \(header): empty file"))
            #expect(result.standardError.contains("Error: 2 of 3 files could not be counted"))
        }
    }

    /// 20: the SVG goes to the current folder, not beside the recording.
    @Test func plotWritesIntoTheCurrentFolder() throws {
        try withTemporaryFolder { folder in
            let recording = Fixtures.samples.appendingPathComponent("walk-wrist-100.csv").path
            let result = try runProcess(
                Fixtures.stepgateExecutable, ["plot", recording, "--to", "10"], directory: folder)
            #expect(result.status == 0, "\(result.standardError)")
            #expect(
                FileManager.default.fileExists(
                    atPath: folder.appendingPathComponent("walk-wrist-100.svg").path))
            #expect(
                !FileManager.default.fileExists(
                    atPath: Fixtures.samples.appendingPathComponent("walk-wrist-100.svg").path))
        }
    }

    /// 5: options a command cannot run without are shown without brackets, and options go
    /// before `--` where everything after it belongs to the program.
    @Test func usageShowsRequiredOptionsAndPutsExecOptionsFirst() throws {
        let record = try runProcess(Fixtures.stepgateExecutable, ["record", "--help"]).standardOutput
        #expect(record.contains("USAGE: stepgate record --output <file> "))
        let unlock = try runProcess(Fixtures.stepgateExecutable, ["unlock", "--help"]).standardOutput
        #expect(unlock.contains("USAGE: stepgate unlock <store> --emergency "))
        let exec = try runProcess(Fixtures.stepgateExecutable, ["exec", "--help"]).standardOutput
        #expect(exec.contains("USAGE: stepgate exec [--socket <path>] -- <command> [<argument>...]\n"))
        let tune = try runProcess(Fixtures.stepgateExecutable, ["tune", "--help"]).standardOutput
        #expect(tune.contains("--no-robust"))
    }

    /// 19: the demo resolves the files it is given from where it was run.
    /// The demo installs only what building needs (no broker, no test tools); the test script's
    /// full install leaves no mosquitto service enabled or running where it installed mosquitto.
    /// Runs the script with stand-ins for dpkg-query (nothing installed), apt-get, systemctl,
    /// deb-systemd-helper, service and sudo on PATH that record their calls.
    @Test func installDependenciesLeavesNoBrokerRunning() throws {
        try withTemporaryFolder { folder in
            let bin = folder.appendingPathComponent("bin")
            try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
            let log = folder.appendingPathComponent("calls").path
            for name in ["apt-get", "systemctl", "deb-systemd-helper", "service", "swift"] {
                try "#!/bin/sh\necho \"\(name) $*\" >> '\(log)'\n".write(
                    to: bin.appendingPathComponent(name), atomically: true, encoding: .utf8)
            }
            try "#!/bin/sh\nexit 1\n".write(
                to: bin.appendingPathComponent("dpkg-query"), atomically: true, encoding: .utf8)
            try "#!/bin/sh\nexec \"$@\"\n".write(
                to: bin.appendingPathComponent("sudo"), atomically: true, encoding: .utf8)
            for name in [
                "apt-get", "systemctl", "deb-systemd-helper", "service", "swift", "dpkg-query", "sudo",
            ] {
                chmod(bin.appendingPathComponent(name).path, 0o755)
            }
            let script = Fixtures.packageRoot.appendingPathComponent("scripts/install-deps.sh").path
            let path = "PATH=\(bin.path):/usr/bin:/bin"
            func calls(_ arguments: [String]) throws -> [String] {
                try? FileManager.default.removeItem(atPath: log)
                let result = try runProcess(
                    URL(fileURLWithPath: "/usr/bin/env"), [path, "bash", script] + arguments,
                    directory: folder)
                #expect(result.status == 0, "\(result.standardError)")
                return (try? String(contentsOfFile: log, encoding: .utf8))?.split(separator: "\n").map(
                    String.init) ?? []
            }
            let build = try calls(["--build"])
            let buildInstall = try #require(build.first { $0.hasPrefix("apt-get install") })
            #expect(buildInstall.hasSuffix("libiio-dev libsystemd-dev libmosquitto-dev"), "\(build)")
            #expect(!build.contains { $0.contains("mosquitto.service") })
            let all = try calls([])
            let install = try #require(all.first { $0.hasPrefix("apt-get install") })
            #expect(install.contains(" mosquitto") && install.contains(" dbus-daemon"), "\(all)")
            let disabled = all.contains { $0.contains("disable") && $0.contains("mosquitto.service") }
            #expect(disabled, "installing mosquitto left its service enabled: \(all)")
        }
    }

    @Test func demoScriptResolvesFilesFromTheCallersFolder() throws {
        try withTemporaryFolder { folder in
            try FileManager.default.copyItem(
                at: Fixtures.samples.appendingPathComponent("walk-wrist-100.csv"),
                to: folder.appendingPathComponent("mine.csv"))
            let script = Fixtures.packageRoot.appendingPathComponent("scripts/demo.sh").path
            let binary = "STEPGATE_DEMO_BINARY=\(Fixtures.stepgateExecutable.path)"
            let result = try runProcess(
                URL(fileURLWithPath: "/usr/bin/env"), [binary, "bash", script, "mine.csv"], directory: folder)
            #expect(result.status == 0, "\(result.standardError)")
            #expect(result.standardOutput.hasPrefix("mine.csv "), "\(result.standardOutput)")
            let bundled = try runProcess(
                URL(fileURLWithPath: "/usr/bin/env"), [binary, "bash", script], directory: folder)
            #expect(
                bundled.standardOutput.hasPrefix("samples/walk-wrist-100.csv "), "\(bundled.standardOutput)")
        }
    }
}
