import Formatting
@preconcurrency import Glibc
import StepGateDaemon

/// The `stepgate` command: parses the subcommand and runs it.
public enum StepGate {
    /// The version printed by `--version`.
    public static let version = "0.1.0"

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
        let configuration = type.configuration
        do {
            let parsed = try ParsedArguments(arguments, options: configuration.options)
            if parsed.wantsHelp {
                print(help(for: configuration))
                return 0
            }
            var command = try type.init(arguments: parsed)
            try await command.run()
            return 0
        } catch {
            return status(for: error, configuration)
        }
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
        let configuration = type.configuration
        do {
            let parsed = try ParsedArguments(Array(arguments.dropFirst()), options: configuration.options)
            if parsed.wantsHelp {
                print(help(for: configuration))
                return 0
            }
            var command = try type.init(arguments: parsed)
            try command.runSynchronously()
            return 0
        } catch {
            return status(for: error, configuration)
        }
    }

    /// Prints what went wrong; the exit status for it.
    private static func status(for error: any Error, _ configuration: CommandConfiguration) -> Int32 {
        switch error {
        case let error as UsageError:
            printError(
                "Error: \(error.message)\nUsage: \(usage(for: configuration))\n"
                    + "  See 'stepgate \(configuration.commandName) --help' for more information.")
            return ExitCode.usage.rawValue
        case let code as ExitCode:
            return code.rawValue
        default:
            printError("Error: \(error)")
            return ExitCode.failure.rawValue
        }
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

    static func usage(for c: CommandConfiguration) -> String {
        var parts = ["stepgate", c.commandName]
        // Arguments after `--` (a program and its arguments) come last: options after them
        // would be passed to the program.
        let (trailing, leading) = (
            c.arguments.filter { $0.name.hasPrefix("--") }, c.arguments.filter { !$0.name.hasPrefix("--") }
        )
        for argument in leading {
            parts.append(argument.isOptional ? "[\(argument.name)]" : argument.name)
        }
        for option in c.options { parts.append(option.isRequired ? option.synopsis : "[\(option.synopsis)]") }
        for argument in trailing {
            parts.append(argument.isOptional ? "[\(argument.name)]" : argument.name)
        }
        return parts.joined(separator: " ")
    }

    static func help(for c: CommandConfiguration) -> String {
        var text = "OVERVIEW: \(c.abstract)\n"
        if !c.discussion.isEmpty { text += "\n\(c.discussion)\n" }
        text += "\nUSAGE: \(usage(for: c))\n"
        let width = 24
        func row(_ left: String, _ help: String) -> String {
            let label = "  " + left
            if label.count + 2 > width {
                return label + "\n" + String(repeating: " ", count: width) + help + "\n"
            }
            return rightPad(label, width) + help + "\n"
        }
        if !c.arguments.isEmpty {
            text += "\nARGUMENTS:\n"
            for argument in c.arguments { text += row(argument.name, argument.help) }
        }
        text += "\nOPTIONS:\n"
        for option in c.options { text += row(option.helpSynopsis, option.help) }
        text += row("-h, --help", "Show help information.")
        return text
    }
}
