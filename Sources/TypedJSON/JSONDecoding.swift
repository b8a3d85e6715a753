/// Decodes `Decodable` types from a ``JSONValue``, as strictly as the rest of StepGate reads
/// JSON: a whole number must be written as one (`7`, not `7.5` or `1e20`), `true` is never `1`,
/// and a key the type never asked for is an error naming it ("unknown key"), so no hand-kept
/// list of allowed keys is needed. Every error is a ``JSONPathError`` with the key path.
package enum JSONDecoding {
    /// Decodes `type` from `value`; `path` is where `value` sits in its document, for errors.
    /// `ignoringUnknownKeys` passes over keys the type did not read (a client reading a newer
    /// server's answers); a configuration never does.
    package static func decode<T: Decodable>(
        _ type: T.Type, from value: JSONValue, path: String = "", ignoringUnknownKeys: Bool = false
    ) throws(JSONPathError) -> T {
        let state = DecodingState()
        let result: T
        do {
            result = try T(from: ValueDecoder(value: value, path: path, state: state))
        } catch let error as JSONPathError {
            throw error
        } catch let error as DecodingError {
            throw JSONPathError(decodingError: error)
        } catch {
            throw JSONPathError(path: path, message: "\(error)")
        }
        if !ignoringUnknownKeys { try state.checkEveryKeyWasRead() }
        return result
    }
}

extension JSONPathError {
    /// A Swift `DecodingError` (thrown by a type's own `init(from:)`) in StepGate's words. The
    /// decoder's coding paths start with the whole path of the container.
    init(decodingError: DecodingError) {
        func path(_ codingPath: [any CodingKey]) -> String {
            codingPath.reduce("") { path, key in
                if let index = key.intValue { return "\(path)[\(index)]" }
                return path.isEmpty ? key.stringValue : "\(path).\(key.stringValue)"
            }
        }
        switch decodingError {
        case .dataCorrupted(let context):
            self.init(path: path(context.codingPath), message: context.debugDescription)
        case .keyNotFound(let key, let context):
            self.init(path: path(context.codingPath + [key]), message: "missing required key")
        case .typeMismatch(_, let context), .valueNotFound(_, let context):
            self.init(path: path(context.codingPath), message: context.debugDescription)
        @unknown default:
            self.init(path: "", message: "\(decodingError)")
        }
    }
}

/// What the decoding of one document read, to find the keys nobody asked for.
private final class DecodingState {
    struct Record {
        var members: [String] = []
        var asked: Set<String> = []
        /// The type listed every key itself (`allKeys`): it decides what is unknown.
        var listed = false
    }
    /// Per object path, in the order first seen.
    var records: [String: Record] = [:]
    var order: [String] = []

    func opened(_ path: String, members: [String]) {
        if records[path] == nil {
            order.append(path)
            records[path] = Record(members: members)
        }
    }

    func asked(_ key: String, in path: String) { records[path]?.asked.insert(key) }
    func listed(_ path: String) { records[path]?.listed = true }

    func checkEveryKeyWasRead() throws(JSONPathError) {
        for path in order {
            guard let record = records[path], !record.listed else { continue }
            for key in record.members where !record.asked.contains(key) {
                let expected = record.asked.sorted().map { "\"\($0)\"" }.joined(separator: ", ")
                throw JSONPathError(
                    path: path.isEmpty ? key : "\(path).\(key)",
                    message: expected.isEmpty ? "unknown key" : "unknown key; expected one of \(expected)")
            }
        }
    }
}

private struct PathKey: CodingKey {
    var stringValue: String
    var intValue: Int?
    init(stringValue: String) { self.stringValue = stringValue }
    init(intValue: Int) {
        stringValue = String(intValue)
        self.intValue = intValue
    }
}

