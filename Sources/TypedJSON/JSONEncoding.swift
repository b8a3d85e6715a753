/// Encodes `Encodable` types into a ``JSONValue``, the one JSON model StepGate reads and writes:
/// whole numbers stay whole, keys are written in the type's order or sorted, `nil` optionals
/// are left out (as `encodeIfPresent` asks), and a number that is not finite is an error, not
/// text a reader would refuse.
package enum JSONEncoding {
    /// Encodes `value`; with `sortedKeys`, every object's keys in order (so the text of equal
    /// values is equal whatever order the type wrote them in).
    package static func encode<T: Encodable>(_ value: T, sortedKeys: Bool = false) throws(JSONPathError)
        -> JSONValue
    {
        let root = Node()
        do {
            try value.encode(to: ValueEncoder(node: root, codingPath: []))
        } catch let error as JSONPathError {
            throw error
        } catch {
            throw JSONPathError(path: "", message: "\(error)")
        }
        return root.value(sortedKeys: sortedKeys)
    }
}

/// What one place of the document holds while it is encoded.
private final class Node {
    enum Content {
        case empty
        case value(JSONValue)
        case array([Node])
        case object([(String, Node)])
    }
    var content = Content.empty

    func value(sortedKeys: Bool) -> JSONValue {
        switch content {
        case .empty: return .object([])
        case .value(let value): return value
        case .array(let nodes): return .array(nodes.map { $0.value(sortedKeys: sortedKeys) })
        case .object(let members):
            var list = members.map { ($0.0, $0.1.value(sortedKeys: sortedKeys)) }
            if sortedKeys { list.sort { $0.0 < $1.0 } }
            return .object(list)
        }
    }

    /// The node of `key` in this object, made on first use (a key encoded twice is written once).
    func member(_ key: String) -> Node {
        if case .object(let members) = content, let node = members.first(where: { $0.0 == key })?.1 {
            return node
        }
        let node = Node()
        if case .object(var members) = content {
            members.append((key, node))
            content = .object(members)
        } else {
            content = .object([(key, node)])
        }
        return node
    }

    func append() -> Node {
        let node = Node()
        if case .array(var nodes) = content {
            nodes.append(node)
            content = .array(nodes)
        } else {
            content = .array([node])
        }
        return node
    }
}

private func path(_ codingPath: [any CodingKey]) -> String {
    codingPath.reduce("") { path, key in
        if let index = key.intValue { return "\(path)[\(index)]" }
        return path.isEmpty ? key.stringValue : "\(path).\(key.stringValue)"
    }
}

private func number<T: BinaryFloatingPoint>(_ value: T, at codingPath: [any CodingKey]) throws -> JSONValue {
    let double = Double(value)
    guard double.isFinite else {
        throw JSONPathError(path: path(codingPath), message: "cannot write \(double) as JSON")
    }
    return .number(double, isInteger: false)
}

private func integer<T: BinaryInteger>(_ value: T) -> JSONValue { .number(Double(value), isInteger: true) }

private struct IndexKey: CodingKey {
    var intValue: Int?
    var stringValue: String { String(intValue ?? 0) }
    init(intValue: Int) { self.intValue = intValue }
    init?(stringValue: String) { nil }
}

private struct ValueEncoder: Encoder {
    let node: Node
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        if case .object = node.content {} else { node.content = .object([]) }
        return KeyedEncodingContainer(KeyedContainer<Key>(node: node, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        if case .array = node.content {} else { node.content = .array([]) }
        return UnkeyedContainer(node: node, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        SingleContainer(node: node, codingPath: codingPath)
    }
}

private struct SingleContainer: SingleValueEncodingContainer {
    let node: Node
    let codingPath: [any CodingKey]

    mutating func encodeNil() throws { node.content = .value(.null) }
    mutating func encode(_ value: Bool) throws { node.content = .value(.bool(value)) }
    mutating func encode(_ value: String) throws { node.content = .value(.string(value)) }
    mutating func encode(_ value: Double) throws { node.content = .value(try number(value, at: codingPath)) }
    mutating func encode(_ value: Float) throws {
        // The float's own shortest digits (0.6, not 0.6000000238418579).
        node.content = .value(try number(Double("\(value)") ?? Double(value), at: codingPath))
    }
    mutating func encode(_ value: Int) throws { node.content = .value(integer(value)) }
    mutating func encode(_ value: Int8) throws { node.content = .value(integer(value)) }
    mutating func encode(_ value: Int16) throws { node.content = .value(integer(value)) }
    mutating func encode(_ value: Int32) throws { node.content = .value(integer(value)) }
    mutating func encode(_ value: Int64) throws { node.content = .value(integer(value)) }
    mutating func encode(_ value: UInt) throws { node.content = .value(integer(value)) }
    mutating func encode(_ value: UInt8) throws { node.content = .value(integer(value)) }
    mutating func encode(_ value: UInt16) throws { node.content = .value(integer(value)) }
    mutating func encode(_ value: UInt32) throws { node.content = .value(integer(value)) }
    mutating func encode(_ value: UInt64) throws { node.content = .value(integer(value)) }
    mutating func encode<T: Encodable>(_ value: T) throws {
        try value.encode(to: ValueEncoder(node: node, codingPath: codingPath))
    }
}

/// The keyed and unkeyed containers write every value through its own `encode(to:)`, which
/// reaches ``SingleContainer`` for the primitives: one place for numbers, strings and booleans.
private struct KeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let node: Node
    let codingPath: [any CodingKey]

    private func single(_ key: Key) -> SingleContainer {
        SingleContainer(node: node.member(key.stringValue), codingPath: codingPath + [key])
    }

    mutating func encodeNil(forKey key: Key) throws {
        var container = single(key)
        try container.encodeNil()
    }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        try value.encode(to: ValueEncoder(node: node.member(key.stringValue), codingPath: codingPath + [key]))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key)
        -> KeyedEncodingContainer<NestedKey>
    {
        ValueEncoder(node: node.member(key.stringValue), codingPath: codingPath + [key]).container(
            keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        ValueEncoder(node: node.member(key.stringValue), codingPath: codingPath + [key]).unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder {
        ValueEncoder(node: node.member("super"), codingPath: codingPath)
    }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
        ValueEncoder(node: node.member(key.stringValue), codingPath: codingPath + [key])
    }
}

private struct UnkeyedContainer: UnkeyedEncodingContainer {
    let node: Node
    let codingPath: [any CodingKey]
    var count: Int {
        if case .array(let nodes) = node.content { return nodes.count }
        return 0
    }

    private func next() -> ValueEncoder {
        let index = count
        return ValueEncoder(node: node.append(), codingPath: codingPath + [IndexKey(intValue: index)])
    }

    mutating func encodeNil() throws {
        var container = next().singleValueContainer()
        try container.encodeNil()
    }
    mutating func encode<T: Encodable>(_ value: T) throws { try value.encode(to: next()) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type)
        -> KeyedEncodingContainer<NestedKey>
    {
        next().container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer { next().unkeyedContainer() }

    mutating func superEncoder() -> any Encoder { next() }
}
