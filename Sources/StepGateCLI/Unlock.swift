import CoreCommands
import Formatting
import StepGateDaemon

/// `stepgate unlock --emergency`: the audited, limited emergency unlock.
struct Unlock: SynchronousCommand {
    static let configuration = CommandConfiguration(
        commandName: "unlock",
        abstract: "Emergency-unlock a store (limited per week, recorded); root or the admin group.",
        arguments: [ArgumentHelp("<store>", help: "The store to unlock.")],
        options: [
            .flag(
                "emergency", help: "This is an emergency unlock, and it uses one of the week's.",
                required: true),
            ControlDefaults.socketOption, .flag("json", help: "Print the daemon's answer as JSON."),
        ]
    )

    var store: String
    var socket: String
    var json: Bool

    init(arguments: ParsedArguments) throws(UsageError) {
        guard arguments.flag("emergency") else {
            throw UsageError("only emergency unlocks exist: walk to unlock, or pass '--emergency'")
        }
        guard arguments.positionals.count == 1 else { throw UsageError("expected exactly one '<store>'") }
        store = arguments.positionals[0]
        socket = arguments.value("socket") ?? ControlDefaults.socket
        json = arguments.flag("json")
    }

    func runSynchronously() throws {
        try sendControl(.emergency(store: store), socket: socket, json: json)
    }
}
