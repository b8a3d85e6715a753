import Counting
import Foundation
import Household
import StepHistoryStore
import Synchronization
import SystemFiles
import TypedJSON

/// What the MQTT link hands the daemon's loop.
enum HouseholdOutcome {
    /// A command from the broker, to answer as the control socket's are.
    case request(ControlRequest)
    /// Steps another host counted (input `{"mqtt": PREFIX}`), new since the last ones taken.
    case steps(Int)
}

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
    /// carried out once, and answered again with its first answer; for 10 minutes (an
    /// automation sending the same payload every evening is carried out every evening).
    private var recentIDs = RecentCommandIDs()
    private let firstAnswers = Answers()

    /// Shared steps, sending (`shareSteps`): the sessions and where they are kept.
    private var sender: SharedStepSender?
    private let senderFile: String
    /// When the sessions must be on disk (on the daemon's boot clock): 5 s after a count.
    private var senderDeadline = SaveDeadline(interval: .seconds(5))
    /// Sessions too old to keep, to remove from the broker at start.
    private var droppedSessions: [String] = []
    /// The sessions before this one are published again only once the broker's retained copies
    /// of them have been read (``SessionReadBack``), so a total the broker has higher (the
    /// host was killed before it wrote it) is never replaced by the lower one from disk.
    private var readBack = SessionReadBack()
    /// Shared steps, receiving (input `{"mqtt": PREFIX}`): the source's prefix, the totals
    /// taken, where they are kept.
    private let stepSource: String?
    private var receiver: SharedStepReceiver
    private let receiverFile: String
    private var sessionsSeen = 0
    /// Whether the gate's steps reach it: see ``watchedProblems``.
    private var watch = SourceWatch()
    /// The account the link logs in with, named in its problems.
    private let account: String
    /// Step messages passed over since the last report, and when that was: one line a minute
    /// at most, however many a broken source sends.
    private var badMessages = 0
    private var badMessagesReported: ContinuousClock.Instant?
    /// When accepted connections were lost lately: a broker that keeps closing the gate's
    /// connection is likely letting another client take its client id.
    private var losses: [ContinuousClock.Instant] = []
    private var connected = false
    private var takeoverReported: ContinuousClock.Instant?
    /// Since when the link has been down (nil while connected), on the wall clock for `status`.
    private var downSince: Date? = Date()
    private let brokerName: String

    init(
        _ settings: MQTTSettings, stores: [String], version: String,
        stateDirectory: String = "/var/lib/stepgate",
        stepSource: String? = nil, log: Logger, inbox: Inbox
    ) throws(MQTTError) {
        topics = GateTopics(
            prefix: settings.topicPrefix, discoveryPrefix: settings.discoveryPrefix, host: settings.node,
            version: version)
        account = settings.broker.username.map { "account \($0)" } ?? "client \(settings.broker.clientID)"
        self.stores = stores
        self.log = log
        commands = settings.commands
        brokerName = settings.broker.described
        senderFile = stateDirectory + "/step-sessions.json"
        receiverFile = stateDirectory + "/step-sources.json"
        self.stepSource = stepSource
        receiver = SharedStepReceiver(restoring: nil)
        // A broker's socket is only as trustworthy as its folder, which may appear (or change)
        // after the start: checked before every connection.
        var mayConnect: @Sendable () -> String? = { nil }
        if case .unixSocket(let path) = settings.broker.address {
            let folder = path.split(separator: "/", omittingEmptySubsequences: false).dropLast()
                .joined(separator: "/")
            mayConnect = {
                do {
                    try FolderSafety.checkOnlyRootCanChange(
                        folder.isEmpty ? "/" : folder, leafMayBelongToSystemAccount: true)
                    return nil
                } catch {
                    return "not connecting to the broker's socket: \(error)"
                }
            }
        }
        client = try MQTTClient(settings.broker, will: topics.offline, mayConnect: mayConnect) {
            inbox.post(.household($0))
        }
        // Retain as published: a command published retained is known as such live too.
        if commands { client.subscribe(topics.command, qos: 1, retainAsPublished: true) }
        if settings.shareSteps {
            let saved = Self.loadSessions(senderFile, log: log) ?? []
            let fresh = SharedStepSender(restoring: saved)
            droppedSessions = fresh.dropped(since: saved)
            sender = fresh
            // The broker's copies of this host's sessions (not what it publishes itself), then
            // the marker that says they are through.
            client.subscribe(StepSession.filter(prefix: topics.prefix), qos: 1, noLocal: true)
            client.subscribe(readBackTopic, qos: 1)
        }
        if let stepSource {
            // No file: this gate has never taken steps from the source, and adopts its past.
            receiver = SharedStepReceiver(restoring: Self.loadSessions(receiverFile, log: log))
            client.subscribe(StepSession.filter(prefix: stepSource), qos: 1)
            client.subscribe(stepSource + "/availability", qos: 1)
        }
        log.info(
            "mqtt: publishing under \(settings.topicPrefix) at \(settings.broker.described)"
                + (commands ? "; commands from \(topics.command)" : ""))
    }

    /// Connects (in the background) and queues availability and discovery.
    func start(_ snapshot: GateSnapshot) {
        client.publish(topics.online)
        if let sender {
            // This session at 0; the ones before it once the broker's copies are read.
            publish(sender.current)
            for session in droppedSessions {
                client.publish(
                    MQTTMessage(
                        topic: StepSession.topic(prefix: topics.prefix, session: session), payload: [],
                        retain: true))
            }
            saveSender()
        }
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

    /// What the connection thread reported (handled at `now` on the daemon's boot clock): a
    /// command to carry out, or steps to count.
    func handle(_ event: MQTTClient.Event, at now: Duration) -> HouseholdOutcome? {
        switch event {
        case .connected:
            if lastProblem != nil || sessionsSeen == 0 { log.notice("mqtt: connected") }
            lastProblem = nil
            connected = true
            downSince = nil
            sessionsSeen += 1
            watch.connected(at: now)
            if sender != nil {
                let marker = readBack.connected(at: now)
                client.publish(MQTTMessage(topic: readBackTopic, text: marker, qos: 1))
            }
            // The first connection's retained totals are the source's past, adopted; after
            // that, a session first seen is new.
            if sessionsSeen == 2, receiver.adopting {
                receiver.adopted()
                saveReceiver()
            }
        case .disconnected(let reason):
            if reason != lastProblem { log.warning("mqtt: \(reason); retrying with back-off") }
            lastProblem = reason
            if downSince == nil { downSince = Date() }
            watch.disconnected()
            readBack.disconnected()
            if connected {
                connected = false
                let now = ContinuousClock.now
                losses = losses.filter { now - $0 < .seconds(60) } + [now]
                if losses.count >= 3, takeoverReported.map({ now - $0 >= .seconds(600) }) ?? true {
                    takeoverReported = now
                    log.warning(
                        "mqtt: the broker closed this gate's connection \(losses.count) times in a minute: another client is likely logging in with its client id, or, where the broker sets use_username_as_clientid, with its account; give every client an account and client id of its own"
                    )
                }
            }
        case .subscribed(let filter, let granted):
            watch.subscribed(filter, granted: granted)
            if !granted, filter == readBackTopic || filter == StepSession.filter(prefix: topics.prefix) {
                readBack.refused()
                publishPastSessions()
            }
        case .message(let message):
            if commands, message.topic == topics.command { return request(message).map { .request($0) } }
            if let stepSource, message.topic.hasPrefix(stepSource + "/steps/session/") {
                watch.heardTotal()
                return steps(message, at: now).map { .steps($0) }
            }
            if let stepSource, message.topic == stepSource + "/availability" {
                watch.heardAvailability(message.text)
            }
            if sender != nil, message.topic == readBackTopic {
                if readBack.markerCame(message.text) { publishPastSessions() }
            } else if sender != nil, message.topic.hasPrefix(topics.prefix + "/steps/session/") {
                readOwn(message, at: now)
            }
        }
        return nil
    }

    // MARK: Problems

    /// How long a connected gate may go without a session total from its source (or a sensor
    /// without its own sessions read back) before it says so.
    static let silenceLimit: Duration = .seconds(60)

    /// The problems of the link at `now` (boot clock), for `status` and the `problems` topic;
    /// each is logged when it appears and when it goes.
    private(set) var problems: [String] = []

    /// Looks again at what the link should have received by `now`.
    func check(at now: Duration) {
        var list: [String] = []
        if let stepSource {
            let filter = StepSession.filter(prefix: stepSource)
            if watch.refused.contains(filter) {
                list.append(
                    "mqtt: the broker refused this gate's subscription to \(filter), so no steps come from \(stepSource): its ACL must let \(account) read \(filter)"
                )
            } else if let since = watch.silentSince, now - since >= Self.silenceLimit {
                let state =
                    switch watch.sourceAvailability {
                    case "online"?: "although \(stepSource)/availability says online"
                    case let other?: "(\(stepSource)/availability says \(other))"
                    case nil: "and nothing from \(stepSource)/availability either"
                    }
                list.append(
                    "mqtt: no step total from \(stepSource) in the \(Self.silenceLimit.components.seconds) s since this gate connected, \(state): the broker's ACL likely does not let \(account) read \(filter) (Mosquitto grants such a subscription and drops the messages)"
                )
            }
        }
        if sender != nil {
            if readBack.wasRefused || readBack.isOverdue(at: now, limit: Self.silenceLimit) {
                // Published all the same: a broker that lost them needs them.
                publishPastSessions()
                list.append(
                    "mqtt: cannot read back this host's step sessions from the broker: its ACL must let \(account) read and write \(topics.prefix)/steps/#"
                )
            }
        }
        for problem in list where !problems.contains(problem) { log.warning(problem) }
        for problem in problems where !list.contains(problem) { log.notice("no longer: \(problem)") }
        problems = list
    }
    // MARK: Shared steps

    /// Steps this host counted (at `now` on the daemon's boot clock): into the current
    /// session's total, published; on disk by ``saveDue``.
    func counted(_ count: Int, at now: Duration) {
        guard var sender, count > 0 else { return }
        sender.add(count)
        self.sender = sender
        publish(sender.current)
        senderDeadline.changed(at: now)
    }

    /// When the step sessions must be written (``saveIfDue(at:)``); nil when they are on disk.
    var saveDue: Duration? { senderDeadline.due }

    /// Writes the step sessions when they are due at `now`.
    func saveIfDue(at now: Duration) {
        guard senderDeadline.isDue(at: now) else { return }
        if !saveSender() { senderDeadline.failed(at: now) }
    }

    /// Where the sensor host sends itself a marker after subscribing to its own sessions: when
    /// it comes back, the broker's retained copies (sent at subscription) are through.
    private var readBackTopic: String { "\(topics.prefix)/steps/read-back" }

    /// The sessions before this one, published once per connection's read-back (a total not
    /// published when the host stopped goes out now; one the broker has higher was taken).
    private func publishPastSessions() {
        guard let sender, readBack.publishPast() else { return }
        for session in sender.sessions.dropLast() { publish(session) }
    }

    /// The broker's copy of one of this host's sessions: the larger total is kept, and goes out
    /// again if this host had a lower one (killed before it wrote its last steps).
    private func readOwn(_ message: MQTTMessage, at now: Duration) {
        guard var sender, !message.payload.isEmpty, let copy = try? StepSession.parse(message.payload),
            message.topic == StepSession.topic(prefix: topics.prefix, session: copy.session)
        else { return }
        guard sender.raise(to: copy) else { return }
        log.notice(
            "mqtt: the broker has session \(copy.session) at \(copy.total) steps (seq \(copy.seq)), more than this host wrote down; kept"
        )
        self.sender = sender
        senderDeadline.changed(at: now)
        if readBack.pastPublished, let session = sender.sessions.first(where: { $0.session == copy.session })
        {
            publish(session)
        }
    }

    private func publish(_ session: StepSession) {
        client.publish(
            MQTTMessage(
                topic: StepSession.topic(prefix: topics.prefix, session: session.session),
                text: session.payload(at: Date()), retain: true))
    }

    /// The sessions on disk at most 5 s after steps were counted (``SaveDeadline``), and at
    /// stop: a host that loses power loses at most the last 5 s of its total; a gate never counts
    /// a step twice for it. False when the write failed.
    @discardableResult
    private func saveSender() -> Bool {
        guard let sender else { return true }
        do {
            try DurableFile.writeAtomically(StepSessionFile.encode(sender.sessions), to: senderFile)
            senderDeadline.written()
            return true
        } catch {
            log.warning("mqtt: cannot save the step sessions: \(error)")
            return false
        }
    }

    /// The most steps taken from another host in any 24 hours (of the daemon's run): more than
    /// anyone walks in a day. What a broken or hostile source claims beyond it is passed over,
    /// and logged.
    static let dailyLimit = 100_000
    /// The steps taken in the last 24 hours, and when (boot clock).
    private var taken: [(at: Duration, steps: Int)] = []

    /// Takes a session total from the source: what it adds to the count, once.
    private func steps(_ message: MQTTMessage, at now: Duration) -> Int? {
        guard !message.payload.isEmpty else { return nil }  // a session the source removed
        let session: StepSession
        do throws(JSONPathError) {
            session = try StepSession.parse(message.payload)
            guard message.topic.hasSuffix("/" + session.session) else {
                throw JSONPathError(path: "session", message: "does not match the topic")
            }
        } catch {
            badMessages += 1
            let now = ContinuousClock.now
            if badMessagesReported.map({ now - $0 >= .seconds(60) }) ?? true {
                let reason =
                    "\(message.topic): \(error.path.isEmpty ? "" : error.path + ": ")\(error.message)"
                let others = badMessages > 1 ? " (and \(badMessages - 1) more since the last report)" : ""
                log.warning("mqtt: passed over a step message: \(reason)\(others)")
                badMessages = 0
                badMessagesReported = now
            }
            return nil
        }
        let before = receiver
        var added = receiver.receive(session, retained: message.retain)
        guard receiver != before else { return nil }
        if receiver.heldBack > 0 {
            log.warning(
                "mqtt: \(message.topic) claimed \(added + receiver.heldBack) steps in one message; took \(added), the most one message may add (\(SharedStepReceiver.maximumPerMessage))"
            )
        }
        taken.removeAll { now - $0.at >= .seconds(86_400) }
        let day = taken.reduce(0) { $0 + $1.steps }
        if day + added > Self.dailyLimit {
            let room = max(0, Self.dailyLimit - day)
            log.warning(
                "mqtt: \(message.topic) would make the steps taken from another host in 24 hours \(day + added), more than \(Self.dailyLimit); took \(room)"
            )
            added = room
        }
        if added > 0 { taken.append((now, added)) }
        // Written before the steps are counted: a gate that dies in between loses them rather
        // than counting them twice after its restart (when in doubt, locked).
        saveReceiver()
        return added > 0 ? added : nil
    }

    private func saveReceiver() {
        do {
            try DurableFile.writeAtomically(StepSessionFile.encode(receiver.taken), to: receiverFile)
        } catch {
            log.warning("mqtt: cannot save the step totals taken: \(error)")
        }
    }

    /// A sessions file: nil when there is none; one that cannot be read is reported and moved
    /// aside (counting starts over from the source's present).
    private static func loadSessions(_ path: String, log: Logger) -> [StepSession]? {
        do {
            guard let bytes = try DurableFile.read(path, limit: 1 << 20) else { return nil }
            return try StepSessionFile.decode(bytes)
        } catch {
            log.error("mqtt: \(path): \(error); moved aside to \(path).bad")
            rename(path, path + ".bad")
            return nil
        }
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
            let now = ContinuousClock.now
            let repeated = recentIDs.isRepeat(id, at: now)
            firstAnswers.keep(recentIDs.ids)
            guard !repeated else {
                log.info("mqtt: command \(id) came again within 10 minutes; carried out once, answered again")
                if let first = firstAnswers.answer(for: id) { answer(first) }
                return nil
            }

        }
        switch ControlCommand.decode(message.payload) {
        case .failure(let error):
            log.warning("mqtt: refused a command: \(error.message)")
            answer(ControlReply.refusal(error.message))
            return nil
        case .success(let command):
            let origin = "mqtt \(topics.command)"
            let tag = id.map { " (id \($0))" } ?? ""
            if command.changesPolicy { log.notice("\(origin)\(tag): \(command.requestLine)") }
            let answers = firstAnswers
            return ControlRequest(
                command: command, peer: PeerCredentials(pid: 0, uid: UInt32.max, gid: UInt32.max),
                isAdmin: true,
                origin: origin
            ) { json in
                if command.changesPolicy { log.notice("\(origin)\(tag): answered \(json)") }
                if let id { answers.record(json, for: id) }
                answer(json)
            }
        }
    }

    /// The connection for `status`: up, or down since when and why. A gate whose broker cannot
    /// be reached (or is taken by something that fails TLS) gets no commands and no shared
    /// steps: said here, so it is seen at the gate.
    var statusLine: String {
        guard let downSince else { return "connected to \(brokerName)" }
        let since = ISO8601DateFormatter().string(from: downSince)
        return "not connected to \(brokerName) since \(since)" + (lastProblem.map { ": \($0)" } ?? "")
    }

    /// Says `offline` and disconnects cleanly; keeps the step sessions.
    func stop() {
        saveSender()
        client.stop(goodbye: [topics.offline])
    }
}

