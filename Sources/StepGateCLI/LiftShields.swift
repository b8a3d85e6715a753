import CoreCommands
import Formatting
import Foundation
import Shields
import StepGateDaemon
import StepHistoryStore
import SystemFiles
import TypedJSON
import UnlockPolicy

/// `stepgate lift-shields`: lifts everything a stopped daemon left in force, for package
/// removal (the daemon keeps its shields across a restart on purpose, so stopping it is not
/// enough): the runtime masks of shielded systemd units, the managed block in the domains file
/// and its reserve file, the browsers' DNS-over-HTTPS policies and the nftables table.
struct LiftShields: SynchronousCommand {
    static let configuration = CommandConfiguration(
        commandName: "lift-shields",
        abstract: "Lift every shield a stopped daemon left in force (used when the package is removed).",
        discussion: """
            Reads the daemon's configuration (defaults when the file is missing: state in \
            /var/lib/stepgate, domains in /etc/hosts) and, as root: unmasks the systemd units \
            remembered in <stateDirectory>/systemd-units.json (starting those that were running \
            before), removes the managed block and its hidden reserve file beside the domains file, \
            removes the browsers' DNS-over-HTTPS policies and deletes the nftables table 'inet \
            stepgate'. Prints a line for each thing it lifted ('no StepGate shield is in force' when \
            there was none). Refuses while a daemon answers on the control socket (it would shield \
            again). Exits 1 when something could not be lifted, after trying everything.
            """,
        options: [
            .option(
                "config", "file",
                help: "The daemon's configuration (default \(defaultConfig); may be missing).")
        ]
    )

    static let defaultConfig = "/etc/stepgate/config.json"

    var configPath: String

    init(arguments: ParsedArguments) throws(UsageError) {
        guard arguments.positionals.isEmpty else {
            throw UsageError("unexpected argument '\(arguments.positionals[0])'")
        }
        configPath = arguments.value("config") ?? Self.defaultConfig
    }

    func runSynchronously() throws {
        var problems: [String] = []
        let settings: Settings
        do {
            settings = try Self.settings(configPath: configPath)
        } catch {
            // Removal must not leave shields behind for want of a valid file: use the defaults.
            problems.append("\(error); using the default places")
            settings = Settings()
        }
        if (try? ControlClient.send(.status, socket: settings.controlSocket, timeout: 5)) != nil {
            throw ControlSocketError(
                message:
                    "a daemon answers on \(settings.controlSocket); stop it first (systemctl stop stepgate)")
        }
        var lifted: [String] = []
        for outcome in [
            Self.liftUnits(settings), Self.liftDomains(settings), Self.liftBrowserPolicies(settings),
            Self.liftTable(settings),
        ] {
            lifted += outcome.lifted
            problems += outcome.problems
        }
        for line in lifted { print("lifted: \(line)") }
        for problem in problems { printError("lift-shields: \(problem)") }
        if !problems.isEmpty { throw ExitCode.failure }
        if lifted.isEmpty { print("no StepGate shield is in force") }
    }

    /// What one kind of shield lifted (a line each) and what it could not.
    struct Outcome {
        var lifted: [String] = []
        var problems: [String] = []
    }

    /// What is needed to find the shields: from the configuration, or the defaults when the file
    /// does not exist.
    struct Settings {
        var stateDirectory = "/var/lib/stepgate"
        var controlSocket = ControlDefaults.socket
        var systemctl = "systemctl"
        var domains: (path: String, format: DomainShield.Format, reload: [String]?)? = (
            "/etc/hosts", .hosts, nil
        )
        var browserPolicyRoot = "/"
        var nft = "nft"
    }

    /// - Throws: When the file exists but is not a valid configuration.
    static func settings(configPath: String) throws -> Settings {
        var settings = Settings()
        guard FileManager.default.fileExists(atPath: configPath) else { return settings }
        let c = try DaemonConfiguration.load(path: configPath)
        settings.stateDirectory = c.stateDirectory
        settings.controlSocket = c.controlSocket
        settings.systemctl = c.systemctl ?? settings.systemctl
        settings.domains = c.domains ?? settings.domains
        settings.browserPolicyRoot = c.browserPolicyRoot
        settings.nft = c.nftables?.nft ?? settings.nft
        return settings
    }

