import Formatting

/// Parsing, help and exit statuses of one subcommand: the same for the commands the front door
/// runs itself and for those of the full program, so both print the same text.
public enum CommandExecution {
    /// Runs the command `type` with `arguments` (those after the subcommand's name); the exit
    /// status.
    public static func run(_ type: any Command.Type, _ arguments: [String]) async -> Int32 {
        do {
            guard var command = try parse(type, arguments) else { return 0 }
            try await command.run()
            return 0
        } catch {
            return status(for: error, type.configuration)
        }
    }

    /// Runs the synchronous command `type` with `arguments` on the calling thread; the exit
    /// status.
    public static func runSynchronously(_ type: any SynchronousCommand.Type, _ arguments: [String]) -> Int32 {
        do {
            guard var command = try parse(type, arguments) else { return 0 }
            try command.runSynchronously()
            return 0
        } catch {
            return status(for: error, type.configuration)
        }
    }

    /// The command `type` made from `arguments`, or nil when they ask for help (printed here).
    private static func parse<C: Command>(_ type: C.Type, _ arguments: [String]) throws -> C? {
        let parsed = try ParsedArguments(arguments, options: type.configuration.options)
        if parsed.wantsHelp {
            print(help(for: type.configuration))
            return nil
        }
        return try type.init(arguments: parsed)
    }

    /// Prints what went wrong; the exit status for it.
    public static func status(for error: any Error, _ configuration: CommandConfiguration) -> Int32 {
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

    /// `stepgate NAME [<file>...] [--option <value>]…`.
    public static func usage(for c: CommandConfiguration) -> String {
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

    /// What `stepgate NAME --help` prints.
    public static func help(for c: CommandConfiguration) -> String {
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
