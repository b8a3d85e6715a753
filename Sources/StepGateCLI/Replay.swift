import CoreCommands
import Counting
import Formatting
import Foundation
import SensorInput
import StepDetection
import StepGateDaemon
import StepHistoryStore
import SystemFiles
import Tuning
import UnlockPolicy

/// `stepgate replay`: counts the steps in recorded walks with the live detector.
struct Replay: SynchronousCommand {
    static var configuration: CommandConfiguration { ReplayArguments.configuration }

    /// Everything but the policy's start and zone (shared with the front door's replay).
    var base: ReplayArguments
    var start: Date?
    var zone: String?

    var files: [String] { base.files }
    var options: RecordingReader.Options { base.options }
    var events: Bool { base.events }
    var json: Bool { base.json }
    var policyPath: String? { base.policyPath }

    init(arguments: ParsedArguments) throws(UsageError) {
        base = try ReplayArguments(arguments: arguments)
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
        let detector = try base.detectorConfiguration()
        if let policyPath, let start {
            try runPolicy(detector: detector, policy: loadPolicyConfiguration(path: policyPath), start: start)
            return
        }
        try base.countFiles(detector: detector)
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
        try ReplayArguments.requireSamples(summary, file: file)
        summary.steps = detector.count
        summary.firstTimestamp = first ?? 0
        summary.lastTimestamp = last
        summary.skipped = reader.skipped
        ReplayArguments.report(summary, file: file)
        if json {
            out.line(ReplayArguments.jsonLine(summary, file: file))
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
