internal import StepDetection

// Format detection: from the header line (or, for headerless Oxford files, the first row)
// to a `RowLayout` that the hot loop follows. Runs once per file; clarity over speed.

/// Which cells of a row hold time and axes, and how to scale them.
struct RowLayout: Sendable {
    var separator: UInt8
    /// 0-based column indices.
    var timeColumn: Int
    var xColumn: Int
    var yColumn: Int
    var zColumn: Int
    /// The largest of the four: cells after it are never looked at.
    var lastColumn: Int
    /// Power of ten from the time cell's unit to nanoseconds (9 for seconds, 6 for ms).
    var timeShift: Int
    /// Units of the axis cells per g (1 for g, 9.80665 for m/s², 8192 for Bangle counts).
    var perG: Double
    /// Header names as written (quotes and spaces stripped), for error messages.
    var columnNames: [String]

    func column(_ index: Int) -> RecordingError.Column {
        RecordingError.Column(index: index + 1, name: index < columnNames.count ? columnNames[index] : nil)
    }

    /// The smallest needed column after `index`, for "too few columns" errors.
    func firstNeededColumn(after index: Int) -> Int {
        [timeColumn, xColumn, yColumn, zColumn].filter { $0 > index }.min() ?? lastColumn
    }
}

/// What detection decided, before the first rows are sampled.
struct DetectedLayout {
    enum UnitRule {
        case fixed(AccelerationUnit)
        /// Bangle.js: counts (8192 = 1 g) when the mean magnitude is large, else g.
        case bangleByMagnitude
    }

    enum GravityRule {
        case included
        case removed
        /// Guessed from the first rows: included when their mean magnitude is close to 1 g.
        case byData
    }

    var format: RecordingFormat
    var layout: RowLayout
    var unit: UnitRule
    var gravity: GravityRule
    /// True when the examined line is the first data row (Oxford), not a header.
    var firstLineIsData: Bool
    /// Sensor Logger's `seconds_elapsed` column, used when `time` is damaged.
    var secondsElapsedColumn: Int?
    /// Whether a row may hold other sensors' values only (AndroSensor, SensorLog: one row for
    /// every enabled sensor): then a row whose three axis cells are all empty or NaN is passed
    /// over and counted, not an error.
    var rowsMayLackAxes = false
}

enum FormatDetection {
    static let quote = UInt8(ascii: "\"")

    /// Splits a line into cells, honouring double quotes (`"a,b"` is one cell). Quotes are
    /// removed from quoted cells; `""` inside quotes is a literal quote.
    static func cells(_ line: [UInt8], separator: UInt8) -> [[UInt8]] {
        var result: [[UInt8]] = []
        var cell: [UInt8] = []
        var inQuotes = false
        var index = 0
        while index < line.count {
            let byte = line[index]
            if inQuotes {
                if byte == quote {
                    if index + 1 < line.count && line[index + 1] == quote {
                        cell.append(quote)
                        index += 1
                    } else {
                        inQuotes = false
                    }
                } else {
                    cell.append(byte)
                }
            } else if byte == quote {
                inQuotes = true
            } else if byte == separator {
                result.append(cell)
                cell = []
            } else {
                cell.append(byte)
            }
            index += 1
        }
        result.append(cell)
        return result
    }

    /// The separator of a header line: the most frequent of `,` `;` TAB outside quotes.
    static func guessSeparator(_ line: [UInt8]) -> UInt8 {
        // Three counters, not a dictionary: a process's first dictionary of this type cost
        // 0.35 M instructions (its runtime metadata), half of reading a 20 KB recording.
        var commas = 0
        var semicolons = 0
        var tabs = 0
        var inQuotes = false
        for byte in line {
            if byte == quote {
                inQuotes.toggle()
            } else if !inQuotes {
                if byte == UInt8(ascii: ",") {
                    commas += 1
                } else if byte == UInt8(ascii: ";") {
                    semicolons += 1
                } else if byte == 9 {
                    tabs += 1
                }
            }
        }
        var best = UInt8(ascii: ",")
        var bestCount = commas
        if semicolons > bestCount {
            best = UInt8(ascii: ";")
            bestCount = semicolons
        }
        if tabs > bestCount { best = 9 }
        return best
    }

