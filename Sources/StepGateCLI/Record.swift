import CoreCommands
import Formatting
import Foundation
import SensorInput
import StepDetection
import StepGateDaemon
import Synchronization

/// `stepgate record`: live samples from an IIO accelerometer into a StepGate CSV file.
struct Record: Command {
    static let configuration = CommandConfiguration(
        commandName: "record",
        abstract: "Record live accelerometer samples to a StepGate CSV file.",
        discussion: """
            Writes time_s,x_g,y_g,z_g rows (the IIO timestamp, acceleration in g after scale, \
            offset and mount matrix) and flushes them to disk at least every second, so Ctrl-C \
            or a power cut loses at most a second. The file replays with 'stepgate replay'. \
            --note is saved with the device and rate in FILE.json beside the recording.
            """,
        options: [.option("output", "file", help: "The CSV file to write.", required: true).short("o")]
            + LiveOptions.specs + [
                .option("note", "text", help: "A note kept in FILE.json beside the recording.")
            ]
    )

    var output: String
    var live: LiveOptions
    var note: String?

    init(arguments: ParsedArguments) throws(UsageError) {
        if let extra = arguments.positionals.first { throw UsageError("unexpected argument '\(extra)'") }
        guard let output = arguments.value("output") else { throw UsageError("missing '-o <file>'") }
        self.output = output
        live = try LiveOptions(arguments)
        note = arguments.value("note")
    }

    func run() async throws {
        let source = try live.source()
        let output = output
        let limit = live.sampleLimit
        let started = Date()
        let written = Mutex(0)
        let reason = try await runUntilStopped(duration: live.duration) {
            var writer = try StepGateCSVWriter(path: output)
            var lastFlush = monotonicNanoseconds()
            var count = 0
            for try await sample in source.samples() {
                try writer.write(sample)
                count += 1
                let now = monotonicNanoseconds()
                if now - lastFlush >= 1_000_000_000 {
                    try writer.flush(sync: true)
                    written.withLock { $0 = count }
                    lastFlush = now
                }
                if let limit, count >= limit { break }
            }
            // Reached on cancellation too (Ctrl-C, --duration): the stream just ends.
            try writer.close(sync: true)
            written.withLock { $0 = count }
        }
        await source.waitUntilStopped()
        let stats = source.statistics
        try writeMetadata(source: source, started: started, stats: stats)
        var summary =
            "\(output): \(written.withLock { $0 }) samples from \(source.name), \(stats.mode) at "
            + "\(formatFixed(stats.rate, decimals: 1)) Hz"
        if stats.reconnects > 0 { summary += ", \(stats.reconnects) reconnects" }
        if case .signal = reason { summary += " (interrupted)" }
        printError(summary)
    }

    private func writeMetadata(source: IIOAccelerometer, started: Date, stats: IIOAccelerometer.Statistics)
        throws
    {
        guard note != nil else { return }
        var line = JSONLine()
        line.add("file", (output as NSString).lastPathComponent)
        line.add("device", source.name)
        line.add("started", ISO8601DateFormatter().string(from: started))
        line.add("mode", stats.mode)
        line.add("rate_hz", stats.rate, decimals: 3)
        line.add("samples", stats.samples)
        if let note { line.add("note", note) }
        try (line.string + "\n").write(toFile: output + ".json", atomically: true, encoding: .utf8)
    }
}
