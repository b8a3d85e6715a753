/// `stepgate daemon`: the live pipeline with shields and the control socket.
struct DaemonCommand: Command {
    static let configuration = CommandConfiguration(
        commandName: "daemon",
        abstract: "Run the live pipeline: input, detector, policy and shields, with a control socket.",
        discussion: """
            Reads one JSON configuration (input, detector, policy, shields, state directory, control \
            socket, admin group; see docs/daemon.md), keeps the policy state in \
            <stateDirectory>/state.json (written atomically), and serves the control socket: any \
            local user may ask 'stepgate status'; root or the admin group may lock, skip, \
            emergency-unlock and reload. SIGTERM/SIGINT save and exit 0; SIGHUP reloads, keeping the \
            old configuration when the new one is invalid. Logs carry journald priority prefixes; \
            readiness is signalled through $NOTIFY_SOCKET.
            """,
        options: [
            .option("config", "file", help: "The StepGate configuration (JSON).", required: true),
            .flag("verbose", help: "Log debug messages too."),
        ]
    )

    var configPath: String
    var verbose: Bool

    init(arguments: ParsedArguments) throws(UsageError) {
        guard let path = arguments.value("config") else { throw UsageError("missing '--config <file>'") }
        guard arguments.positionals.isEmpty else {
            throw UsageError("unexpected argument '\(arguments.positionals[0])'")
        }
        configPath = path
        verbose = arguments.flag("verbose")
    }

    func run() async throws {
        let configuration = try DaemonConfiguration.load(path: configPath)
        let daemon = try Daemon(
            configuration: configuration, configPath: configPath, log: Logger(level: verbose ? .debug : .info)
        )
        try await daemon.run()
    }
}
