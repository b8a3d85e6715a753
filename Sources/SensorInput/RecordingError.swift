/// Why a recording could not be read, with the place and the offending text.
///
/// `description` is the message shown to the user, for example
/// `walk.csv:17: column 3 'y': expected a number, found 'abc'`.
public struct RecordingError: Error, Hashable, CustomStringConvertible {
    /// What went wrong.
    public enum Kind: String, Hashable, Sendable, CaseIterable {
        /// The file could not be opened (`found` holds the system error text).
        case cannotOpen
        /// Reading failed after the file was opened.
        case cannotRead
        /// Writing or syncing an output file failed.
        case cannotWrite
        /// No header and no data: the file is empty or holds only blank lines.
        case emptyFile
        /// The first line matches none of the supported formats.
        case unknownFormat
        /// A format was forced, but the file does not carry that format's header.
        case missingHeader
        /// A column named by a column layout (`--columns`) is not in the file.
        case columnNotFound
        /// A column layout's name matches several columns, or two of its columns are one.
        case ambiguousColumn
        /// A row ends before a column the reader needs.
        case tooFewColumns
        /// A cell that should hold a number does not (includes empty cells).
        case notANumber
        /// A cell holds `NaN` or an infinity.
        case notFinite
        /// A number is too large for its destination (Int64 nanoseconds or Float).
        case outOfRange
        /// A timestamp is earlier than the one on the previous row (equal is fine).
        case timeWentBackwards
        /// A line is longer than the reader's buffer.
        case lineTooLong
        /// A unit name could not be parsed.
        case invalidUnit
        /// The file holds binary data (NUL or other control bytes, or invalid UTF-8), not text.
        case notText
    }

    /// A column of the file: its 1-based index and, when the file has a header, its name.
    public struct Column: Hashable, Sendable, CustomStringConvertible {
        /// The 1-based column index.
        public var index: Int
        /// The column name from the header (quotes and spaces stripped), if any.
        public var name: String?

        /// Creates a column reference.
        public init(index: Int, name: String?) {
            self.index = index
            self.name = name
        }

        /// `column 3 'y'` or `column 3`.
        public var description: String {
            if let name { "column \(index) '\(name)'" } else { "column \(index)" }
        }
    }

    /// What went wrong.
    public var kind: Kind
    /// The file path as given to the reader or writer (empty when there is no file).
    public var path: String
    /// The 1-based line number, when the error belongs to a line.
    public var line: Int?
    /// The column, when the error belongs to a cell.
    public var column: Column?
    /// What the reader expected there, for example `a number`.
    public var expected: String
    /// What it found, ready to print (cell text is single-quoted), for example `'abc'`.
    public var found: String?

    /// Creates an error.
    public init(
        kind: Kind,
        path: String,
        line: Int? = nil,
        column: Column? = nil,
        expected: String,
        found: String? = nil
    ) {
        self.kind = kind
        self.path = path
        self.line = line
        self.column = column
        self.expected = expected
        self.found = found
    }

    /// The user-facing message: `path:line: column: what: expected …, found …`.
    public var description: String {
        var parts: [String] = []
        var location = path
        if let line { location += location.isEmpty ? "line \(line)" : ":\(line)" }
        if !location.isEmpty { parts.append(location) }
        if let column { parts.append(column.description) }
        switch kind {
        case .cannotOpen: parts.append("cannot open")
        case .cannotRead: parts.append("cannot read")
        case .cannotWrite: parts.append("cannot write")
        case .emptyFile: parts.append("empty file")
        case .unknownFormat: parts.append("unknown format")
        case .missingHeader: parts.append("missing header")
        case .columnNotFound: parts.append("column not found")
        case .ambiguousColumn: parts.append("ambiguous column")
        case .timeWentBackwards: parts.append("time went backwards")
        case .lineTooLong: parts.append("line too long")
        case .invalidUnit: parts.append("invalid unit")
        case .notText: parts.append("not a text recording")
        case .tooFewColumns, .notANumber, .notFinite, .outOfRange: break
        }
        var what = "expected \(expected)"
        if let found { what += ", found \(found)" }
        parts.append(what)
        return parts.joined(separator: ": ")
    }
}

