import Formatting
import Foundation
import SensorInput
import StepDetection
import StepGateDaemon
import SystemFiles
import Tuning
import UnlockPolicy

/// `stepgate replay`: counts the steps in recorded walks with the live detector.
struct Replay: SynchronousCommand {
    static let configuration = CommandConfiguration(
        commandName: "replay",
        abstract: "Count steps in recorded accelerometer walks.",
        discussion: """
            Reads each recording with the same detector the live pipeline runs and prints its step \
            count, then the total. Formats are detected from the header and the first rows: \
            StepGate (time_s,x_g,y_g,z_g), Bangle.js (Time (ms),X,Y,Z), Android/Oxford \
            (timestamp_ns,accuracy,x,y,z), phyphox and Sensor Logger exports.
            """,
        arguments: [ArgumentHelp("<file>...", help: "Recordings to count.")],
        options: [
            .option("config", "file", help: "Detector configuration (JSON); defaults otherwise."),
            .option(
                "format", "format",
                help:
                    "Read every file as this format: \(RecordingFormat.allCases.map(\.rawValue).joined(separator: ", "))."
            ),
            .option("units", "unit", help: "Unit of the axis columns: g, m/s2 or counts:<per-g>."),
            .flag(
                "skip-bad-rows", help: "Skip malformed rows (reported on standard error) instead of stopping."
            ),
            .flag(
                "events", help: "Print one JSON line per step: file, time (s from the first sample), count."),
            .flag("json", help: "Print one JSON line per file and one for the total."),
            .option(
                "policy", "file",
                help: "Run the steps through this unlock policy (JSON) and print its events as JSON lines."),
            .option(
                "start", "time", help: "With --policy: the wall-clock time of the first sample (ISO 8601)."),
            .option("zone", "id", help: "With --policy: the machine's time zone (e.g. Europe/Berlin)."),
        ]
    )

    var files: [String]
    var configPath: String?
    var options: RecordingReader.Options
    var events: Bool
    var json: Bool
    var policyPath: String?
    var start: Date?
    var zone: String?

    init(arguments: ParsedArguments) throws(UsageError) {
        files = arguments.positionals
        guard !files.isEmpty else { throw UsageError("missing expected argument '<file>...'") }
        configPath = arguments.value("config")
        let format = try arguments.value(
            "format", expected: RecordingFormat.allCases.map(\.rawValue).joined(separator: ", "),
            RecordingFormat.init(rawValue:))
        let unit = try arguments.value("units", expected: "g, m/s2 or counts:<per-g>", AccelerationUnit.init)
        options = RecordingReader.Options(
            format: format, unit: unit, skipBadRows: arguments.flag("skip-bad-rows"))
        events = arguments.flag("events")
        json = arguments.flag("json")
        policyPath = arguments.value("policy")
        start = try arguments.value(
            "start", expected: "an ISO 8601 time such as 2026-11-29T18:30:00+01:00", parseISO8601)
        zone = try arguments.value("zone", expected: "a time-zone identifier such as Europe/Berlin") {
            TimeZone(identifier: $0) != nil ? $0 : nil
        }
        if policyPath != nil {
            guard start != nil else { throw UsageError("'--policy' needs '--start <time>'") }
            guard files.count == 1 else { throw UsageError("'--policy' replays exactly one file") }
        } else if start != nil || zone != nil {
            throw UsageError("'--start' and '--zone' go with '--policy <file>'")
        }
    }

