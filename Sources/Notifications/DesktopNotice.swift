/// One desktop notification, as the freedesktop notification specification describes it:
/// a summary, a body, actions, an urgency hint and an expiry.
public struct DesktopNotice: Sendable, Hashable {
    /// An action button: the key sent back when it is invoked, and its label.
    public struct Action: Sendable, Hashable {
        public var key: String
        public var label: String

        public init(key: String, label: String) {
            self.key = key
            self.label = label
        }
    }

    /// The `urgency` hint (a byte: 0 low, 1 normal, 2 critical).
    public enum Urgency: UInt8, Sendable, Hashable {
        case low = 0
        case normal = 1
        case critical = 2
    }

    public var summary: String
    public var body: String
    public var actions: [Action]
    public var urgency: Urgency
    /// Milliseconds until it expires; -1 lets the server decide, 0 never expires.
    public var expireTimeout: Int32
    /// The `category` hint, e.g. `device` or `x-stepgate.shield`.
    public var category: String?
    /// The application name shown by the server.
    public var appName: String
    /// An icon name from the icon theme, or empty.
    public var icon: String

    /// The most bytes a summary or body may carry (longer text is cut at a character boundary).
    public static let maximumText = 1024

    public init(
        summary: String, body: String = "", actions: [Action] = [], urgency: Urgency = .normal,
        expireTimeout: Int32 = -1, category: String? = nil, appName: String = "StepGate", icon: String = ""
    ) {
        self.summary = DesktopNotice.bounded(summary)
        self.body = DesktopNotice.bounded(body)
        self.actions = actions
        self.urgency = urgency
        self.expireTimeout = expireTimeout
        self.category = category
        self.appName = appName
        self.icon = icon
    }

    /// `text` cut to ``maximumText`` bytes of whole characters, without NUL bytes (a C string
    /// ends there).
    static func bounded(_ text: String) -> String {
        var result = ""
        var bytes = 0
        for character in text where character != "\0" {
            let size = String(character).utf8.count
            if bytes + size > maximumText { break }
            result.append(character)
            bytes += size
        }
        return result
    }

    // MARK: - As command-line arguments (for the helper that speaks as the user)

    /// The notice as `--name value` arguments for `stepgate notify-helper`.
    public var arguments: [String] {
        var list = [
            "--summary", summary, "--body", body, "--urgency", String(urgency.rawValue), "--expire",
            String(expireTimeout), "--app", appName, "--icon", icon,
        ]
        if let category { list += ["--category", category] }
        for action in actions { list += ["--action", action.key + "=" + action.label] }
        return list
    }

    /// Reads ``arguments`` back; the rest of the helper's options are returned as they are.
    public static func parse(_ arguments: [String]) throws(NotificationError) -> (
        DesktopNotice, [String: String]
    ) {
        var notice = DesktopNotice(summary: "")
        var other: [String: String] = [:]
        var index = 0
        while index < arguments.count {
            let name = arguments[index]
            guard name.hasPrefix("--"), index + 1 < arguments.count else {
                throw NotificationError("expected --name value, found '\(name)'")
            }
            let value = arguments[index + 1]
            index += 2
            switch name {
            case "--summary": notice.summary = bounded(value)
            case "--body": notice.body = bounded(value)
            case "--urgency":
                guard let raw = UInt8(value), let urgency = Urgency(rawValue: raw) else {
                    throw NotificationError("--urgency: expected 0, 1 or 2, found '\(value)'")
                }
                notice.urgency = urgency
            case "--expire":
                guard let milliseconds = Int32(value), milliseconds >= -1 else {
                    throw NotificationError("--expire: expected milliseconds ≥ -1, found '\(value)'")
                }
                notice.expireTimeout = milliseconds
            case "--app": notice.appName = value
            case "--icon": notice.icon = value
            case "--category": notice.category = value
            case "--action":
                guard let equals = value.firstIndex(of: "="), equals != value.startIndex else {
                    throw NotificationError("--action: expected KEY=LABEL, found '\(value)'")
                }
                notice.actions.append(
                    Action(key: String(value[..<equals]), label: String(value[value.index(after: equals)...]))
                )
            default: other[String(name.dropFirst(2))] = value
            }
        }
        return (notice, other)
    }
}

/// A notification that could not be delivered, and why.
public struct NotificationError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    /// Whether it ran out of time (the bus or the server never answered).
    public var timedOut: Bool

    public init(_ message: String, timedOut: Bool = false) {
        self.message = message
        self.timedOut = timedOut
    }

    public var description: String { message }
}
