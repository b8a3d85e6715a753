import CoreCommands
import Formatting
@preconcurrency import Glibc
import StepGateDaemon

/// The `stepgate` command: parses the subcommand and runs it.
public enum StepGate {
    /// The version printed by `--version`.
    public static let version = StepGateVersion.version

    /// Every subcommand, in the order help lists them, by name: finding the command to run does
    /// not build every configuration before it (each builds its help text; the daemon's start
    /// would build nine). `StartupPathTests` checks each name is its configuration's.
    static let commands: [(name: String, type: any Command.Type)] = [
        ("replay", Replay.self), ("eval", Eval.self), ("tune", Tune.self), ("plot", Plot.self),
        ("simulate", Simulate.self), ("devices", Devices.self), ("record", Record.self), ("run", Run.self),
        ("daemon", DaemonCommand.self), ("status", Status.self), ("history", History.self),
        ("lock", Lock.self),
        ("skip", Skip.self), ("unlock", Unlock.self), ("reload", Reload.self), ("exec", ExecGuard.self),
        ("config", Config.self), ("bench", Bench.self), ("completions", Completions.self),
        ("lift-shields", LiftShields.self),
    ]

    /// The command called `name`, if any.
    static func command(named name: String) -> (any Command.Type)? {
        commands.first { $0.name == name }?.type
    }

    /// What StepGate is, for `--help` and the manual page.
    static let overview =
        "StepGate counts your steps from an accelerometer and unlocks what you shielded once you have walked enough."

    /// Runs `stepgate` with the process's arguments and exits.
    public static func main() async -> Never {
        let status = await run(Array(CommandLine.arguments.dropFirst()))
        exit(status)
    }

    /// Ends the process with `status`, flushing standard output.
    public static func exit(_ status: Int32) -> Never { Glibc.exit(status) }

    /// Runs `stepgate` with `arguments` (without the program name); returns the exit status.
    public static func run(_ arguments: [String]) async -> Int32 {
        guard let first = arguments.first else {
            print(rootHelp)
            return ExitCode.usage.rawValue
        }
        switch first {
        case "-h", "--help":
            print(rootHelp)
            return 0
        case "--version":
            print(version)
            return 0
        case "notify-helper":
            // Internal: the daemon's messenger to a user's session bus (not listed in help).
            return NotifyHelper.main(Array(arguments.dropFirst()))
        case "help":
            guard let name = arguments.dropFirst().first else {
                print(rootHelp)
                return 0
            }
            if name == "--man" {
                print(Documentation.manPage(), terminator: "")
                return 0
            }
            if name == "--markdown" {
                print(Documentation.markdownReference(), terminator: "")
                return 0
            }
            guard let command = command(named: name) else {
                printError("Error: unknown subcommand '\(name)'\n\(rootUsage)")
                return ExitCode.usage.rawValue
            }
            print(help(for: command.configuration))
            return 0
        default:
            break
        }
        guard let type = command(named: first) else {
            printError(
                "Error: unknown subcommand '\(first)'\n\(rootUsage)\n  See 'stepgate --help' for more information."
            )
            return ExitCode.usage.rawValue
        }
        return await run(type, Array(arguments.dropFirst()))
    }

    static func run(_ type: any Command.Type, _ arguments: [String]) async -> Int32 {
        await CommandExecution.run(type, arguments)
    }

    /// Runs `arguments` at once, on the calling thread, when they name a
    /// ``SynchronousCommand`` (such as `replay`); the exit status, or `nil` for any other
    /// command, which ``main()`` runs.
    public static func runSynchronously(_ arguments: [String]) -> Int32? {
        // Found by name: only this command's configuration is built (each builds its help text),
        // and no dynamic cast to the protocol (its first use scans every protocol conformance in
        // the executable).
        guard let first = arguments.first,
            let type = command(named: first)?.synchronous
        else { return nil }
        return CommandExecution.runSynchronously(type, Array(arguments.dropFirst()))
    }

    static var rootUsage: String { "Usage: stepgate <subcommand>" }

    static var rootHelp: String {
        var text = """
            OVERVIEW: \(overview)

            USAGE: stepgate <subcommand>

            OPTIONS:
              --version               Show the version.
              -h, --help              Show help information.

            SUBCOMMANDS:

            """
        let width = max(22, (commands.map { $0.name.count }.max() ?? 0) + 4)
        for command in commands {
            let c = command.type.configuration
            text += "  " + rightPad(c.commandName, width) + c.abstract + "\n"
        }
        text += "\n  See 'stepgate help <subcommand>' for detailed help."
        return text
    }

    static func usage(for c: CommandConfiguration) -> String { CommandExecution.usage(for: c) }

    static func help(for c: CommandConfiguration) -> String { CommandExecution.help(for: c) }
}