/// The first answer to each recent command id (answered from whichever thread the daemon
/// answers on).
final class Answers: Sendable {
    private let answers = Mutex<[String: String]>([:])
    func record(_ json: String, for id: String) { answers.withLock { $0[id] = $0[id] ?? json } }
    func answer(for id: String) -> String? { answers.withLock { $0[id] } }
    /// Forgets the answers of ids not in `ids`.
    func keep(_ ids: Set<String>) { answers.withLock { $0 = $0.filter { ids.contains($0.key) } } }
}

/// The ids of the commands taken lately: one that comes again within ``window`` is a repeat (QoS 1
/// delivers at least once); after that, the same id is a new command. The last 256 are kept.
struct RecentCommandIDs {
    static let window: Duration = .seconds(600)
    private var taken: [(id: String, at: ContinuousClock.Instant)] = []

    /// Whether `id` is a repeat at `now`; if not, it is taken now.
    mutating func isRepeat(_ id: String, at now: ContinuousClock.Instant) -> Bool {
        taken.removeAll { now - $0.at >= Self.window }
        if taken.contains(where: { $0.id == id }) { return true }
        taken.append((id, now))
        if taken.count > 256 { taken.removeFirst(taken.count - 256) }
        return false
    }

    /// The ids taken within the window.
    var ids: Set<String> { Set(taken.map(\.id)) }
}
