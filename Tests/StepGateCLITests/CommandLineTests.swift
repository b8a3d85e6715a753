import Foundation
import StepGateDaemon
import StepGateTestSupport
import Testing

/// End-to-end tests: run the built `stepgate` and check output, messages and exit status.
@Suite("stepgate command line")
struct CommandLineTests {
    private func stepgate(_ arguments: String...) throws -> ProcessResult {
        try runProcess(Fixtures.stepgateExecutable, arguments)
    }

    private func sample(_ name: String) -> String { Fixtures.samples.appendingPathComponent(name).path }

    private func temporaryFile(_ name: String, _ contents: String) throws -> String {
        let folder = try Fixtures.temporaryFolder()
        let url = folder.appendingPathComponent(name)
        try contents.write(to: url, atomically: true, encoding: .utf8)
        return url.path
    }

    @Test func helpAndVersionExitZero() throws {
        let help = try stepgate("--help")
        #expect(help.status == 0)
        #expect(help.standardOutput.contains("USAGE: stepgate <subcommand>"))
        for name in [
            "replay", "eval", "tune", "plot", "simulate", "devices", "record", "run", "daemon", "status",
            "lock",
            "skip", "unlock", "reload", "exec", "config", "bench",
        ] {
            #expect(help.standardOutput.contains("  \(name) "))
            let sub = try stepgate(name, "--help")
            #expect(sub.status == 0)
            #expect(sub.standardOutput.contains("USAGE: stepgate \(name)"))
            #expect(try stepgate("help", name).standardOutput == sub.standardOutput)
        }
        let version = try stepgate("--version")
        #expect(version.status == 0)
        #expect(version.standardOutput.hasPrefix("0."))
    }

    @Test(arguments: [
        (["frobnicate"], "unknown subcommand 'frobnicate'"),
        (["replay"], "missing expected argument '<file>...'"),
        (["replay", "--frob", "x.csv"], "unknown option '--frob'"),
        (["replay", "x.csv", "--format"], "missing value for '--format <format>'"),
        (["replay", "x.csv", "--format", "xls"], "invalid value 'xls' for '--format'"),
        (["replay", "x.csv", "--units", "furlongs"], "invalid value 'furlongs' for '--units'"),
        (["replay", "x.csv", "--format", "columns"], "invalid value 'columns' for '--format'"),
        (
            ["replay", "x.csv", "--columns", "time=t,x=a,y=b,z=c,unit=g"],
            "invalid value 'time=t,x=a,y=b,z=c,unit=g' for '--columns': time=t: expected COLUMN:UNIT with "
                + "UNIT s, ms, us or ns"
        ),
        (
            ["replay", "x.csv", "--columns", "time=t:s,x=a"],
            "invalid value 'time=t:s,x=a' for '--columns': missing y=COLUMN, z=COLUMN, unit=UNIT (expected "
                + "time=COLUMN:UNIT,x=COLUMN,y=COLUMN,z=COLUMN,unit=UNIT[,delimiter=D])"
        ),
        (
            ["replay", "x.csv", "--format", "bangle", "--columns", "time=t:s,x=a,y=b,z=c,unit=g"],
            "'--format' and '--columns' cannot be used together"
        ),
        (
            ["plot", "x.csv", "--columns", "time=t:s,x=a,y=b,z=c,unit=hz"],
            "invalid value 'time=t:s,x=a,y=b,z=c,unit=hz' for '--columns': unit=hz: expected g, m/s2 or "
                + "counts:<counts per g>"
        ),
        (["eval"], "missing expected argument '<set>...'"),
        (["config", "a", "b"], "unexpected argument 'b'"),
        (["bench", "--samples", "10"], "invalid value '10' for '--samples'"),
        (["bench", "--executable", "/nonexistent"], "invalid value '/nonexistent' for '--executable'"),
        (["simulate", "s.jsonl"], "missing '--config <file>'"),
        (["daemon"], "missing '--config <file>'"),
        (["lock", "games"], "missing '--minutes <minutes>'"),
        (["lock", "games", "--minutes", "-3"], "invalid value '-3' for '--minutes'"),
        (["unlock", "games"], "only emergency unlocks exist"),
        (["skip"], "expected exactly one '<schedule>'"),
        (["exec"], "missing the program to start"),
        (["replay", "x.csv", "--policy", "p.json"], "'--policy' needs '--start <time>'"),
        (
            ["replay", "x.csv", "--start", "2026-01-01T00:00:00Z"],
            "'--start', '--zone' and '--verbose' go with '--policy <file>'"
        ),
        (["replay", "x.csv", "--verbose"], "'--start', '--zone' and '--verbose' go with '--policy <file>'"),
        (
            ["replay", "x.csv", "--bouts", "--policy", "p.json", "--start", "2026-01-01T00:00:00Z"],
            "'--bouts' counts recordings; it does not go with '--policy'"
        ),
        (
            ["replay", "x.csv", "--policy", "p.json", "--start", "yesterday"],
            "invalid value 'yesterday' for '--start'"
        ),
        (
            [
                "replay", "x.csv", "--policy", "p.json", "--start", "2026-01-01T00:00:00Z", "--zone",
                "Mars/Olympus",
            ], "invalid value 'Mars/Olympus' for '--zone'"
        ),
    ])
    func usageErrorsExit64WithUsage(arguments: [String], message: String) throws {
        let result = try runProcess(Fixtures.stepgateExecutable, arguments)
        #expect(result.status == 64)
        #expect(result.standardError.contains("Error: \(message)"), "\(result.standardError)")
        #expect(result.standardError.contains("Usage: stepgate"))
        #expect(result.standardOutput.isEmpty)
    }

