@preconcurrency import Glibc
import Tuning
import UnlockPolicy

/// Writes to standard error, unbuffered, adding a newline.
func printError(_ text: String) {
    var line = text
    if !line.hasSuffix("\n") { line += "\n" }
    line.withUTF8 { buffer in _ = writeAll(2, buffer) }
}

/// Writes all of `bytes` to `descriptor`, retrying short writes; false on failure.
func writeAll(_ descriptor: Int32, _ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
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
func isTerminal(_ descriptor: Int32) -> Bool { isatty(descriptor) == 1 }

/// Buffered standard output for machine-readable lines: far fewer `write` calls than `print`.
final class StandardOutput {
    private var buffer: [UInt8] = []

    init() { buffer.reserveCapacity(1 << 16) }

    deinit { flush() }

    func write(_ text: String) {
        buffer.append(contentsOf: text.utf8)
        if buffer.count >= 1 << 16 { flush() }
    }

    func line(_ text: String) {
        write(text)
        buffer.append(0x0A)
    }

    func flush() {
        fflush(stdout)
        buffer.withUnsafeBufferPointer { _ = writeAll(1, $0) }
        buffer.removeAll(keepingCapacity: true)
    }
}

@available(*, unavailable) extension StandardOutput: Sendable {}

/// A JSON object written one key at a time, keys in the order given.
struct JSONLine {
    private var text = "{"
    private var first = true

    private mutating func key(_ name: String) {
        if !first { text += "," }
        first = false
        text += JSONLine.quoted(name) + ":"
    }

    mutating func add(_ name: String, _ value: String) {
        key(name)
        text += JSONLine.quoted(value)
    }

    mutating func add(_ name: String, _ value: Int) {
        key(name)
        text += String(value)
    }

    mutating func add(_ name: String, _ value: Double, decimals: Int = 3) {
        key(name)
        text += value.isFinite ? formatFixed(value, decimals: decimals) : "null"
    }

    mutating func add(_ name: String, _ value: Bool) {
        key(name)
        text += value ? "true" : "false"
    }

    mutating func addRaw(_ name: String, _ json: String) {
        key(name)
        text += json
    }

    var string: String { text + "}" }

    static func quoted(_ s: String) -> String { StrictJSON.quoted(s) }
}

/// `value` with exactly `decimals` digits after the point (Tuning's `fixed`).
func formatFixed(_ value: Double, decimals: Int) -> String { fixed(value, decimals) }

/// Pads `text` on the left to `width` characters.
func leftPad(_ text: String, _ width: Int) -> String {
    text.count >= width ? text : String(repeating: " ", count: width - text.count) + text
}

/// Pads `text` on the right to `width` characters.
func rightPad(_ text: String, _ width: Int) -> String {
    text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
}

/// `text` with its control characters (C0, DEL, C1: newlines and terminal escapes among them)
/// shown as `\u{XX}` instead of sent to the terminal or log: text that can carry a name a user
/// chose must not rewrite what root sees.
func visible(_ text: String) -> String {
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
func visibleJSON(_ json: String) -> String {
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
