import Testing
import TypedJSON
import UnlockPolicy

@Suite("Strict JSON")
struct StrictJSONTests {
    @Test func quotesAndEscapesStrings() {
        #expect(StrictJSON.quoted("plain") == "\"plain\"")
        #expect(StrictJSON.quoted("a\"b\\c\nd\te\u{1}é") == "\"a\\\"b\\\\c\\nd\\te\\u0001é\"")
    }

    @Test func rejectsDuplicateKeysWithThePath() {
        let error = #expect(throws: JSONPathError.self) {
            try StrictJSON.validate(Array(#"{"a": {"b": 1, "b": 2}}"#.utf8))
        }
        #expect(error?.description.contains("duplicate key") == true)
    }
}
