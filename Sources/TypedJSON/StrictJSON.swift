/// Strict JSON checking for configuration files read with other decoders.
public enum StrictJSON {
    /// Checks that `bytes` is exactly one JSON document with no duplicate keys in any object
    /// (Foundation's decoders silently keep one of two duplicates); the error names the path.
    public static func validate(_ bytes: [UInt8]) throws(JSONPathError) {
        _ = try JSONValue.parse(bytes: bytes)
    }

    /// `text` as a JSON string literal, quotes included (control characters escaped).
    public static func quoted(_ text: String) -> String {
        var out = ""
        JSONValue.writeString(text, to: &out)
        return out
    }
}