/// Rows that a reader with `skipBadRows` dropped, counted per reason, each with the first
/// line it happened on and its full error (for a `--skip-bad-rows` report).
public struct SkippedRows: Sendable, Hashable, CustomStringConvertible {
    /// Why a row was skipped.
    public enum Reason: String, Hashable, Sendable, CaseIterable {
        /// The row ends before a needed column.
        case tooFewColumns = "too few columns"
        /// A needed cell is empty or not a number.
        case notANumber = "not a number"
        /// A needed cell is `NaN` or infinite.
        case notFinite = "not finite"
        /// A number does not fit (time in Int64 ns, value in Float).
        case outOfRange = "out of range"
        /// The time is earlier than the previous row's.
        case timeWentBackwards = "time went backwards"
        /// The line is longer than the reader's buffer.
        case lineTooLong = "line too long"

        init?(_ kind: RecordingError.Kind) {
            switch kind {
            case .tooFewColumns: self = .tooFewColumns
            case .notANumber: self = .notANumber
            case .notFinite: self = .notFinite
            case .outOfRange: self = .outOfRange
            case .timeWentBackwards: self = .timeWentBackwards
            case .lineTooLong: self = .lineTooLong
            default: return nil
            }
        }
    }

    /// How many rows were skipped for each reason (absent means none).
    public private(set) var counts: [Reason: Int] = [:]
    /// The first error seen for each reason; its `line` is the first line skipped for it.
    public private(set) var firstErrors: [Reason: RecordingError] = [:]
    /// Empty (or whitespace-only) lines between rows. Not bad rows: never an error.
    public internal(set) var blankLines = 0
    /// Rows of an AndroSensor or SensorLog export whose x, y and z cells are all empty or `NaN`:
    /// rows of the other sensors, with no accelerometer reading. Passed over, never an error.
    public private(set) var withoutAcceleration = 0
    /// The first line of those rows.
    public private(set) var firstWithoutAcceleration: Int?

    /// Creates an empty tally.
    public init() {}

    /// The number of rows skipped for `reason`.
    public subscript(reason: Reason) -> Int { counts[reason] ?? 0 }

    /// The first line skipped for `reason`, if any.
    public func firstLine(of reason: Reason) -> Int? { firstErrors[reason]?.line }

    /// All skipped rows (blank lines not included).
    public var total: Int { counts.values.reduce(0, +) }

    mutating func recordWithoutAcceleration(line: Int) {
        withoutAcceleration += 1
        if firstWithoutAcceleration == nil { firstWithoutAcceleration = line }
    }

    /// `3 rows without accelerometer values passed over (first at line 5)`, or nil when none.
    public var withoutAccelerationNote: String? {
        guard withoutAcceleration > 0, let first = firstWithoutAcceleration else { return nil }
        let rows = withoutAcceleration == 1 ? "1 row" : "\(withoutAcceleration) rows"
        return "\(rows) without accelerometer values passed over (first at line \(first))"
    }

    mutating func record(_ reason: Reason, _ error: RecordingError) {
        counts[reason, default: 0] += 1
        if firstErrors[reason] == nil { firstErrors[reason] = error }
    }

    /// `no rows skipped`, or `12 rows skipped: 10 not a number (first at line 5), …`.
    public var description: String {
        let total = total
        if total == 0 { return "no rows skipped" }
        let details = Reason.allCases.compactMap { reason -> String? in
            guard let count = counts[reason] else { return nil }
            let first = firstLine(of: reason).map { " (first at line \($0))" } ?? ""
            return "\(count) \(reason.rawValue)\(first)"
        }
        return "\(total) row\(total == 1 ? "" : "s") skipped: " + details.joined(separator: ", ")
    }
}
