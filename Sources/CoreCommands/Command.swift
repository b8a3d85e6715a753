/// A subcommand of `stepgate`: one type per file, shaped like swift-argument-parser's
/// `ParsableCommand`.
public protocol Command: SendableMetatype {
    /// Name, abstract, usage, arguments and options, for parsing and help.
    static var configuration: CommandConfiguration { get }
    /// Parses the arguments that follow the subcommand's name.
    init(arguments: ParsedArguments) throws(UsageError)
    /// Runs the command. Thrown errors print as `Error: …` and exit with status 1.
    mutating func run() async throws
    /// This command as a ``SynchronousCommand``, or nil: a protocol witness, so the start-up path
    /// needs no dynamic cast (the first cast to a protocol scans every conformance in the
    /// executable).
    static var synchronous: (any SynchronousCommand.Type)? { get }
}

extension Command {
    public static var synchronous: (any SynchronousCommand.Type)? { nil }
}

/// A command that needs no concurrency: `stepgate` runs it on the main thread before the
/// concurrency runtime starts any thread (``StepGate/runSynchronously(_:)``), so a replay, a
/// control command or a launcher's `stepgate exec` pays for no thread start-up and no hop
/// between threads, which on a loaded machine can cost more than the command itself.
public protocol SynchronousCommand: Command {
    mutating func runSynchronously() throws
}

extension SynchronousCommand {
    public mutating func run() async throws { try runSynchronously() }
    public static var synchronous: (any SynchronousCommand.Type)? { Self.self }
}

/// What a command is called, what it does and what it accepts.
public struct CommandConfiguration: Sendable {
    /// The subcommand's name, as typed.
    public var commandName: String
    /// One sentence, ending with a period.
    public var abstract: String
    /// Longer help, shown by `stepgate help <subcommand>`.
    public var discussion: String
    /// Positional arguments.
    public var arguments: [ArgumentHelp]
    /// Options and flags.
    public var options: [OptionSpec]

    public init(
        commandName: String, abstract: String, discussion: String = "", arguments: [ArgumentHelp] = [],
        options: [OptionSpec] = []
    ) {
        self.commandName = commandName
        self.abstract = abstract
        self.discussion = discussion
        self.arguments = arguments
        self.options = options
    }
}

/// A positional argument, for help.
public struct ArgumentHelp: Sendable {
    /// As shown in usage, e.g. `<file>...`.
    public var name: String
    public var help: String
    public var isOptional: Bool

    public init(_ name: String, help: String, isOptional: Bool = false) {
        self.name = name
        self.help = help
        self.isOptional = isOptional
    }
}

/// An option (`--name <value>`) or a flag (`--name`).
public struct OptionSpec: Sendable {
    /// Without the dashes.
    public var name: String
    /// For options, the value's placeholder (`file`); `nil` for flags.
    public var valueName: String?
    public var help: String
    /// Whether the option may be given more than once.
    public var isRepeatable: Bool
    /// Whether the command cannot run without it (shown without brackets in the usage).
    public var isRequired = false
    /// A one-letter alias (`-o`), if any.
    public var shortName: Character? = nil

    /// The same option, also accepted as `-<letter>`.
    public func short(_ letter: Character) -> OptionSpec {
        var copy = self
        copy.shortName = letter
        return copy
    }

    /// An option that takes a value.
    public static func option(
        _ name: String, _ valueName: String, help: String, repeatable: Bool = false, required: Bool = false
    ) -> OptionSpec {
        OptionSpec(
            name: name, valueName: valueName, help: help, isRepeatable: repeatable, isRequired: required)
    }

    /// A flag.
    public static func flag(_ name: String, help: String, required: Bool = false) -> OptionSpec {
        OptionSpec(name: name, valueName: nil, help: help, isRepeatable: false, isRequired: required)
    }

    public var synopsis: String { valueName.map { "--\(name) <\($0)>" } ?? "--\(name)" }

    /// As help lists it: `-o, --output <file>`.
    public var helpSynopsis: String { shortName.map { "-\($0), " + synopsis } ?? synopsis }
}

/// A mistake in how the command was called: printed with the usage, exit status 64.
public struct UsageError: Error, Hashable, CustomStringConvertible {
    public var message: String

    public init(_ message: String) { self.message = message }

    public var description: String { message }
}

/// Ends the program with a status and no further message (the command printed its own).
public struct ExitCode: Error, Hashable {
    public var rawValue: Int32

    public init(_ rawValue: Int32) { self.rawValue = rawValue }

    public static let success = ExitCode(0)
    public static let failure = ExitCode(1)
    public static let usage = ExitCode(64)
}
