import Foundation
import StepGateTestSupport
import Testing

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// End-to-end tests of `stepgate tune` and `stepgate plot` on the bundled samples, with tiny
/// budgets (the debug binary; a few hundred detector runs in all).
@Suite("stepgate tune and plot")
struct TuneCommandTests {
    private func stepgate(_ arguments: [String]) throws -> ProcessResult {
        try runProcess(Fixtures.stepgateExecutable, arguments)
    }

    private var manifest: String { Fixtures.samples.appendingPathComponent("manifest.csv").path }

    private func read(_ folder: URL, _ name: String) throws -> String {
        try String(contentsOf: folder.appendingPathComponent(name), encoding: .utf8)
    }

    /// A small manifest of two Oxford walks (with their foot switches) and the bundled drive.
    private func dailyLifeManifest(in folder: URL) throws -> String {
        let oxford = Fixtures.sharedData.appendingPathComponent("oxford-optimisation").path
        let drive = Fixtures.samples.appendingPathComponent("drive-wrist-0.csv").path
        let text = """
            path,format,placement,device,kind,truth_steps,truth_source
            \(oxford)/Pixel_Jamie_Hard_InHand_1/accelerometer.csv,oxford-ns,hand,Pixel,walk,0,x
            \(oxford)/Samsung_Dario_Hard_FrontPocket_1/accelerometer.csv,oxford-ns,front-pocket,Samsung,walk,0,x
            \(drive),bangle,wrist,Bangle.js,nowalk,0,x
            """
        let path = folder.appendingPathComponent("day.csv").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test(.enabled(if: Fixtures.sharedDataAvailable, "../shared/data is not present"))
    func evalDailyLifeReportsDaysAndRecallByBoutLength() throws {
        let folder = try Fixtures.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let day = try dailyLifeManifest(in: folder)
        let result = try stepgate(["eval", "--daily-life", "4", "--days", "2", "--bouts", "12", day])
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput.contains("daily-life days from 2 walks with per-step truth"))
        #expect(result.standardOutput.contains("bout length"))
        #expect(result.standardOutput.contains("day error"))
        let rows = result.standardOutput.split(separator: "\n").filter {
            $0.hasPrefix("4 ") || $0.hasPrefix("5 ")
        }
        #expect(rows.count == 2, "\(result.standardOutput)")
        let json = try stepgate(["eval", "--daily-life", "4", "--days", "2", "--bouts", "12", "--json", day])
        #expect(json.status == 0)
        #expect(json.standardOutput.contains("\"recall_percent_by_bout_length\""))
        // Without walks carrying per-step truth there is nothing to cut bouts from.
        let none = try stepgate(["eval", "--daily-life", "1", manifest])
        #expect(none.status == 1)
        #expect(none.standardError.contains("per-step truth"))
    }

    /// `eval --misses` matches counted steps to the foot switches and reports the misses by
    /// phase; recordings without per-step truth are left out, and a set of none is an error.
    @Test(.enabled(if: Fixtures.sharedDataAvailable, "../shared/data is not present"))
    func evalMissesReportsMissedStepsByPhase() throws {
        let folder = try Fixtures.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let result = try stepgate(["eval", "--misses", try dailyLifeManifest(in: folder)])
        #expect(result.status == 0, "\(result.standardError)")
        let lines = result.standardOutput.split(separator: "\n")
        #expect(lines.filter { $0.contains("accelerometer.csv") }.count == 2, "\(result.standardOutput)")
        for phase in ["start ", "stop ", "middle ", "all "] {
            #expect(lines.contains { $0.hasPrefix(phase) }, "\(phase)")
        }
        #expect(!lines.contains { $0.hasPrefix("turn ") }, "no U-turn times given")
        let none = try stepgate(["eval", "--misses", manifest])
        #expect(none.status == 1)
        #expect(none.standardError.contains("'--misses' needs recordings with per-step truth"))
    }