private func childPath(_ path: String, _ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

private func codingPath(_ path: String) -> [any CodingKey] {
    path.isEmpty ? [] : [PathKey(stringValue: path)]
}

/// Reads one value as the types ask for it.
private struct Scalar {
    let value: JSONValue
    let path: String

    func mismatch(_ expected: String) -> JSONPathError {
        JSONPathError(path: path, message: "expected \(expected), found \(value.excerpt)")
    }

    var isNull: Bool {
        if case .null = value { return true }
        return false
    }

    func bool() throws(JSONPathError) -> Bool {
        guard case .bool(let b) = value else { throw mismatch("true or false") }
        return b
    }

    func string() throws(JSONPathError) -> String {
        guard case .string(let s) = value else { throw mismatch("a string") }
        return s
    }

    func double() throws(JSONPathError) -> Double {
        guard case .number(let d, _) = value else { throw mismatch("a number") }
        return d
    }

    func float() throws(JSONPathError) -> Float {
        let d = try double()
        guard abs(d) <= Double(Float.greatestFiniteMagnitude) else {
            throw mismatch("a number within Float's range")
        }
        return Float(d)
    }

    func integer<I: FixedWidthInteger>(_ type: I.Type) throws(JSONPathError) -> I {
        guard case .number(let d, let isInteger) = value, isInteger, let n = I(exactly: d) else {
            throw mismatch(
                "a whole number" + (I.isSigned ? "" : " of at least 0")
                    + (I.bitWidth < 64 ? " that fits \(I.self)" : ""))
        }
        return n
    }
}

private struct ValueDecoder: Decoder {
    let value: JSONValue
    let path: String
    let state: DecodingState
    var codingPath: [any CodingKey] { TypedJSON.codingPath(path) }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .object(let members) = value else {
            throw JSONPathError(path: path, message: "expected an object, found \(value.excerpt)")
        }
        state.opened(path, members: members.map(\.0))
        return KeyedDecodingContainer(KeyedContainer<Key>(members: members, path: path, state: state))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .array(let elements) = value else {
            throw JSONPathError(path: path, message: "expected an array, found \(value.excerpt)")
        }
        return UnkeyedContainer(elements: elements, path: path, state: state)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        SingleContainer(value: value, path: path, state: state)
    }
}

private struct SingleContainer: SingleValueDecodingContainer {
    let value: JSONValue
    let path: String
    let state: DecodingState
    var codingPath: [any CodingKey] { TypedJSON.codingPath(path) }
    private var scalar: Scalar { Scalar(value: value, path: path) }

    func decodeNil() -> Bool { scalar.isNull }
    func decode(_ type: Bool.Type) throws -> Bool { try scalar.bool() }
    func decode(_ type: String.Type) throws -> String { try scalar.string() }
    func decode(_ type: Double.Type) throws -> Double { try scalar.double() }
    func decode(_ type: Float.Type) throws -> Float { try scalar.float() }
    func decode(_ type: Int.Type) throws -> Int { try scalar.integer(Int.self) }
    func decode(_ type: Int8.Type) throws -> Int8 { try scalar.integer(Int8.self) }
    func decode(_ type: Int16.Type) throws -> Int16 { try scalar.integer(Int16.self) }
    func decode(_ type: Int32.Type) throws -> Int32 { try scalar.integer(Int32.self) }
    func decode(_ type: Int64.Type) throws -> Int64 { try scalar.integer(Int64.self) }
    func decode(_ type: UInt.Type) throws -> UInt { try scalar.integer(UInt.self) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try scalar.integer(UInt8.self) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try scalar.integer(UInt16.self) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try scalar.integer(UInt32.self) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try scalar.integer(UInt64.self) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try T(from: ValueDecoder(value: value, path: path, state: state))
    }
}

