public import SensorInput

/// The options that say how to read recordings, for every command that reads them (`replay`,
/// `plot`): their help and their parsing, so that each means the same everywhere.
public enum RecordingOptions {
    /// `--format`: a detected format, forced.
    public static let format = OptionSpec.option(
        "format", "format",
        help: "Read the recordings as this format instead of detecting it: "
            + "\(RecordingFormat.named.map(\.rawValue).joined(separator: ", "))."
    )

    /// `--columns`: the columns of any other delimited file (``ColumnLayout``).
    public static let columns = OptionSpec.option(
        "columns", "layout",
        help:
            "Read the recordings by these columns (files no format is detected for): \(ColumnLayout.syntax), "
            + "where a COLUMN is a header name or a number from 1, the time's UNIT s, ms, us or ns, the "
            + "values' UNIT g, m/s2 or counts:<per-g>, and D comma, semicolon, tab, space or one character.")

    /// `--units`: the unit of the axis columns, forced.
    public static let units = OptionSpec.option(
        "units", "unit", help: "Unit of the axis columns: g, m/s2 or counts:<per-g>.")

    /// `--gravity`: whether the values include gravity, forced.
    public static let gravity = OptionSpec.option(
        "gravity", "included|removed",
        help: "Whether the values include gravity, instead of what the header, the file name or the "
            + "first rows say: included (an accelerometer's total acceleration) or removed (linear "
            + "acceleration, as phyphox and Sensor Logger export it).")

    /// `--skip-bad-rows`.
    public static let skipBadRows = OptionSpec.flag(
        "skip-bad-rows", help: "Skip malformed rows (reported on standard error) instead of stopping.")

    /// How to read, from those of the options above the command has.
    public static func parse(_ arguments: ParsedArguments) throws(UsageError) -> RecordingReader.Options {
        let format = try arguments.value(
            "format", expected: RecordingFormat.named.map(\.rawValue).joined(separator: ", "),
            RecordingFormat.init(name:))
        var columns: ColumnLayout?
        if let text = arguments.value("columns") {
            do {
                columns = try ColumnLayout(parsing: text)
            } catch {
                throw UsageError("invalid value '\(text)' for '--columns': \(error)")
            }
            if format != nil { throw UsageError("'--format' and '--columns' cannot be used together") }
        }
        let unit = try arguments.value("units", expected: "g, m/s2 or counts:<per-g>", AccelerationUnit.init)
        let gravity = try arguments.value("gravity", expected: "included or removed") { text -> Bool? in
            switch text {
            case "included": true
            case "removed": false
            default: nil
            }
        }
        return RecordingReader.Options(
            format: format, columns: columns, unit: unit, skipBadRows: arguments.flag("skip-bad-rows"),
            gravityIncluded: gravity)
    }
}
