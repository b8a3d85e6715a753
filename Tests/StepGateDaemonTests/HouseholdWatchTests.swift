import Foundation
import Glibc
import Household
import StepGateTestSupport
import Testing

@testable import StepGateDaemon

/// A gate whose steps come over MQTT says when none reach it (docs/household.md, *A gate that
/// gets no steps says so*), against real Mosquitto brokers, the loop's clock moved by the test.
@Suite(
    "A gate that gets no steps says so (real broker)",
    .enabled(if: TestBroker.unavailableReason == nil, "\(TestBroker.unavailableReason ?? "")"),
    .serialized, .timeLimit(.minutes(5)))
struct HouseholdWatchTests {
    /// The gate's `mqtt` section for `broker`, logging in as `gate`.
    private func mqtt(_ broker: TestBroker, folder: URL) throws -> String {
        let password = folder.appendingPathComponent("mqtt-password").path
        try "gate-secret\n".write(toFile: password, atomically: true, encoding: .utf8)
        chmod(password, 0o600)
        return """
            {\(broker.connectionJSON), "username": "gate", "passwordFile": "\(password)", "keepalive": 5,
             "topicPrefix": "stepgate/gate"}
            """
    }

    private static func acl(gateReadsSessions: Bool) -> String {
        """
        user sensor
        topic readwrite stepgate/pocket/#

        user gate
        topic readwrite stepgate/gate/#
        topic read stepgate/pocket/availability
        \(gateReadsSessions ? "topic read stepgate/pocket/steps/session/+" : "")

        user viewer
        topic read #

        """
    }

    /// Mosquitto grants a subscription its ACL denies, then drops the messages: the gate lists
    /// the problem a minute after connecting when the sensor host says it is online, in status
    /// and on its problems topic; the ACL fixed (SIGHUP), the next total clears it.
    @Test func aGateTheACLKeepsFromTheTotalsSaysSoAfterAMinute() async throws {
        let broker = try TestBroker(
            users: ["gate": "gate-secret", "sensor": "sensor-secret", "viewer": "look"],
            acl: Self.acl(gateReadsSessions: false), tls: true)
        let (sensor, _) = try testClient(broker, id: "sensor", user: ("sensor", "sensor-secret"))
        defer { sensor.stop() }
        let (viewer, seen) = try testClient(
            broker, id: "viewer", user: ("viewer", "look"), subscribe: ["stepgate/gate/problems"])
        defer { viewer.stop() }
        #expect(seen.wait { $0.connected() })
        sensor.publish(MQTTMessage(topic: "stepgate/pocket/availability", text: "online", retain: true))
        sensor.publish(
            MQTTMessage(
                topic: "stepgate/pocket/steps/session/s1",
                text: #"{"session": "s1", "seq": 2, "total": 40}"#, retain: true))
        let folder = try Fixtures.temporaryFolder()
        try await withLoop(
            goal: 100, minutes: 30, stores: ["games"], folder: folder, mqtt: try mqtt(broker, folder: folder),
            input: #"{"mqtt": "stepgate/pocket"}"#
        ) { loop in
            _ = try await loop.waitForStatus { ($0["mqtt"] as? String)?.hasPrefix("connected") == true }
            try await loop.settle()
            #expect(try await loop.status()["problems"] as? [String] == [])
            loop.clock.advance(by: .seconds(60))
            let status = try await loop.waitForStatus { !($0["problems"] as? [String] ?? []).isEmpty }
            let problem =
                "mqtt: no step total from stepgate/pocket in the 60 s since this gate connected, although stepgate/pocket/availability says online: the broker's ACL likely does not let account gate read stepgate/pocket/steps/session/+ (Mosquitto grants such a subscription and drops the messages)"
            #expect(status["problems"] as? [String] == [problem])
            #expect(
                seen.wait { $0.last("stepgate/gate/problems")?.text.contains("no step total from") == true })
            // The right added (the broker restarted with it; the sensor publishes its totals
            // again): the gate counts the session it had not seen, and the problem goes.
            broker.kill()
            try Self.acl(gateReadsSessions: true).write(
                to: broker.folder.appendingPathComponent("acl"), atomically: true, encoding: .utf8)
            try broker.start()
            let fixed = try await loop.waitForStatus { $0["stepsSinceStart"] as? Int == 40 }
            #expect(fixed["problems"] as? [String] == [])
            #expect(seen.wait { $0.last("stepgate/gate/problems")?.text == #"{"count":0,"problems":[]}"# })
        }
    }

    /// A broker that refuses the subscription (SUBACK 0x80 and up; Mosquitto's dynamic security
    /// plugin does, with subscriptions denied by default): the problem is listed at once.
    @Test func aRefusedSubscriptionIsListedAtOnce() async throws {
        let plugin = "/usr/lib/x86_64-linux-gnu/mosquitto_dynamic_security.so"
        try #require(FileManager.default.fileExists(atPath: plugin), "\(plugin) (Debian package mosquitto)")
        let folder = try Fixtures.temporaryFolder()
        let home = folder.appendingPathComponent("broker")
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        try
            #"{"defaultACLAccess": {"publishClientSend": true, "publishClientReceive": true, "subscribe": false, "unsubscribe": true}, "clients": [], "groups": [], "roles": []}"#
            .write(toFile: home.appendingPathComponent("dynsec.json").path, atomically: true, encoding: .utf8)
        let socket = home.appendingPathComponent("broker.sock").path
        let port = try TestBroker.freePort()
        let broker = try TestBroker(
            folder: home, port: port,
            configuration: """
                listener \(port) 127.0.0.1
                listener 0 \(socket)
                allow_anonymous true
                plugin \(plugin)
                plugin_opt_config_file \(home.path)/dynsec.json
                persistence false
                log_dest file \(home.path)/broker.log
                \(geteuid() == 0 ? "user root" : "")

                """)
        _ = broker
        try await withLoop(
            goal: 100, minutes: 30, stores: ["games"], folder: folder,
            mqtt: #"{"socket": "\#(socket)", "topicPrefix": "stepgate/gate"}"#,
            input: #"{"mqtt": "stepgate/pocket"}"#
        ) { loop in
            let status = try await loop.waitForStatus { !($0["problems"] as? [String] ?? []).isEmpty }
            #expect(
                status["problems"] as? [String] == [
                    "mqtt: the broker refused this gate's subscription to stepgate/pocket/steps/session/+, so no steps come from stepgate/pocket: its ACL must let client stepgate-\(MQTTSettings.hostName) read stepgate/pocket/steps/session/+"
                ])
        }
    }

