import Foundation
import StepHistoryStore
package import TypedJSON

// The daemon's answers on the control socket, one JSON line each. The server writes them from
// these types and the client reads them back into the same types with StepGate's strict
// decoder (a whole number must be one, `true` is never `1`); keys a type does not know are
// passed over by the client, so an older `stepgate status` still reads a newer daemon.

/// What every answer says: whether the request was done, and if not, why. Answers to `lock`,
/// `unlock`, `skip` and the like carry the policy's events too.
package struct ControlReply: Codable, Sendable, Equatable {
    package var ok: Bool
    package var error: String?
    /// What the request changed, as the policy tells it (`games: locked by parent until …`).
    package var events: [String]?

    package init(ok: Bool, error: String? = nil, events: [String]? = nil) {
        self.ok = ok
        self.error = error
        self.events = events
    }

    /// A refusal, `{"ok":false,"error":…}`.
    package static func refusal(_ reason: String) -> String {
        ControlCoding.line(ControlReply(ok: false, error: reason))
    }
}

/// The answer to `status`.
package struct StatusReply: Codable, Sendable, Equatable {
    package struct Store: Codable, Sendable, Equatable {
        package var name: String
        package var shielded: Bool
        /// Who holds the store shielded (`gate`, `schedule:night`, `parent`).
        package var owners: [String]
        /// ISO 8601, when a timed unlock ends.
        package var unlockedUntil: String?
        package var emergencyUntil: String?
        package var steps: Int
        package var nextGoal: Int?
        /// `true` when `steps` and `nextGoal` are the local day's (a `stepsToday` goal).
        package var goalIsDaily: Bool?
        package var stepsToGo: Int?
        package var unlocksToday: Int
        package var dailyUnlockCap: Int?
        package var note: String?
        /// `ok`, or why the store's shields do not hold.
        package var shieldHealth: String
        /// What the store selects, one entry per kind (a folder or pattern with what it matches now).
        package var selects: [String]? = nil
    }

    package struct Day: Codable, Sendable, Equatable {
        /// `YYYY-MM-DD` in the policy's time zone.
        package var day: String
        package var steps: Int
    }

    package var ok: Bool
    /// What the daemon reads steps from, and how that goes.
    package var input: String
    package var samples: Int
    package var stepsSinceStart: Int
    package var stepsToday: Int
    /// The last 7 days, today last.
    package var lastDays: [Day]
    package var stores: [Store]
    package var emergencyRemaining: Int
    package var problems: [String]
    /// ISO 8601, the next time the policy changes something by itself.
    package var nextChange: String?
    /// Target kinds a store selects that no shield on this machine enforces.
    package var unenforcedKinds: [String]?
    /// The MQTT connection, when the daemon has one: `connected to BROKER`, or `not connected
    /// to BROKER since TIME: REASON`.
    package var mqtt: String?
    /// Why the input delivers no steps now, when it does not.
    package var inputProblem: InputProblem?
}

/// Why the daemon's input delivers no samples, since when, and what the daemon does about it.
package struct InputProblem: Codable, Sendable, Equatable {
    /// `no-device`, `no-permission`, `device-lost`, `missing-file` or `failed`.
    package var kind: String
    /// The error, as the log has it.
    package var message: String
    /// ISO 8601, when the problem began (a retry that fails the same way keeps it).
    package var since: String
    /// `retrying every 5 s`, `reconnecting` or `not retried`.
    package var action: String

    package init(kind: String, message: String, since: String, action: String) {
        self.kind = kind
        self.message = message
        self.since = since
        self.action = action
    }

    /// The line `status` prints: `no device since TIME (retrying every 5 s): MESSAGE`.
    package var line: String {
        "\(kind.replacingOccurrences(of: "-", with: " ")) since \(since) (\(action)): \(message)"
    }
}

/// The answer to `check`: whether starting a program is shielded now, with the shield screen.
package struct CheckReply: Codable, Sendable, Equatable {
    package var ok: Bool
    package var shielded: Bool
    package var store: String?
    package var title: String?
    package var subtitle: String?
    package var stepsToGo: Int?
    package var unlockedUntil: String?

    package init(
        ok: Bool = true, shielded: Bool, store: String? = nil, title: String? = nil, subtitle: String? = nil,
        stepsToGo: Int? = nil, unlockedUntil: String? = nil
    ) {
        self.ok = ok
        self.shielded = shielded
        self.store = store
        self.title = title
        self.subtitle = subtitle
        self.stepsToGo = stepsToGo
        self.unlockedUntil = unlockedUntil
    }
}

/// The answer to `history`, but for its `history` member: the step history in its own file
/// format (``StepHistory``), read apart.
package struct HistoryReply: Codable, Sendable, Equatable {
    package var ok: Bool
    /// The policy's time zone.
    package var zone: String
    /// `YYYY-MM-DD`, and the hour now, there.
    package var today: String
    package var hour: Int
    /// The goal line of charts: the first goal tier of the largest gate.
    package var goal: Int?
}

/// One answer as the client received it: the line, parsed, to be read as one of the reply
/// types.
package struct ControlAnswer: Sendable {
    package let value: JSONValue
    /// The uid of the process that answered (0 for root's daemon).
    package var serverUID: UInt32 = 0

    package init(line: String) throws(JSONPathError) { value = try JSONValue.parse(line) }

    /// The answer read as `type`; keys `type` does not know are passed over.
    package func decode<T: Decodable>(_ type: T.Type) throws(JSONPathError) -> T {
        try JSONDecoding.decode(type, from: value, ignoringUnknownKeys: true)
    }

    /// The answer as compact JSON, keys in the order the daemon wrote them.
    package var json: String { value.serialized() }

    /// The member `key` of the answer as compact JSON, if it has one.
    package func memberJSON(_ key: String) -> String? {
        guard case .object(let members) = value else { return nil }
        return members.first { $0.0 == key }?.1.serialized()
    }

    /// The envelope every answer has.
    package var reply: ControlReply {
        (try? decode(ControlReply.self))
            ?? ControlReply(ok: false, error: "the daemon's answer is not one: \(value.excerpt)")
    }
}

package enum ControlCoding {
    /// `value` as one line of JSON, keys sorted, slashes as they are.
    package static func line<T: Encodable>(_ value: T) -> String {
        // The reply types hold strings, whole numbers, booleans and arrays of them: nothing
        // the encoder refuses.
        guard let json = try? JSONEncoding.encode(value, sortedKeys: true) else {
            return #"{"ok":false,"error":"cannot encode the answer"}"#
        }
        return json.serialized()
    }
}
