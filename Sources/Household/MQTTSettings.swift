import Foundation
package import TypedJSON

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The daemon configuration's `mqtt` section.
///
/// ```json
/// "mqtt": {
///   "host": "broker.home", "port": 8883,
///   "username": "gate-desktop", "passwordFile": "/etc/stepgate/mqtt-password",
///   "tls": { "caFile": "/etc/stepgate/ca.crt" },
///   "topicPrefix": "stepgate/desktop", "discoveryPrefix": "homeassistant"
/// }
/// ```
///
/// `socket` (a broker's Unix socket) replaces `host` and `port`. The password is read from its
/// file when the configuration is loaded; a file that other users may read is refused, since
/// whoever has the gate's credentials has its rights at the broker.
package struct MQTTSettings: Equatable, Sendable {
    package var broker: MQTTBroker
    package var topicPrefix: String
    /// Home Assistant's discovery prefix; nil: no discovery messages.
    package var discoveryPrefix: String?
    package var passwordFile: String?
    /// Whether the gate takes commands (lock, skip, emergency unlock…) from `PREFIX/command`;
    /// whoever the broker lets publish there has the admin group's rights.
    package var commands = false
    /// Whether the gate publishes the steps it counts for gates on other hosts (their input
    /// `{"mqtt": PREFIX}`).
    package var shareSteps = false
    /// The gate's name in Home Assistant (device `StepGate NODE`, node id `stepgate_NODE`);
    /// the host name unless set, so two daemons on one host need it to keep their entities apart.
    package var node: String

    package static let keys: Set<String> = [
        "host", "port", "socket", "clientID", "username", "passwordFile", "tls", "keepalive", "topicPrefix",
        "discoveryPrefix", "commands", "shareSteps", "node",
    ]

    /// This machine's host name (the defaults' `HOSTNAME`).
    package static var hostName: String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "localhost" }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return name.isEmpty ? "localhost" : name
    }

    package static func parse(_ value: JSONValue?, host: String = hostName) throws -> MQTTSettings? {
        guard let value else { return nil }
        guard case .object(let list) = value else {
            throw JSONPathError(path: "mqtt", message: "expected an object, found \(value.excerpt)")
        }
        let members = Dictionary(list, uniquingKeysWith: { first, _ in first })
        for key in members.keys.sorted() where !keys.contains(key) {
            throw JSONPathError(
                path: "mqtt.\(key)",
                message: "unknown key; expected one of: \(keys.sorted().joined(separator: ", "))")
        }
        func string(_ key: String, in object: [String: JSONValue] = members, at path: String = "mqtt") throws
            -> String?
        {
            guard let value = object[key] else { return nil }
            guard case .string(let text) = value, !text.isEmpty else {
                throw JSONPathError(
                    path: "\(path).\(key)", message: "expected a non-empty string, found \(value.excerpt)")
            }
            return text
        }
        func integer(_ key: String, _ range: ClosedRange<Int>) throws -> Int? {
            guard let value = members[key] else { return nil }
            guard case .number(let number, true) = value, let whole = Int(exactly: number),
                range.contains(whole)
            else {
                throw JSONPathError(
                    path: "mqtt.\(key)",
                    message:
                        "expected a whole number from \(range.lowerBound) to \(range.upperBound), found \(value.excerpt)"
                )
            }
            return whole
        }
        var tls: MQTTBroker.TLS?
        if let value = members["tls"] {
            guard case .object(let list) = value else {
                throw JSONPathError(path: "mqtt.tls", message: "expected an object, found \(value.excerpt)")
            }
            let object = Dictionary(list, uniquingKeysWith: { first, _ in first })
            let allowed: Set = ["caFile", "certificateFile", "keyFile"]
            for key in object.keys.sorted() where !allowed.contains(key) {
                throw JSONPathError(
                    path: "mqtt.tls.\(key)",
                    message: "unknown key; expected one of: \(allowed.sorted().joined(separator: ", "))")
            }
            guard let ca = try string("caFile", in: object, at: "mqtt.tls") else {
                throw JSONPathError(
                    path: "mqtt.tls.caFile",
                    message: "missing: the CA certificate the broker's is checked against")
            }
            tls = MQTTBroker.TLS(
                caFile: ca, certificateFile: try string("certificateFile", in: object, at: "mqtt.tls"),
                keyFile: try string("keyFile", in: object, at: "mqtt.tls"))
            if (tls?.certificateFile == nil) != (tls?.keyFile == nil) {
                throw JSONPathError(
                    path: "mqtt.tls",
                    message: "a client certificate needs its key: give both certificateFile and keyFile")
            }
            for (key, path) in [
                ("caFile", ca), ("certificateFile", tls?.certificateFile), ("keyFile", tls?.keyFile),
            ] {
                guard let path else { continue }
                guard access(path, R_OK) == 0 else {
                    throw JSONPathError(
                        path: "mqtt.tls.\(key)",
                        message: "cannot read \(path): \(String(cString: strerror(errno)))")
                }
            }
        }
        let address: MQTTBroker.Address
        if let socket = try string("socket") {
            if members["host"] != nil || members["port"] != nil {
                throw JSONPathError(
                    path: "mqtt.socket",
                    message: "a Unix socket replaces host and port: give one or the other")
            }
            address = .unixSocket(socket)
        } else {
            address = .tcp(
                host: try string("host") ?? "localhost",
                port: try integer("port", 1...65_535) ?? (tls == nil ? 1883 : 8883))
        }
        var broker = MQTTBroker(address: address, clientID: try string("clientID") ?? "stepgate-\(host)")
        broker.tls = tls
        broker.keepalive = try integer("keepalive", 5...3600) ?? 30
        broker.username = try string("username")
        let passwordFile = try string("passwordFile")
        if let passwordFile {
            guard broker.username != nil else {
                throw JSONPathError(path: "mqtt.passwordFile", message: "a password needs a username")
            }
            broker.password = try readPassword(passwordFile)
        }
        let prefix = try string("topicPrefix") ?? "stepgate/\(host)"
        try checkTopic(prefix, at: "mqtt.topicPrefix")
        var discovery: String? = "homeassistant"
        switch members["discoveryPrefix"] {
        case nil: break
        case .bool(false)?: discovery = nil
        case .string(let text)? where !text.isEmpty:
            try checkTopic(text, at: "mqtt.discoveryPrefix")
            discovery = text
        case let value?:
            throw JSONPathError(
                path: "mqtt.discoveryPrefix",
                message: "expected a topic prefix like \"homeassistant\" or false, found \(value.excerpt)")
        }
        let node = try string("node") ?? host
        guard node.utf8.count <= 64,
            !node.contains(where: { $0 == "/" || $0 == "+" || $0 == "#" || $0 == "\0" })
        else {
            throw JSONPathError(
                path: "mqtt.node",
                message: "expected a name of at most 64 bytes without '/', '+', '#' or NUL; found \"\(node)\""
            )
        }
        var settings = MQTTSettings(
            broker: broker, topicPrefix: prefix, discoveryPrefix: discovery, passwordFile: passwordFile,
            node: node)
        for (key, flag) in [("commands", \MQTTSettings.commands), ("shareSteps", \MQTTSettings.shareSteps)] {
            switch members[key] {
            case nil: break
            case .bool(let value)?: settings[keyPath: flag] = value
            case let value?:
                throw JSONPathError(
                    path: "mqtt.\(key)", message: "expected true or false, found \(value.excerpt)")
            }
        }
        return settings
    }

    /// A topic prefix: levels separated by `/`, none empty, no wildcards, no NUL.
    /// Whether `topic` is a topic prefix: levels separated by `/`, none empty, no wildcards, no NUL.
    package static func isTopicPrefix(_ topic: String) -> Bool {
        let levels = topic.split(separator: "/", omittingEmptySubsequences: false)
        return !topic.isEmpty && topic.utf8.count < 1024 && levels.allSatisfy({ !$0.isEmpty })
            && !topic.contains(where: { $0 == "+" || $0 == "#" || $0 == "\0" })
    }

    private static func checkTopic(_ topic: String, at path: String) throws {
        guard isTopicPrefix(topic) else {
            throw JSONPathError(
                path: path,
                message:
                    "expected topic levels separated by '/', none empty, without '+', '#' or NUL; found \"\(topic)\""
            )
        }
    }

    /// The first line of `path`, which only its owner (and group) may read.
    private static func readPassword(_ path: String) throws -> String {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw JSONPathError(
                path: "mqtt.passwordFile", message: "cannot read \(path): \(String(cString: strerror(errno)))"
            )
        }
        guard info.st_mode & S_IROTH == 0 else {
            throw JSONPathError(
                path: "mqtt.passwordFile",
                message:
                    "\(path) is readable by every user (mode \(String(info.st_mode & 0o777, radix: 8))): whoever reads it has the gate's rights at the broker; chmod o-r it"
            )
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw JSONPathError(
                path: "mqtt.passwordFile", message: "cannot read \(path): \(String(cString: strerror(errno)))"
            )
        }
        let text = String(decoding: data, as: UTF8.self)
        let line =
            text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init)
            ?? ""
        guard !line.isEmpty else {
            throw JSONPathError(
                path: "mqtt.passwordFile",
                message: "\(path) is empty; expected the password on its first line")
        }
        return line
    }
}
