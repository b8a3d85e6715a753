// swift-format-ignore-file: AlwaysUseLowerCamelCase

// (the discovery and payload keys keep Home Assistant's snake_case names: they are its documented keys)
import Foundation
import TypedJSON

/// What a gate tells the household: today's steps, each store's state, the problems.
package struct GateSnapshot: Equatable, Sendable {
    package struct Store: Equatable, Sendable {
        package var name: String
        package var shielded: Bool
        /// ISO 8601, when unlocked.
        package var unlockedUntil: String?
        package var owners: [String]
        /// Steps counted toward the store's next goal.
        package var steps: Int
        package var nextGoal: Int?
        package var stepsToGo: Int?
        /// "ok", or why the store's shield is failing.
        package var health: String

        package init(
            name: String, shielded: Bool, unlockedUntil: String? = nil, owners: [String] = [], steps: Int = 0,
            nextGoal: Int? = nil, stepsToGo: Int? = nil, health: String = "ok"
        ) {
            self.name = name
            self.shielded = shielded
            self.unlockedUntil = unlockedUntil
            self.owners = owners
            self.steps = steps
            self.nextGoal = nextGoal
            self.stepsToGo = stepsToGo
            self.health = health
        }
    }
    package var stepsToday: Int
    package var input: String
    package var stores: [Store]
    package var problems: [String]

    package init(stepsToday: Int, input: String, stores: [Store], problems: [String]) {
        self.stepsToday = stepsToday
        self.input = input
        self.stores = stores
        self.problems = problems
    }
}

