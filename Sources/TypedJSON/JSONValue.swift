#if canImport(Formatting)
    import Formatting  // the fuzz scripts compile its sources into one module instead
#endif

/// A small, strict JSON model used for the policy's config, state file and scenario scripts.
///
/// Hand-rolled so that every value keeps its exact type (a `true` is never a `1`), object keys
/// keep their order, duplicate keys are rejected, and errors carry a JSON path. The parser has a
/// nesting limit and never traps on input.
package enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    /// A number with its lexical form: `isInteger` is true when it had no fraction or exponent.
    case number(Double, isInteger: Bool)
    case string(String)
    case array([JSONValue])
    case object([(String, JSONValue)])

    package static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case (.bool(let a), .bool(let b)): return a == b
        case (.number(let a, _), .number(let b, _)): return a == b
        case (.string(let a), .string(let b)): return a == b
        case (.array(let a), .array(let b)): return a == b
        case (.object(let a), .object(let b)):
            return a.count == b.count && zip(a, b).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: return false
        }
    }

    package func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0)
        case .bool(let b): hasher.combine(b)
        case .number(let d, _): hasher.combine(d)
        case .string(let s): hasher.combine(s)
        case .array(let a): hasher.combine(a)
        case .object(let o):
            for (k, v) in o {
                hasher.combine(k)
                hasher.combine(v)
            }
        }
    }

    /// A short name of the value's type, for error messages.
    package var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .number(_, let isInteger): isInteger ? "an integer" : "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }

    /// The value as it would appear in JSON, shortened for error messages.
    package var excerpt: String {
        let text = serialized()
        return text.count > 40 ? String(text.prefix(37)) + "..." : text
    }
}

/// A problem found while reading JSON: where (a JSON path such as
/// `stores.games.schedules[1].start`) and what.
public struct JSONPathError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The JSON path of the offending value; empty for the document itself.
    public var path: String
    /// What is wrong, in words for the user.
    public var message: String
    /// For a syntax error, the byte offset where reading stopped.
    public var offset: Int?

    public init(path: String, message: String, offset: Int? = nil) {
        self.path = path
        self.message = message
        self.offset = offset
    }

    public var description: String { path.isEmpty ? message : "\(path): \(message)" }

    /// The message without the byte offset a syntax error names, for when the error is shown
    /// with its line and column instead.
    package var messageWithoutOffset: String {
        guard let offset, let range = message.firstRange(of: " at byte \(offset):") else { return message }
        var text = message
        text.replaceSubrange(range, with: ":")
        return text
    }
}

// MARK: - Parsing

extension JSONValue {
    /// Parses one JSON document; trailing non-space text is an error.
    package static func parse(_ text: String) throws(JSONPathError) -> JSONValue {
        var parser = JSONParser(bytes: Array(text.utf8))
        return try parser.document()
    }

    /// Parses one JSON document from raw bytes.
    package static func parse(bytes: [UInt8]) throws(JSONPathError) -> JSONValue {
        var parser = JSONParser(bytes: bytes)
        return try parser.document()
    }
}

/// A parsed document that remembers where each value began, so an error about a key path can
/// say `LINE:COLUMN` in the file.
package struct JSONDocument: Sendable {
    package let value: JSONValue
    private let bytes: [UInt8]
    /// The byte offset of each value by its JSON path (an object member: where its key begins).
    private let offsets: [String: Int]

    /// Parses one JSON document; a syntax error carries its byte offset (see ``location(of:)``).
    package static func parse(bytes: [UInt8]) throws(JSONPathError) -> JSONDocument {
        var parser = JSONParser(bytes: bytes, recordingOffsets: true)
        let value = try parser.document()
        return JSONDocument(value: value, bytes: bytes, offsets: parser.offsets)
    }

    /// Line and column (from 1; the column counts characters) of the value at `path`, or of the
    /// nearest enclosing value that is there (a missing key is reported at its object).
    package func location(of path: String) -> (line: Int, column: Int)? {
        var path = path
        while true {
            if let offset = offsets[path] { return Self.location(of: offset, in: bytes) }
            guard !path.isEmpty else { return nil }
            if path.hasSuffix("]"), let open = path.lastIndex(of: "[") {
                path = String(path[..<open])
            } else if let dot = path.lastIndex(of: ".") {
                path = String(path[..<dot])
            } else {
                path = ""
            }
        }
    }

    /// Line and column (from 1; the column counts characters) of byte `offset` in `bytes`.
    package static func location(of offset: Int, in bytes: [UInt8]) -> (line: Int, column: Int) {
        var line = 1
        var column = 1
        for byte in bytes.prefix(min(offset, bytes.count)) {
            if byte == 0x0A {
                line += 1
                column = 1
            } else if byte & 0xC0 != 0x80 {
                column += 1  // continuation bytes of a UTF-8 character do not count
            }
        }
        return (line, column)
    }
}