private struct KeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let members: [(String, JSONValue)]
    let path: String
    let state: DecodingState
    var codingPath: [any CodingKey] { TypedJSON.codingPath(path) }

    var allKeys: [Key] {
        state.listed(path)
        return members.compactMap { Key(stringValue: $0.0) }
    }

    private func member(_ key: Key) -> JSONValue? {
        state.asked(key.stringValue, in: path)
        return members.first { $0.0 == key.stringValue }?.1
    }

    private func scalar(_ key: Key) throws(JSONPathError) -> Scalar {
        guard let value = member(key) else {
            throw JSONPathError(path: childPath(path, key.stringValue), message: "missing required key")
        }
        return Scalar(value: value, path: childPath(path, key.stringValue))
    }

    func contains(_ key: Key) -> Bool { member(key) != nil }

    func decodeNil(forKey key: Key) throws -> Bool {
        guard let value = member(key) else { return true }
        if case .null = value { return true }
        return false
    }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try scalar(key).bool() }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try scalar(key).string() }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try scalar(key).double() }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try scalar(key).float() }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try scalar(key).integer(Int.self) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try scalar(key).integer(Int8.self) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try scalar(key).integer(Int16.self) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try scalar(key).integer(Int32.self) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try scalar(key).integer(Int64.self) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try scalar(key).integer(UInt.self) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try scalar(key).integer(UInt8.self) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 {
        try scalar(key).integer(UInt16.self)
    }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 {
        try scalar(key).integer(UInt32.self)
    }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 {
        try scalar(key).integer(UInt64.self)
    }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        let s = try scalar(key)
        return try T(from: ValueDecoder(value: s.value, path: s.path, state: state))
    }

    func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type, forKey key: Key
    ) throws -> KeyedDecodingContainer<NestedKey> {
        let s = try scalar(key)
        return try ValueDecoder(value: s.value, path: s.path, state: state).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        let s = try scalar(key)
        return try ValueDecoder(value: s.value, path: s.path, state: state).unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder {
        ValueDecoder(value: .object(members), path: path, state: state)
    }

    func superDecoder(forKey key: Key) throws -> any Decoder {
        let s = try scalar(key)
        return ValueDecoder(value: s.value, path: s.path, state: state)
    }
}

private struct UnkeyedContainer: UnkeyedDecodingContainer {
    let elements: [JSONValue]
    let path: String
    let state: DecodingState
    var currentIndex = 0
    var codingPath: [any CodingKey] { TypedJSON.codingPath(path) }
    var count: Int? { elements.count }
    var isAtEnd: Bool { currentIndex >= elements.count }

    init(elements: [JSONValue], path: String, state: DecodingState) {
        self.elements = elements
        self.path = path
        self.state = state
    }

    private mutating func next() throws(JSONPathError) -> Scalar {
        guard !isAtEnd else { throw JSONPathError(path: path, message: "expected more elements") }
        defer { currentIndex += 1 }
        return Scalar(value: elements[currentIndex], path: "\(path)[\(currentIndex)]")
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd, case .null = elements[currentIndex] else { return false }
        currentIndex += 1
        return true
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try next().bool() }
    mutating func decode(_ type: String.Type) throws -> String { try next().string() }
    mutating func decode(_ type: Double.Type) throws -> Double { try next().double() }
    mutating func decode(_ type: Float.Type) throws -> Float { try next().float() }
    mutating func decode(_ type: Int.Type) throws -> Int { try next().integer(Int.self) }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try next().integer(Int8.self) }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try next().integer(Int16.self) }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try next().integer(Int32.self) }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try next().integer(Int64.self) }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try next().integer(UInt.self) }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try next().integer(UInt8.self) }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try next().integer(UInt16.self) }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try next().integer(UInt32.self) }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try next().integer(UInt64.self) }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let s = try next()
        return try T(from: ValueDecoder(value: s.value, path: s.path, state: state))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type
    ) throws -> KeyedDecodingContainer<NestedKey> {
        let s = try next()
        return try ValueDecoder(value: s.value, path: s.path, state: state).container(keyedBy: type)
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        let s = try next()
        return try ValueDecoder(value: s.value, path: s.path, state: state).unkeyedContainer()
    }

    mutating func superDecoder() throws -> any Decoder {
        let s = try next()
        return ValueDecoder(value: s.value, path: s.path, state: state)
    }
}
