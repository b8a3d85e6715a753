import Foundation
import Household
import StepGateTestSupport
import Synchronization
import Testing

@Suite(
    "MQTT client against a real Mosquitto broker",
    .enabled(if: TestBroker.unavailableReason == nil, "\(TestBroker.unavailableReason ?? "")"))
struct MQTTClientTests {
    @Test func aRetainedMessageReachesALaterSubscriber() throws {
        let broker = try TestBroker()
        let (publisher, up) = try testClient(broker, id: "publisher")
        defer { publisher.stop() }
        #expect(up.wait { $0.all.contains(.connected) })
        #expect(publisher.publish(MQTTMessage(topic: "gate/steps", text: "42", retain: true)))
        let (subscriber, received) = try testClient(broker, id: "subscriber", subscribe: ["gate/#"])
        defer { subscriber.stop() }
        #expect(received.wait { $0.last("gate/steps")?.text == "42" })
        #expect(received.last("gate/steps")?.retain == true)
    }

    @Test func retainedStateComesBackAfterTheBrokerForgetsIt() throws {
        let broker = try TestBroker()
        let (publisher, up) = try testClient(broker, id: "gate")
        defer { publisher.stop() }
        #expect(up.wait { $0.all.contains(.connected) })
        publisher.publish(MQTTMessage(topic: "gate/state", text: "shielded", retain: true))
        // Published while the broker is down: kept and sent on the next connection.
        broker.kill()
        #expect(up.wait { $0.all.contains { if case .disconnected = $0 { true } else { false } } })
        #expect(!publisher.publish(MQTTMessage(topic: "gate/state", text: "unlocked", retain: true)))
        #expect(!publisher.publish(MQTTMessage(topic: "gate/event", text: "not kept", retain: false)))
        #expect(publisher.dropped == 1)
        try broker.start()
        #expect(up.wait(10) { $0.all.filter { $0 == .connected }.count == 2 })
        let (subscriber, received) = try testClient(broker, id: "reader", subscribe: ["gate/#"])
        defer { subscriber.stop() }
        #expect(received.wait { $0.last("gate/state")?.text == "unlocked" }, "\(received.all)\n\(broker.log)")
        #expect(received.last("gate/event") == nil)
    }

    @Test func aGoodbyeSaysOfflineAndNoWillFollows() throws {
        let broker = try TestBroker()
        let (watcher, seen) = try testClient(broker, id: "watcher", subscribe: ["gate/availability"])
        defer { watcher.stop() }
        #expect(seen.wait { $0.all.contains(.connected) })
        // A clean stop: the goodbye says offline, and no will follows.
        let will = MQTTMessage(topic: "gate/availability", text: "died", retain: true)
        let (gate, up) = try testClient(broker, id: "gate", will: will)
        #expect(up.wait { $0.all.contains(.connected) })
        gate.publish(MQTTMessage(topic: "gate/availability", text: "online", retain: true))
        #expect(seen.wait { $0.last("gate/availability")?.text == "online" })
        gate.stop(goodbye: [MQTTMessage(topic: "gate/availability", text: "offline", retain: true)])
        #expect(seen.wait { $0.last("gate/availability")?.text == "offline" })
        usleep(300_000)
        #expect(seen.last("gate/availability")?.text == "offline")
    }

    @Test func refusedCredentialsAreReportedAndRetried() throws {
        let broker = try TestBroker(users: ["gate": "right"])
        let (client, events) = try testClient(broker, id: "gate", user: ("gate", "wrong"))
        defer { client.stop() }
        #expect(
            events.wait {
                $0.all.filter {
                    if case .disconnected(let reason) = $0 { reason.contains("refused") } else { false }
                }.count >= 2
            }, "\(events.all)")
        #expect(!client.isConnected)
        let (good, up) = try testClient(broker, id: "gate2", user: ("gate", "right"))
        defer { good.stop() }
        #expect(up.wait { $0.all.contains(.connected) })
    }

    @Test func aBrokerThatIsNotThereIsRetriedWithoutHoldingUpTheCaller() throws {
        let broker = try TestBroker()
        broker.kill()
        let started = Date()
        let (client, events) = try testClient(broker, id: "gate")
        defer { client.stop() }
        #expect(!client.publish(MQTTMessage(topic: "gate/x", text: "1", retain: true)))
        #expect(Date().timeIntervalSince(started) < 1)
        #expect(events.wait { $0.all.count >= 2 }, "\(events.all)")
        try broker.start()
        #expect(events.wait(10) { $0.all.contains(.connected) })
    }

    @Test func tlsChecksTheBrokersCertificate() throws {
        let broker = try TestBroker(tls: true)
        let ca = try #require(broker.caFile)
        let (client, up) = try testClient(
            broker, id: "gate", subscribe: ["gate/#"], host: "localhost", caFile: ca)
        defer { client.stop() }
        #expect(up.wait { $0.connected() }, "\(up.all)\n\(broker.log)")
        client.publish(MQTTMessage(topic: "gate/steps", text: "7", retain: true))
        #expect(up.wait { $0.last("gate/steps")?.text == "7" })
        // A broker whose certificate another CA signed is not talked to.
        let other = try TestBroker(tls: true)
        let (wrong, refused) = try testClient(
            broker, id: "gate2", host: "localhost", caFile: other.caFile)
        defer { wrong.stop() }
        #expect(refused.wait { $0.all.contains { if case .disconnected = $0 { true } else { false } } })
        #expect(!refused.connected())
        // Plain MQTT to a TLS listener does not get through either.
        let (plain, none) = try testClient(broker, id: "gate3", plain: true)
        defer { plain.stop() }
        #expect(none.wait { $0.all.contains { if case .disconnected = $0 { true } else { false } } })
        #expect(!none.connected())
    }
}
