internal import CMosquitto
import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Musl)
    internal import Musl
#endif

/// Where a broker is and how to reach it.
package struct MQTTBroker: Equatable, Sendable {
    package enum Address: Equatable, Sendable {
        case tcp(host: String, port: Int)
        /// A broker's Unix socket (Mosquitto's `listener 0 PATH`).
        case unixSocket(String)
    }
    package struct TLS: Equatable, Sendable {
        package var caFile: String
        package var certificateFile: String?
        package var keyFile: String?
        package init(caFile: String, certificateFile: String? = nil, keyFile: String? = nil) {
            self.caFile = caFile
            self.certificateFile = certificateFile
            self.keyFile = keyFile
        }
    }
    package var address: Address
    package var clientID: String
    package var username: String?
    package var password: String?
    package var tls: TLS?
    /// Seconds between the keepalive pings; the broker sends the will after 1.5 × this of silence.
    package var keepalive = 30
    /// The first and the longest pause between attempts to reach the broker (doubling between).
    package var reconnectDelay: ClosedRange<Double> = 1...60

    package init(address: Address, clientID: String) {
        self.address = address
        self.clientID = clientID
    }

    package var described: String {
        switch address {
        case .tcp(let host, let port): "\(host):\(port)\(tls == nil ? "" : " (TLS)")"
        case .unixSocket(let path): path
        }
    }
}

/// One message to or from the broker.
package struct MQTTMessage: Equatable, Sendable {
    package var topic: String
    package var payload: [UInt8]
    package var retain: Bool
    package var qos: Int32

    package init(topic: String, payload: [UInt8], retain: Bool = false, qos: Int32 = 1) {
        self.topic = topic
        self.payload = payload
        self.retain = retain
        self.qos = qos
    }

    package init(topic: String, text: String, retain: Bool = false, qos: Int32 = 1) {
        self.init(topic: topic, payload: Array(text.utf8), retain: retain, qos: qos)
    }

    package var text: String { String(decoding: payload, as: UTF8.self) }
}