    /// Text for messages: lossy UTF-8, at most `limit` bytes, control characters shown as `?`.
    static func display(_ bytes: some Collection<UInt8>, limit: Int = 120) -> String {
        let shown = bytes.prefix(limit).map { $0 < 0x20 && $0 != 9 ? UInt8(ascii: "?") : $0 }
        return String(decoding: shown, as: UTF8.self) + (bytes.count > limit ? "…" : "")
    }

    /// A header name as written: spaces and tabs trimmed. Bytes that are not UTF-8 (an export
    /// re-saved in a legacy encoding) are read as Latin-1, one character each.
    static func trimmedName(_ cell: [UInt8]) -> String {
        var slice = cell[...]
        while let first = slice.first, first == 32 || first == 9 { slice.removeFirst() }
        while let last = slice.last, last == 32 || last == 9 { slice.removeLast() }
        return String(validating: slice, as: UTF8.self)
            ?? String(String.UnicodeScalarView(slice.map { Unicode.Scalar($0) }))
    }

    /// A lowercased header name without the unit in brackets at its end:
    /// `accelerometer x (m/s²)` and `accelerometeraccelerationx(g)` → `accelerometer x` and
    /// `accelerometeraccelerationx`. Formats that write their unit there are matched on this, so
    /// that a unit damaged by a re-save (`m/s²` → `m/sì`) or spelled another way (`μT`, `µT`)
    /// does not matter.
    static func unitFree(_ key: String) -> String {
        guard key.hasSuffix(")"), let open = key.lastIndex(of: "(") else { return key }
        var name = key[..<open]
        while name.last == " " { name.removeLast() }
        return String(name)
    }

    static let tried =
        "a header or first row of stepgate (time_s,x_g,y_g,z_g), bangle (Time (ms),X,Y,Z), "
        + "oxford (no header: timestamp_ns,accuracy,x,y,z), "
        + "phyphox (\"Time (s)\",\"Acceleration x (m/s^2)\",…), "
        + "sensor-logger (time,seconds_elapsed,z,y,x), physics-toolbox (time,gFx,gFy,gFz,…), "
        + "androsensor (ACCELEROMETER X (m/s²);…;Time since start in ms ;…) or "
        + "sensorlog (…,accelerometerTimestamp_sinceReboot(s),accelerometerAccelerationX(G),…); "
        + "name the columns of any other file with --columns"

    static func canonicalHeader(_ format: RecordingFormat) -> String {
        switch format {
        case .stepgate: "time_s,x_g,y_g,z_g"
        case .bangle: "Time (ms),X,Y,Z"
        case .oxford: "(none)"
        case .phyphox: "\"Time (s)\",\"Acceleration x (m/s^2)\",\"Acceleration y (m/s^2)\",…"
        case .sensorLogger: "time,seconds_elapsed,z,y,x"
        case .physicsToolbox: "time,gFx,gFy,gFz"
        case .androSensor:
            "ACCELEROMETER X (m/s²);ACCELEROMETER Y (m/s²);ACCELEROMETER Z (m/s²);…;Time since start in ms "
        case .sensorLog:
            "…,accelerometerTimestamp_sinceReboot(s),accelerometerAccelerationX(G),accelerometerAccelerationY(G),"
                + "accelerometerAccelerationZ(G),…"
        case .columns: "(named by --columns)"
        }
    }

    /// Whether a header line is binary data rather than text: control characters (a NUL, an
    /// escape; TAB and CR aside) or a UTF-16 byte order mark. Invalid UTF-8 alone is not binary:
    /// exports in a legacy encoding put Latin-1 letters in their column names.
    static func isBinary(_ line: some Collection<UInt8>) -> Bool {
        let start = Array(line.prefix(2))
        return line.contains { $0 < 0x20 && $0 != 9 && $0 != 13 || $0 == 0x7F }
            || start == [0xFF, 0xFE] || start == [0xFE, 0xFF]
    }