    func runSynchronously() throws {
        let detector = try configPath.map(loadDetectorConfiguration(path:)) ?? DetectorConfiguration()
        if let policyPath, let start {
            try runPolicy(detector: detector, policy: loadPolicyConfiguration(path: policyPath), start: start)
            return
        }
        let out = StandardOutput()
        defer { out.flush() }
        var total = 0
        var rows: [(String, RecordingSummary)] = []
        // A file that cannot be counted is reported at once; the others are still counted and
        // printed, and the command fails at the end.
        var failed = 0
        for file in files {
            var bar = ProgressBar(label: file)
            var first: Int64 = 0
            let events = events
            let summary: RecordingSummary
            do {
                summary = try countSteps(
                    inFile: file, options: options, configuration: detector,
                    progress: { bar.update(done: $0, total: $1) },
                    onFirstSample: { first = $0 },
                    onStep: { event in
                        guard events else { return }
                        var line = JSONLine()
                        line.add("file", file)
                        line.add("time_s", Double(event.timestamp &- first) / 1e9, decimals: 3)
                        line.add("count", event.count)
                        out.line(line.string)
                    }, readAhead: true)
                bar.finish()
                try Replay.requireSamples(summary, file: file)
            } catch {
                bar.finish()
                out.flush()
                printError("Error: \(error)")
                failed += 1
                continue
            }
            total += summary.steps
            report(summary, file: file)
            if json {
                out.line(Replay.jsonLine(summary, file: file))
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
                        + s.format.rawValue)
            }
            if rows.count > 1 {
                out.line(rightPad("total", width) + "  " + leftPad(String(total), 6) + " steps")
            }
        }
        if failed > 0 {
            out.flush()
            if files.count > 1 {
                printError("Error: \(failed) of \(files.count) files could not be counted (see above)")
            }
            throw ExitCode.failure
        }
    }

    /// A recording with a header but no samples is an error, as an empty file is.
    static func requireSamples(_ summary: RecordingSummary, file: String) throws(RecordingError) {
        guard summary.samples == 0 else { return }
        throw RecordingError(
            kind: .emptyFile, path: file, expected: "data rows after the header",
            found: summary.skipped.total > 0 ? "only rows that were skipped" : "only the header")
    }

    /// Warnings that belong on standard error: skipped rows.
    private func report(_ summary: RecordingSummary, file: String) {
        if summary.skipped.total > 0 { printError("\(file): \(summary.skipped)") }
    }

    static func jsonLine(_ s: RecordingSummary, file: String) -> String {
        var line = JSONLine()
        line.add("file", file)
        line.add("steps", s.steps)
        line.add("duration_s", s.duration, decimals: 3)
        line.add("samples", s.samples)
        line.add("rate_hz", s.meanRate, decimals: 2)
        line.add("format", s.format.rawValue)
        line.add("unit", s.unit.description)
        line.add("gravity_included", s.gravityIncluded)
        line.add("skipped_rows", s.skipped.total)
        return line.string
    }

    /// Replays one file through the detector and the policy, on the recording's own clock: each
    /// batch of steps reaches the policy at the time of the sample that confirmed it, as live.
    private func runPolicy(
        detector configuration: DetectorConfiguration, policy: PolicyConfiguration, start: Date
    )
        throws
    {
        let file = files[0]
        var reader = try RecordingReader(path: file, options: options)
        var detector = StepDetector(
            configuration: configuration,
            input: reader.gravityIncluded ? .totalAcceleration : .linearAcceleration)
        var replay = PolicyReplay(configuration: policy, start: start, zone: zone)
        let out = StandardOutput()
        defer { out.flush() }
        var records = replay.begin()
        var first: Int64?
        var last: Int64 = 0
        var samples = 0
        var bar = ProgressBar(label: file)
        while let sample = try reader.next() {
            if first == nil { first = sample.timestamp }
            last = sample.timestamp
            samples += 1
            let before = detector.count
            let origin = first ?? sample.timestamp
            detector.process(sample) { event in
                if events {
                    var line = JSONLine()
                    line.add("file", file)
                    line.add("time_s", Double(event.timestamp &- origin) / 1e9, decimals: 3)
                    line.add("count", event.count)
                    out.line(line.string)
                }
            }
            if detector.count > before {
                records += replay.steps(detector.count - before, at: .nanoseconds(sample.timestamp &- origin))
            }
            if samples & 0xFFFF == 0 { bar.update(done: reader.bytesRead, total: reader.fileSize) }
        }
        bar.finish()
        records += replay.finish(at: .nanoseconds(last &- (first ?? last)))
        if let stalled = replay.simulator.stalled {
            throw ConfigurationFileError(
                path: policyPath ?? "policy", message: "the policy replay stopped: \(stalled)")
        }
        var summary = RecordingSummary(
            path: file, format: reader.format, unit: reader.unit, gravityIncluded: reader.gravityIncluded)
        summary.samples = samples
        try Replay.requireSamples(summary, file: file)
        summary.steps = detector.count
        summary.firstTimestamp = first ?? 0
        summary.lastTimestamp = last
        summary.skipped = reader.skipped
        report(summary, file: file)
        if json {
            out.line(Replay.jsonLine(summary, file: file))
        } else {
            out.line(
                "\(file): \(summary.steps) steps in \(formatFixed(summary.duration, decimals: 1)) s; policy events:"
            )
        }
        // State writes are the daemon's business; the replay shows what the policy did.
        for record in records {
            if case .persist = record.effect { continue }
            out.line(record.jsonLine)
        }
    }
}

/// Parses an ISO 8601 time, with or without fractional seconds.
func parseISO8601(_ text: String) -> Date? {
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    if let date = formatter.date(from: text) { return date }
    formatter.formatOptions = [.withInternetDateTime]
    return formatter.date(from: text)
}