    @Test func replayCountsTheSamplesAndPrintsATotal() throws {
        let result = try stepgate("replay", sample("walk-wrist-100.csv"), sample("drive-wrist-0.csv"))
        #expect(result.status == 0)
        let lines = result.standardOutput.split(separator: "\n")
        #expect(lines.count == 3)
        #expect(lines[0].contains("walk-wrist-100.csv"))
        #expect(lines[0].contains("bangle"))
        #expect(lines[2].hasPrefix("total"))
    }

    @Test func replayJSONAndEventsAreValidJSONLines() throws {
        let result = try stepgate("replay", "--json", "--events", sample("walk-wrist-100.csv"))
        #expect(result.status == 0)
        var steps: [[String: Any]] = []
        var files: [[String: Any]] = []
        var total: [String: Any]?
        for line in result.standardOutput.split(separator: "\n") {
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            if object["time_s"] != nil {
                steps.append(object)
            } else if object["total_steps"] != nil {
                total = object
            } else {
                files.append(object)
            }
        }
        #expect(files.count == 1)
        let counted = try #require(files.first?["steps"] as? Int)
        #expect(steps.count == counted)
        #expect(steps.map { $0["count"] as? Int } == (1...counted).map { $0 })
        let times = steps.compactMap { $0["time_s"] as? Double }
        #expect(times == times.sorted())
        #expect((times.first ?? -1) >= 0 && (times.last ?? 1000) <= 80)
        #expect(total?["total_steps"] as? Int == counted)
    }

