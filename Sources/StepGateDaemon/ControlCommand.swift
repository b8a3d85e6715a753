import Foundation

#if canImport(UnlockPolicy)
    package import UnlockPolicy
#endif
#if canImport(TypedJSON)
    import TypedJSON
#endif

/// A control socket error: what failed and why (the message goes back to the client).
package struct ControlSocketError: Error, CustomStringConvertible {
    package var message: String
    package var description: String { message }
    package init(message: String) { self.message = message }
}

/// One checked control request. Everything a client can send is decoded and bounded here,
/// before it reaches the daemon's loop; pure, so it is fuzzed together with the engine
/// (`Fuzz/run-control.sh`).
package enum ControlCommand: Sendable, Equatable {
    case ping
    case status
    /// The step history of the last `days` local days (1–400).
    case history(days: Int)
    /// The launch guard's question: the path it would start and, optionally, that path resolved
    /// by the client. Only ever compared as text.
    case check(executable: String, resolved: String?)
    case lock(store: String, minutes: Double)
    case skip(schedule: String, occurrence: String?)
    case emergency(store: String)
    case reload

    /// The longest lock that may be asked for, in minutes (366 days).
    package static let maximumLockMinutes = 366.0 * 24 * 60
    /// The longest name or path accepted in a request.
    package static let maximumText = 4096

    /// Whether only root or the admin group may ask it.
    package var changesPolicy: Bool {
        switch self {
        case .ping, .status, .history, .check: false
        case .lock, .skip, .emergency, .reload: true
        }
    }

    #if canImport(UnlockPolicy) || CONTROL_FUZZ
        /// The policy command this stands for, on behalf of `who`; `nil` for requests the daemon
        /// answers itself.
        package func policyCommand(by who: String) -> PolicyCommand? {
            switch self {
            case .lock(let store, let minutes): .lock(store: store, duration: .seconds(minutes * 60), by: who)
            case .skip(let schedule, let occurrence): .skip(schedule: schedule, occurrence: occurrence)
            case .emergency(let store): .emergencyUnlock(store: store, by: who)
            case .ping, .status, .history, .check, .reload: nil
            }
        }
    #endif

    /// Reads one request line: a JSON object with a string `command` and the members it takes,
    /// by the strict reader every StepGate file goes through (a `1` is a number, never `true`).
    package static func decode(_ line: [UInt8]) -> Result<ControlCommand, ControlSocketError> {
        let document: JSONValue
        do {
            document = try JSONValue.parse(bytes: line)
        } catch {
            return .failure(ControlSocketError(message: "expected one JSON request line"))
        }
        guard case .object(let list) = document,
            let nameValue = list.first(where: { $0.0 == "command" })?.1, case .string(let name) = nameValue
        else {
            return .failure(ControlSocketError(message: #"expected a JSON object with a "command""#))
        }
        let members = Dictionary(list, uniquingKeysWith: { first, _ in first })
        func text(_ key: String, required: Bool = true) throws(ControlSocketError) -> String? {
            guard let value = members[key] else {
                if required { throw ControlSocketError(message: "\(name) needs \"\(key)\"") }
                return nil
            }
            guard case .string(let string) = value, !string.isEmpty, string.utf8.count <= maximumText else {
                throw ControlSocketError(
                    message: "\(name): \"\(key)\" must be a non-empty string of at most \(maximumText) bytes")
            }
            return string
        }
        do throws(ControlSocketError) {
            switch name {
            case "ping": return .success(.ping)
            case "status": return .success(.status)
            case "reload": return .success(.reload)
            case "history":
                let value = members["days"] ?? .number(14, isInteger: true)
                guard case .number(let number, true) = value, (1...400).contains(number) else {
                    throw ControlSocketError(
                        message:
                            "history: \"days\" must be a whole number from 1 to 400, found \(value.excerpt)")
                }
                return .success(.history(days: Int(number)))
            case "check":
                return .success(
                    .check(
                        executable: try text("executable")!, resolved: try text("resolved", required: false)))
            case "lock":
                let store = try text("store")!
                let value = members["minutes"]
                let minutes: Double? =
                    switch value {
                    case .number(let number, _): number
                    case .string(let string): Double(string)
                    default: nil
                    }
                guard let minutes, minutes.isFinite, minutes > 0, minutes <= maximumLockMinutes else {
                    throw ControlSocketError(
                        message: "lock: \"minutes\" must be a number greater than 0 and at most "
                            + "\(Int(maximumLockMinutes)) (366 days), found \(value.map(\.excerpt) ?? "nothing")"
                    )
                }
                return .success(.lock(store: store, minutes: minutes))
            case "skip":
                return .success(
                    .skip(
                        schedule: try text("schedule")!, occurrence: try text("occurrence", required: false)))
            case "emergency":
                return .success(.emergency(store: try text("store")!))
            default:
                return .failure(ControlSocketError(message: "unknown command '\(name.prefix(64))'"))
            }
        } catch {
            return .failure(error)
        }
    }

    /// The request line a client sends for this command: what ``decode(_:)`` reads back.
    package var requestLine: String {
        var members: [(String, JSONValue)]
        switch self {
        case .ping: members = [("command", .string("ping"))]
        case .status: members = [("command", .string("status"))]
        case .reload: members = [("command", .string("reload"))]
        case .history(let days):
            members = [("command", .string("history")), ("days", .number(Double(days), isInteger: true))]
        case .check(let executable, let resolved):
            members = [("command", .string("check")), ("executable", .string(executable))]
            if let resolved { members.append(("resolved", .string(resolved))) }
        case .lock(let store, let minutes):
            members = [
                ("command", .string("lock")), ("store", .string(store)),
                ("minutes", .number(minutes, isInteger: minutes == minutes.rounded())),
            ]
        case .skip(let schedule, let occurrence):
            members = [("command", .string("skip")), ("schedule", .string(schedule))]
            if let occurrence { members.append(("occurrence", .string(occurrence))) }
        case .emergency(let store):
            members = [("command", .string("emergency")), ("store", .string(store))]
        }
        return JSONValue.object(members).serialized()
    }
}
