import Foundation
package import Household
import Synchronization

/// What a test client received, to wait on.
package final class Received: Sendable {
    private let events = Mutex<[(at: ContinuousClock.Instant, event: MQTTClient.Event)]>([])

    package func record(_ event: MQTTClient.Event) { events.withLock { $0.append((.now, event)) } }

    package var all: [MQTTClient.Event] { events.withLock { $0.map(\.event) } }

    /// When the first message matching `condition` arrived (on the client's thread).
    package func arrival(of condition: (MQTTMessage) -> Bool) -> ContinuousClock.Instant? {
        events.withLock { list in
            list.first {
                if case .message(let message) = $0.event { return condition(message) }
                return false
            }?.at
        }
    }

    package var messages: [MQTTMessage] {
        all.compactMap {
            if case .message(let message) = $0 { return message }
            return nil
        }
    }

    /// The last payload seen on `topic`, if any.
    package func last(_ topic: String) -> MQTTMessage? { messages.last { $0.topic == topic } }

    /// Waits up to `seconds` for `condition`; true if it came.
    @discardableResult
    package func wait(_ seconds: Double = 5, until condition: (Received) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if condition(self) { return true }
            usleep(10_000)
        }
        return condition(self)
    }
}

/// A client of `broker` on loopback, started, that records what it gets.
package func testClient(
    _ broker: TestBroker, id: String, user: (String, String)? = nil, will: MQTTMessage? = nil,
    subscribe filters: [String] = [], host: String? = nil, caFile: String? = nil, plain: Bool = false
) throws -> (MQTTClient, Received) {
    // A TLS broker is reached by the name on its certificate, and checked with its CA.
    let ca = plain ? nil : caFile ?? broker.caFile
    var settings = MQTTBroker(
        address: .tcp(host: host ?? (ca == nil ? "127.0.0.1" : "localhost"), port: broker.port), clientID: id)
    settings.tls = ca.map { MQTTBroker.TLS(caFile: $0) }
    settings.username = user?.0
    settings.password = user?.1
    settings.keepalive = 5
    settings.reconnectDelay = 0.1...0.5
    let received = Received()
    let client = try MQTTClient(settings, will: will) { received.record($0) }
    for filter in filters { client.subscribe(filter) }
    client.start()
    return (client, received)
}

extension Received {
    /// Whether a `.connected` event came `count` times.
    package func connected(_ count: Int = 1) -> Bool { all.filter { $0 == .connected }.count >= count }
}