    /// Decides the format and layout from the first non-blank line; with `columns`, follows
    /// them instead (the format is then ``RecordingFormat/columns``).
    static func detect(
        line: [UInt8],
        lineNumber: Int,
        separatorHint: UInt8?,
        path: String,
        forced: RecordingFormat?,
        columns: ColumnLayout? = nil
    ) throws(RecordingError) -> DetectedLayout {
        if let columns {
            return try resolve(
                columns, line: line, lineNumber: lineNumber, separatorHint: separatorHint, path: path)
        }
        let separator = separatorHint ?? guessSeparator(line)
        let rawCells = cells(line, separator: separator)
        let names = rawCells.map(trimmedName)
        let keys = names.map { $0.lowercased() }
        let fileName = baseName(path).lowercased()

        if forced == .columns {
            throw RecordingError(
                kind: .unknownFormat, path: path, line: lineNumber,
                expected: "the columns of the columns format (--columns)", found: "none")
        }
        let candidates = forced.map { [$0] } ?? RecordingFormat.named
        for format in candidates {
            if var detected = match(format, keys: keys, line: line, fileName: fileName) {
                detected.layout.separator = format == .oxford ? UInt8(ascii: ",") : separator
                if format != .oxford { detected.layout.columnNames = names }
                if format == .sensorLogger, forced == nil, let reason = notAcceleration(fileName) {
                    throw RecordingError(
                        kind: .unknownFormat, path: path, line: lineNumber,
                        expected: "an acceleration file (Accelerometer.csv or TotalAcceleration.csv)",
                        found: "a Sensor Logger \(reason) file '\(baseName(path))'")
                }
                return detected
            }
        }
        if forced == .oxford {
            // A header line on a forced headerless file: skip it, read the rows by position.
            return oxfordLayout(firstLineIsData: false)
        }
        if let forced {
            throw RecordingError(
                kind: .missingHeader, path: path, line: lineNumber,
                expected: "the \(forced) header '\(canonicalHeader(forced))'", found: "'\(display(line))'")
        }
        if let export = gravityFreeOnly(keys.map(unitFree)) {
            throw RecordingError(
                kind: .unknownFormat, path: path, line: lineNumber, expected: export.expected,
                found: export.found)
        }
        throw RecordingError(
            kind: .unknownFormat, path: path, line: lineNumber, expected: tried, found: "'\(display(line))'")
    }

    static func baseName(_ path: String) -> String {
        if let slash = path.lastIndex(of: "/") { String(path[path.index(after: slash)...]) } else { path }
    }

    /// Sensor Logger writes gyroscope, magnetometer, … with the same `time,…,z,y,x` header.
    static func notAcceleration(_ fileName: String) -> String? {
        for word in ["gyroscope", "magnetometer", "gravity", "orientation"] where fileName.contains(word) {
            return word
        }
        return nil
    }

    /// An AndroSensor or SensorLog export (known by its time column) without the accelerometer
    /// columns, whose gravity-free ones (LINEAR ACCELERATION, motionUserAcceleration) are a
    /// different signal, not read in their place: what to say.
    static func gravityFreeOnly(_ bases: [String]) -> (expected: String, found: String)? {
        if bases.contains("time since start in ms") {
            return (
                "the ACCELEROMETER X/Y/Z (m/s²) columns of an AndroSensor export (LINEAR ACCELERATION, "
                    + "gravity removed, is not read in their place)",
                "an AndroSensor header without them"
            )
        }
        if bases.contains("loggingtime") && bases.contains("loggingsample") {
            return (
                "the accelerometerAcceleration X/Y/Z(G) columns of a SensorLog export (motionUserAcceleration, "
                    + "gravity removed, is not read in their place)",
                "a SensorLog header without them"
            )
        }
        return nil
    }