    /// One message adds at most 100,000 steps, and a gate takes at most 100,000 a day from
    /// another host.
    @Test func aSourceIsHeldToTheMessageAndDayLimits() async throws {
        let broker = try TestBroker(
            users: ["gate": "gate-secret", "sensor": "sensor-secret"],
            acl: Self.acl(gateReadsSessions: true), tls: true)
        let (sensor, _) = try testClient(broker, id: "sensor", user: ("sensor", "sensor-secret"))
        defer { sensor.stop() }
        let folder = try Fixtures.temporaryFolder()
        try await withLoop(
            goal: 1_000_000, minutes: 30, stores: ["games"], folder: folder,
            mqtt: try mqtt(broker, folder: folder), input: #"{"mqtt": "stepgate/pocket"}"#
        ) { loop in
            _ = try await loop.waitForStatus { ($0["mqtt"] as? String)?.hasPrefix("connected") == true }
            // Sent live, after the gate's first connection: a new session, counted in full…
            sensor.publish(
                MQTTMessage(
                    topic: "stepgate/pocket/steps/session/s1",
                    text: #"{"session": "s1", "seq": 1, "total": 150000}"#, retain: true))
            _ = try await loop.waitForStatus { $0["stepsSinceStart"] as? Int == 100_000 }
            // …up to the limit of 24 hours, which then has room again.
            sensor.publish(
                MQTTMessage(
                    topic: "stepgate/pocket/steps/session/s1",
                    text: #"{"session": "s1", "seq": 2, "total": 150010}"#, retain: true))
            let file = folder.appendingPathComponent("state/step-sources.json").path
            try await eventually {
                (try? String(contentsOfFile: file, encoding: .utf8))?.contains(#""seq":2"#) == true
            }
            try await loop.settle()
            #expect(try await loop.status()["stepsSinceStart"] as? Int == 100_000)
            loop.clock.advance(by: .seconds(86_400))
            sensor.publish(
                MQTTMessage(
                    topic: "stepgate/pocket/steps/session/s2",
                    text: #"{"session": "s2", "seq": 1, "total": 7}"#, retain: true))
            _ = try await loop.waitForStatus { $0["stepsSinceStart"] as? Int == 100_007 }
        }
    }
}