private struct JSONParser {
    let bytes: [UInt8]
    var index = 0
    let maximumDepth = 64
    /// Where each value began, by path, when asked for (``JSONDocument``).
    let recordingOffsets: Bool
    var offsets: [String: Int] = [:]
    private var path = ""

    init(bytes: [UInt8], recordingOffsets: Bool = false) {
        self.bytes = bytes
        self.recordingOffsets = recordingOffsets
    }

    mutating func document() throws(JSONPathError) -> JSONValue {
        skipSpace()
        let value = try parseValue(depth: 0)
        skipSpace()
        if index != bytes.count { throw fail("unexpected text after the JSON value") }
        return value
    }

    func fail(_ message: String) -> JSONPathError {
        JSONPathError(path: "", message: "invalid JSON at byte \(index): \(message)", offset: index)
    }

    mutating func skipSpace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    mutating func parseValue(depth: Int) throws(JSONPathError) -> JSONValue {
        guard depth < maximumDepth else { throw fail("nesting deeper than \(maximumDepth)") }
        guard index < bytes.count else { throw fail("unexpected end of input") }
        if recordingOffsets && offsets[path] == nil { offsets[path] = index }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject(depth: depth)
        case UInt8(ascii: "["): return try parseArray(depth: depth)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"):
            try literal("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try literal("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try literal("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw fail("unexpected character")
        }
    }

    mutating func literal(_ word: String) throws(JSONPathError) {
        for byte in word.utf8 {
            guard index < bytes.count, bytes[index] == byte else { throw fail("expected \(word)") }
            index += 1
        }
    }

    mutating func parseObject(depth: Int) throws(JSONPathError) -> JSONValue {
        index += 1
        var members: [(String, JSONValue)] = []
        var keys = Set<String>()
        skipSpace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return .object(members)
        }
        while true {
            skipSpace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else {
                throw fail("expected a string key")
            }
            let keyStart = index
            let key = try parseString()
            guard keys.insert(key).inserted else {
                index = keyStart
                throw fail("duplicate key \"\(key)\"")
            }
            skipSpace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw fail("expected ':'") }
            index += 1
            skipSpace()
            let outer = path
            if recordingOffsets {
                path = path.isEmpty ? key : "\(path).\(key)"
                offsets[path] = keyStart
            }
            let value = try parseValue(depth: depth + 1)
            path = outer
            members.append((key, value))
            skipSpace()
            guard index < bytes.count else { throw fail("unexpected end of input in an object") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            if bytes[index] == UInt8(ascii: "}") {
                index += 1
                return .object(members)
            }
            throw fail("expected ',' or '}'")
        }
    }

    mutating func parseArray(depth: Int) throws(JSONPathError) -> JSONValue {
        index += 1
        var elements: [JSONValue] = []
        skipSpace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            return .array(elements)
        }
        while true {
            skipSpace()
            let outer = path
            if recordingOffsets { path = "\(path)[\(elements.count)]" }
            elements.append(try parseValue(depth: depth + 1))
            path = outer
            skipSpace()
            guard index < bytes.count else { throw fail("unexpected end of input in an array") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            if bytes[index] == UInt8(ascii: "]") {
                index += 1
                return .array(elements)
            }
            throw fail("expected ',' or ']'")
        }
    }

