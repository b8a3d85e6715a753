import Foundation

#if canImport(UnlockPolicy)
    import UnlockPolicy
#endif

/// A control socket error: what failed and why (the message goes back to the client).
struct ControlSocketError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}

/// One checked control request. Everything a client can send is decoded and bounded here,
/// before it reaches the daemon's loop; pure, so it is fuzzed together with the engine
/// (`Fuzz/run-control.sh`).
enum ControlCommand: Sendable, Equatable {
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
    static let maximumLockMinutes = 366.0 * 24 * 60
    /// The longest name or path accepted in a request.
    static let maximumText = 4096

    /// Whether only root or the admin group may ask it.
    var changesPolicy: Bool {
        switch self {
        case .ping, .status, .history, .check: false
        case .lock, .skip, .emergency, .reload: true
        }
    }

    #if canImport(UnlockPolicy) || CONTROL_FUZZ
        /// The policy command this stands for, on behalf of `who`; `nil` for requests the daemon
        /// answers itself.
        func policyCommand(by who: String) -> PolicyCommand? {
            switch self {
            case .lock(let store, let minutes): .lock(store: store, duration: .seconds(minutes * 60), by: who)
            case .skip(let schedule, let occurrence): .skip(schedule: schedule, occurrence: occurrence)
            case .emergency(let store): .emergencyUnlock(store: store, by: who)
            case .ping, .status, .history, .check, .reload: nil
            }
        }
    #endif

    /// Reads one request line: a JSON object with a string `command` and the members it takes.
    static func decode(_ line: [UInt8]) -> Result<ControlCommand, ControlSocketError> {
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: Data(line))
        } catch {
            return .failure(ControlSocketError(message: "expected one JSON request line"))
        }
        guard let members = object as? [String: Any], let name = members["command"] as? String else {
            return .failure(ControlSocketError(message: #"expected a JSON object with a "command""#))
        }
        func text(_ key: String, required: Bool = true) throws(ControlSocketError) -> String? {
            guard let value = members[key] else {
                if required { throw ControlSocketError(message: "\(name) needs \"\(key)\"") }
                return nil
            }
            guard let string = value as? String, !string.isEmpty, string.utf8.count <= maximumText else {
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
                let value = members["days"] ?? 14
                // Not `value is Bool`: on Linux the number 1 passes that test; a boolean's type is "c".
                guard let number = value as? NSNumber, String(cString: number.objCType) != "c",
                    number.doubleValue.rounded() == number.doubleValue, (1...400).contains(number.doubleValue)
                else {
                    throw ControlSocketError(
                        message: "history: \"days\" must be a whole number from 1 to 400")
                }
                return .success(.history(days: number.intValue))
            case "check":
                return .success(
                    .check(
                        executable: try text("executable")!, resolved: try text("resolved", required: false)))
            case "lock":
                let store = try text("store")!
                let value = members["minutes"]
                let minutes: Double? =
                    switch value {
                    case let number as NSNumber where !(value is Bool): number.doubleValue
                    case let string as String: Double(string)
                    default: nil
                    }
                guard let minutes, minutes.isFinite, minutes > 0, minutes <= maximumLockMinutes else {
                    throw ControlSocketError(
                        message: "lock: \"minutes\" must be a number greater than 0 and at most "
                            + "\(Int(maximumLockMinutes)) (366 days), found \(value.map { "\($0)" } ?? "nothing")"
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
}
