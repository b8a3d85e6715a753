import Foundation
import Household
import Testing

/// The configuration keys Home Assistant documents for MQTT discovery of the components StepGate
/// announces (home-assistant.io/integrations/sensor.mqtt, binary_sensor.mqtt, and the shared
/// device keys), with the device and state classes it accepts for them.
private enum HomeAssistantSchema {
    static let common: Set<String> = [
        "availability", "availability_mode", "availability_template", "availability_topic",
        "default_entity_id",
        "device", "device_class", "enabled_by_default", "encoding", "entity_category", "entity_picture",
        "expire_after", "force_update", "icon", "json_attributes_template", "json_attributes_topic", "name",
        "payload_available", "payload_not_available", "platform", "qos", "state_topic", "unique_id",
        "value_template",
    ]
    static let keys: [String: Set<String>] = [
        "sensor": common.union([
            "last_reset_value_template", "options", "state_class", "suggested_display_precision",
            "unit_of_measurement",
        ]),
        "binary_sensor": common.union(["off_delay", "payload_off", "payload_on"]),
    ]
    static let deviceKeys: Set<String> = [
        "configuration_url", "connections", "hw_version", "identifiers", "manufacturer", "model", "model_id",
        "name",
        "serial_number", "suggested_area", "sw_version", "via_device",
    ]
    static let deviceClasses: [String: Set<String>] = [
        "sensor": ["timestamp", "duration", "enum"],
        "binary_sensor": ["lock", "problem", "running", "connectivity"],
    ]
    static let stateClasses: Set<String> = ["measurement", "total", "total_increasing"]
    static let entityCategories: Set<String> = ["config", "diagnostic"]
}

@Suite struct GateTopicsTests {
    let topics = GateTopics(
        prefix: "stepgate/den", discoveryPrefix: "homeassistant", host: "den.local", version: "0.1.0")

    private func object(_ message: MQTTMessage) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(message.payload)) as? [String: Any])
    }

    @Test func discoveryUsesOnlyDocumentedKeysAndValidClasses() throws {
        let messages = topics.discoveryMessages(stores: ["games", "social.media"])
        #expect(messages.count == 2 + 3 * 2)
        var uniqueIDs: Set<String> = []
        for message in messages {
            let levels = message.topic.split(separator: "/").map(String.init)
            // <discovery prefix>/<component>/<node id>/<object id>/config, ids in [A-Za-z0-9_-].
            #expect(
                levels.count == 5 && levels[0] == "homeassistant" && levels[4] == "config", "\(message.topic)"
            )
            #expect(levels[2] == "stepgate_den_local")
            #expect(
                levels[3].allSatisfy { $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" }, "\(levels[3])")
            #expect(message.retain)
            let component = levels[1]
            let config = try object(message)
            let allowed = try #require(HomeAssistantSchema.keys[component], "component \(component)")
            #expect(
                Set(config.keys).subtracting(allowed).isEmpty, "\(message.topic): \(config.keys.sorted())")
            let device = try #require(config["device"] as? [String: Any])
            #expect(Set(device.keys).subtracting(HomeAssistantSchema.deviceKeys).isEmpty)
            #expect(device["identifiers"] as? [String] == ["stepgate_den_local"])
            if let deviceClass = config["device_class"] as? String {
                #expect(
                    HomeAssistantSchema.deviceClasses[component]?.contains(deviceClass) == true,
                    "\(deviceClass)")
            }
            if let stateClass = config["state_class"] as? String {
                #expect(HomeAssistantSchema.stateClasses.contains(stateClass))
            }
            if let category = config["entity_category"] as? String {
                #expect(HomeAssistantSchema.entityCategories.contains(category))
            }
            let unique = try #require(config["unique_id"] as? String)
            #expect(uniqueIDs.insert(unique).inserted, "\(unique) twice")
            #expect(
                (config["default_entity_id"] as? String)?.hasPrefix("\(component).stepgate_den_local_")
                    == true)
            #expect(config["availability_topic"] as? String == "stepgate/den/availability")
            let state = try #require(config["state_topic"] as? String)
            #expect(state.hasPrefix("stepgate/den/"))
        }
        #expect(uniqueIDs.contains("stepgate_den_local_social_media_unlocked"))
    }

    @Test func aStoreWithoutAnUnlockPublishesNullNotAMissingKey() throws {
        let snapshot = GateSnapshot(
            stepsToday: 1234, input: "IIO lis3dh at 100 Hz",
            stores: [
                .init(
                    name: "games", shielded: true, owners: ["gate"], steps: 20, nextGoal: 100, stepsToGo: 80),
                .init(
                    name: "tv", shielded: false, unlockedUntil: "2026-12-01T18:40:00Z",
                    health: "exec: cannot mark"),
            ], problems: ["tv: exec: cannot mark"])
        let messages = topics.state(snapshot)
        #expect(
            messages.map(\.topic) == [
                "stepgate/den/steps", "stepgate/den/store/games", "stepgate/den/store/tv",
                "stepgate/den/problems",
            ])
        #expect(messages.allSatisfy { $0.retain })
        #expect(messages[0].text == #"{"input":"IIO lis3dh at 100 Hz","today":1234}"#)
        #expect(
            messages[1].text
                == #"{"health":"ok","next_goal":100,"owners":["gate"],"state":"shielded","steps":20,"steps_to_go":80,"unlocked_until":null}"#
        )
        let tv = try object(messages[2])
        #expect(tv["state"] as? String == "unlocked")
        #expect(tv["unlocked_until"] as? String == "2026-12-01T18:40:00Z")
        #expect(messages[3].text == #"{"count":1,"problems":["tv: exec: cannot mark"]}"#)
    }

    @Test func aRemovedStoresEntitiesAreDeleted() {
        let messages = topics.discoveryMessages(stores: ["games"], removed: ["tv", "games"])
        let emptied = messages.filter { $0.payload.isEmpty }.map(\.topic).sorted()
        #expect(
            emptied == [
                "homeassistant/binary_sensor/stepgate_den_local/tv_unlocked/config",
                "homeassistant/sensor/stepgate_den_local/tv_steps_to_go/config",
                "homeassistant/sensor/stepgate_den_local/tv_unlocked_until/config",
            ])
        #expect(messages.filter { !$0.payload.isEmpty }.count == 5)
    }

    @Test func withoutADiscoveryPrefixNothingIsAnnounced() {
        let quiet = GateTopics(prefix: "p", discoveryPrefix: nil, host: "h", version: "1")
        #expect(quiet.discoveryMessages(stores: ["games"]).isEmpty)
    }
}