    mutating func parseHex4() throws(JSONPathError) -> UInt32 {
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard index < bytes.count else { throw fail("short \\u escape") }
            let byte = bytes[index]
            let digit: UInt32
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
            default: throw fail("bad \\u escape")
            }
            value = value * 16 + digit
            index += 1
        }
        return value
    }

    mutating func parseString() throws(JSONPathError) -> String {
        index += 1
        var scalars: [UInt8] = []
        while true {
            guard index < bytes.count else { throw fail("unterminated string") }
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                guard let text = String(validating: scalars, as: UTF8.self) else {
                    throw fail("string is not valid UTF-8")
                }
                return text
            case UInt8(ascii: "\\"):
                index += 1
                guard index < bytes.count else { throw fail("unterminated escape") }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""): scalars.append(0x22)
                case UInt8(ascii: "\\"): scalars.append(0x5C)
                case UInt8(ascii: "/"): scalars.append(0x2F)
                case UInt8(ascii: "b"): scalars.append(0x08)
                case UInt8(ascii: "f"): scalars.append(0x0C)
                case UInt8(ascii: "n"): scalars.append(0x0A)
                case UInt8(ascii: "r"): scalars.append(0x0D)
                case UInt8(ascii: "t"): scalars.append(0x09)
                case UInt8(ascii: "u"):
                    var code = try parseHex4()
                    if (0xD800..<0xDC00).contains(code) {
                        guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"),
                            bytes[index + 1] == UInt8(ascii: "u")
                        else { throw fail("unpaired surrogate") }
                        index += 2
                        let low = try parseHex4()
                        guard (0xDC00..<0xE000).contains(low) else { throw fail("unpaired surrogate") }
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let scalar = Unicode.Scalar(code) else { throw fail("invalid \\u escape") }
                    scalars.append(contentsOf: Array(String(Character(scalar)).utf8))
                default: throw fail("bad escape")
                }
            default:
                guard byte >= 0x20 else { throw fail("control character in string") }
                scalars.append(byte)
                index += 1
            }
        }
    }

    mutating func parseNumber() throws(JSONPathError) -> JSONValue {
        let start = index
        var isInteger = true
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) else {
            throw fail("bad number")
        }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else {
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) {
                index += 1
            }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            let digits = index
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) {
                index += 1
            }
            guard index > digits else { throw fail("bad number") }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            isInteger = false
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                index += 1
            }
            let digits = index
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) {
                index += 1
            }
            guard index > digits else { throw fail("bad number") }
        }
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        guard let value = Double(text), value.isFinite else { throw fail("number out of range") }
        return .number(value, isInteger: isInteger)
    }
}

// MARK: - Serializing

extension JSONValue {
    /// Compact JSON text, keys in their stored order.
    package func serialized() -> String {
        var out = ""
        write(to: &out, indent: nil, level: 0)
        return out
    }

    /// Indented JSON text (two spaces), keys in their stored order, ending without a newline.
    package func prettySerialized() -> String {
        var out = ""
        write(to: &out, indent: "  ", level: 0)
        return out
    }

    private func write(to out: inout String, indent: String?, level: Int) {
        switch self {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .number(let d, _):
            if d == d.rounded(), abs(d) < 9.0e15 {
                out += String(Int64(d))
            } else {
                out += "\(d)"
            }
        case .string(let s): JSONValue.writeString(s, to: &out)
        case .array(let elements):
            if elements.isEmpty {
                out += "[]"
                return
            }
            out += "["
            for (i, element) in elements.enumerated() {
                if i > 0 { out += "," }
                if let indent {
                    out += "\n" + String(repeating: indent, count: level + 1)
                }
                element.write(to: &out, indent: indent, level: level + 1)
            }
            if let indent { out += "\n" + String(repeating: indent, count: level) }
            out += "]"
        case .object(let members):
            if members.isEmpty {
                out += "{}"
                return
            }
            out += "{"
            for (i, (key, value)) in members.enumerated() {
                if i > 0 { out += "," }
                if let indent {
                    out += "\n" + String(repeating: indent, count: level + 1)
                }
                JSONValue.writeString(key, to: &out)
                out += indent == nil ? ":" : ": "
                value.write(to: &out, indent: indent, level: level + 1)
            }
            if let indent { out += "\n" + String(repeating: indent, count: level) }
            out += "}"
        }
    }

    package static func writeString(_ s: String, to out: inout String) { appendJSONString(s, to: &out) }
}

// MARK: - Reading objects with paths

