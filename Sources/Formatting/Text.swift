@preconcurrency import Glibc

/// Writes to standard error, unbuffered, adding a newline.
public func printError(_ text: String) {
    var line = text
    if !line.hasSuffix("\n") { line += "\n" }
    line.withUTF8 { buffer in _ = writeAll(2, buffer) }
}

/// Writes all of `bytes` to `descriptor`, retrying short writes; false on failure.
public func writeAll(_ descriptor: Int32, _ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
    guard let base = bytes.baseAddress else { return true }
    var offset = 0
    while offset < bytes.count {
        let written = write(descriptor, base + offset, bytes.count - offset)
        if written < 0 && errno == EINTR { continue }
        if written <= 0 { return false }
        offset += written
    }
    return true
}

/// Whether the given descriptor is a terminal.
public func isTerminal(_ descriptor: Int32) -> Bool { isatty(descriptor) == 1 }

/// Buffered standard output for machine-readable lines: far fewer `write` calls than `print`.
public final class StandardOutput {
    private var buffer: [UInt8] = []

    public init() { buffer.reserveCapacity(1 << 16) }

    deinit { flush() }

    public func write(_ text: String) {
        buffer.append(contentsOf: text.utf8)
        if buffer.count >= 1 << 16 { flush() }
    }

    public func line(_ text: String) {
        write(text)
        buffer.append(0x0A)
    }

    public func flush() {
        fflush(stdout)
        buffer.withUnsafeBufferPointer { _ = writeAll(1, $0) }
        buffer.removeAll(keepingCapacity: true)
    }
}

@available(*, unavailable) extension StandardOutput: Sendable {}

/// A JSON object written one key at a time, keys in the order given.
public struct JSONLine {
    public init() {}

    private var text = "{"
    private var first = true

    private mutating func key(_ name: String) {
        if !first { text += "," }
        first = false
        text += JSONLine.quoted(name) + ":"
    }

    public mutating func add(_ name: String, _ value: String) {
        key(name)
        text += JSONLine.quoted(value)
    }

    public mutating func add(_ name: String, _ value: Int) {
        key(name)
        text += String(value)
    }

    public mutating func add(_ name: String, _ value: Double, decimals: Int = 3) {
        key(name)
        text += value.isFinite ? formatFixed(value, decimals: decimals) : "null"
    }

    public mutating func add(_ name: String, _ value: Bool) {
        key(name)
        text += value ? "true" : "false"
    }

    public mutating func addRaw(_ name: String, _ json: String) {
        key(name)
        text += json
    }

    public var string: String { text + "}" }

    /// `text` as a JSON string literal, quotes included (control characters escaped).
    public static func quoted(_ text: String) -> String {
        var out = ""
        appendJSONString(text, to: &out)
        return out
    }
}

/// `value` with exactly `decimals` digits after the point.
public func formatFixed(_ value: Double, decimals: Int) -> String { fixed(value, decimals) }

/// `value` with exactly `decimals` digits after the point, without Foundation's formatter.
public func fixed(_ value: Double, _ decimals: Int) -> String {
    guard value.isFinite else { return value.description }
    var scale = 1.0
    for _ in 0..<decimals { scale *= 10 }
    let scaled = (abs(value) * scale).rounded()
    guard scaled < 9e18 else { return value.description }
    let whole = Int64(scaled)
    let divisor = Int64(scale)
    var text = String(whole / divisor)
    if decimals > 0 {
        let fraction = String(whole % divisor)
        text += "." + String(repeating: "0", count: decimals - fraction.count) + fraction
    }
    return (value < 0 && scaled != 0 ? "-" : "") + text
}

/// Appends `text` to `out` as a JSON string literal: quotes, backslashes and the C0 control
/// characters escaped.
public func appendJSONString(_ text: String, to out: inout String) {
    out += "\""
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        default:
            if scalar.value < 0x20 {
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
    }
    out += "\""
}

/// Pads `text` on the left to `width` characters.
public func leftPad(_ text: String, _ width: Int) -> String {
    text.count >= width ? text : String(repeating: " ", count: width - text.count) + text
}

/// Pads `text` on the right to `width` characters.
public func rightPad(_ text: String, _ width: Int) -> String {
    text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
}

/// `text` with its control characters (C0, DEL, C1: newlines and terminal escapes among them)
/// shown as `\u{XX}` instead of sent to the terminal or log: text that can carry a name a user
/// chose must not rewrite what root sees.
public func visible(_ text: String) -> String {
    guard text.unicodeScalars.contains(where: isControl) else { return text }
    var out = ""
    for scalar in text.unicodeScalars {
        if isControl(scalar) {
            out += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
        } else {
            out.unicodeScalars.append(scalar)
        }
    }
    return out
}

/// Serialized JSON with DEL and the C1 control characters escaped too (JSON requires it only
/// for C0), so printing it cannot send a terminal escape.
public func visibleJSON(_ json: String) -> String {
    guard json.unicodeScalars.contains(where: { $0.value >= 0x7F && $0.value <= 0x9F }) else { return json }
    var out = ""
    for scalar in json.unicodeScalars {
        if scalar.value >= 0x7F && scalar.value <= 0x9F {
            out += "\\u00" + String(scalar.value, radix: 16)
        } else {
            out.unicodeScalars.append(scalar)
        }
    }
    return out
}

private func isControl(_ scalar: Unicode.Scalar) -> Bool {
    scalar.value < 0x20 || (scalar.value >= 0x7F && scalar.value <= 0x9F)
}
