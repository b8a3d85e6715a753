import Testing
import TypedJSON

/// The strict decoder for Codable types and the document's line and column of each value.
@Suite("typed JSON")
struct TypedJSONTests {
    struct Settings: Decodable, Equatable {
        var count: Int
        var ratio: Double?
        var enabled: Bool?
        var names: [String]?
        var inner: Inner?
        struct Inner: Decodable, Equatable { var level: UInt8 }
    }

    private func decode(_ text: String) throws(JSONPathError) -> Settings {
        try JSONDecoding.decode(
            Settings.self, from: JSONDocument.parse(bytes: Array(text.utf8)).value, path: "")
    }

    @Test func decodesWhatTheTypeAsksFor() throws {
        let settings = try decode(
            #"{"count": 3, "ratio": 1, "enabled": false, "names": ["a"], "inner": {"level": 7}}"#)
        #expect(
            settings == Settings(count: 3, ratio: 1, enabled: false, names: ["a"], inner: .init(level: 7)))
    }

    @Test(arguments: [
        (#"{"count": 7.5}"#, "count", "expected a whole number, found 7.5"),
        (#"{"count": 1e20}"#, "count", "expected a whole number"),
        (#"{"count": true}"#, "count", "expected a whole number, found true"),
        (#"{"count": 1, "enabled": 1}"#, "enabled", "expected true or false, found 1"),
        (#"{"count": 1, "names": ["a", 2]}"#, "names[1]", "expected a string, found 2"),
        (
            #"{"count": 1, "inner": {"level": 300}}"#, "inner.level",
            "expected a whole number of at least 0 that fits UInt8"
        ),
        (#"{"count": 1, "cuont": 2}"#, "cuont", "unknown key; expected one of"),
        (#"{"count": 1, "inner": {"level": 1, "lvl": 2}}"#, "inner.lvl", "unknown key"),
        (#"{"ratio": 1}"#, "count", "missing required key"),
    ])
    func refusesWithTheKeyPath(text: String, path: String, message: String) {
        let error = #expect(throws: JSONPathError.self) { try decode(text) }
        #expect(error?.path == path)
        #expect(error?.message.contains(message) == true, "\(error?.message ?? "")")
    }

    @Test func aDocumentKnowsTheLineAndColumnOfEachValue() throws {
        let text = """
            {
              "policy": {
                "stores": [ { "name": "gämes" }, { "name": 2 } ]
              }
            }
            """
        let document = try JSONDocument.parse(bytes: Array(text.utf8))
        #expect(document.location(of: "policy")! == (2, 3))
        #expect(document.location(of: "policy.stores[1].name")! == (3, 40))
        // A missing key is reported at the nearest value that is there.
        #expect(document.location(of: "policy.stores[0].missing")! == (3, 17))
        #expect(document.location(of: "")! == (1, 1))
    }

    @Test func aSyntaxErrorCarriesWhereReadingStopped() {
        let text = "{\n  \"a\": 1,\n  \"a\": 2\n}"
        let error = #expect(throws: JSONPathError.self) { try JSONDocument.parse(bytes: Array(text.utf8)) }
        let offset = try? #require(error?.offset)
        #expect(offset.map { JSONDocument.location(of: $0, in: Array(text.utf8)) }! == (3, 3))
    }
}

/// The encoder: the one way StepGate writes `Encodable` values as JSON (control answers, MQTT
/// payloads, the systemd shield's memory, the detector configuration).
@Suite("TypedJSON encoding")
struct TypedJSONEncodingTests {
    struct Inner: Codable, Equatable {
        var name: String
        var ratio: Float
    }
    struct Outer: Codable, Equatable {
        var zebra: Int
        var alpha: Double
        var optional: String?
        var list: [Inner]
        var flags: [String: Bool]
        var path: String
    }

    @Test func writesWhatTheDecoderReadsBack() throws {
        let value = Outer(
            zebra: 3, alpha: 0.6, optional: nil, list: [Inner(name: "a\u{1b}b", ratio: 0.6)],
            flags: ["b": true, "a": false], path: "/run/stepgate")
        let json = try JSONEncoding.encode(value, sortedKeys: true)
        #expect(
            json.serialized()
                == #"{"alpha":0.6,"flags":{"a":false,"b":true},"list":[{"name":"a\u001bb","ratio":0.6}],"path":"/run/stepgate","zebra":3}"#
        )
        #expect(try JSONDecoding.decode(Outer.self, from: json) == value)
        // In the type's own order without sorting; a whole number written as one.
        let unsorted = try JSONEncoding.encode(Inner(name: "x", ratio: 2)).serialized()
        #expect(unsorted == #"{"name":"x","ratio":2}"#)
    }

    @Test func aNumberThatIsNotFiniteIsAnErrorWithItsPath() {
        #expect(throws: JSONPathError(path: "list[0].ratio", message: "cannot write nan as JSON")) {
            try JSONEncoding.encode(
                Outer(zebra: 1, alpha: 1, list: [Inner(name: "x", ratio: .nan)], flags: [:], path: ""))
        }
    }
}