/// Reads the members of one JSON object, tracking its path and rejecting unknown keys.
package struct JSONObjectReader {
    package let path: String
    private let members: [String: JSONValue]

    package init(_ value: JSONValue, path: String) throws(JSONPathError) {
        guard case .object(let list) = value else {
            throw JSONPathError(path: path, message: "expected an object, found \(value.typeName)")
        }
        self.path = path
        var members: [String: JSONValue] = [:]
        for (key, value) in list { members[key] = value }
        self.members = members
    }

    package var keys: [String] { members.keys.sorted() }

    package func childPath(_ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    /// Fails on any key outside `allowed`, naming the first unknown one and the allowed set.
    package func rejectUnknownKeys(allowed: [String]) throws(JSONPathError) {
        for key in keys where !allowed.contains(key) {
            throw JSONPathError(
                path: childPath(key),
                message: "unknown key; expected one of \(allowed.map { "\"\($0)\"" }.joined(separator: ", "))"
            )
        }
    }

    /// Whether the key is present, even with a `null` value.
    package func has(_ key: String) -> Bool { members[key] != nil }

    package func value(_ key: String) -> JSONValue? {
        guard let value = members[key] else { return nil }
        if case .null = value { return nil }
        return value
    }

    package func require(_ key: String) throws(JSONPathError) -> JSONValue {
        guard let value = value(key) else {
            throw JSONPathError(path: childPath(key), message: "missing required key")
        }
        return value
    }

    package func string(_ key: String) throws(JSONPathError) -> String {
        try JSONObjectReader.string(try require(key), path: childPath(key))
    }

    package func optionalString(_ key: String) throws(JSONPathError) -> String? {
        guard let value = value(key) else { return nil }
        return try JSONObjectReader.string(value, path: childPath(key))
    }

    package func int(_ key: String, minimum: Int = Int.min) throws(JSONPathError) -> Int {
        try JSONObjectReader.int(try require(key), path: childPath(key), minimum: minimum)
    }

    package func optionalInt(_ key: String, minimum: Int = Int.min) throws(JSONPathError) -> Int? {
        guard let value = value(key) else { return nil }
        return try JSONObjectReader.int(value, path: childPath(key), minimum: minimum)
    }

    package func double(_ key: String) throws(JSONPathError) -> Double {
        let value = try require(key)
        guard case .number(let d, _) = value else {
            throw JSONPathError(path: childPath(key), message: "expected a number, found \(value.typeName)")
        }
        return d
    }

    package func bool(_ key: String) throws(JSONPathError) -> Bool? {
        guard let value = value(key) else { return nil }
        guard case .bool(let b) = value else {
            throw JSONPathError(path: childPath(key), message: "expected a boolean, found \(value.typeName)")
        }
        return b
    }

    package func object(_ key: String) throws(JSONPathError) -> JSONObjectReader {
        try JSONObjectReader(try require(key), path: childPath(key))
    }

    package func optionalObject(_ key: String) throws(JSONPathError) -> JSONObjectReader? {
        guard let value = value(key) else { return nil }
        return try JSONObjectReader(value, path: childPath(key))
    }

    /// The elements of an array member with their paths; a missing key reads as empty.
    package func array(_ key: String) throws(JSONPathError) -> [(JSONValue, String)] {
        guard let value = value(key) else { return [] }
        guard case .array(let elements) = value else {
            throw JSONPathError(path: childPath(key), message: "expected an array, found \(value.typeName)")
        }
        return elements.enumerated().map { ($1, "\(childPath(key))[\($0)]") }
    }

    package func stringArray(_ key: String) throws(JSONPathError) -> [String] {
        var result: [String] = []
        for (element, path) in try array(key) {
            result.append(try JSONObjectReader.string(element, path: path))
        }
        return result
    }

    package static func string(_ value: JSONValue, path: String) throws(JSONPathError) -> String {
        guard case .string(let s) = value else {
            throw JSONPathError(path: path, message: "expected a string, found \(value.typeName)")
        }
        return s
    }

    package static func int(_ value: JSONValue, path: String, minimum: Int = Int.min) throws(JSONPathError)
        -> Int
    {
        guard case .number(let d, let isInteger) = value, isInteger else {
            throw JSONPathError(path: path, message: "expected an integer, found \(value.excerpt)")
        }
        let largest = 8_999_999_999_999_999
        guard abs(d) < 9.0e15 else {
            let found = abs(d) < 9.0e18 ? String(Int64(d)) : value.excerpt
            let range =
                minimum > -largest ? "from \(minimum) to \(largest)" : "between -\(largest) and \(largest)"
            throw JSONPathError(path: path, message: "expected an integer \(range), found \(found)")
        }
        let n = Int(d)
        guard n >= minimum else {
            throw JSONPathError(path: path, message: "expected an integer of at least \(minimum), found \(n)")
        }
        return n
    }
}
