import Foundation
import Household
import TypedJSON

/// The daemon's side of the household over MQTT: publishes the gate's state (retained, only
/// what changed), Home Assistant's discovery configurations and availability; logs the
/// connection's ups and downs once each. Used from the daemon's loop only. The broker is never
/// waited on: publishing queues, and the client reconnects by itself.
final class HouseholdLink {
    private let client: MQTTClient
    let topics: GateTopics
    private let log: Logger
    /// Each state topic's last published payload.
    private var published: [String: String] = [:]
    private var stores: [String]
    private var lastProblem: String?
    private let commands: Bool
    /// The ids of the last commands taken, so one delivered twice (QoS 1 is at least once) is
    /// carried out once.
    private var recentIDs: [String] = []

    init(_ settings: MQTTSettings, stores: [String], version: String, log: Logger, inbox: Inbox)
        throws(MQTTError)
    {
        topics = GateTopics(
            prefix: settings.topicPrefix, discoveryPrefix: settings.discoveryPrefix,
            host: MQTTSettings.hostName,
            version: version)
        self.stores = stores
        self.log = log
        commands = settings.commands
        client = try MQTTClient(settings.broker, will: topics.offline) { inbox.post(.household($0)) }
        if commands { client.subscribe(topics.command, qos: 1) }
        log.info(
            "mqtt: publishing under \(settings.topicPrefix) at \(settings.broker.described)"
                + (commands ? "; commands from \(topics.command)" : ""))
    }

    /// Connects (in the background) and queues availability and discovery.
    func start(_ snapshot: GateSnapshot) {
        client.publish(topics.online)
        for message in topics.discoveryMessages(stores: stores) { client.publish(message) }
        update(snapshot)
        client.start()
    }

    /// Publishes what changed since the last call.
    func update(_ snapshot: GateSnapshot) {
        let names = snapshot.stores.map(\.name)
        if names != stores {
            let removed = stores.filter { !names.contains($0) }
            for message in topics.discoveryMessages(stores: names, removed: removed) {
                client.publish(message)
            }
            for store in removed {
                client.publish(MQTTMessage(topic: topics.store(store), payload: [], retain: true))
                published[topics.store(store)] = nil
            }
            stores = names
        }
        for message in topics.state(snapshot) where published[message.topic] != message.text {
            published[message.topic] = message.text
            client.publish(message)
        }
    }

    /// What the connection thread reported; a command to carry out, if that is what came.
    func handle(_ event: MQTTClient.Event) -> ControlRequest? {
        switch event {
        case .connected:
            log.notice("mqtt: connected")
            lastProblem = nil
        case .disconnected(let reason):
            if reason != lastProblem { log.warning("mqtt: \(reason); retrying with back-off") }
            lastProblem = reason
        case .message(let message):
            guard commands, message.topic == topics.command else { return nil }
            return request(message)
        }
        return nil
    }

    /// The longest command payload taken.
    static let maximumCommand = 4096

    /// A command from the broker, checked as the control socket checks its requests. Whoever
    /// the broker let publish on the command topic has the admin group's rights there (the
    /// broker's ACL is the rights model: see docs/household.md).
    private func request(_ message: MQTTMessage) -> ControlRequest? {
        let (reply, client, log) = (topics.reply, client, log)
        // The id, if the payload is an object with one; checked below.
        var idValue: JSONValue?
        if message.payload.count <= Self.maximumCommand,
            case .object(let members)? = try? JSONValue.parse(bytes: message.payload)
        {
            idValue = members.first(where: { $0.0 == "id" })?.1
        }
        let id: String? =
            if case .string(let text)? = idValue, !text.isEmpty, text.utf8.count <= 64 { text } else { nil }
        let answer: @Sendable (String) -> Void = { json in
            let idJSON = id.map { JSONValue.string($0).serialized() } ?? "null"
            client.publish(MQTTMessage(topic: reply, text: #"{"id":\#(idJSON),"reply":\#(json)}"#, qos: 1))
        }
        guard message.payload.count <= Self.maximumCommand else {
            answer(ControlReply.refusal("a command is at most \(Self.maximumCommand) bytes"))
            return nil
        }
        guard idValue == nil || id != nil else {
            answer(ControlReply.refusal(#""id" must be a string of 1 to 64 bytes"#))
            return nil
        }
        // A retained command would be carried out again at every reconnection.
        guard !message.retain else {
            log.warning(
                "mqtt: a retained command on \(topics.command) was ignored; send commands without retain")
            answer(ControlReply.refusal("retained commands are ignored: publish without retain"))
            return nil
        }
        if let id {
            guard !recentIDs.contains(id) else {
                log.info("mqtt: command \(id) came again; carried out once")
                return nil
            }
            recentIDs.append(id)
            if recentIDs.count > 256 { recentIDs.removeFirst(recentIDs.count - 256) }
        }
        switch ControlCommand.decode(message.payload) {
        case .failure(let error):
            log.warning("mqtt: refused a command: \(error.message)")
            answer(ControlReply.refusal(error.message))
            return nil
        case .success(let command):
            let origin = "mqtt \(topics.command)"
            if command.changesPolicy { log.notice("\(origin): \(command.requestLine)") }
            return ControlRequest(
                command: command, peer: PeerCredentials(pid: 0, uid: UInt32.max, gid: UInt32.max),
                isAdmin: true,
                origin: origin
            ) { json in
                if command.changesPolicy { log.notice("\(origin): answered \(json)") }
                answer(json)
            }
        }
    }

    /// Says `offline` and disconnects cleanly.
    func stop() { client.stop(goodbye: [topics.offline]) }
}
