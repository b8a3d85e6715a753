import CoreCommands
import Formatting
import Foundation
import SensorInput
import StepDetection
import StepGateDaemon
import StepHistoryStore
import SystemFiles
import Tuning

/// `stepgate plot`: draws one recording's filtered signal, threshold and steps as SVG.
struct Plot: Command {
    static let configuration = CommandConfiguration(
        commandName: "plot",
        abstract: "Plot a recording's filtered signal, peak prominence test and steps as SVG.",
        discussion: """
            Draws the band-passed magnitude, the peak detector's prominence test (the level the \
            signal must cross next: the last valley plus the adaptive prominence a peak needs, or \
            the last peak minus it), the periods the cadence gate counted as walking, the detected steps and, \
            when a stepcounter.csv lies beside an accelerometer.csv (Oxford data set), the true \
            steps. --from and --to choose a window in seconds from the first sample; the detector \
            always runs from the start, so its state in the window is the real one.
            """,
        arguments: [ArgumentHelp("<file>", help: "The recording.")],
        options: [
            .option("config", "file", help: "Detector configuration (JSON); defaults otherwise."),
            .option("from", "seconds", help: "Start of the window (default 0)."),
            .option("to", "seconds", help: "End of the window (default: the end)."),
            RecordingOptions.format, RecordingOptions.columns, RecordingOptions.gravity,
            .option(
                "output", "file",
                help: "SVG file to write (default: the recording's name with .svg, in the current folder)."
            )
            .short("o"),
        ]
    )

    var file: String
    var configPath: String?
    var from: Double
    var to: Double
    var options: RecordingReader.Options
    var output: String?

    init(arguments: ParsedArguments) throws(UsageError) {
        let positionals = arguments.positionals
        guard let file = positionals.first else { throw UsageError("missing expected argument '<file>'") }
        guard positionals.count == 1 else { throw UsageError("unexpected argument '\(positionals[1])'") }
        self.file = file
        output = arguments.value("output")
        configPath = arguments.value("config")
        from =
            try arguments.value("from", expected: "seconds ≥ 0") { Double($0).flatMap { $0 >= 0 ? $0 : nil } }
            ?? 0
        to =
            try arguments.value("to", expected: "seconds > 0") { Double($0).flatMap { $0 > 0 ? $0 : nil } }
            ?? .infinity
        guard from < to else { throw UsageError("'--from' must be before '--to'") }
        options = try RecordingOptions.parse(arguments)
    }

    func run() async throws {
        let configuration = try configPath.map(loadDetectorConfiguration(path:)) ?? DetectorConfiguration()
        var reader = try RecordingReader(path: file, options: options)
        let samples = try reader.readAll()
        var truth: [Int64]?
        if let path = StepTruth.companionPath(of: file), FileManager.default.fileExists(atPath: path) {
            truth = try StepTruth.read(path: path)
        }
        let trace = SignalTrace.record(
            samples, configuration: configuration,
            input: reader.gravityIncluded ? .totalAcceleration : .linearAcceleration, truth: truth,
            from: from,
            to: to)
        guard !trace.times.isEmpty else {
            throw ConfigurationFileError(path: file, message: "no samples between \(from) s and \(to) s")
        }
        let name = (file as NSString).lastPathComponent
        let parent = ((file as NSString).deletingLastPathComponent as NSString).lastPathComponent
        let shown = name == "accelerometer.csv" && !parent.isEmpty ? "\(parent)/\(name)" : name
        let svg = Charts.signal(trace, title: "\(shown): \(trace.detected.count) steps detected")
        // By default in the current folder: the recording's folder may be read-only.
        let path = output ?? ((name as NSString).deletingPathExtension + ".svg")
        do {
            try svg.write(toFile: path, atomically: true, encoding: .utf8)
        } catch {
            throw ConfigurationFileError(path: path, message: "cannot write: \(systemReason(error))")
        }
        print(
            "wrote \(path): \(trace.detected.count) steps detected"
                + (trace.truth.map { ", \($0.count) true" } ?? "") + " in the window")
    }
}
