import CoreCommands
import Counting
import Formatting
import Foundation
import Household
import Shields
import StepGateDaemon
import StepHistoryStore
import SystemFiles
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
            let (problems, plan) = Self.preflight(configuration)
            if !problems.isEmpty {
                for problem in problems { printError("\(configPath): \(problem)") }
                throw ExitCode(1)
            }
            print("\(configPath): valid")
            switch configuration.input {
            case .replay(let path, let speed): print("input: replay \(path) at \(speed)× real time")
            case .device(let name, let uri, let rate):
                print(
                    "input: IIO device \(name ?? "(first accelerometer)") \(uri.map { "at \($0) " } ?? "")at \(rate) Hz"
                )
            case .mqtt(let prefix):
                print("input: steps counted by the host publishing under \(prefix), over MQTT")
            }
            print("stores:\(configuration.policy.stores.isEmpty ? " none" : "")")
            for store in configuration.policy.stores {
                print("  \(store.name): \(store.summary(zone: configuration.policy.timeZone))")
            }
            print("shields:\(plan.isEmpty ? " none" : "")")
            for line in plan { print("  \(line)") }
            print(
                "state: \(configuration.stateDirectory)/state.json; control socket: \(configuration.controlSocket)"
            )
            return
        }
        let daemon = try Daemon(
            configuration: configuration, configPath: configPath,
            log: Logger(level: verbose ? .debug : .info),
            version: StepGate.version)
        try await daemon.run()
    }

    /// What the daemon would fail on at run time (a missing replay file, a hook or tool that is
    /// not there, a shield that needs root), and what each shield will do.
    static func preflight(_ c: DaemonConfiguration) -> (problems: [String], plan: [String]) {
        var problems: [String] = []
        var plan: [String] = []
        let runner = CommandRunner()
        if case .replay(let path, _) = c.input {
            var info = stat()
            if stat(path, &info) != 0 {
                problems.append("input.replay: \(path): \(String(cString: strerror(errno)))")
            } else if info.st_mode & S_IFMT != S_IFREG || access(path, R_OK) != 0 {
                problems.append("input.replay: \(path): not a readable file")
            }
        }
        func used(_ kind: Target.Kind) -> [String] {
            c.policy.stores.filter { !$0.selection.targets.filter { $0.kind == kind }.isEmpty }.map(\.name)
        }
        /// The stores named, or what it means that there are none.
        func stores(_ names: [String]) -> String {
            names.isEmpty ? "no store (none selects any)" : names.joined(separator: ", ")
        }
        let root = geteuid() == 0
        if c.execShield {
            if !root { problems.append("shields.exec: the exec shield needs root (fanotify)") }
            plan.append(
                "exec: denies running (to everyone) and opening (to all but root and the admin group) the "
                    + "programs and desktop categories of \(stores(Set(used(.executable) + used(.desktopCategory)).sorted()))"
            )
            // Every entry resolved as the shield will resolve it: what would fail at run time
            // fails here, and a folder or pattern says what it stands for now.
            for store in c.policy.stores {
                for entry in store.selection.executables {
                    let (problem, matches) = ProgramEntry.check(entry)
                    let path = "policy.stores.\(store.name).selection.executables"
                    if let problem { problems.append("\(path): \(problem)") }
                    guard !ProgramEntry(entry).isProgram, problem == nil else { continue }
                    let names = matches.map { String($0.split(separator: "/").last ?? "") }
                    let listed = names.prefix(8).joined(separator: ", ") + (names.count > 8 ? ", …" : "")
                    plan.append(
                        "exec: \(store.name): \(entry) is \(matches.count) program\(matches.count == 1 ? "" : "s") now"
                            + (matches.isEmpty ? "" : " (\(listed))")
                            + (ProgramEntry(entry).isFolder
                                ? "; programs added there later are shielded too" : ""))
                }
            }
        }
        if let systemctl = c.systemctl {
            if runner.resolve(systemctl) == nil {
                problems.append("shields.systemd.systemctl: \(systemctl): not found")
            }
            plan.append("systemd: masks and stops the units of \(stores(used(.systemdUnit)))")
        }
        if let domains = c.domains {
            let folder = String(domains.path[..<(domains.path.lastIndex(of: "/") ?? domains.path.startIndex)])
            // A missing folder is created at start; something else in its place is not.
            var isFolder: ObjCBool = false
            if !folder.isEmpty, FileManager.default.fileExists(atPath: folder, isDirectory: &isFolder),
                !isFolder.boolValue
            {
                problems.append("shields.domains.path: \(folder) is not a folder")
            }
            if let reload = domains.reload?.first, runner.resolve(reload) == nil {
                problems.append("shields.domains.reload: \(reload): not found")
            }
            plan.append(
                "domains: blocks the domains of \(stores(used(.domain))) in \(domains.path) "
                    + "(\(domains.format.rawValue) format\(domains.format == .hosts ? "; subdomains other than www. are not covered" : ""))"
                    + (c.browserPolicies ? "; browsers' DNS over HTTPS kept off by policy" : ""))
            // A name written with its www. covers only that name: the site itself stays open.
            for store in c.policy.stores {
                for domain in store.selection.domains where domain.hasPrefix("www.") {
                    let site = domain.dropFirst(4)
                    plan.append(
                        "domains: \(store.name): \(domain) blocks only that name; \(site) stays open "
                            + "(write \(site) to block both)")
                }
            }
        }
        if let nft = c.nftables {
            if runner.resolve(nft.nft) == nil {
                problems.append("shields.nftables.nft: \(nft.nft): not found (Debian package nftables)")
            }
            if !root { problems.append("shields.nftables: the nftables shield needs root") }
            plan.append(
                "nftables: refuses \(nft.users.map { $0.joined(separator: ", ") } ?? "every account from uid 1000 outside the admin group") "
                    + "connections to the addresses of \(used(.domain).joined(separator: ", "))'s domains and to \(nft.resolvers.count) DoH resolvers"
            )
        }
        for (name, hook) in c.hooks.sorted(by: { $0.key < $1.key }) {
            if let program = hook.command.first, runner.resolve(program) == nil {
                problems.append("shields.hooks.\(name).command: \(program): not found or not executable")
            }
            plan.append(
                "hook \(name): runs \(hook.command.joined(separator: " ")) (timeout \(Int(hook.timeout)) s)")
        }
        if let mqtt = c.mqtt {
            if let problem = MQTTClient.libraryProblem { problems.append("mqtt: \(problem)") }
            plan.append(
                "mqtt: publishes steps and each store's state (retained) under \(mqtt.topicPrefix) at "
                    + "\(mqtt.broker.described)\(mqtt.broker.username.map { " as \($0)" } ?? ""), "
                    + (mqtt.discoveryPrefix.map {
                        "Home Assistant discovery under \($0)/ (node id stepgate_\(GateTopics.identifier(mqtt.node))), "
                    } ?? "")
                    + "availability with a will; "
                    + (mqtt.commands
                        ? "takes lock, skip and emergency commands from \(mqtt.topicPrefix)/command with the admin group's rights (the broker's ACL must let only admins publish there); "
                        : "")
                    + (mqtt.shareSteps
                        ? "shares the steps it counts on \(mqtt.topicPrefix)/steps/session/SESSION for gates on other hosts (the broker's ACL must let this host read and write \(mqtt.topicPrefix)/steps/#, and no one else write there); "
                        : "")
                    + "enforcement never waits on the broker")
        }
        for kind in Target.Kind.allCases where !used(kind).isEmpty {
            let enforced: Bool
            switch kind {
            case .executable, .desktopCategory: enforced = c.execShield
            case .systemdUnit: enforced = c.systemctl != nil
            case .domain: enforced = c.domains != nil || c.nftables != nil
            case .hook: enforced = !c.hooks.isEmpty
            }
            if !enforced {
                problems.append(
                    "policy: \(used(kind).joined(separator: ", ")) select \(kind.rawValue) targets but no shield enforces them "
                        + "(they would stay locked with a failing shield)")
            }
        }
        return (problems, plan)
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
        // And whatever broker the CA vouches for: a CA file another user could replace would
        // let their broker pass.
        if let tls = configuration.mqtt?.broker.tls {
            for (role, file) in [
                ("CA", tls.caFile), ("certificate", tls.certificateFile), ("key", tls.keyFile),
            ] {
                if let file { list.append(("MQTT \(role) file folder", folderOf(file))) }
            }
        }
        if let password = configuration.mqtt?.passwordFile {
            list.append(("MQTT password file folder", folderOf(password)))
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
        // The gate trusts whatever answers on the broker's socket (and sends it its password):
        // its folder is the broker's (a system account's, such as /run/mosquitto) or root's,
        // and no one else's. It may appear after the daemon starts, with the broker; the link
        // checks it again before every connection.
        if case .unixSocket(let path)? = configuration.mqtt?.broker.address {
            do {
                try FolderSafety.checkOnlyRootCanChange(
                    folderOf(path), allowMissing: true, leafMayBelongToSystemAccount: true)
            } catch {
                throw ConfigurationFileError(path: configPath, message: "MQTT broker socket folder: \(error)")
            }
        }
        // The TLS and password files themselves: root's, not writable by anyone else, and the
        // secrets not readable by anyone else either.
        if let mqtt = configuration.mqtt {
            let tls = mqtt.broker.tls
            for (key, file, secret) in [
                ("tls.caFile", tls?.caFile, false), ("tls.certificateFile", tls?.certificateFile, false),
                ("tls.keyFile", tls?.keyFile, true), ("passwordFile", mqtt.passwordFile, true),
            ] {
                guard let file else { continue }
                var info = stat()
                guard lstat(file, &info) == 0 else {
                    throw ConfigurationFileError(
                        path: configPath, message: "mqtt.\(key): \(file): \(String(cString: strerror(errno)))"
                    )
                }
                if info.st_uid != 0 || info.st_mode & 0o022 != 0 || info.st_mode & S_IFMT != S_IFREG
                    || (secret && info.st_mode & 0o004 != 0)
                {
                    throw ConfigurationFileError(
                        path: configPath,
                        message:
                            "mqtt.\(key): \(file) is owned by uid \(info.st_uid), mode \(String(info.st_mode & 0o7777, radix: 8)); expected a regular file of root's that no one else may write\(secret ? " or read" : "") (whoever could change it could vouch for a broker of their own, or take the gate's place at it)"
                    )
                }
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