    /// The wrist no-walk set names stretches of a day log; eval counts each stretch alone.
    @Test(.enabled(if: Fixtures.sharedDataAvailable, "../shared/data is not present"))
    func evalCountsTheStretchesAManifestNames() throws {
        let set = Fixtures.packageRoot.appendingPathComponent("Tests/WristNoWalk/manifest.csv").path
        let result = try stepgate(["eval", set])
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput.contains("0_HughB-work-66.csv#t=1990,3330  wrist"))
        #expect(result.standardOutput.contains("5.05 h, 30 no-walk logs"), "\(result.standardOutput)")
    }

    @Test func tuneAcrossSetsReportsEachSetAndHoldsEachOut() throws {
        let folder = try Fixtures.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        // The bundled manifest holds two formats: two sets, samples/bangle and samples/oxford.
        let result = try stepgate([
            "tune", manifest, "--budget", "4", "--folds", "0", "--cv-budget", "2", "--no-placement-cv",
            "--set-weight", "samples/bangle=2", "--output", folder.path,
        ])
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput.contains("leave-set-out"))
        #expect(result.standardOutput.contains("set samples/bangle walks MAPE %"))
        #expect(result.standardOutput.contains("set samples/oxford walks MAPE %"))
        #expect(result.standardOutput.contains("set-held-out"))
        let unknown = try stepgate(["tune", manifest, "--budget", "2", "--set-weight", "pebble=2"])
        #expect(unknown.status == 64)
        #expect(unknown.standardError.contains("no set named 'pebble'"), "\(unknown.standardError)")
    }

    @Test func tuneWritesTheConfigurationReportAndFigures() throws {
        let folder = try Fixtures.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let result = try stepgate([
            "tune", manifest, "--budget", "6", "--folds", "2", "--cv-budget", "3", "--output", folder.path,
        ])
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput.contains("walks MAPE %"))
        #expect(result.standardOutput.contains("configurations/s"))
        for name in ["best.json", "report.md", "objective.svg", "placements.svg", "space.json"] {
            #expect(
                FileManager.default.fileExists(atPath: folder.appendingPathComponent(name).path), "\(name)")
        }
        let report = try read(folder, "report.md")
        #expect(report.contains("## Summary"))
        #expect(report.contains("## Per recording"))
        #expect(report.contains("walk-front-pocket-303.csv"))
        #expect(report.contains("after (k-fold)"))
        for name in ["objective.svg", "placements.svg"] {
            #expect(XMLParser(data: Data(try read(folder, name).utf8)).parse(), "\(name)")
        }
        // best.json is a valid configuration for --config.
        let check = try stepgate(["config", folder.appendingPathComponent("best.json").path])
        #expect(check.status == 0, "\(check.standardError)")
    }

    @Test func aSeedReproducesTheBestConfigurationWithAnyJobs() throws {
        var outputs: [String] = []
        for jobs in ["1", "2"] {
            let folder = try Fixtures.temporaryFolder()
            defer { try? FileManager.default.removeItem(at: folder) }
            let result = try stepgate([
                "tune", manifest, "--budget", "10", "--folds", "0", "--no-placement-cv", "--seed", "7",
                "--jobs", jobs, "--output", folder.path,
            ])
            #expect(result.status == 0, "\(result.standardError)")
            outputs.append(try read(folder, "best.json"))
        }
        #expect(outputs[0] == outputs[1])
    }

    @Test(arguments: [
        (["tune"], "missing expected argument '<set>...'"),
        (["tune", "m.csv", "--budget", "0"], "invalid value '0' for '--budget'"),
        (["tune", "m.csv", "--time", "soon"], "invalid value 'soon' for '--time'"),
        (["tune", "m.csv", "--folds", "1"], "invalid value '1' for '--folds'"),
        (["tune", "m.csv", "--jobs", "0"], "invalid value '0' for '--jobs'"),
        (["tune", "m.csv", "--false-step-weight", "-1"], "invalid value '-1' for '--false-step-weight'"),
        (
            ["tune", "m.csv", "--set-weight", "pebble"],
            "option '--set-weight <name=w>': expected NAME=WEIGHT"
        ),
        (["tune", "m.csv", "--daily-life", "-2"], "invalid value '-2' for '--daily-life'"),
        (["eval", "m.csv", "--days", "3"], "option '--days' needs '--daily-life'"),
        (["eval", "m.csv", "--daily-life", "x"], "option '--daily-life <seed>': expected a whole number"),
        (["eval", "m.csv", "--misses", "--daily-life", "1"], "'--misses' does not go with '--daily-life'"),
        (["eval", "m.csv", "--misses", "--json"], "'--misses' goes with none of '--json'"),
        (["plot"], "missing expected argument '<file>'"),
        (["plot", "a.csv", "b.csv"], "unexpected argument 'b.csv'"),
        (["plot", "a.csv", "--from", "20", "--to", "10"], "'--from' must be before '--to'"),
    ])
    func usageErrorsExit64(arguments: [String], message: String) throws {
        let result = try stepgate(arguments)
        #expect(result.status == 64)
        #expect(result.standardError.contains("Error: \(message)"), "\(result.standardError)")
    }

    @Test func aBadSpaceFileNamesTheFileAndKey() throws {
        let folder = try Fixtures.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let space = folder.appendingPathComponent("space.json")
        try #"{"minimumPeak": {"min": 0.2, "max": 0.1}}"#.write(to: space, atomically: true, encoding: .utf8)
        let result = try stepgate(["tune", manifest, "--space", space.path, "--output", folder.path])
        #expect(result.status == 1)
        #expect(
            result.standardError.contains("space.json:1:2: minimumPeak: expected min ≤ max"),
            "\(result.standardError)")
    }

    @Test func aTimeLimitEndsTheSearchAndStillWritesTheBest() throws {
        let folder = try Fixtures.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let result = try stepgate([
            "tune", manifest, "--time", "1s", "--folds", "0", "--no-placement-cv", "--output", folder.path,
        ])
        #expect(result.status == 0, "\(result.standardError)")
        #expect(FileManager.default.fileExists(atPath: folder.appendingPathComponent("best.json").path))
    }

    @Test func printSpaceShowsTheDefaults() throws {
        let result = try stepgate(["tune", "--print-space"])
        #expect(result.status == 0)
        #expect(result.standardOutput.contains(#""stepsToConfirm": {"min": 6, "max": 12, "integer": true}"#))
    }

    @Test func plotDrawsTheSignalAndSteps() throws {
        let folder = try Fixtures.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let output = folder.appendingPathComponent("walk.svg").path
        let result = try stepgate([
            "plot", Fixtures.samples.appendingPathComponent("walk-wrist-100.csv").path, "--from", "10",
            "--to", "40",
            "-o", output,
        ])
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput.hasPrefix("wrote \(output): "))
        let svg = try String(contentsOfFile: output, encoding: .utf8)
        #expect(XMLParser(data: Data(svg.utf8)).parse())
        #expect(svg.contains("filtered signal"))
        #expect(svg.contains("<polygon"))
        #expect(svg.contains("time (s)"))
    }

    @Test func plotOfAMissingFileFails() throws {
        let result = try stepgate(["plot", "/nonexistent/walk.csv"])
        #expect(result.status == 1)
        #expect(result.standardError.contains("/nonexistent/walk.csv"))
    }
}
