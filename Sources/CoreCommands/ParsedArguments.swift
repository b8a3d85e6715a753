/// The options, flags and positional arguments of one command line, checked against the
/// command's ``OptionSpec``s.
public struct ParsedArguments: Sendable {
    /// Positional arguments, in order.
    public private(set) var positionals: [String] = []
    // Arrays searched in order, not a Dictionary and a Set: a command has a handful of options,
    // and the first String-keyed hash table of a process costs the Swift runtime a scan of every
    // protocol conformance in the executable (about 0.15 ms before `replay` reads its file).
    private var values: [(name: String, values: [String])] = []
    private var flags: [String] = []
    /// Whether `-h` or `--help` was given.
    public private(set) var wantsHelp = false

    /// Parses `arguments` for a command with the given options.
    ///
    /// Accepts `--name value`, `--name=value`, flags, and `--` to end options.
    public init(_ arguments: some Collection<String>, options: [OptionSpec]) throws(UsageError) {
        var iterator = arguments.makeIterator()
        var onlyPositionals = false
        while let argument = iterator.next() {
            if onlyPositionals || !argument.hasPrefix("-") || argument == "-" {
                positionals.append(argument)
                continue
            }
            if argument == "--" {
                onlyPositionals = true
                continue
            }
            if argument == "-h" || argument == "--help" {
                wantsHelp = true
                continue
            }
            var name: String
            if !argument.hasPrefix("--"), argument.count == 2,
                let short = options.first(where: { $0.shortName == argument.last })
            {
                name = short.name
            } else {
                guard argument.hasPrefix("--") else {
                    throw UsageError("unknown option '\(argument)'")
                }
                name = String(argument.dropFirst(2))
            }
            var inlineValue: String?
            if let equals = name.firstIndex(of: "=") {
                inlineValue = String(name[name.index(after: equals)...])
                name = String(name[..<equals])
            }
            guard let spec = options.last(where: { $0.name == name }) else {
                throw UsageError("unknown option '--\(name)'")
            }
            if spec.valueName == nil {
                if inlineValue != nil { throw UsageError("flag '--\(name)' takes no value") }
                if !flags.contains(name) { flags.append(name) }
                continue
            }
            guard let value = inlineValue ?? iterator.next() else {
                throw UsageError("missing value for '\(spec.synopsis)'")
            }
            if let given = values.firstIndex(where: { $0.name == name }) {
                guard spec.isRepeatable else { throw UsageError("option '--\(name)' given more than once") }
                values[given].values.append(value)
            } else {
                values.append((name, [value]))
            }
        }
    }

    /// The value of an option, or `nil` when absent.
    public func value(_ name: String) -> String? { values(name).last }

    /// Every value of a repeatable option.
    public func values(_ name: String) -> [String] { values.first { $0.name == name }?.values ?? [] }

    /// Whether a flag was given.
    public func flag(_ name: String) -> Bool { flags.contains(name) }

    /// The value of an option converted by `transform`, with a usage error naming the option
    /// when it does not convert.
    public func value<T>(_ name: String, expected: String, _ transform: (String) -> T?) throws(UsageError)
        -> T?
    {
        guard let raw = value(name) else { return nil }
        guard let converted = transform(raw) else {
            throw UsageError("invalid value '\(raw)' for '--\(name)': expected \(expected)")
        }
        return converted
    }
}