    /// Unmasks every unit the systemd shield remembers, through the shield itself (so a unit that
    /// was running before is started again and the memory is emptied).
    static func liftUnits(_ settings: Settings) -> Outcome {
        let memoryPath = settings.stateDirectory + "/systemd-units.json"
        struct Remembered: Decodable {
            var stores: [String]
            var wasActive: Bool
        }
        let units: [String: Remembered]
        do {
            guard let bytes = try DurableFile.read(memoryPath) else { return Outcome() }
            units = try JSONDecoding.decode([String: Remembered].self, from: JSONValue.parse(bytes: bytes))
        } catch {
            return Outcome(problems: ["\(memoryPath): \(error)"])
        }
        guard !units.isEmpty else { return Outcome() }
        do {
            let shield = try SystemdShield(memoryPath: memoryPath, systemctl: settings.systemctl)
            var outcome = Outcome()
            // One unit at a time, for each store that shields it (the last one unmasks it), so
            // each line says what happened to that unit.
            for (unit, remembered) in units.sorted(by: { $0.key < $1.key }) {
                var failed = false
                for store in remembered.stores.sorted() {
                    do {
                        try shield.remove(
                            [Target(kind: .systemdUnit, value: unit)], context: ShieldContext(store: store))
                    } catch {
                        outcome.problems.append(error.description)
                        failed = true
                    }
                }
                if !failed && !remembered.stores.isEmpty {
                    outcome.lifted.append(
                        "systemd unit \(unit) unmasked" + (remembered.wasActive ? " and started again" : ""))
                }
            }
            return outcome
        } catch {
            return Outcome(problems: [error.description])
        }
    }

    /// Empties the managed block (the file keeps every other line) and removes the reserve file.
    static func liftDomains(_ settings: Settings) -> Outcome {
        guard let domains = settings.domains else { return Outcome() }
        let shield = DomainShield(path: domains.path, format: domains.format, reloadCommand: domains.reload)
        var outcome = Outcome()
        do {
            for (store, targets) in try shield.inForce().sorted(by: { $0.key < $1.key }) {
                try shield.remove(Array(targets), context: ShieldContext(store: store))
                let names = targets.map(\.value).sorted().joined(separator: ", ")
                outcome.lifted.append("domains of store \(store) blocked in \(domains.path): \(names)")
            }
        } catch {
            outcome.problems.append(error.description)
        }
        let reserve = reservePath(beside: domains.path)
        if unlink(reserve) != 0 && errno != ENOENT {
            outcome.problems.append("\(reserve): cannot remove: \(String(cString: strerror(errno)))")
        }
        return outcome
    }

    /// Removes the browsers' DNS-over-HTTPS policies.
    static func liftBrowserPolicies(_ settings: Settings) -> Outcome {
        let (removed, problems) = BrowserPolicies(root: settings.browserPolicyRoot).removeReporting()
        return Outcome(lifted: removed.map { "DNS-over-HTTPS policy in \($0)" }, problems: problems)
    }

    /// The domain shield's hidden reserve file beside `path` (`/etc/.hosts.stepgate-reserve`).
    static func reservePath(beside path: String) -> String {
        let url = URL(fileURLWithPath: path)
        return url.deletingLastPathComponent().appendingPathComponent(
            ".\(url.lastPathComponent).stepgate-reserve"
        )
        .path
    }

    /// Deletes the nftables table when there is one (nothing to do without `nft`).
    static func liftTable(_ settings: Settings) -> Outcome {
        let runner = CommandRunner()
        guard runner.resolve(settings.nft) != nil else { return Outcome() }
        do {
            let list = try runner.run(
                [settings.nft, "list", "table", "inet", "stepgate"], timeout: 10, shield: "nftables")
            guard list.status == 0 else { return Outcome() }
            let delete = try runner.run(
                [settings.nft, "delete", "table", "inet", "stepgate"], timeout: 10, shield: "nftables")
            return delete.status == 0
                ? Outcome(lifted: ["nftables table inet stepgate deleted"])
                : Outcome(problems: ["nftables: cannot delete table inet stepgate: \(delete.output)"])
        } catch {
            return Outcome(problems: [error.description])
        }
    }
}
