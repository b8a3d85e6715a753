import Formatting
import Foundation
package import Household
package import Shields
package import StepDetection
import StepHistoryStore
import SystemFiles
package import TypedJSON
package import UnlockPolicy

/// The daemon's one configuration file: detector, policy, input, shields, paths.
///
/// ```json
/// {
///   "input": { "replay": "samples/walk-wrist-100.csv", "speed": 1 },
///   "detector": { "minimumPeak": 0.06 },
///   "policy": { "stores": { … } },
///   "stateDirectory": "/var/lib/stepgate",
///   "controlSocket": "/run/stepgate/control.sock",
///   "adminGroup": "stepgate-admin",
///   "shields": {
///     "exec": { "enabled": true },
///     "systemd": { "systemctl": "systemctl" },
///     "domains": { "path": "/etc/hosts", "format": "hosts", "reload": ["systemctl", "reload", "dnsmasq"] },
///     "hooks": { "journal": { "command": ["/usr/bin/logger", "-t", "stepgate-hook"], "timeout": 30 } }
///   },
///   "messages": { "games": { "title": "Games are shielded", "subtitle": "Walk to unlock them." } }
/// }
/// ```
package struct DaemonConfiguration {
    /// Where samples come from.
    package enum Input: Equatable {
        /// A recorded walk, replayed in real time (`speed` 1) or faster; for trying the daemon
        /// without a sensor and for tests.
        case replay(path: String, speed: Double)
        /// An IIO accelerometer.
        case device(name: String?, uri: String?, rate: Double)
        /// Steps counted by another host's daemon, published under this topic prefix with
        /// `mqtt.shareSteps` (see docs/household.md); needs an `mqtt` section.
        case mqtt(prefix: String)
    }

    /// A shield screen: what a denied launch shows.
    package struct Message: Equatable {
        package var title: String
        package var subtitle: String
    }

    package var input: Input
    package var detector = DetectorConfiguration()
    package var policy: PolicyConfiguration
    package var stateDirectory = "/var/lib/stepgate"
    package var controlSocket = "/run/stepgate/control.sock"
    package var adminGroup: String?
    package var execShield = false
    package var applicationDirectories: [String]?
    /// What happens to a store's running programs when it is shielded: per store, else
    /// `runningDefault`.
    package var running: [String: RunningProgramAction] = [:]
    package var runningDefault = RunningProgramAction.terminate
    /// Between SIGTERM and SIGKILL for `terminate`.
    package var graceSeconds = 10.0
    /// The cgroup (v2, below its mount) what gated users start from an unlocked store's files
    /// is kept in (`shields.exec.cgroup`): `nil` for the default (``defaultCgroup``), `false`
    /// in the file for none.
    package var cgroup: String?
    package var confinementOff = false

    /// The cgroup the exec shield keeps what gated users start during an unlock in, if any.
    package var confinementCgroup: String? {
        confinementOff ? nil : cgroup ?? Self.defaultCgroup(stateDirectory: stateDirectory)
    }

    /// `path` with every `%u` replaced by this process's uid.
    package static func expandingUID(_ path: String) -> String {
        path.replacingOccurrences(of: "%u", with: String(getuid()))
    }

    /// `/stepgate` for the default state directory; for another, `/stepgate-` and eight hex
    /// digits of a hash of its path, so two daemons on one machine never share their cgroups
    /// (one's relock would end what the other's unlock allowed).
    package static func defaultCgroup(stateDirectory: String) -> String {
        guard stateDirectory != "/var/lib/stepgate" else { return "/stepgate" }
        var hash: UInt32 = 2_166_136_261  // FNV-1a
        for byte in stateDirectory.utf8 { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
        let hex = String(hash, radix: 16)
        return "/stepgate-" + String(repeating: "0", count: 8 - hex.count) + hex
    }
    package var systemctl: String?
    package var domains: (path: String, format: DomainShield.Format, reload: [String]?)?
    /// Whether the browsers' managed policies keep DNS over HTTPS off while a store has domains.
    package var browserPolicies = true
    /// The file system root the browser policy files are written under.
    package var browserPolicyRoot = "/"
    /// The nftables shield (`shields.nftables`): refuses the gated users' connections to the
    /// shielded domains' addresses and to public DNS-over-HTTPS resolvers.
    package struct Nftables: Equatable {
        package var nft = "nft"
        /// User names whose connections are refused; nil: every ordinary account (uid 1000 and
        /// up) outside the admin group.
        package var users: [String]?
        /// DNS servers to look the domains up with; nil: the system's upstream servers.
        package var nameservers: [String]?
        package var resolvers = NftablesShield.wellKnownResolvers
        package var refreshSeconds = 300.0
    }
    package var nftables: Nftables?
    package var hooks: [String: HookShield.Hook] = [:]
    package var messages: [String: Message] = [:]
    /// Desktop notices (see ``NoticeSettings``).
    package var notifications = NoticeSettings()
    /// The household over MQTT (see ``MQTTSettings``); nil: none.
    package var mqtt: MQTTSettings?

    /// The shield settings (`shields`, `adminGroup`) as text, to tell whether a reload changed
    /// them: the shields are made at start, so such a change takes effect on restart.
    package var shieldSettings: String {
        let parts: [Any?] = [
            execShield, applicationDirectories,
            running.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" },
            runningDefault, graceSeconds, confinementCgroup, adminGroup, systemctl, domains.map { "\($0)" },
            browserPolicies,
            browserPolicyRoot, nftables, hooks.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" },
        ]
        return parts.map { "\(String(describing: $0))" }.joined(separator: "|")
    }

    package static let keys: Set<String> = [
        "input", "detector", "policy", "stateDirectory", "controlSocket", "adminGroup", "shields", "messages",
        "notifications", "mqtt",
    ]

    /// Reads and checks a configuration file; errors name the file and the key path. The file is
    /// read by the strict JSON reader the policy uses (duplicate keys refused, `true`, `1` and
    /// `1.0` kept apart), once.
    package static func load(path: String) throws -> DaemonConfiguration {
        let (bytes, document) = try readConfigurationDocument(path: path)
        guard case .object(let members) = document.value else {
            throw ConfigurationFileError(path: path, message: "expected a JSON object at the top level")
        }
        do {
            return try parse(
                Dictionary(members, uniquingKeysWith: { first, _ in first }),
                text: String(decoding: bytes, as: UTF8.self), path: path)
        } catch let error as JSONPathError {
            throw ConfigurationFileError(path: path, bytes: bytes, document: document, error: error)
        }
    }

    package static func parse(_ root: [String: JSONValue], text: String, path: String) throws
        -> DaemonConfiguration
    {
        try rejectUnknown(root, keys, at: "")
        let policy: PolicyConfiguration
        guard root["policy"] != nil else {
            throw JSONPathError(path: "policy", message: "missing the policy section")
        }
        policy = try PolicyConfiguration.parse(text)
        guard let inputObject = object(root["input"]) else {
            throw JSONPathError(
                path: "input", message: "expected an object with \"replay\", \"device\" or \"mqtt\"")
        }
        let input: Input
        if let source = inputObject["mqtt"] {
            try rejectUnknown(inputObject, ["mqtt"], at: "input")
            guard case .string(let prefix) = source, MQTTSettings.isTopicPrefix(prefix) else {
                throw JSONPathError(
                    path: "input.mqtt",
                    message:
                        "expected the sensor host's topic prefix, like \"stepgate/sensor\", found \(source.excerpt)"
                )
            }
            guard root["mqtt"] != nil else {
                throw JSONPathError(
                    path: "input.mqtt", message: "steps over MQTT need an \"mqtt\" section (the broker)")
            }
            input = .mqtt(prefix: prefix)
        } else if let replay = inputObject["replay"] {
            try rejectUnknown(inputObject, ["replay", "speed"], at: "input")
            guard case .string(let file) = replay, !file.isEmpty else {
                throw JSONPathError(path: "input.replay", message: "expected a file path")
            }
            let speed = try number(inputObject["speed"], at: "input.speed", range: 0.1...1000) ?? 1
            let base = (path as NSString).deletingLastPathComponent
            input = .replay(
                path: file.hasPrefix("/") || base.isEmpty ? file : base + "/" + file, speed: speed)
        } else {
            try rejectUnknown(inputObject, ["device", "uri", "rate"], at: "input")
            let name = try string(inputObject["device"], at: "input.device")
            let uri = try string(inputObject["uri"], at: "input.uri")
            let rate = try number(inputObject["rate"], at: "input.rate", range: 1...1000) ?? 100
            input = .device(name: name, uri: uri, rate: rate)
        }
        var configuration = DaemonConfiguration(input: input, policy: policy)
        if let detector = root["detector"] {
            guard case .object = detector else {
                throw JSONPathError(path: "detector", message: "expected an object")
            }
            configuration.detector = try JSONDecoding.decode(
                DetectorConfiguration.self, from: detector, path: "detector")
            do {
                try configuration.detector.validate()
            } catch {
                throw JSONPathError(
                    path: "detector.\(error.key)", message: "expected \(error.expected), found \(error.found)"
                )
            }
        }
        // `%u` in a path is the daemon's uid: one configuration tried by several users (root
        // and others) keeps each one's files apart.
        configuration.stateDirectory =
            try string(root["stateDirectory"], at: "stateDirectory").map(Self.expandingUID)
            ?? configuration.stateDirectory
        configuration.controlSocket =
            try string(root["controlSocket"], at: "controlSocket").map(Self.expandingUID)
            ?? configuration.controlSocket
        configuration.adminGroup = try string(root["adminGroup"], at: "adminGroup")
        if let shields = root["shields"] {
            guard let shields = object(shields) else {
                throw JSONPathError(path: "shields", message: "expected an object")
            }
            try rejectUnknown(shields, ["exec", "systemd", "domains", "nftables", "hooks"], at: "shields")
            if let nft = shields["nftables"] {
                guard let nft = object(nft) else {
                    throw JSONPathError(path: "shields.nftables", message: "expected an object")
                }
                try rejectUnknown(
                    nft, ["nft", "users", "nameservers", "dohResolvers", "refreshSeconds"],
                    at: "shields.nftables")
                var settings = Nftables()
                settings.nft = try string(nft["nft"], at: "shields.nftables.nft") ?? "nft"
                settings.users = try strings(nft["users"], at: "shields.nftables.users")
                for (index, user) in (settings.users ?? []).enumerated() where getpwnam(user) == nil {
                    throw JSONPathError(
                        path: "shields.nftables.users[\(index)]", message: "no user named \"\(user)\"")
                }
                settings.nameservers = try strings(nft["nameservers"], at: "shields.nftables.nameservers")
                let resolvers = try strings(nft["dohResolvers"], at: "shields.nftables.dohResolvers")
                for (key, list) in [
                    ("nameservers", settings.nameservers ?? []), ("dohResolvers", resolvers ?? []),
                ] {
                    for (index, address) in list.enumerated() where !isIPAddress(address) {
                        throw JSONPathError(
                            path: "shields.nftables.\(key)[\(index)]",
                            message: "expected an IP address, found \"\(address)\"")
                    }
                }
                if let resolvers { settings.resolvers = resolvers }
                settings.refreshSeconds =
                    try number(
                        nft["refreshSeconds"], at: "shields.nftables.refreshSeconds", range: 10...86_400)
                    ?? 300
                configuration.nftables = settings
            }
            if let exec = shields["exec"] {
                guard let exec = object(exec) else {
                    throw JSONPathError(path: "shields.exec", message: "expected an object")
                }
                try rejectUnknown(
                    exec, ["enabled", "applicationDirectories", "running", "graceSeconds", "cgroup"],
                    at: "shields.exec")
                switch exec["cgroup"] {
                case nil: break
                case .bool(false)?: configuration.confinementOff = true
                case .string(let path)? where ExecDenyShield.isValidCgroupPath(path):
                    configuration.cgroup = path
                case let value?:
                    throw JSONPathError(
                        path: "shields.exec.cgroup",
                        message:
                            "expected a cgroup path like \"/stepgate\" (folders of letters, digits, '-', '_', '.') or false, found \(value.excerpt)"
                    )
                }
                func action(_ value: JSONValue, at path: String) throws -> RunningProgramAction {
                    let names = RunningProgramAction.allCases.map { "\"\($0.rawValue)\"" }.joined(
                        separator: ", ")
                    guard case .string(let text) = value, let action = RunningProgramAction(rawValue: text)
                    else {
                        throw JSONPathError(
                            path: path, message: "expected one of \(names), found \(value.excerpt)")
                    }
                    return action
                }
                switch exec["running"] {
                case nil: break
                case .object(let perStore)?:
                    for (store, value) in perStore {
                        let parsed = try action(value, at: "shields.exec.running.\(store)")
                        if store == "*" {
                            configuration.runningDefault = parsed
                        } else {
                            configuration.running[store] = parsed
                        }
                    }
                case let value?:
                    configuration.runningDefault = try action(value, at: "shields.exec.running")
                }
                if let grace = exec["graceSeconds"] {
                    guard case .number(let seconds, _) = grace, seconds.isFinite, seconds >= 0, seconds <= 600
                    else {
                        throw JSONPathError(
                            path: "shields.exec.graceSeconds",
                            message: "expected a number of seconds from 0 to 600, found \(grace.excerpt)")
                    }
                    configuration.graceSeconds = seconds
                }
                configuration.execShield = try bool(exec["enabled"], at: "shields.exec.enabled") ?? true
                configuration.applicationDirectories = try strings(
                    exec["applicationDirectories"], at: "shields.exec.applicationDirectories")
            }
            if let systemd = shields["systemd"] {
                guard let systemd = object(systemd) else {
                    throw JSONPathError(path: "shields.systemd", message: "expected an object")
                }
                try rejectUnknown(systemd, ["systemctl"], at: "shields.systemd")
                configuration.systemctl =
                    try string(systemd["systemctl"], at: "shields.systemd.systemctl") ?? "systemctl"
            }
            if let domains = shields["domains"] {
                guard let domains = object(domains) else {
                    throw JSONPathError(path: "shields.domains", message: "expected an object")
                }
                try rejectUnknown(
                    domains, ["path", "format", "reload", "browserPolicies", "browserPolicyRoot"],
                    at: "shields.domains")
                configuration.browserPolicies =
                    try bool(domains["browserPolicies"], at: "shields.domains.browserPolicies") ?? true
                configuration.browserPolicyRoot =
                    try string(domains["browserPolicyRoot"], at: "shields.domains.browserPolicyRoot") ?? "/"
                let formatText = try string(domains["format"], at: "shields.domains.format") ?? "hosts"
                guard let format = DomainShield.Format(rawValue: formatText) else {
                    throw JSONPathError(
                        path: "shields.domains.format",
                        message: "expected \"hosts\" or \"dnsmasq\", found \"\(formatText)\"")
                }
                configuration.domains = (
                    try string(domains["path"], at: "shields.domains.path").map(Self.expandingUID)
                        ?? "/etc/hosts",
                    format,
                    try strings(domains["reload"], at: "shields.domains.reload")
                )
            }
            if let hooks = shields["hooks"] {
                guard let hooks = object(hooks) else {
                    throw JSONPathError(path: "shields.hooks", message: "expected an object")
                }
                for (name, value) in hooks {
                    let at = "shields.hooks.\(name)"
                    guard let hook = object(value) else {
                        throw JSONPathError(path: at, message: "expected an object")
                    }
                    try rejectUnknown(hook, ["command", "timeout"], at: at)
                    guard let command = try strings(hook["command"], at: "\(at).command"), !command.isEmpty
                    else {
                        throw JSONPathError(
                            path: "\(at).command", message: "expected a non-empty array of strings")
                    }
                    let timeout = try number(hook["timeout"], at: "\(at).timeout", range: 0.1...3600) ?? 30
                    configuration.hooks[name] = HookShield.Hook(command: command, timeout: timeout)
                }
            }
        }
        if let messages = root["messages"] {
            guard let messages = object(messages) else {
                throw JSONPathError(path: "messages", message: "expected an object")
            }
            for (store, value) in messages {
                let at = "messages.\(store)"
                guard policy.stores.contains(where: { $0.name == store }) else {
                    throw JSONPathError(path: at, message: "no store named \"\(store)\" in the policy")
                }
                guard let message = object(value) else {
                    throw JSONPathError(path: at, message: "expected an object")
                }
                try rejectUnknown(message, ["title", "subtitle"], at: at)
                configuration.messages[store] = Message(
                    title: try string(message["title"], at: "\(at).title") ?? "\(store) is shielded",
                    subtitle: try string(message["subtitle"], at: "\(at).subtitle") ?? "")
            }
        }
        configuration.notifications = try NoticeSettings.parse(root["notifications"], policy: policy)
        configuration.mqtt = try MQTTSettings.parse(root["mqtt"])
        if let mqtt = configuration.mqtt, case .tcp = mqtt.broker.address, mqtt.broker.tls == nil {
            var uses: [String] = []
            if mqtt.commands { uses.append("commands") }
            if mqtt.shareSteps { uses.append("shared steps") }
            if case .mqtt = input { uses.append("steps over MQTT (input.mqtt)") }
            if !uses.isEmpty {
                throw JSONPathError(
                    path: "mqtt.tls",
                    message:
                        "missing: \(uses.joined(separator: " and ")) need a broker the gate can be sure of: TLS with \"caFile\" (the broker's certificate checked), or \"socket\" in a folder only root can change. Over plain TCP, whoever listens on the broker's address (a gated user's own broker while the real one restarts) gets the gate's password, and could command it or give it steps"
                )
            }
        }
        return configuration
    }

    private static func rejectUnknown(_ object: [String: JSONValue], _ allowed: Set<String>, at path: String)
        throws
    {
        for key in object.keys.sorted() where !allowed.contains(key) {
            throw JSONPathError(
                path: path.isEmpty ? key : "\(path).\(key)",
                message: "unknown key; expected one of: \(allowed.sorted().joined(separator: ", "))")
        }
    }

    private static func isIPAddress(_ text: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, text, &v4) == 1 || inet_pton(AF_INET6, text, &v6) == 1
    }

    /// An object's members by key (the strict reader has refused duplicates); nil for anything
    /// else.
    private static func object(_ value: JSONValue?) -> [String: JSONValue]? {
        guard case .object(let members) = value else { return nil }
        return Dictionary(members, uniquingKeysWith: { first, _ in first })
    }

    private static func string(_ value: JSONValue?, at path: String) throws -> String? {
        guard let value else { return nil }
        guard case .string(let text) = value else {
            throw JSONPathError(path: path, message: "expected a string, found \(value.excerpt)")
        }
        return text
    }

    private static func strings(_ value: JSONValue?, at path: String) throws -> [String]? {
        guard let value else { return nil }
        guard case .array(let list) = value else {
            throw JSONPathError(path: path, message: "expected an array of strings, found \(value.excerpt)")
        }
        var result: [String] = []
        for (index, element) in list.enumerated() {
            guard case .string(let text) = element else {
                throw JSONPathError(
                    path: "\(path)[\(index)]", message: "expected a string, found \(element.excerpt)")
            }
            result.append(text)
        }
        return result
    }

    private static func bool(_ value: JSONValue?, at path: String) throws -> Bool? {
        guard let value else { return nil }
        guard case .bool(let flag) = value else {
            throw JSONPathError(path: path, message: "expected true or false, found \(value.excerpt)")
        }
        return flag
    }

    private static func number(_ value: JSONValue?, at path: String, range: ClosedRange<Double>) throws
        -> Double?
    {
        guard let value else { return nil }
        guard case .number(let number, _) = value, range.contains(number) else {
            throw JSONPathError(
                path: path,
                message:
                    "expected a number in \(range.lowerBound)...\(range.upperBound), found \(value.excerpt)")
        }
        return number
    }
}
