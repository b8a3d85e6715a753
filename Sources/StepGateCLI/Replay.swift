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
    /// With `--policy`: every effect, not only the notices of what changed.
    var verbose: Bool

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
        verbose = arguments.flag("verbose")
        if policyPath != nil {
            guard start != nil else { throw UsageError("'--policy' needs '--start <time>'") }
            guard !base.bouts else {
                throw UsageError("'--bouts' counts recordings; it does not go with '--policy'")
            }
        } else if start != nil || zone != nil || verbose {
            throw UsageError("'--start', '--zone' and '--verbose' go with '--policy <file>'")
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

    /// Replays the files, one after another on one clock (a day made of walks), through the
    /// detector and the policy: each batch of steps reaches the policy at the time of the sample
    /// that confirmed it, as live, and each file starts where the one before it ended.
    private func runPolicy(
        detector configuration: DetectorConfiguration, policy: PolicyConfiguration, start: Date
    )
        throws
    {
        var replay = PolicyReplay(configuration: policy, start: start, zone: zone)
        let out = StandardOutput()
        defer { out.flush() }
        var records = replay.begin()
        var elapsed: Int64 = 0
        var total = 0
        for file in files {
            var reader = try RecordingReader(path: file, options: options)
            var detector = StepDetector(
                configuration: configuration,
                input: reader.gravityIncluded ? .totalAcceleration : .linearAcceleration)
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
                    records += replay.steps(
                        detector.count - before, at: .nanoseconds(elapsed &+ (sample.timestamp &- origin)))
                }
                if samples & 0xFFFF == 0 { bar.update(done: reader.bytesRead, total: reader.fileSize) }
            }
            bar.finish()
            elapsed = elapsed &+ (last &- (first ?? last))
            records += replay.finish(at: .nanoseconds(elapsed))
            var summary = RecordingSummary(
                path: file, format: reader.format, unit: reader.unit, gravityIncluded: reader.gravityIncluded)
            summary.samples = samples
            try ReplayArguments.requireSamples(summary, file: file)
            summary.steps = detector.count
            summary.firstTimestamp = first ?? 0
            summary.lastTimestamp = last
            summary.skipped = reader.skipped
            total += summary.steps
            ReplayArguments.report(summary, file: file)
            if json {
                out.line(ReplayArguments.jsonLine(summary, file: file))
            } else {
                out.line("\(file): \(summary.steps) steps in \(formatFixed(summary.duration, decimals: 1)) s")
            }
        }
        if let stalled = replay.simulator.stalled {
            throw ConfigurationFileError(
                path: policyPath ?? "policy", message: "the policy replay stopped: \(stalled)")
        }
        if !json {
            let ended = formatISO8601Date(start.addingTimeInterval(Double(elapsed) / 1e9))
            let prefix = files.count > 1 ? "\(total) steps in all; " : ""
            out.line("\(prefix)what the policy did (until \(ended)):")
        }
        // State writes are the daemon's business; the replay shows what the policy did: what
        // changed (its notices) by default, every effect with --verbose.
        for record in records {
            switch record.effect {
            case .persist: continue
            case .notify: break
            case .apply, .remove, .wakeUp: if !verbose { continue }
            }
            out.line(json ? record.jsonLine : record.textLine)
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

/// An instant as ISO 8601 UTC, to the second.
private func formatISO8601Date(_ date: Date) -> String {
    let formatter = ISO8601DateFormatter()
    return formatter.string(from: date)
}