/// The topics one gate publishes and listens on, and what it publishes there.
///
/// Under the prefix (default `stepgate/HOSTNAME`), all retained:
///
/// | topic | payload |
/// |---|---|
/// | `PREFIX/availability` | `online`; `offline` at a clean stop, and as the will when the gate dies |
/// | `PREFIX/steps` | `{"input": …, "today": 1234}` |
/// | `PREFIX/store/STORE` | `{"state": "shielded"\|"unlocked", "unlocked_until": …, "owners": […], "steps": …, "next_goal": …, "steps_to_go": …, "health": "ok"}` |
/// | `PREFIX/problems` | `{"count": 0, "problems": []}` |
///
/// and Home Assistant's MQTT discovery configurations under `homeassistant/…/config`.
package struct GateTopics: Sendable {
    package var prefix: String
    package var discoveryPrefix: String?
    /// Home Assistant's node id: `stepgate_` and the host name, in letters, digits, `_` and `-`.
    package var nodeID: String
    package var deviceName: String
    package var version: String

    package init(prefix: String, discoveryPrefix: String?, host: String, version: String) {
        self.prefix = prefix
        self.discoveryPrefix = discoveryPrefix
        nodeID = "stepgate_" + GateTopics.identifier(host)
        deviceName = "StepGate \(host)"
        self.version = version
    }

    /// `text` with every character outside `[A-Za-z0-9_-]` as `_` (Home Assistant's ids).
    package static func identifier(_ text: String) -> String {
        String(
            text.unicodeScalars.map { scalar -> Character in
                switch scalar {
                case "a"..."z", "A"..."Z", "0"..."9", "_", "-": Character(scalar)
                default: "_"
                }
            })
    }

    package var availability: String { "\(prefix)/availability" }
    package var steps: String { "\(prefix)/steps" }
    package var problems: String { "\(prefix)/problems" }
    package func store(_ name: String) -> String { "\(prefix)/store/\(name)" }
    /// Commands in (with `commands` on), as control socket request lines plus an optional `id`.
    package var command: String { "\(prefix)/command" }
    /// Every command's answer: `{"id": …, "reply": {…}}`, not retained.
    package var reply: String { "\(prefix)/reply" }

    package var online: MQTTMessage { MQTTMessage(topic: availability, text: "online", retain: true) }
    package var offline: MQTTMessage { MQTTMessage(topic: availability, text: "offline", retain: true) }

    // MARK: State

    private struct StepsPayload: Encodable {
        let input: String
        let today: Int
    }

    private struct StorePayload: Encodable {
        let store: GateSnapshot.Store
        enum Keys: String, CodingKey {
            case state, unlocked_until, owners, steps, next_goal, steps_to_go, health
        }
        func encode(to encoder: any Encoder) throws {
            // Every key always, null where there is no value: a Home Assistant template reading
            // `value_json.unlocked_until` gets None, not an error.
            var c = encoder.container(keyedBy: Keys.self)
            try c.encode(store.shielded ? "shielded" : "unlocked", forKey: .state)
            try c.encode(store.unlockedUntil, forKey: .unlocked_until)
            try c.encode(store.owners, forKey: .owners)
            try c.encode(store.steps, forKey: .steps)
            try c.encode(store.nextGoal, forKey: .next_goal)
            try c.encode(store.stepsToGo, forKey: .steps_to_go)
            try c.encode(store.health, forKey: .health)
        }
    }

    private struct ProblemsPayload: Encodable {
        let count: Int
        let problems: [String]
    }

    /// The retained state messages for `snapshot`.
    package func state(_ snapshot: GateSnapshot) -> [MQTTMessage] {
        var messages = [
            MQTTMessage(
                topic: steps,
                text: Self.json(StepsPayload(input: snapshot.input, today: snapshot.stepsToday)),
                retain: true)
        ]
        for store in snapshot.stores {
            messages.append(
                MQTTMessage(
                    topic: self.store(store.name), text: Self.json(StorePayload(store: store)), retain: true))
        }
        messages.append(
            MQTTMessage(
                topic: problems,
                text: Self.json(ProblemsPayload(count: snapshot.problems.count, problems: snapshot.problems)),
                retain: true))
        return messages
    }

    // MARK: Home Assistant discovery

    /// One entity's discovery configuration, in Home Assistant's documented keys.
    package struct Discovery: Encodable, Equatable {
        package struct Device: Encodable, Equatable {
            package var identifiers: [String]
            package var name: String
            package var manufacturer: String
            package var model: String
            package var sw_version: String
        }
        package var name: String
        package var unique_id: String
        /// `COMPONENT.ID`: the entity id Home Assistant gives the entity at first (its
        /// replacement for `object_id`, deprecated in 2025.10).
        package var default_entity_id: String
        package var state_topic: String
        package var value_template: String
        package var availability_topic: String
        package var payload_available = "online"
        package var payload_not_available = "offline"
        package var json_attributes_topic: String?
        package var device_class: String?
        package var state_class: String?
        package var unit_of_measurement: String?
        package var icon: String?
        package var payload_on: String?
        package var payload_off: String?
        package var entity_category: String?
        package var device: Device
    }

    /// Each entity's component (`sensor`, `binary_sensor`), object id (the discovery topic's
    /// last level) and configuration for `stores`.
    package func discovery(stores: [String]) -> [(component: String, object: String, config: Discovery)] {
        let device = Discovery.Device(
            identifiers: [nodeID], name: deviceName, manufacturer: "StepGate", model: "walk-to-unlock gate",
            sw_version: version)
        func entity(
            _ component: String, _ object: String, _ name: String, topic: String, template: String,
            attributes: Bool = false
        ) -> Discovery {
            Discovery(
                name: name, unique_id: "\(nodeID)_\(object)",
                default_entity_id: "\(component).\(nodeID)_\(object)",
                state_topic: topic, value_template: template, availability_topic: availability,
                json_attributes_topic: attributes ? topic : nil, device: device)
        }
        var list: [(String, String, Discovery)] = []
        var today = entity(
            "sensor", "steps_today", "Steps today", topic: steps, template: "{{ value_json.today }}")
        today.unit_of_measurement = "steps"
        today.state_class = "total_increasing"
        today.icon = "mdi:walk"
        list.append(("sensor", "steps_today", today))
        var problem = entity(
            "binary_sensor", "problem", "Problem", topic: problems,
            template: "{{ 'ON' if value_json.count > 0 else 'OFF' }}",
            attributes: true)
        problem.device_class = "problem"
        problem.entity_category = "diagnostic"
        list.append(("binary_sensor", "problem", problem))
        for store in stores {
            let id = Self.identifier(store)
            let topic = self.store(store)
            // Home Assistant's lock class: on means unlocked.
            var lock = entity(
                "binary_sensor", "\(id)_unlocked", "\(store) unlocked", topic: topic,
                template: "{{ value_json.state }}",
                attributes: true)
            lock.device_class = "lock"
            lock.payload_on = "unlocked"
            lock.payload_off = "shielded"
            list.append(("binary_sensor", "\(id)_unlocked", lock))
            var toGo = entity(
                "sensor", "\(id)_steps_to_go", "\(store) steps to go", topic: topic,
                template: "{{ value_json.steps_to_go }}")
            toGo.unit_of_measurement = "steps"
            toGo.icon = "mdi:shoe-print"
            list.append(("sensor", "\(id)_steps_to_go", toGo))
            var until = entity(
                "sensor", "\(id)_unlocked_until", "\(store) unlocked until", topic: topic,
                template: "{{ value_json.unlocked_until }}")
            until.device_class = "timestamp"
            list.append(("sensor", "\(id)_unlocked_until", until))
        }
        return list
    }

    /// The retained discovery messages for `stores`, and empty retained messages that remove
    /// the entities of `removed` stores (Home Assistant deletes an entity whose configuration
    /// becomes empty).
    package func discoveryMessages(stores: [String], removed: [String] = []) -> [MQTTMessage] {
        guard let discoveryPrefix else { return [] }
        func topic(_ component: String, _ object: String) -> String {
            "\(discoveryPrefix)/\(component)/\(nodeID)/\(object)/config"
        }
        var messages = discovery(stores: stores).map {
            MQTTMessage(topic: topic($0.component, $0.object), text: Self.json($0.config), retain: true)
        }
        let kept = Set(messages.map(\.topic))
        for (component, object, _) in discovery(stores: removed)
        where !kept.contains(topic(component, object)) {
            messages.append(MQTTMessage(topic: topic(component, object), payload: [], retain: true))
        }
        return messages
    }

    private static func json<T: Encodable>(_ value: T) -> String {
        // Strings, numbers, booleans and arrays of them: nothing the encoder refuses.
        (try? JSONEncoding.encode(value, sortedKeys: true))?.serialized() ?? "{}"
    }
}
