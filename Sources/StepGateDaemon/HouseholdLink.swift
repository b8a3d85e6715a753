import Household

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

    init(_ settings: MQTTSettings, stores: [String], version: String, log: Logger, inbox: Inbox)
        throws(MQTTError)
    {
        topics = GateTopics(
            prefix: settings.topicPrefix, discoveryPrefix: settings.discoveryPrefix,
            host: MQTTSettings.hostName,
            version: version)
        self.stores = stores
        self.log = log
        client = try MQTTClient(settings.broker, will: topics.offline) { inbox.post(.household($0)) }
        log.info("mqtt: publishing under \(settings.topicPrefix) at \(settings.broker.described)")
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

    /// What the connection thread reported.
    func handle(_ event: MQTTClient.Event) {
        switch event {
        case .connected:
            log.notice("mqtt: connected")
            lastProblem = nil
        case .disconnected(let reason):
            if reason != lastProblem { log.warning("mqtt: \(reason); retrying with back-off") }
            lastProblem = reason
        case .message:
            break
        }
    }

    /// Says `offline` and disconnects cleanly.
    func stop() { client.stop(goodbye: [topics.offline]) }
}
