import CoreCommands
import Formatting
import Foundation
import StepDetection
import StepGateDaemon

/// `stepgate config`: prints the default detector configuration, or checks a file.
struct Config: SynchronousCommand {
    static let configuration = CommandConfiguration(
        commandName: "config",
        abstract: "Print the default detector configuration, or check a detector configuration file.",
        discussion: """
            Without arguments, prints every detector parameter with its default as JSON, ready to \
            edit and pass to --config. With a file (a detector configuration, or the "detector" \
            section of a daemon's configuration), checks it (unknown keys, wrong types, values out \
            of range) and prints the complete detector configuration it gives. A daemon's whole \
            configuration is checked by 'stepgate daemon --check --config FILE'.
            """,
        arguments: [
            ArgumentHelp("<file>", help: "A detector configuration file to check.", isOptional: true)
        ]
    )

    var file: String?

    init(arguments: ParsedArguments) throws(UsageError) {
        guard arguments.positionals.count <= 1 else {
            throw UsageError("unexpected argument '\(arguments.positionals[1])'")
        }
        file = arguments.positionals.first
    }

    func runSynchronously() throws {
        let configuration = try file.map(loadDetectorConfiguration(path:)) ?? DetectorConfiguration()
        print(encodeDetectorConfiguration(configuration))
        // A daemon's configuration: only its detector section was checked here.
        if let file, let text = try? String(contentsOfFile: file, encoding: .utf8),
            text.contains("\"policy\"")
        {
            printError(
                "note: \(file): only its \"detector\" section was checked; check the whole configuration "
                    + "with 'stepgate daemon --check --config \(file)'")
        }
    }
}
