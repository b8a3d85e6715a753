package import Foundation
package import TypedJSON

/// Steps counted on one host and used by gates on others.
///
/// The sensor host publishes, per counting session (a start of its daemon), the session's
/// running total with a sequence number, retained on `PREFIX/steps/session/SESSION`:
///
/// ```json
/// {"session": "3f9c0a1b2c3d4e5f", "seq": 42, "total": 318, "time": "2026-12-01T17:20:05Z"}
/// ```
///
/// A total, not a count of new steps: a gate takes the difference from the last total it took
/// for that session, so a message delivered twice (QoS 1, a reconnection, a broker restart)
/// adds nothing, and one that was lost is made up by the next (or by the retained latest one a
/// reconnecting gate gets). The sequence number orders them: an older message arriving late is
/// passed over. Both sides keep their records on disk, bounded: the sender its last
/// ``SharedStepSender/keptSessions`` sessions (republished at start, so a total not yet
/// published when the host stopped is published later), the gate the sessions it has taken
/// (``SharedStepReceiver/keptSessions``, more than the sender keeps, so a session a gate has
/// forgotten is never offered again).
package struct StepSession: Equatable, Sendable {
    package var session: String
    package var seq: Int
    package var total: Int

    package init(session: String, seq: Int, total: Int) {
        self.session = session
        self.seq = seq
        self.total = total
    }

    /// The session's topic under `prefix`.
    package static func topic(prefix: String, session: String) -> String {
        "\(prefix)/steps/session/\(session)"
    }

    /// The filter a gate subscribes to for `prefix`'s sessions.
    package static func filter(prefix: String) -> String { "\(prefix)/steps/session/+" }

    /// The message's JSON: session, seq, total and the time it was sent.
    package func payload(at time: Date) -> String {
        let formatter = ISO8601DateFormatter()
        return JSONValue.object([
            ("session", .string(session)), ("seq", .number(Double(seq), isInteger: true)),
            ("total", .number(Double(total), isInteger: true)),
            ("time", .string(formatter.string(from: time))),
        ]).serialized()
    }

    /// Reads a message's payload: an object with a session id (1–64 letters, digits, `-`,
    /// `_`), a sequence number ≥ 1 and a total ≥ 0, all whole numbers; other keys are passed
    /// over (a newer sender may say more).
    package static func parse(_ bytes: [UInt8]) throws(JSONPathError) -> StepSession {
        guard bytes.count <= 1024 else { throw JSONPathError(path: "", message: "more than 1024 bytes") }
        guard case .object(let list) = try JSONValue.parse(bytes: bytes) else {
            throw JSONPathError(path: "", message: "expected an object")
        }
        let members = Dictionary(list, uniquingKeysWith: { first, _ in first })
        guard case .string(let session)? = members["session"], isSessionID(session) else {
            throw JSONPathError(path: "session", message: "expected 1 to 64 letters, digits, '-' or '_'")
        }
        func whole(_ key: String, minimum: Int) throws(JSONPathError) -> Int {
            guard case .number(let value, true)? = members[key], let number = Int(exactly: value),
                number >= minimum,
                number <= 1 << 52
            else {
                throw JSONPathError(path: key, message: "expected a whole number from \(minimum)")
            }
            return number
        }
        return StepSession(
            session: session, seq: try whole("seq", minimum: 1), total: try whole("total", minimum: 0))
    }

    package static func isSessionID(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 64
            && text.utf8.allSatisfy { byte in
                (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A)
                    || (byte >= 0x61 && byte <= 0x7A)
                    || byte == 0x2D || byte == 0x5F
            }
    }

    /// A new session id: 16 random hexadecimal digits.
    package static func newID() -> String {
        var generator = SystemRandomNumberGenerator()
        let value = generator.next() as UInt64
        let hex = String(value, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}

/// The sensor host's side: the current session's total and the last sessions before it.
package struct SharedStepSender: Equatable, Sendable {
    /// How many sessions are kept (and republished); older ones are removed from the broker.
    package static let keptSessions = 8
    /// The current session last.
    package private(set) var sessions: [StepSession]

    /// Continues from the sessions on disk with a new session.
    package init(restoring saved: [StepSession], newSession: String = StepSession.newID()) {
        sessions =
            Array(saved.suffix(Self.keptSessions - 1)) + [StepSession(session: newSession, seq: 1, total: 0)]
    }

    package var current: StepSession { sessions[sessions.count - 1] }

    /// Adds steps to the current session.
    package mutating func add(_ count: Int) {
        guard count > 0 else { return }
        sessions[sessions.count - 1].seq += 1
        sessions[sessions.count - 1].total += count
    }

    /// The broker's copy of one of the sessions (read back after a restart): the larger total
    /// and sequence number are kept, so a host killed before it wrote its last steps never
    /// publishes a total lower than the one the gates may have taken. True if it raised one.
    package mutating func raise(to copy: StepSession) -> Bool {
        guard let index = sessions.firstIndex(where: { $0.session == copy.session }) else { return false }
        let kept = sessions[index]
        guard copy.total > kept.total || copy.seq > kept.seq else { return false }
        sessions[index] = StepSession(
            session: kept.session, seq: max(kept.seq, copy.seq), total: max(kept.total, copy.total))
        return true
    }

    /// The sessions dropped from `before` to now (to clear from the broker).
    package func dropped(since before: [StepSession]) -> [String] {
        let kept = Set(sessions.map(\.session))
        return before.map(\.session).filter { !kept.contains($0) }
    }
}

/// A gate's side: the last total taken from each session.
package struct SharedStepReceiver: Equatable, Sendable {
    package static let keptSessions = 32
    /// The most one message may add: more than anyone walks in a day. A source that claims more
    /// (a broken or hostile one) is held to it, and no sum of messages can overflow a count.
    package static let maximumPerMessage = 100_000
    /// What the last message claimed beyond ``maximumPerMessage`` (0 when it was within it).
    package private(set) var heldBack = 0
    /// The sessions taken from, oldest first.
    package private(set) var taken: [StepSession]
    /// True until the first connection's retained messages are through, for a gate that has
    /// never taken steps from this source: what the source counted before is not this gate's.
    package private(set) var adopting: Bool

    package init(restoring saved: [StepSession]?) {
        taken = saved ?? []
        adopting = saved == nil
    }

    /// What a message adds: the steps to count now (0 for a repeat, an older message, or a
    /// session adopted as it stands).
    package mutating func receive(_ message: StepSession, retained: Bool) -> Int {
        let claimed: Int
        if let index = taken.firstIndex(where: { $0.session == message.session }) {
            let last = taken[index]
            guard message.seq > last.seq else { return 0 }
            taken[index] = StepSession(
                session: message.session, seq: message.seq, total: max(last.total, message.total))
            claimed = max(0, message.total - last.total)
        } else {
            taken.append(message)
            if taken.count > Self.keptSessions { taken.removeFirst(taken.count - Self.keptSessions) }
            // A session first seen: all its steps are new, unless this gate is adopting the
            // source's past (its first connection, and a retained message: one sent before).
            claimed = adopting && retained ? 0 : message.total
        }
        heldBack = max(0, claimed - Self.maximumPerMessage)
        return claimed - heldBack
    }

    /// The first connection's retained messages are through: from now on a session not seen
    /// before is counted in full.
    package mutating func adopted() { adopting = false }
}

/// The sessions in a state file: `{"version": 1, "sessions": [{"session", "seq", "total"}, …]}`.
package enum StepSessionFile {
    package static func encode(_ sessions: [StepSession]) -> [UInt8] {
        let list = sessions.map {
            JSONValue.object([
                ("session", .string($0.session)), ("seq", .number(Double($0.seq), isInteger: true)),
                ("total", .number(Double($0.total), isInteger: true)),
            ])
        }
        return Array(
            (JSONValue.object([("version", .number(1, isInteger: true)), ("sessions", .array(list))])
                .serialized() + "\n")
                .utf8)
    }

    package static func decode(_ bytes: [UInt8]) throws(JSONPathError) -> [StepSession] {
        guard case .object(let list) = try JSONValue.parse(bytes: bytes) else {
            throw JSONPathError(path: "", message: "expected an object")
        }
        let members = Dictionary(list, uniquingKeysWith: { first, _ in first })
        guard case .number(1, true)? = members["version"] else {
            throw JSONPathError(path: "version", message: "expected 1")
        }
        guard case .array(let items)? = members["sessions"] else {
            throw JSONPathError(path: "sessions", message: "expected an array")
        }
        var sessions: [StepSession] = []
        for (index, item) in items.enumerated() {
            do {
                sessions.append(try StepSession.parse(Array(item.serialized().utf8)))
            } catch {
                throw JSONPathError(path: "sessions[\(index)].\(error.path)", message: error.message)
            }
        }
        return sessions
    }
}
