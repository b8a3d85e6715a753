import CoreCommands
import Formatting
import StepGateDaemon

/// `stepgate lock`: a manual timed lock.
struct Lock: SynchronousCommand {
    static let configuration = CommandConfiguration(
        commandName: "lock",
        abstract: "Shield a store now for a while (\"lock for 2 hours\"); root or the admin group.",
        arguments: [ArgumentHelp("<store>", help: "The store to lock.")],
        options: [
            .option("minutes", "minutes", help: "How long, in minutes.", required: true),
            ControlDefaults.socketOption,
            .flag("json", help: "Print the daemon's answer as JSON."),
        ]
    )

    var store: String
    var minutes: Double
    var socket: String
    var json: Bool

    init(arguments: ParsedArguments) throws(UsageError) {
        guard arguments.positionals.count == 1 else { throw UsageError("expected exactly one '<store>'") }
        store = arguments.positionals[0]
        guard
            let minutes = try arguments.value(
                "minutes", expected: "minutes > 0", { Double($0).flatMap { $0 > 0 ? $0 : nil } })
        else {
            throw UsageError("missing '--minutes <minutes>'")
        }
        self.minutes = minutes
        socket = arguments.value("socket") ?? ControlDefaults.socket
        json = arguments.flag("json")
    }

    func runSynchronously() throws {
        try sendControl(.lock(store: store, minutes: minutes), socket: socket, json: json)
    }
}
