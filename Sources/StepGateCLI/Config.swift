import CoreCommands
import Formatting
import StepDetection
import StepGateDaemon

/// `stepgate config`: prints the default detector configuration, or checks a file.
struct Config: SynchronousCommand {
    static let configuration = CommandConfiguration(
        commandName: "config",
        abstract: "Print the default detector configuration, or check a configuration file.",
        discussion: """
            Without arguments, prints every detector parameter with its default as JSON, ready to \
            edit and pass to --config. With a file, checks it (unknown keys, wrong types, values out \
            of range) and prints the complete configuration it gives.
            """,
        arguments: [ArgumentHelp("<file>", help: "A configuration file to check.", isOptional: true)]
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
    }
}
