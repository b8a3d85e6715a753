public import Counting
import Formatting
public import SensorInput
public import StepDetection

/// What `stepgate replay` takes, and the replay that only counts (no `--policy`): the front
/// door runs it itself, the full program too; a replay through the unlock policy is the full
/// program's (it adds the policy to ``ReplayArguments/countFiles()``).
public struct ReplayArguments: Sendable {
    public static let configuration = CommandConfiguration(
        commandName: "replay",
        abstract: "Count steps in recorded accelerometer walks.",
        discussion: """
            Reads each recording with the same detector the live pipeline runs and prints its step \
            count, then the total. Formats are detected from the header and the first rows: \
            StepGate (time_s,x_g,y_g,z_g), Bangle.js (Time (ms),X,Y,Z), Android/Oxford \
            (timestamp_ns,accuracy,x,y,z), phyphox, Sensor Logger, Physics Toolbox, AndroSensor and \
            SensorLog (iOS) exports. Any other delimited file is read with --columns, which names \
            the time column and its unit (s, ms, us or ns), the x, y and z columns (acceleration \
            with gravity, as a phone's accelerometer gives it, or without) and their unit (g, m/s2 or \
            counts:<per-g>), and the delimiter when it is not the most frequent of , ; and TAB in \
            the header, for example --columns 'time=Time_ms:ms,x=ax,y=ay,z=az,unit=m/s2,delimiter=;'. \
            A column is a header name (any case) or a number from 1; when all four are numbers, a \
            first line of numbers is data, not a header. Whether the values include gravity is \
            told by the header or the file name, or else guessed from the first rows (the line \
            then says so); --gravity says it instead.
            """,
        arguments: [ArgumentHelp("<file>...", help: "Recordings to count.")],
        options: [
            .option("config", "file", help: "Detector configuration (JSON); defaults otherwise."),
            RecordingOptions.format, RecordingOptions.columns, RecordingOptions.units,
            RecordingOptions.gravity, RecordingOptions.skipBadRows,
            .flag(
                "events", help: "Print one JSON line per step: file, time (s from the first sample), count."),
            .flag("json", help: "Print one JSON line per file and one for the total."),
            .flag(
                "bouts",
                help:
                    "Print each walking bout after the counts: start and end (s from the first sample), steps, cadence."
            ),
            .option(
                "policy", "file",
                help:
                    "Run the steps through this unlock policy (JSON) and print what it changed: unlocks, relocks, schedules, refusals, problems."
            ),
            .flag(
                "verbose",
                help:
                    "With --policy: print every effect (shields applied and removed, wake-ups), not only what changed."
            ),
            .option(
                "start", "time", help: "With --policy: the wall-clock time of the first sample (ISO 8601)."),
            .option("zone", "id", help: "With --policy: the machine's time zone (e.g. Europe/Berlin)."),
        ]
    )

    /// The options only the full program handles (they need the unlock policy, ISO 8601 dates
    /// and named time zones).
    public static let policyOptions = ["policy", "start", "zone", "verbose"]

    public var files: [String]
    public var configPath: String?
    public var options: RecordingReader.Options
    public var events: Bool
    /// Whether each file's walking bouts are printed.
    public var bouts: Bool
    public var json: Bool
    public var policyPath: String?

    /// Parses everything but `--start` and `--zone`, in the order the full command checks them.
    public init(arguments: ParsedArguments) throws(UsageError) {
        files = arguments.positionals
        guard !files.isEmpty else { throw UsageError("missing expected argument '<file>...'") }
        configPath = arguments.value("config")
        options = try RecordingOptions.parse(arguments)
        events = arguments.flag("events")
        bouts = arguments.flag("bouts")
        json = arguments.flag("json")
        policyPath = arguments.value("policy")
    }

    /// The detector configuration: `--config`, else the defaults.
    public func detectorConfiguration() throws -> DetectorConfiguration {
        try configPath.map(loadDetectorConfiguration(path:)) ?? DetectorConfiguration()
    }