/// A connection to an MQTT broker that keeps itself up: libmosquitto on a thread of its own,
/// which connects, reconnects with a doubling pause (1 s to 60 s) for as long as the client
/// lives, and after every (re)connection subscribes again and republishes every retained
/// message the client has published since it started (a broker restarted without persistence
/// has them again at once). The caller never waits on the broker: ``publish(_:)`` queues and
/// returns; with no connection, a retained message is kept for the next one and any other is
/// dropped (and counted). Retained messages are state and go at QoS 0 (see ``send(_:)``).
///
/// It speaks MQTT 5, for one option 3.1.1 lacks: a subscription may ask for messages with the
/// retain flag they were published with (``subscribe(_:qos:retainAsPublished:)``), so a command
/// published retained is known as such on its first, live delivery too.
package final class MQTTClient: Sendable {
    /// What the connection thread reports.
    package enum Event: Sendable, Equatable {
        case connected
        /// The connection was lost or could not be made; the thread tries again.
        case disconnected(reason: String)
        case message(MQTTMessage)
        /// The broker answered a subscription (SUBACK): granted, or refused (a failure code,
        /// 0x80 and up: the broker's ACL, mostly). Mosquitto 2 grants a subscription its ACL
        /// denies and then drops the messages, so a grant does not mean they will come.
        case subscribed(filter: String, granted: Bool)
    }

    private struct State {
        var connected = false
        /// Connections accepted so far.
        var sessions = 0
        var started = false
        var stopping = false
        var retained: [String: MQTTMessage] = [:]
        var retainedOrder: [String] = []
        var subscriptions: [(filter: String, qos: Int32, options: Int32)] = []
        /// The filters of the subscriptions not answered yet, by message id.
        var pendingSubscriptions: [Int32: String] = [:]
        var dropped = 0
        var lastReason: String?
    }

    private let library: LibMosquitto
    /// libmosquitto's client (`struct mosquitto *`); safe to publish and subscribe from any
    /// thread once `mosquitto_threaded_set` is on. Wrapped for Sendable.
    private struct Handle: @unchecked Sendable { let pointer: OpaquePointer }
    private let handle: Handle
    private let broker: MQTTBroker
    private let state = Mutex(State())
    private let onEvent: @Sendable (Event) -> Void
    /// Asked before every attempt to connect: why not to (the reason is reported as a failed
    /// attempt, and tried again after the pause), or nil.
    private let mayConnect: @Sendable () -> String?
    private let threadDone = DispatchSemaphore(value: 0)

    /// Makes the client; nothing is sent until ``start()``. `will` is published by the broker
    /// when the connection ends without a goodbye (the daemon was killed, the machine lost
    /// power or network). `onEvent` is called on the connection's thread. `mayConnect` is asked
    /// before every attempt (the daemon checks the folder of a broker's socket there).
    package init(
        _ broker: MQTTBroker, will: MQTTMessage? = nil,
        mayConnect: @escaping @Sendable () -> String? = { nil },
        onEvent: @escaping @Sendable (Event) -> Void
    ) throws(MQTTError) {
        library = try LibMosquitto.load()
        self.broker = broker
        self.onEvent = onEvent
        self.mayConnect = mayConnect
        guard let pointer = library.new(broker.clientID, true, nil) else {
            throw MQTTError("cannot make an MQTT client (client id \"\(broker.clientID)\")")
        }
        handle = Handle(pointer: pointer)
        _ = library.threadedSet(pointer, true)
        _ = library.intOption(pointer, MOSQ_OPT_PROTOCOL_VERSION, Int32(MQTT_PROTOCOL_V5))
        // Small messages at once, not held for Nagle's algorithm (some 40 ms a step on loopback).
        _ = library.intOption(pointer, MOSQ_OPT_TCP_NODELAY, 1)
        func check(_ code: Int32, _ what: String) throws(MQTTError) {
            guard code == 0 else {
                library.destroy(pointer)
                throw MQTTError("\(what): \(library.describe(code))")
            }
        }
        if let username = broker.username {
            try check(library.usernamePasswordSet(pointer, username, broker.password), "MQTT user name")
        }
        if let will {
            let code = will.payload.withUnsafeBytes {
                library.willSet(pointer, will.topic, Int32($0.count), $0.baseAddress, will.qos, will.retain)
            }
            try check(code, "MQTT will on \(will.topic)")
        }
        if let tls = broker.tls {
            let code = library.tlsSet(pointer, tls.caFile, nil, tls.certificateFile, tls.keyFile, nil)
            try check(
                code, "MQTT TLS (CA \(tls.caFile)\(tls.certificateFile.map { ", certificate \($0)" } ?? ""))")
        }
    }

    deinit {
        stop()
        library.destroy(handle.pointer)
    }

    /// Why libmosquitto cannot be used on this machine; nil when it can.
    package static var libraryProblem: String? {
        do {
            _ = try LibMosquitto.load()
            return nil
        } catch {
            return error.description
        }
    }

    /// Starts the connection thread.
    package func start() {
        guard
            state.withLock({ state in
                defer { state.started = true }
                return !state.started && !state.stopping
            })
        else { return }
        library.connectCallbackSet(handle.pointer) { _, context, code in
            guard let context else { return }
            Unmanaged<MQTTClient>.fromOpaque(context).takeUnretainedValue().connected(code)
        }
        library.disconnectCallbackSet(handle.pointer) { _, context, code in
            guard let context else { return }
            Unmanaged<MQTTClient>.fromOpaque(context).takeUnretainedValue().lost(code)
        }
        library.subscribeCallbackSet(handle.pointer) { _, context, id, count, codes in
            guard let context, count > 0, let codes else { return }
            Unmanaged<MQTTClient>.fromOpaque(context).takeUnretainedValue().subscribed(id, code: codes[0])
        }
        library.messageCallbackSet(handle.pointer) { _, context, message in
            guard let context, let message = message?.pointee, let topic = message.topic else { return }
            let payload =
                message.payloadlen > 0 && message.payload != nil
                ? Array(UnsafeRawBufferPointer(start: message.payload, count: Int(message.payloadlen)))
                : []
            Unmanaged<MQTTClient>.fromOpaque(context).takeUnretainedValue().onEvent(
                .message(
                    MQTTMessage(
                        topic: String(cString: topic), payload: payload, retain: message.retain,
                        qos: message.qos)))
        }
        // The callbacks find this object through the client's user data, unretained: the
        // thread holds a reference until it ends, and only its loop calls them.
        library.userDataSet(handle.pointer, Unmanaged.passUnretained(self).toOpaque())
        let retained = Unmanaged.passRetained(self)
        let thread = Thread { retained.takeRetainedValue().run() }
        thread.name = "mqtt"
        thread.start()
    }

    /// Queues a message. A retained one is also kept, to be sent again after every
    /// reconnection. Returns whether it was handed to a live connection.
    @discardableResult
    package func publish(_ message: MQTTMessage) -> Bool {
        let connected = state.withLock { state in
            if message.retain {
                if state.retained[message.topic] == nil { state.retainedOrder.append(message.topic) }
                state.retained[message.topic] = message
            }
            return state.connected
        }
        guard connected else {
            if !message.retain { state.withLock { $0.dropped += 1 } }
            return false
        }
        return send(message)
    }

    private func send(_ message: MQTTMessage) -> Bool {
        // A retained message is state, and the latest is all that counts: it goes at QoS 0, so
        // libmosquitto keeps no copy in flight. A QoS 1 copy cut off by a lost connection is
        // sent again after the reconnection, after the newer state republished from `retained`,
        // and the broker would keep the older one.
        let qos = message.retain ? 0 : message.qos
        let code = message.payload.withUnsafeBytes {
            library.publish(
                handle.pointer, nil, message.topic, Int32($0.count), $0.baseAddress, qos, message.retain)
        }
        return code == 0
    }

    /// Subscribes now if connected, and again after every reconnection. With
    /// `retainAsPublished`, messages come with the retain flag they were published with, also
    /// when they are delivered live (otherwise only those the broker sends from its store at
    /// subscription time are flagged); with `noLocal`, not the ones this client publishes.
    package func subscribe(
        _ filter: String, qos: Int32 = 1, retainAsPublished: Bool = false, noLocal: Bool = false
    ) {
        let options =
            (retainAsPublished ? Int32(MQTT_SUB_OPT_RETAIN_AS_PUBLISHED.rawValue) : 0)
            | (noLocal ? Int32(MQTT_SUB_OPT_NO_LOCAL.rawValue) : 0)
        let connected = state.withLock { state in
            state.subscriptions.append((filter, qos, options))
            return state.connected
        }
        if connected { sendSubscription(filter, qos: qos, options: options) }
    }

    /// SUBSCRIBE, its message id kept to name the filter in the answer. (Sent from another
    /// thread than the connection's, the answer may in theory come before the id is kept, and
    /// is then not reported; the daemon subscribes before it starts the client.)
    private func sendSubscription(_ filter: String, qos: Int32, options: Int32) {
        var id: Int32 = 0
        guard library.subscribe(handle.pointer, &id, filter, qos, options, nil) == 0 else { return }
        state.withLock { $0.pendingSubscriptions[id] = filter }
    }

    /// SUBACK for the subscription with message id `id`: `code` is the granted QoS (0–2), or a
    /// failure (0x80 and up).
    fileprivate func subscribed(_ id: Int32, code: Int32) {
        guard let filter = state.withLock({ $0.pendingSubscriptions.removeValue(forKey: id) }) else { return }
        onEvent(.subscribed(filter: filter, granted: code < 0x80))
    }

    /// Messages dropped so far because there was no connection (retained ones are kept instead).
    package var dropped: Int { state.withLock { $0.dropped } }
    package var isConnected: Bool { state.withLock { $0.connected } }

    /// Sends `goodbye` (if connected) then disconnects cleanly, so the broker does not send the
    /// will, and ends the thread. Waits at most `timeout` for the thread.
    package func stop(goodbye: [MQTTMessage] = [], timeout: Double = 2) {
        let (wasStopping, connected, started) = state.withLock { state in
            defer { state.stopping = true }
            return (state.stopping, state.connected, state.started)
        }
        guard !wasStopping else { return }
        if connected {
            for message in goodbye { _ = send(message) }
            _ = library.disconnect(handle.pointer)
        }
        if started { _ = threadDone.wait(timeout: .now() + timeout) }
    }

    // MARK: The connection thread

    private var stopping: Bool { state.withLock { $0.stopping } }

    private func run() {
        defer { threadDone.signal() }
        var pause = broker.reconnectDelay.lowerBound
        var everConnected = false
        while !stopping {
            var code: Int32
            if let refusal = mayConnect() {
                markDisconnected(refusal)
                sleep(pause)
                pause = min(pause * 2, broker.reconnectDelay.upperBound)
                continue
            }
            if everConnected {
                code = library.reconnect(handle.pointer)
            } else {
                switch broker.address {
                case .tcp(let host, let port):
                    code = library.connect(handle.pointer, host, Int32(port), Int32(broker.keepalive))
                case .unixSocket(let path):
                    code = library.connect(handle.pointer, path, 0, Int32(broker.keepalive))
                }
                if code == 0 { everConnected = true }
            }
            let sessions = state.withLock { $0.sessions }
            if code == 0 {
                // Packets flow until the connection drops (the connect callback set `connected`).
                // After stop(), the loop goes on until it has written the goodbye and the
                // DISCONNECT (the socket then closes), for at most 2 s.
                var afterStop = 0
                repeat {
                    code = library.loop(handle.pointer, 500, 1)
                    if stopping { afterStop += 1 }
                } while code == 0 && afterStop < 4
                // A connection that was accepted starts the pauses over.
                if state.withLock({ $0.sessions }) > sessions { pause = broker.reconnectDelay.lowerBound }
            }
            if stopping { break }
            let reason = state.withLock { $0.lastReason } ?? library.describe(code)
            markDisconnected(reason)
            sleep(pause)
            pause = min(pause * 2, broker.reconnectDelay.upperBound)
        }
        markDisconnected(nil)
    }

    /// Sleeps `seconds` in short slices, so stop() is not held up by a long pause.
    private func sleep(_ seconds: Double) {
        var slept = 0.0
        while slept < seconds && !stopping {
            usleep(100_000)
            slept += 0.1
        }
    }

    private func markDisconnected(_ reason: String?) {
        state.withLock { state in
            state.connected = false
            state.lastReason = nil
        }
        // Every failed attempt is reported (the daemon logs a reason once, until it changes).
        if let reason { onEvent(.disconnected(reason: reason)) }
    }

    /// CONNACK: 0 is accepted; anything else is the broker's refusal (bad credentials, …).
    fileprivate func connected(_ code: Int32) {
        guard code == 0 else {
            let reason = library.reasonString(code).map { String(cString: $0) } ?? "refused (\(code))"
            state.withLock { $0.lastReason = "the broker refused the connection: \(reason)" }
            return
        }
        let (subscriptions, retained) = state.withLock { state in
            state.connected = true
            state.sessions += 1
            state.pendingSubscriptions = [:]
            return (state.subscriptions, state.retainedOrder.compactMap { state.retained[$0] })
        }
        for (filter, qos, options) in subscriptions { sendSubscription(filter, qos: qos, options: options) }
        for message in retained { _ = send(message) }
        onEvent(.connected)
    }

    /// The connection ended: 0 after our own DISCONNECT, anything else unexpectedly.
    fileprivate func lost(_ code: Int32) {
        let reason = "connection lost: \(library.describe(code))"
        state.withLock { state in
            state.connected = false
            if code != 0 && state.lastReason == nil { state.lastReason = reason }
        }
    }
}