    @Test func replayByNamedColumnsCountsAKnownRecordingTheSame() throws {
        let walk = sample("walk-wrist-100.csv")
        let detected = try stepgate("replay", "--json", walk)
        let named = try stepgate(
            "replay", "--json", "--columns", "time=Time (ms):ms,x=X,y=Y,z=Z,unit=counts:8192", walk)
        #expect(named.status == 0, "\(named.standardError)")
        let format = #/"format":"[a-z-]+",/#
        let guessed = #/"gravity_guessed":(true|false),/#
        #expect(named.standardOutput.contains(#""steps":100,"#))
        #expect(named.standardOutput.contains(#""format":"columns","#))
        // The header of a --columns file does not say whether gravity is included: guessed.
        #expect(named.standardOutput.contains(#""gravity_guessed":true,"#))
        #expect(detected.standardOutput.contains(#""gravity_guessed":false,"#))
        #expect(
            named.standardOutput.replacing(format, with: "").replacing(guessed, with: "")
                == detected.standardOutput.replacing(format, with: "").replacing(guessed, with: ""))
    }

    @Test func gravityOverridesWhatTheRecordingSays() throws {
        let walk = sample("walk-wrist-100.csv")
        let removed = try stepgate("replay", "--gravity", "removed", walk)
        #expect(removed.status == 0, "\(removed.standardError)")
        #expect(removed.standardOutput.hasSuffix("bangle, gravity removed\n"), "\(removed.standardOutput)")
        let wrong = try stepgate("replay", "--gravity", "sideways", walk)
        #expect(wrong.status != 0)
        #expect(wrong.standardError.contains("expected included or removed"), "\(wrong.standardError)")
    }

    @Test func replayNotesTheRowsWithoutAccelerometerValues() throws {
        var text =
            "sep=;\nACCELEROMETER X (m/s²);ACCELEROMETER Y (m/s²);ACCELEROMETER Z (m/s²);LIGHT (lux);"
            + "Time since start in ms ;YYYY-MO-DD HH-MI-SS_SSS\n;;;8.8;5;2022-09-28 12:08:36:509"
        for i in 1...200 { text += "\n0;0;9.81;8.8;\(i * 10);2022-09-28 12:08:36:526" }
        let path = try temporaryFile("androsensor.csv", text)
        let result = try stepgate("replay", "--json", path)
        #expect(result.status == 0, "\(result.standardError)")
        #expect(
            result.standardError.contains(
                "androsensor.csv: 1 row without accelerometer values passed over (first at line 3)"),
            "\(result.standardError)")
        #expect(result.standardOutput.contains(#""samples":200,"#))
        #expect(result.standardOutput.contains(#""format":"androsensor","#))
        #expect(result.standardOutput.contains(#""rows_without_acceleration":1}"#))
    }

    @Test func aMalformedRowNamesFileLineAndColumn() throws {
        let path = try temporaryFile("bad.csv", "time_s,x_g,y_g,z_g\n0.00,0,0,1\n0.01,0,abc,1\n")
        let result = try stepgate("replay", path)
        #expect(result.status == 1)
        #expect(result.standardError.contains("bad.csv:3"), "\(result.standardError)")
        #expect(result.standardError.contains("abc"))
        #expect(!result.standardError.contains("Usage:"))
    }

    @Test func skipBadRowsReportsWhatItSkipped() throws {
        var text = "time_s,x_g,y_g,z_g\n"
        for i in 0..<100 { text += "\(Double(i) / 100),0,0,1\n" }
        text += "1.00,0,abc,1\n1.01,0,0\n"
        let path = try temporaryFile("skip.csv", text)
        let result = try stepgate("replay", "--skip-bad-rows", path)
        #expect(result.status == 0)
        #expect(result.standardError.contains("2 rows skipped"), "\(result.standardError)")
        #expect(result.standardOutput.contains("100 samples"))
    }

    @Test func aMissingFileIsAnErrorNotAUsageError() throws {
        let result = try stepgate("replay", "/nonexistent/walk.csv")
        #expect(result.status == 1)
        #expect(result.standardError.contains("/nonexistent/walk.csv"))
    }

    @Test func evalScoresTheSampleManifest() throws {
        let result = try stepgate("eval", "--json", sample("manifest.csv"))
        #expect(result.status == 0)
        let lines = result.standardOutput.split(separator: "\n")
        #expect(lines.count == 4)
        let summary = try #require(
            try JSONSerialization.jsonObject(with: Data(lines[3].utf8)) as? [String: Any])
        #expect(summary["walks"] as? Int == 2)
        #expect(summary["walk_mape_percent"] is Double)
        #expect(summary["false_steps_per_hour"] is Double)
    }

    @Test func evalOverAFolderReadsTheTruthFromNames() throws {
        let result = try stepgate("eval", Fixtures.samples.path)
        #expect(result.status == 0)
        #expect(result.standardOutput.contains("walk-wrist-100.csv"))
        #expect(result.standardOutput.contains("walks MAPE"))
        // manifest.csv is a set description, not a recording: it is passed over.
        #expect(!result.standardOutput.contains("manifest.csv"))
        let stray = try temporaryFile("notes.csv", "time_s,x_g,y_g,z_g\n0,0,0,1\n")
        let folder = (stray as NSString).deletingLastPathComponent
        let named = try stepgate("eval", folder)
        #expect(named.standardError.contains("notes.csv: not scored: the file name carries no step count"))
    }

    @Test func configPrintsTheExampleAndRejectsBadFiles() throws {
        let printed = try stepgate("config")
        #expect(printed.status == 0)
        let example = try String(
            contentsOf: Fixtures.samples.appendingPathComponent("detector.example.json"), encoding: .utf8)
        #expect(
            printed.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
                == example.trimmingCharacters(in: .whitespacesAndNewlines))
        // FILE:LINE:COLUMN: key.path: expected X, found Y.
        let cases = [
            (#"{"minimumPeek": 0.1}"#, ":1:2: minimumPeek: unknown key 'minimumPeek'"),
            (
                #"{"detector": {"minimumPeak": "high"}}"#,
                #":1:15: detector.minimumPeak: expected a number, found "high""#
            ),
            (#"{"minimumPeak": 100}"#, ":1:2: minimumPeak: expected g in 0...8, found 100.0"),
            (#"{"minimumPeak": "#, ":1:17: invalid JSON: unexpected end of input"),
            ("[1, 2]", ": expected a JSON object at the top level, found [1,2]"),
            (#"{"sampleRate": 25, "sampleRate": 1000}"#, ":1:20: invalid JSON: duplicate key \"sampleRate\""),
            (#"{"maximumGap": 1e300}"#, ":1:2: maximumGap: expected seconds"),
            // A whole number written as a fraction or with an exponent names its key.
            ("{\n  \"stepsToConfirm\": 7.5\n}", ":2:3: stepsToConfirm: expected a whole number, found 7.5"),
            (#"{"stepsToConfirm": 1e20}"#, ":1:2: stepsToConfirm: expected a whole number"),
        ]
        for (text, message) in cases {
            let path = try temporaryFile("c.json", text)
            let result = try stepgate("config", path)
            #expect(result.status == 1)
            #expect(result.standardError.contains(path + message), "\(result.standardError)")
            let replay = try stepgate("replay", "--config", path, sample("walk-wrist-100.csv"))
            #expect(replay.status == 1)
        }
    }

    @Test func aConfigurationChangesTheCount() throws {
        let path = try temporaryFile("strict.json", #"{"minimumPeak": 2}"#)
        let result = try stepgate("replay", "--json", "--config", path, sample("walk-wrist-100.csv"))
        #expect(result.status == 0)
        #expect(result.standardOutput.contains(#""steps":0"#))
    }

    @Test func benchPrintsEveryFigure() throws {
        let result = try stepgate(
            "bench", "--json", "--samples", "20000", "--repeat", "1", "--tune-set", sample("manifest.csv"),
            "--executable", Fixtures.stepgateExecutable.path, sample("walk-wrist-100.csv"))
        #expect(result.status == 0)
        let line = try #require(result.standardOutput.split(separator: "\n").last)
        let figures = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        for key in [
            "detector_ns_per_sample_100hz", "detector_ns_per_sample_12_5hz", "replay_in_process_ms",
            "replay_whole_process_ms", "wc_l_ms", "replay_over_wc_l", "start_to_open_ms", "true_ms",
            "tune_configurations_per_s",
        ] {
            #expect((figures[key] as? Double ?? 0) > 0, "\(key)")
        }
        #expect((figures["csv_parse_mb_per_s"] as? [String: Any])?.count == 1)
        if getuid() == 0 {  // the exec shield's figures (fanotify needs root)
            for key in [
                "exec_median_us", "exec_median_us_with_exec_shield", "exec_beside_median_us",
                "exec_beside_median_us_with_exec_shield",
            ] {
                #expect((figures[key] as? Double ?? 0) > 0, "\(key)")
            }
        }
    }

    private var scenarios: URL {
        Fixtures.packageRoot.appendingPathComponent("Tests/UnlockPolicyTests/Scenarios")
    }

    @Test func simulateRunsAScenarioAndChecksItsExpectations() throws {
        let result = try stepgate(
            "simulate", "--config", scenarios.appendingPathComponent("configs/gate.json").path,
            scenarios.appendingPathComponent("gate-graduated-cap.jsonl").path)
        #expect(result.status == 0, "\(result.standardError)")
        let lines = result.standardOutput.split(separator: "\n")
        #expect(!lines.isEmpty)
        for line in lines {
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            #expect(object["at"] is String)
            // One line per effect, or the verdict of an "expect" line.
            #expect(object["effect"] is String || object["expect"] as? String == "ok")
        }
        #expect(result.standardOutput.contains(#""effect":"remove""#))
    }

    @Test func simulateStopsAtAFailedExpectationWithTheLine() throws {
        let script = try temporaryFile(
            "s.jsonl",
            """
            {"at": "2025-03-01T09:00:00Z", "tick": true}
            {"after": 1, "expect": {"open": ["games"]}}
            """)
        let result = try stepgate(
            "simulate", "--config", scenarios.appendingPathComponent("configs/gate.json").path, script)
        #expect(result.status == 1)
        #expect(result.standardError.contains("s.jsonl:2:"), "\(result.standardError)")
    }

    @Test func simulateReportsConfigurationErrorsWithTheirPath() throws {
        let config = try temporaryFile(
            "p.json", #"{"stores": {"games": {"selection": {"executables": [1]}}}}"#)
        let script = try temporaryFile("s.jsonl", #"{"at": "2025-03-01T09:00:00Z", "tick": true}"#)
        let result = try stepgate("simulate", "--config", config, script)
        #expect(result.status == 1)
        #expect(
            result.standardError.contains("stores.games.selection.executables"), "\(result.standardError)")
    }

    @Test func replayThroughThePolicyUnlocksAfterTheGoal() throws {
        let policy = try temporaryFile(
            "p.json",
            #"{"stores": {"games": {"selection": {"executables": ["/usr/games/x"]}, "gate": {"goals": [{"steps": 100, "minutes": 1}]}}}}"#
        )
        // By default, what changed, as text: locked, unlocked after 100 steps, locked again.
        let changes = try stepgate(
            "replay", sample("walk-front-pocket-303.csv"), "--policy", policy, "--start",
            "2026-11-29T18:00:00Z",
            "--zone", "UTC")
        #expect(changes.status == 0, "\(changes.standardError)")
        let lines = changes.standardOutput.split(separator: "\n")
        #expect(lines.first?.hasSuffix("303 steps in 171.5 s") == true)
        #expect(lines.dropFirst().first == "what the policy did (until 2026-11-29T18:02:51Z):")
        #expect(lines.dropFirst(2).allSatisfy { $0.hasPrefix("2026-11-29T18:") }, "\(lines)")
        #expect(!changes.standardOutput.contains("wake-up") && !changes.standardOutput.contains("apply"))
        #expect(
            lines.contains {
                $0.contains("  owner-removed games [gate] until ") && $0.contains("walked 100 steps")
            })
        #expect(lines.filter { $0.contains("  owner-added games [gate]") }.count == 2)
        // --verbose --json: every effect as a JSON line.
        let result = try stepgate(
            "replay", sample("walk-front-pocket-303.csv"), "--policy", policy, "--start",
            "2026-11-29T18:00:00Z",
            "--zone", "UTC", "--verbose", "--json")
        #expect(result.status == 0, "\(result.standardError)")
        let events = result.standardOutput.split(separator: "\n").dropFirst().compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        let effects = events.compactMap { $0["effect"] as? String }
        #expect(!effects.contains("persist"))
        // Locked at the start, unlocked once 100 steps are walked, locked again a minute later.
        #expect(effects.first(where: { $0 == "apply" || $0 == "remove" }) == "apply")
        #expect(effects.filter { $0 == "remove" }.count == 1)
        #expect(effects.filter { $0 == "apply" }.count >= 2)
    }

    /// Several recordings replay one after another on one clock, a day made of walks: four
    /// pocket walks (1,212 steps) meet the example's daily goal of 1,000 steps in the fourth.
    @Test func replayThroughThePolicyPlaysSeveralWalksOnOneClock() throws {
        let walk = sample("walk-front-pocket-303.csv")
        let result = try stepgate(
            "replay", walk, walk, walk, walk, "--policy", sample("stepgate.example.json"), "--start",
            "2026-11-29T09:00:00Z")
        #expect(result.status == 0, "\(result.standardError)")
        let lines = result.standardOutput.split(separator: "\n").map(String.init)
        #expect(lines.prefix(4).allSatisfy { $0.hasSuffix("303 steps in 171.5 s") }, "\(lines)")
        #expect(lines[4] == "1212 steps in all; what the policy did (until 2026-11-29T09:11:25Z):")
        let unlocked = try #require(lines.first { $0.contains("owner-removed games [gate]") })
        #expect(unlocked.contains("walked 1000 steps today (goal 1000 today): unlocked for 30 min"))
        // The unlock comes during the fourth walk (after 3 × 171.5 s).
        #expect(unlocked.hasPrefix("2026-11-29T09:08:") || unlocked.hasPrefix("2026-11-29T09:09:"))
    }

    /// `config` checks a detector configuration; given a daemon's whole configuration it says
    /// that only the detector section was checked, and what checks the rest.
    @Test func configOnADaemonConfigurationPointsToDaemonCheck() throws {
        let result = try stepgate("config", sample("stepgate.example.json"))
        #expect(result.status == 0)
        #expect(
            result.standardError.contains(
                "only its \"detector\" section was checked; check the whole configuration with 'stepgate daemon --check --config "
            ))
        let detector = try stepgate("config", sample("detector.example.json"))
        #expect(detector.status == 0 && detector.standardError.isEmpty)
    }

    @Test func daemonCheckValidatesTheExampleConfiguration() throws {
        let result = try stepgate("daemon", "--check", "--config", sample("stepgate.example.json"))
        #expect(result.status == 0, "\(result.standardError)")
        #expect(
            result.standardOutput.contains(
                "stores:\n  games: locked until walked: 1000 steps today → 30 min, 2000 steps today → 30 min more; "
                    + "shielded 22:00–07:00 daily (night, Europe/Berlin)\n"))
        #expect(result.standardOutput.contains("\n  domains: blocks the domains of games in /etc/hosts"))
        #expect(result.standardOutput.contains("\n  exec: games: /usr/games/ is "))
        #expect(
            !result.standardOutput.contains("stays open"), "the example's domains are written without www.")
        let folder = try Fixtures.temporaryFolder()
        chmod(folder.path, 0o755)
        let www = try temporaryFile(
            "www.json",
            #"{"input": {"replay": ""# + sample("walk-wrist-100.csv")
                + #""}, "policy": {"stores": {"games": {"selection": {"domains": ["www.youtube.com"]}}}}, "#
                + #""shields": {"domains": {"path": ""# + folder.path
                + #"/hosts", "browserPolicies": false}}}"#)
        let note = try stepgate("daemon", "--check", "--config", www)
        #expect(
            note.standardOutput.contains(
                "\n  domains: games: www.youtube.com blocks only that name; youtube.com stays open (write youtube.com to block both)"
            ), "\(note.standardOutput)\(note.standardError)")
        #expect(result.standardOutput.contains("programs added there later are shielded too"))
        #expect(result.standardOutput.contains("\n  hook journal: runs /usr/bin/logger -t stepgate-hook"))
        let bad = try temporaryFile(
            "d.json",
            #"{"input": {"replay": "x.csv"}, "policy": {"stores": {}}, "shields": {"exec": {"enabled": 1}}}"#)
        let failed = try stepgate("daemon", "--check", "--config", bad)
        #expect(failed.status == 1)
        #expect(failed.standardError.contains("shields.exec.enabled: expected true or false"))
    }

    /// Every `executables` entry is resolved as the exec shield will resolve it: a folder
    /// written without its `/`, a pattern that matches nothing and a missing program are named
    /// with their key; a folder and a pattern say what they stand for now.
    @Test func daemonCheckResolvesEveryProgramEntry() throws {
        let folder = try Fixtures.temporaryFolder().path
        try FileManager.default.createDirectory(atPath: folder + "/games", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: "/bin/true", toPath: folder + "/games/tux")
        let entries = [folder + "/games", folder + "/*/nothing*", folder + "/games/kart"]
        let config = try temporaryFile(
            "exec.json",
            #"{"input": {"replay": ""# + sample("walk-wrist-100.csv")
                + #""}, "policy": {"stores": {"games": {"selection": {"executables": ["#
                + entries.map { "\"\($0)\"" }.joined(separator: ", ")
                + #"]}}}}, "shields": {"exec": {"enabled": true}}}"#)
        let result = try stepgate("daemon", "--check", "--config", config)
        #expect(result.status == 1)
        let key = "policy.stores.games.selection.executables"
        for expected in [
            "\(key): \(folder)/games: a folder; write \"\(folder)/games/\" to shield every program in it",
            "\(key): \(folder)/*/nothing*: matches no program",
            "\(key): \(folder)/games/kart: not found",
        ] {
            #expect(result.standardError.contains(expected), "\(result.standardError)")
        }
        let fixed = try temporaryFile(
            "exec-fixed.json",
            #"{"input": {"replay": ""# + sample("walk-wrist-100.csv")
                + #""}, "policy": {"stores": {"games": {"selection": {"executables": [""#
                + folder + #"/games/", ""# + folder + #"/*/t*"]}}}}, "shields": {"exec": {"enabled": true}}}"#
        )
        let valid = try stepgate("daemon", "--check", "--config", fixed)
        #expect(!valid.standardError.contains(key), "\(valid.standardError)")
        #expect(
            valid.standardOutput.contains(
                "exec: games: \(folder)/games/ is 1 program now (tux); programs added"))
        #expect(valid.standardOutput.contains("exec: games: \(folder)/*/t* is 1 program now (tux)\n"))
    }

    /// `--check` finds what the daemon would fail on at run time, each with its key.
    @Test func daemonCheckFindsRunTimeFailures() throws {
        let config = try temporaryFile(
            "run.json",
            #"""
            {"input": {"replay": "/nonexistent/walk.csv"},
             "policy": {"stores": {"games":
                {"selection": {"hooks": ["h"], "systemdUnits": ["x.service"]}}}},
             "shields": {"hooks": {"h": {"command": ["/nonexistent/hook"]}},
                         "nftables": {"nft": "/nonexistent/nft"}}}
            """#)
        let result = try stepgate("daemon", "--check", "--config", config)
        #expect(result.status == 1)
        for expected in [
            "input.replay: /nonexistent/walk.csv: No such file or directory",
            "shields.hooks.h.command: /nonexistent/hook: not found or not executable",
            "shields.nftables.nft: /nonexistent/nft: not found",
            "policy: games select systemd-unit targets but no shield enforces them",
        ] {
            #expect(result.standardError.contains(expected), "\(result.standardError)")
        }
        #expect(!result.standardOutput.contains("valid"))
    }
}