    /// Counts every file and prints a row (or a JSON line) for each and the total.
    public func countFiles(detector: DetectorConfiguration) throws {
        let out = StandardOutput()
        defer { out.flush() }
        var total = 0
        var rows: [(String, RecordingSummary)] = []
        // A file that cannot be counted is reported at once; the others are still counted and
        // printed, and the command fails at the end.
        var failed = 0
        var boutLines: [String] = []
        for file in files {
            var bar = ProgressBar(label: file)
            var first: Int64 = 0
            let events = events
            var tracker = BoutTracker(configuration: detector)
            var found: [WalkingBout] = []
            let summary: RecordingSummary
            do {
                summary = try countSteps(
                    inFile: file, options: options, configuration: detector,
                    progress: { bar.update(done: $0, total: $1) },
                    onFirstSample: { first = $0 },
                    onStep: { event in
                        if bouts, let bout = tracker.add(event) { found.append(bout) }
                        guard events else { return }
                        var line = JSONLine()
                        line.add("file", file)
                        line.add("time_s", Double(event.timestamp &- first) / 1e9, decimals: 3)
                        line.add("count", event.count)
                        out.line(line.string)
                    }, readAhead: true)
                bar.finish()
                try Self.requireSamples(summary, file: file)
            } catch {
                bar.finish()
                out.flush()
                printError("Error: \(error)")
                failed += 1
                continue
            }
            total += summary.steps
            if let bout = tracker.finish() { found.append(bout) }
            for (index, bout) in found.enumerated() where bouts {
                boutLines.append(Self.boutLine(bout, number: index + 1, file: file, first: first, json: json))
            }
            Self.report(summary, file: file)
            if json {
                out.line(Self.jsonLine(summary, file: file))
            } else {
                rows.append((file, summary))
            }
        }
        if json {
            var line = JSONLine()
            line.add("total_steps", total)
            line.add("files", files.count)
            out.line(line.string)
        } else {
            let width = max(5, rows.map(\.0.count).max() ?? 0)
            for (file, s) in rows {
                out.line(
                    rightPad(file, width) + "  " + leftPad(String(s.steps), 6) + " steps  "
                        + leftPad(formatFixed(s.duration, decimals: 1), 7) + " s  "
                        + leftPad(String(s.samples), 8)
                        + " samples  " + leftPad(formatFixed(s.meanRate, decimals: 1), 6) + " Hz  "
                        + s.format.rawValue + Self.inputNote(s))
            }
            if rows.count > 1 {
                out.line(rightPad("total", width) + "  " + leftPad(String(total), 6) + " steps")
            }
        }
        for line in boutLines { out.line(line) }
        if failed > 0 {
            out.flush()
            if files.count > 1 {
                printError("Error: \(failed) of \(files.count) files could not be counted (see above)")
            }
            throw ExitCode.failure
        }
    }

    /// One walking bout of a file, as text or a JSON line.
    static func boutLine(_ bout: WalkingBout, number: Int, file: String, first: Int64, json: Bool) -> String {
        let start = Double(bout.start &- first) / 1e9
        let end = Double(bout.end &- first) / 1e9
        if json {
            var line = JSONLine()
            line.add("file", file)
            line.add("bout", number)
            line.add("start_s", start, decimals: 2)
            line.add("end_s", end, decimals: 2)
            line.add("steps", bout.steps)
            line.add("cadence_per_min", bout.cadence, decimals: 1)
            return line.string
        }
        return
            "\(file): bout \(number): \(formatFixed(start, decimals: 1))–\(formatFixed(end, decimals: 1)) s, "
            + "\(bout.steps) steps, \(formatFixed(bout.cadence, decimals: 0)) steps/min"
    }

    /// A recording with a header but no samples is an error, as an empty file is.
    public static func requireSamples(_ summary: RecordingSummary, file: String) throws(RecordingError) {
        guard summary.samples == 0 else { return }
        throw RecordingError(
            kind: .emptyFile, path: file, expected: "data rows after the header",
            found: summary.skipped.total > 0 ? "only rows that were skipped" : "only the header")
    }

    /// Notes that belong on standard error: skipped rows, rows without accelerometer values.
    public static func report(_ summary: RecordingSummary, file: String) {
        if summary.skipped.total > 0 { printError("\(file): \(summary.skipped)") }
        if let note = summary.skipped.withoutAccelerationNote { printError("\(file): \(note)") }
    }

    /// What the row says of the input beyond its format: gravity removed, and whether gravity's
    /// presence was guessed from the data (then `--gravity` can say otherwise).
    public static func inputNote(_ s: RecordingSummary) -> String {
        let kind = s.gravityIncluded ? "gravity included" : "gravity removed"
        if s.gravityGuessed { return ", \(kind) (guessed from the data)" }
        return s.gravityIncluded ? "" : ", \(kind)"
    }

    /// The JSON line of one file (`--json`).
    public static func jsonLine(_ s: RecordingSummary, file: String) -> String {
        var line = JSONLine()
        line.add("file", file)
        line.add("steps", s.steps)
        line.add("duration_s", s.duration, decimals: 3)
        line.add("samples", s.samples)
        line.add("rate_hz", s.meanRate, decimals: 2)
        line.add("format", s.format.rawValue)
        line.add("unit", s.unit.description)
        line.add("gravity_included", s.gravityIncluded)
        line.add("gravity_guessed", s.gravityGuessed)
        line.add("skipped_rows", s.skipped.total)
        line.add("rows_without_acceleration", s.skipped.withoutAcceleration)
        return line.string
    }
}

/// `stepgate replay` as the front door runs it: counting only. The front door hands a command
/// line with any of ``ReplayArguments/policyOptions`` to the full program instead.
public struct CountingReplay: SynchronousCommand {
    public static var configuration: CommandConfiguration { ReplayArguments.configuration }

    public var arguments: ReplayArguments

    public init(arguments: ParsedArguments) throws(UsageError) {
        self.arguments = try ReplayArguments(arguments: arguments)
    }

    public func runSynchronously() throws {
        try arguments.countFiles(detector: arguments.detectorConfiguration())
    }
}