    /// The layout `columns` gives on the file whose first non-blank line is `line`.
    static func resolve(
        _ columns: ColumnLayout, line: [UInt8], lineNumber: Int, separatorHint: UInt8?, path: String
    ) throws(RecordingError) -> DetectedLayout {
        let separator = columns.delimiter ?? separatorHint ?? guessSeparator(line)
        let names = cells(line, separator: separator).map(trimmedName)
        let keys = names.map { $0.lowercased() }
        let roles = [("time", columns.time), ("x", columns.x), ("y", columns.y), ("z", columns.z)]
        var indices: [Int] = []
        for (role, column) in roles {
            let given = "\(role)=\(column) in --columns"
            switch column {
            case .index(let index):
                guard index <= names.count else {
                    throw RecordingError(
                        kind: .columnNotFound, path: path, line: lineNumber,
                        expected: "at least \(index) columns (\(given))",
                        found: "\(names.count): '\(display(line))'")
                }
                indices.append(index - 1)
            case .name(let name):
                let matches = keys.indices.filter { keys[$0] == name.lowercased() }
                guard let first = matches.first else {
                    throw RecordingError(
                        kind: .columnNotFound, path: path, line: lineNumber,
                        expected: "a column named '\(name)' (\(given))", found: "'\(display(line))'")
                }
                guard matches.count == 1 else {
                    throw RecordingError(
                        kind: .ambiguousColumn, path: path, line: lineNumber,
                        expected: "one column named '\(name)' (\(given); name it by number)",
                        found: "columns \(matches.map { String($0 + 1) }.joined(separator: ", "))")
                }
                indices.append(first)
            }
        }
        for (index, role) in roles.enumerated() {
            if let other = roles.indices.first(where: { $0 < index && indices[$0] == indices[index] }) {
                throw RecordingError(
                    kind: .ambiguousColumn, path: path, line: lineNumber,
                    expected: "four different columns for time, x, y and z",
                    found: "\(roles[other].0) and \(role.0) both column \(indices[index] + 1)")
            }
        }
        var rowLayout = layout(
            time: indices[0], x: indices[1], y: indices[2], z: indices[3], timeShift: columns.timeUnit.shift,
            perG: columns.unit.perG)
        rowLayout.separator = separator
        // With names, the line is their header. With numbers only, it is data when its four
        // cells are numbers (a header is kept for messages).
        let named = roles.contains { if case .name = $0.1 { true } else { false } }
        let isData =
            !named
            && line.withUnsafeBufferPointer { bytes in
                guard let base = bytes.baseAddress else { return false }
                if case .sample = parseRow(base, bytes.count, rowLayout) { return true }
                return false
            }
        if !isData { rowLayout.columnNames = names }
        return DetectedLayout(
            format: .columns, layout: rowLayout, unit: .fixed(columns.unit), gravity: .byData,
            firstLineIsData: isData, secondsElapsedColumn: nil)
    }

    private static func layout(
        time: Int, x: Int, y: Int, z: Int, timeShift: Int, perG: Double
    ) -> RowLayout {
        RowLayout(
            separator: UInt8(ascii: ","), timeColumn: time, xColumn: x, yColumn: y, zColumn: z,
            lastColumn: max(time, x, y, z), timeShift: timeShift, perG: perG, columnNames: [])
    }

    static func oxfordLayout(firstLineIsData: Bool) -> DetectedLayout {
        var rowLayout = layout(time: 0, x: 2, y: 3, z: 4, timeShift: 0, perG: standardGravity)
        rowLayout.columnNames = ["timestamp_ns", "accuracy", "x", "y", "z"]
        return DetectedLayout(
            format: .oxford, layout: rowLayout, unit: .fixed(.metersPerSecondSquared), gravity: .included,
            firstLineIsData: firstLineIsData, secondsElapsedColumn: nil)
    }

