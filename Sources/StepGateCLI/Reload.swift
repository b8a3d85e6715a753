import CoreCommands
import Formatting
import StepGateDaemon

/// `stepgate reload`: re-read the daemon's configuration.
struct Reload: SynchronousCommand {
    static let configuration = CommandConfiguration(
        commandName: "reload",
        abstract: "Make the daemon re-read its configuration (kept if invalid); root or the admin group.",
        options: [ControlDefaults.socketOption, .flag("json", help: "Print the daemon's answer as JSON.")]
    )

    var socket: String
    var json: Bool

    init(arguments: ParsedArguments) throws(UsageError) {
        guard arguments.positionals.isEmpty else {
            throw UsageError("unexpected argument '\(arguments.positionals[0])'")
        }
        socket = arguments.value("socket") ?? ControlDefaults.socket
        json = arguments.flag("json")
    }

    func runSynchronously() throws {
        try sendControl(.reload, socket: socket, json: json)
    }
}
