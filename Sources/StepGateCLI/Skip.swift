import CoreCommands
import Formatting
import StepGateDaemon

/// `stepgate skip`: mark one occurrence of a schedule as done ("skip tonight only").
struct Skip: SynchronousCommand {
    static let configuration = CommandConfiguration(
        commandName: "skip",
        abstract: "Skip one occurrence of a schedule (tonight's, by default); root or the admin group.",
        arguments: [ArgumentHelp("<schedule>", help: "The schedule's name.")],
        options: [
            .option(
                "occurrence", "date",
                help: "The occurrence's local start date (YYYY-MM-DD); default the current or next."),
            ControlDefaults.socketOption, .flag("json", help: "Print the daemon's answer as JSON."),
        ]
    )

    var schedule: String
    var occurrence: String?
    var socket: String
    var json: Bool

    init(arguments: ParsedArguments) throws(UsageError) {
        guard arguments.positionals.count == 1 else { throw UsageError("expected exactly one '<schedule>'") }
        schedule = arguments.positionals[0]
        occurrence = arguments.value("occurrence")
        socket = arguments.value("socket") ?? ControlDefaults.socket
        json = arguments.flag("json")
    }

    func runSynchronously() throws {
        try sendControl(.skip(schedule: schedule, occurrence: occurrence), socket: socket, json: json)
    }
}