    private static func match(
        _ format: RecordingFormat, keys: [String], line: [UInt8], fileName: String
    ) -> DetectedLayout? {
        func find(_ name: String) -> Int? { keys.firstIndex(of: name) }
        /// By the name without its unit (AndroSensor and SensorLog write the unit in brackets).
        func findUnitFree(_ name: String) -> Int? { keys.firstIndex { unitFree($0) == name } }
        func result(
            _ rowLayout: RowLayout, _ unit: DetectedLayout.UnitRule, _ gravity: DetectedLayout.GravityRule,
            secondsElapsed: Int? = nil, rowsMayLackAxes: Bool = false
        ) -> DetectedLayout {
            DetectedLayout(
                format: format, layout: rowLayout, unit: unit, gravity: gravity, firstLineIsData: false,
                secondsElapsedColumn: secondsElapsed, rowsMayLackAxes: rowsMayLackAxes)
        }
        switch format {
        case .stepgate:
            guard let t = find("time_s"), let x = find("x_g"), let y = find("y_g"), let z = find("z_g") else {
                return nil
            }
            return result(layout(time: t, x: x, y: y, z: z, timeShift: 9, perG: 1), .fixed(.g), .included)
        case .bangle:
            guard let t = find("time (ms)"), let x = find("x"), let y = find("y"), let z = find("z") else {
                return nil
            }
            return result(
                layout(time: t, x: x, y: y, z: z, timeShift: 6, perG: 8192), .bangleByMagnitude, .included)
        case .phyphox:
            guard let t = find("time (s)") else { return nil }
            let styles: [(prefix: String, gravity: DetectedLayout.GravityRule)] = [
                ("acceleration ", .included), ("linear acceleration ", .removed),
                ("", phyphoxGravity(fileName)),
            ]
            for style in styles {
                if let x = find(style.prefix + "x (m/s^2)"), let y = find(style.prefix + "y (m/s^2)"),
                    let z = find(style.prefix + "z (m/s^2)")
                {
                    let rowLayout = layout(time: t, x: x, y: y, z: z, timeShift: 9, perG: standardGravity)
                    return result(rowLayout, .fixed(.metersPerSecondSquared), style.gravity)
                }
            }
            return nil
        case .sensorLogger:
            guard let t = find("time"), let x = find("x"), let y = find("y"), let z = find("z") else {
                return nil
            }
            let gravity: DetectedLayout.GravityRule =
                fileName.hasPrefix("totalacceleration")
                ? .included
                : fileName.hasPrefix("accelerometer") ? .removed : .byData
            let rowLayout = layout(time: t, x: x, y: y, z: z, timeShift: 0, perG: standardGravity)
            return result(
                rowLayout, .fixed(.metersPerSecondSquared), gravity, secondsElapsed: find("seconds_elapsed"))
        case .physicsToolbox:
            guard let t = find("time"), let x = find("gfx"), let y = find("gfy"), let z = find("gfz") else {
                return nil
            }
            return result(layout(time: t, x: x, y: y, z: z, timeShift: 9, perG: 1), .fixed(.g), .included)
        case .androSensor:
            // `ACCELEROMETER X (m/s²)`, never `LINEAR ACCELERATION X` (gravity removed); the
            // columns' places depend on the sensors enabled. `Time since start in ms ` (with a
            // trailing space) is ms from the start.
            guard let t = findUnitFree("time since start in ms"), let x = findUnitFree("accelerometer x"),
                let y = findUnitFree("accelerometer y"), let z = findUnitFree("accelerometer z")
            else { return nil }
            let rowLayout = layout(time: t, x: x, y: y, z: z, timeShift: 6, perG: standardGravity)
            return result(rowLayout, .fixed(.metersPerSecondSquared), .included, rowsMayLackAxes: true)
        case .sensorLog:
            // `accelerometerAcceleration…(G)`, never `motionUserAcceleration…(G)` (gravity
            // removed); the accelerometer's own timestamp, seconds since boot.
            guard let t = findUnitFree("accelerometertimestamp_sincereboot"),
                let x = findUnitFree("accelerometeraccelerationx"),
                let y = findUnitFree("accelerometeraccelerationy"),
                let z = findUnitFree("accelerometeraccelerationz")
            else { return nil }
            let rowLayout = layout(time: t, x: x, y: y, z: z, timeShift: 9, perG: 1)
            return result(rowLayout, .fixed(.g), .included, rowsMayLackAxes: true)
        case .columns:
            return nil
        case .oxford:
            return looksLikeOxfordRow(line) ? oxfordLayout(firstLineIsData: true) : nil
        }
    }

    private static func phyphoxGravity(_ fileName: String) -> DetectedLayout.GravityRule {
        if fileName.contains("linear") { return .removed }
        if fileName.contains("accelerometer") || fileName.contains("acceleration with g") { return .included }
        return .byData
    }

    /// Five comma-separated cells (a trailing empty one allowed): two integers, three numbers.
    static func looksLikeOxfordRow(_ line: [UInt8]) -> Bool {
        var parts = cells(line, separator: UInt8(ascii: ","))
        if parts.count == 6, parts[5].allSatisfy({ $0 == 32 }) { parts.removeLast() }
        guard parts.count == 5 else { return false }
        for (index, cell) in parts.enumerated() {
            if cell.isEmpty { return false }
            if index < 2 {
                guard cell.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return false }
            } else {
                let ok = cell.withUnsafeBufferPointer { buffer -> Bool in
                    guard let base = buffer.baseAddress else { return false }
                    let scan = scanNumber(base, from: 0, to: buffer.count)
                    return scan.hasDigits && scan.next == buffer.count
                }
                if !ok { return false }
            }
        }
        return true
    }
}
