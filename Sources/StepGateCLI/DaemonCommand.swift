import Foundation
import Shields
import UnlockPolicy

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
            .flag("check", help: "Only check the configuration, print a summary and exit."),
            .flag("verbose", help: "Log debug messages too."),
        ]
    )

    var configPath: String
    var check: Bool
    var verbose: Bool

    init(arguments: ParsedArguments) throws(UsageError) {
        guard let path = arguments.value("config") else { throw UsageError("missing '--config <file>'") }
        guard arguments.positionals.isEmpty else {
            throw UsageError("unexpected argument '\(arguments.positionals[0])'")
        }
        configPath = path
        check = arguments.flag("check")
        verbose = arguments.flag("verbose")
    }

    func run() async throws {
        let configuration = try DaemonConfiguration.load(path: configPath)
        if geteuid() == 0 {
            // Checked before anything is created in them, and again once the daemon's own folders
            // exist (so one that another user made first is refused).
            try Self.checkFolders(configuration, configPath: configPath, allowMissing: true)
            if !check {
                try Self.createFolders(configuration)
                try Self.checkFolders(configuration, configPath: configPath, allowMissing: false)
            }
        }
        if check {
            print("\(configPath): valid")
            switch configuration.input {
            case .replay(let path, let speed): print("input: replay \(path) at \(speed)× real time")
            case .device(let name, let uri, let rate):
                print(
                    "input: IIO device \(name ?? "(first accelerometer)") \(uri.map { "at \($0) " } ?? "")at \(rate) Hz"
                )
            }
            print("stores: \(configuration.policy.stores.map(\.name).joined(separator: ", "))")
            var shields: [String] = []
            if configuration.execShield { shields.append("exec") }
            if configuration.systemctl != nil { shields.append("systemd") }
            if let domains = configuration.domains {
                shields.append("domains (\(domains.format.rawValue) file \(domains.path))")
            }
            if !configuration.hooks.isEmpty {
                shields.append("hooks (\(configuration.hooks.keys.sorted().joined(separator: ", ")))")
            }
            print("shields: \(shields.isEmpty ? "none" : shields.joined(separator: ", "))")
            print(
                "state: \(configuration.stateDirectory)/state.json; control socket: \(configuration.controlSocket)"
            )
            return
        }
        let daemon = try Daemon(
            configuration: configuration, configPath: configPath, log: Logger(level: verbose ? .debug : .info)
        )
        try await daemon.run()
    }

    /// The folders root keeps its files in: the state directory, the control socket's folder and
    /// the domains shield's file's folder.
    static func folders(_ configuration: DaemonConfiguration) -> [(role: String, path: String)] {
        var list = [
            ("state directory", configuration.stateDirectory),
            ("control socket folder", folderOf(configuration.controlSocket)),
        ]
        if let domains = configuration.domains {
            list.append(("domains file folder", folderOf(domains.path)))
        }
        return list
    }

    /// As root, refuses folders that another user could change (planted links would let them
    /// make root overwrite any file). `allowMissing` before the daemon has created its state and
    /// socket folders (and for `--check`, which creates nothing).
    static func checkFolders(_ configuration: DaemonConfiguration, configPath: String, allowMissing: Bool)
        throws
    {
        for (role, path) in folders(configuration) {
            do {
                try FolderSafety.checkOnlyRootCanChange(path, allowMissing: allowMissing)
            } catch {
                throw ConfigurationFileError(path: configPath, message: "\(role): \(error)")
            }
        }
    }

    /// Creates the state directory (0700) and the control socket's folder (0755), and any folder
    /// above them (0755), as root, before they are checked.
    static func createFolders(_ configuration: DaemonConfiguration) throws {
        for (path, mode) in [
            (configuration.stateDirectory, mode_t(0o700)),
            (folderOf(configuration.controlSocket), mode_t(0o755)),
        ] {
            var prefix = path.hasPrefix("/") ? "" : "."
            let parts = path.split(separator: "/").map(String.init)
            for (index, part) in parts.enumerated() {
                prefix += "/" + part
                if mkdir(prefix, index == parts.count - 1 ? mode : 0o755) != 0 && errno != EEXIST {
                    throw ConfigurationFileError(
                        path: prefix, message: "cannot create the folder: \(String(cString: strerror(errno)))"
                    )
                }
            }
        }
    }

    private static func folderOf(_ path: String) -> String {
        let folder = (path as NSString).deletingLastPathComponent
        return folder.isEmpty ? "." : folder
    }
}
