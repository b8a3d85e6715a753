/// The columns of a delimited recording that no format is detected for, as `--columns` names
/// them: `time=Time_ms:ms,x=ax,y=ay,z=az,unit=m/s2,delimiter=;`.
///
/// Every key but `delimiter` is required. A column is a header name (matched ignoring case and
/// the spaces and quotes around it) or a 1-based index; the time column carries its unit after
/// the last `:`. Without `delimiter`, the separator is found as for the other formats (a
/// `sep=` line, else the most frequent of `,` `;` TAB in the first line). When every column is
/// an index, the first line is data if its four cells are numbers, else a header.
public struct ColumnLayout: Sendable, Hashable, CustomStringConvertible {
    /// One column of the file.
    public enum Column: Sendable, Hashable, CustomStringConvertible {
        /// The column with this header name.
        case name(String)
        /// The column at this 1-based index.
        case index(Int)

        /// As written in `--columns`: the name, or the index.
        public var description: String {
            switch self {
            case .name(let name): name
            case .index(let index): String(index)
            }
        }

        /// Whether two columns are certainly the same (names compared ignoring case).
        func sameAs(_ other: Column) -> Bool {
            switch (self, other) {
            case (.name(let a), .name(let b)): a.lowercased() == b.lowercased()
            case (.index(let a), .index(let b)): a == b
            default: false
            }
        }
    }

    /// The unit of the time column's numbers.
    public enum TimeUnit: String, Sendable, CaseIterable {
        case s, ms, us, ns

        /// Power of ten from this unit to nanoseconds.
        var shift: Int {
            switch self {
            case .s: 9
            case .ms: 6
            case .us: 3
            case .ns: 0
            }
        }
    }

    /// Why a `--columns` value could not be parsed, said with what was expected.
    public struct ParseError: Error, Hashable, CustomStringConvertible {
        public var description: String
    }

    public var time: Column
    public var timeUnit: TimeUnit
    public var x: Column
    public var y: Column
    public var z: Column
    /// The unit of the x, y and z columns.
    public var unit: AccelerationUnit
    /// The separator byte; nil to find it as for the detected formats.
    public var delimiter: UInt8?

    /// The syntax, for help texts and errors.
    public static let syntax = "time=COLUMN:UNIT,x=COLUMN,y=COLUMN,z=COLUMN,unit=UNIT[,delimiter=D]"

    /// Creates a layout.
    public init(
        time: Column, timeUnit: TimeUnit, x: Column, y: Column, z: Column, unit: AccelerationUnit,
        delimiter: UInt8? = nil
    ) {
        self.time = time
        self.timeUnit = timeUnit
        self.x = x
        self.y = y
        self.z = z
        self.unit = unit
        self.delimiter = delimiter
    }

    /// Parses comma-separated `key=value` items (see ``syntax``); spaces around keys and values
    /// are ignored.
    public init(parsing text: String) throws(ParseError) {
        var values: [String: String] = [:]
        var delimiter: UInt8?
        for item in text.split(separator: ",", omittingEmptySubsequences: false) {
            guard let equals = item.firstIndex(of: "=") else {
                throw ParseError(
                    description: item.allSatisfy(\.isWhitespace)
                        ? "expected key=value items separated by commas, found an empty item"
                        : "expected key=value, found '\(item)'")
            }
            let key = Self.trimmed(item[..<equals]).lowercased()
            let value = Self.trimmed(item[item.index(after: equals)...])
            guard Self.keys.contains(key) else {
                throw ParseError(
                    description: "unknown key '\(key)': expected time, x, y, z, unit or delimiter")
            }
            guard values[key] == nil else { throw ParseError(description: "\(key) given twice") }
            values[key] = value
            // At once: `delimiter=,` leaves an empty item after it, which is not the mistake.
            if key == "delimiter" { delimiter = try Self.delimiter(value) }
        }
        let missing = Self.keys.dropLast().filter { values[$0] == nil }
        guard missing.isEmpty else {
            let items = missing.map {
                $0 == "unit" ? "unit=UNIT" : $0 == "time" ? "time=COLUMN:UNIT" : "\($0)=COLUMN"
            }
            throw ParseError(
                description: "missing \(items.joined(separator: ", ")) (expected \(Self.syntax))")
        }
        let timeText = values["time"] ?? ""
        guard let colon = timeText.lastIndex(of: ":"),
            let timeUnit = TimeUnit(rawValue: String(timeText[timeText.index(after: colon)...]).lowercased())
        else {
            throw ParseError(
                description:
                    "time=\(timeText): expected COLUMN:UNIT with UNIT s, ms, us or ns (for example time=Time (ms):ms)"
            )
        }
        self.timeUnit = timeUnit
        time = try Self.column("time", Self.trimmed(timeText[..<colon]))
        x = try Self.column("x", values["x"] ?? "")
        y = try Self.column("y", values["y"] ?? "")
        z = try Self.column("z", values["z"] ?? "")
        let unitText = values["unit"] ?? ""
        guard let unit = AccelerationUnit(unitText) else {
            throw ParseError(description: "unit=\(unitText): expected g, m/s2 or counts:<counts per g>")
        }
        self.unit = unit
        self.delimiter = delimiter
        let roles = [("time", time), ("x", x), ("y", y), ("z", z)]
        for (index, role) in roles.enumerated() {
            if let other = roles[..<index].first(where: { $0.1.sameAs(role.1) }) {
                throw ParseError(
                    description:
                        "\(other.0) and \(role.0) name the same column '\(role.1)': expected four different columns"
                )
            }
        }
    }

    /// The spelling ``init(parsing:)`` reads back.
    public var description: String {
        var text = "time=\(time):\(timeUnit.rawValue),x=\(x),y=\(y),z=\(z),unit=\(unit)"
        if let delimiter {
            let names: [UInt8: String] = [44: "comma", 59: "semicolon", 9: "tab", 32: "space"]
            text += ",delimiter=" + (names[delimiter] ?? String(UnicodeScalar(delimiter)))
        }
        return text
    }

    private static let keys = ["time", "x", "y", "z", "unit", "delimiter"]

    private static func trimmed(_ text: Substring) -> String {
        String(text.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
    }

    private static func column(_ key: String, _ text: String) throws(ParseError) -> Column {
        if text.isEmpty {
            throw ParseError(description: "\(key)=: expected a column name or a 1-based column number")
        }
        guard text.allSatisfy({ $0.isASCII && $0.isNumber }) else { return .name(text) }
        guard let index = Int(text), index >= 1 else {
            throw ParseError(description: "\(key)=\(text): expected a column number from 1")
        }
        return .index(index)
    }

    private static func delimiter(_ text: String) throws(ParseError) -> UInt8 {
        switch text.lowercased() {
        case "comma": return UInt8(ascii: ",")
        case "semicolon": return UInt8(ascii: ";")
        case "tab", "\\t": return 9
        case "space": return 32
        default:
            // One character that cannot be part of a number or a quoted cell.
            if text.utf8.count == 1, let byte = text.utf8.first, byte > 32, byte < 127,
                !Array("0123456789.+-eE\"".utf8).contains(byte),
                !(byte >= 65 && byte <= 90 || byte >= 97 && byte <= 122)
            {
                return byte
            }
            throw ParseError(
                description:
                    "delimiter=\(text): expected comma, semicolon, tab, space or one other character that is "
                    + "not a letter, digit, '.', '+', '-' or '\"'")
        }
    }
}
