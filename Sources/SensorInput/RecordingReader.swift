public import StepDetection

#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Musl)
    internal import Musl
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// Reads an accelerometer recording (CSV) as a stream of ``AccelerationSample``s in g.
///
/// The format is detected from the header and the first rows, unless forced in
/// ``Options``. The file is read in 256 KiB chunks, so memory stays constant however long
/// the recording, and rows are parsed straight from the bytes without allocating.
///
/// ```swift
/// var reader = try RecordingReader(path: "walk.csv")
/// while let sample = try reader.next() { detector.process(sample) }
/// ```
///
/// Copies of a reader are independent (the buffer is copy-on-write and files are read with
/// `pread`), except when reading from a pipe.
public struct RecordingReader: Sendable {
    /// How to read a recording.
    public struct Options: Sendable {
        /// Read the file as this format instead of detecting it.
        public var format: RecordingFormat?
        /// Read the file by these columns (format ``RecordingFormat/columns``); wins over
        /// ``format``.
        public var columns: ColumnLayout?
        /// Read the axis columns in this unit instead of the format's own.
        public var unit: AccelerationUnit?
        /// Skip (and count in ``RecordingReader/skipped``) bad rows instead of throwing.
        public var skipBadRows: Bool
        /// Whether the values include gravity, instead of what the header, the file name or the
        /// data say (`--gravity included|removed`).
        public var gravityIncluded: Bool?
        /// Size of the read buffer, which is also the longest line accepted.
        var bufferSize: Int = 256 * 1024
        /// Largest read from an in-memory source (tests and fuzzing use small values).
        var maximumRead: Int = .max
        /// Whether plain rows go through the fast path (FastRowParsing.swift) before
        /// `parseRow`; tests and fuzzing turn it off to check that it changes nothing.
        var rowFastPath = true

        /// Creates options; the defaults detect everything and throw on the first bad row.
        public init(
            format: RecordingFormat? = nil, columns: ColumnLayout? = nil, unit: AccelerationUnit? = nil,
            skipBadRows: Bool = false, gravityIncluded: Bool? = nil
        ) {
            self.format = format
            self.columns = columns
            self.unit = unit
            self.skipBadRows = skipBadRows
            self.gravityIncluded = gravityIncluded
        }
    }

    /// The path the reader was opened with (or the name given to an in-memory reader).
    public let path: String
    /// The detected (or forced) format.
    public private(set) var format: RecordingFormat
    /// The unit of the file's axis columns (detected, or forced by ``Options/unit``).
    public private(set) var unit: AccelerationUnit
    /// Whether the values include gravity. False for phyphox "Linear Acceleration" and
    /// Sensor Logger `Accelerometer.csv`: their samples are user acceleration only.
    public private(set) var gravityIncluded: Bool
    /// Whether ``gravityIncluded`` was guessed from the first rows (the header and the file name
    /// did not say, and ``Options/gravityIncluded`` was not given).
    public private(set) var gravityGuessed = false
    /// Rows skipped so far (only with ``Options/skipBadRows``), blank lines and rows without
    /// accelerometer values seen.
    public private(set) var skipped = SkippedRows()
    /// The 1-based number of the line read last (0 before the first line).
    public private(set) var line = 0

    private let source: ByteSource
    private var buffer: ChunkBuffer
    private var start = 0
    private var end = 0
    private var sourceOffset = 0
    private var sourceExhausted = false
    private var layout: RowLayout
    /// The fast path's view of `layout` (nil: every row goes through `parseRow`).
    private var plan: FastRowPlan?
    /// Samples of the plain rows after `start`, parsed ahead in one go by the fast path
    /// (``parsePlainLines(_:_:_:after:into:)``) and handed out by `next()` one by one, with
    /// `line` counted as they are. Rows stop at the first row that is not plain.
    private var ahead: [AccelerationSample] = []
    private var aheadCount = 0
    private var aheadIndex = 0
    private let skipBadRows: Bool
    /// ``DetectedLayout/rowsMayLackAxes``: rows whose axis cells are all empty or NaN are passed
    /// over (counted in ``SkippedRows/withoutAcceleration``).
    private var rowsMayLackAxes = false
    /// ``Options/rowFastPath``.
    private let rowFastPath: Bool
    private var previousTime = Int64.min
    private var previousLine = 0

    /// Bytes taken from the file so far (for a progress bar; read ahead of parsing).
    public var bytesRead: Int { sourceOffset }
    /// The file size in bytes, or 0 when unknown (pipes).
    public var fileSize: Int { source.size }

    /// Opens `path` and detects its format from the first lines.
    public init(path: String, options: Options = .init()) throws(RecordingError) {
        try self.init(source: ByteSource.openFile(path: path), name: path, options: options)
    }

    /// Reads a recording held in memory; `name` stands for the path in errors and is used,
    /// like a file name, to tell Sensor Logger and phyphox files apart.
    public init(bytes: [UInt8], name: String = "<memory>", options: Options = .init()) throws(RecordingError)
    {
        try self.init(
            source: .memory(bytes, maximumRead: max(options.maximumRead, 1)), name: name, options: options)
    }

    private init(source: ByteSource, name: String, options: Options) throws(RecordingError) {
        self.source = source
        path = name
        skipBadRows = options.skipBadRows
        rowFastPath = options.rowFastPath
        buffer = ChunkBuffer(capacity: max(options.bufferSize, 16))
        // Placeholders until detection has run.
        format = .stepgate
        unit = .g
        gravityIncluded = true
        layout = RowLayout(
            separator: 44, timeColumn: 0, xColumn: 1, yColumn: 2, zColumn: 3, lastColumn: 3, timeShift: 9,
            perG: 1, columnNames: [])
        try detect(options: options)
    }

    /// Counts the samples of a file without keeping them (for benchmarks and `--dry-run`).
    public static func countSamples(path: String, options: Options = .init()) throws(RecordingError) -> (
        samples: Int, bytes: Int
    ) {
        var reader = try RecordingReader(path: path, options: options)
        var samples = 0
        // In batches, as a replay reads (ReadAhead).
        let batch = UnsafeMutablePointer<AccelerationSample>.allocate(capacity: 4096)
        defer { batch.deallocate() }
        while true {
            var count = 0
            let more = try reader.read(into: batch, capacity: 4096, count: &count)
            samples += count
            if !more { break }
        }
        return (samples, reader.bytesRead)
    }

    /// Reads every remaining sample into an array.
    public mutating func readAll() throws(RecordingError) -> [AccelerationSample] {
        var samples: [AccelerationSample] = []
        while let sample = try next() { samples.append(sample) }
        return samples
    }

    /// The next sample, or nil at the end of the file.
    ///
    /// Throws on the first bad row, unless ``Options/skipBadRows`` is set, in which case
    /// bad rows are counted in ``skipped`` and reading goes on.
    public mutating func next() throws(RecordingError) -> AccelerationSample? {
        while true {
            if aheadIndex < aheadCount { return takeAhead() }
            // The fast path: plain rows straight from the buffer, each one's end found by
            // parsing it.
            if plan != nil && start < end {
                // Out of `self` while parsing into it (swapped, so no copy is made).
                var batch: [AccelerationSample] = []
                swap(&batch, &ahead)
                let count = batch.withUnsafeMutableBufferPointer { samples in
                    parseAhead(into: samples.baseAddress!, capacity: samples.count)
                }
                swap(&batch, &ahead)
                if count > 0 {
                    aheadCount = count
                    aheadIndex = 0
                    continue
                }
            }
            return try nextRow()
        }
    }

    /// The next sample parsed ahead and not handed out yet (`aheadIndex < aheadCount`), with
    /// the line it came from accounted for.
    @inline(__always)
    private mutating func takeAhead() -> AccelerationSample {
        let sample = ahead[aheadIndex]
        aheadIndex &+= 1
        line &+= 1
        previousTime = sample.timestamp
        previousLine = line
        return sample
    }

    /// Reads samples into `samples` from `count` on, until `capacity` (then true) or the end
    /// of the file (then false); `count` says how many there are, also when a bad row throws
    /// (the samples before it stay). The same samples, errors, ``line`` and ``skipped`` as
    /// calling ``next()`` that many times, without its per-sample work: plain rows are parsed
    /// straight into `samples`.
    public mutating func read(
        into samples: UnsafeMutablePointer<AccelerationSample>, capacity: Int, count: inout Int
    ) throws(RecordingError) -> Bool {
        while count < capacity {
            // Samples next() parsed ahead and has not handed out yet.
            if aheadIndex < aheadCount {
                (samples + count).initialize(to: takeAhead())
                count &+= 1
                continue
            }
            if plan != nil && start < end {
                let parsed = parseAhead(into: samples + count, capacity: capacity &- count)
                if parsed > 0 {
                    count &+= parsed
                    line &+= parsed
                    previousTime = samples[count &- 1].timestamp
                    previousLine = line
                    continue
                }
            }
            guard let sample = try nextRow() else { return false }
            (samples + count).initialize(to: sample)
            count &+= 1
        }
        return true
    }

    /// The fast path: plain rows from the unread bytes, parsed into `samples` (up to
    /// `capacity`, at least 1) while they last and time does not go back, and their bytes taken
    /// (the caller counts their lines). Returns how many; 0 when the next row is not plain or
    /// its line ending is not in the buffer yet. Only with a plan.
    @inline(__always)
    private mutating func parseAhead(into samples: UnsafeMutablePointer<AccelerationSample>, capacity: Int)
        -> Int
    {
        guard let plan else { return 0 }
        let (count, taken) = parsePlainLines(
            UnsafePointer(buffer.pointer + start), end &- start, plan, after: previousTime,
            into: UnsafeMutableBufferPointer(start: samples, count: capacity))
        start &+= taken
        return count
    }

    /// The next sample the slow way: the next line found first, then parsed by
    /// ``parsePlainRow(_:_:_:)`` or ``parseRow(_:_:_:)``; blank lines skipped, bad rows
    /// thrown or skipped. Nil at the end of the file.
    private mutating func nextRow() throws(RecordingError) -> AccelerationSample? {
        while true {
            guard let range = try nextLine() else { return nil }
            let base = UnsafePointer(buffer.pointer + range.lowerBound)
            var count = range.count
            if count > 0 && base[count &- 1] == 13 { count &-= 1 }
            if count == 0 {
                skipped.blankLines += 1
                continue
            }
            if let plan, let sample = parsePlainRowOutlined(base, count, plan),
                sample.timestamp >= previousTime
            {
                previousTime = sample.timestamp
                previousLine = line
                return sample
            }
            switch parseRowOutlined(base, count, layout) {
            case .sample(let sample):
                if sample.timestamp >= previousTime {
                    previousTime = sample.timestamp
                    previousLine = line
                    return sample
                }
                try reject(timeWentBackwards(sample.timestamp))
            case .failure(let failure):
                if UnsafeBufferPointer(start: base, count: count).allSatisfy({ $0 == 32 || $0 == 9 }) {
                    skipped.blankLines += 1
                    continue
                }
                if rowsMayLackAxes && lacksAxes(base, count) {
                    skipped.recordWithoutAcceleration(line: line)
                    continue
                }
                try reject(error(for: failure, base, count))
            }
        }
    }

    private mutating func reject(_ error: RecordingError) throws(RecordingError) {
        guard skipBadRows, let reason = SkippedRows.Reason(error.kind) else { throw error }
        skipped.record(reason, error)
    }

    // MARK: - Lines

    /// The byte range (in `buffer`) of the next line without its `\n`, or nil at the end.
    @inline(__always)
    private mutating func nextLine() throws(RecordingError) -> Range<Int>? {
        while true {
            if start < end, let hit = memchr(buffer.pointer + start, 10, end &- start) {
                let newline = UnsafeMutableRawPointer(buffer.pointer).distance(to: hit)
                let lineStart = start
                start = newline &+ 1
                line &+= 1
                return lineStart..<newline
            }
            if sourceExhausted {
                if start < end {
                    let lineStart = start
                    start = end
                    line &+= 1
                    return lineStart..<end
                }
                return nil
            }
            try refill()
        }
    }

    /// Moves unread bytes to the front of the buffer and reads more. Handles a line
    /// longer than the buffer: throws, or (skipping bad rows) drops it.
    @inline(never)
    private mutating func refill() throws(RecordingError) {
        compact()
        if end == buffer.capacity {
            let error = RecordingError(
                kind: .lineTooLong, path: path, line: line + 1,
                expected: "a line of at most \(buffer.capacity) bytes", found: "a longer line")
            try reject(error)
            try discardLongLine()
            return
        }
        let n = try source.readChunk(
            into: buffer.pointer + end, count: buffer.capacity - end, at: sourceOffset, path: path)
        if n == 0 {
            sourceExhausted = true
        } else {
            end += n
            sourceOffset += n
        }
        markEnd()
    }

    /// Makes the buffer ours (copy-on-write) and moves unread bytes to its front.
    private mutating func compact() {
        if !isKnownUniquelyReferenced(&buffer) { buffer = buffer.copy() }
        if start > 0 {
            let pending = end - start
            if pending > 0 { memmove(buffer.pointer, buffer.pointer + start, pending) }
            start = 0
            end = pending
        }
        markEnd()
    }

    /// Writes a 0 byte after the unread bytes (in the padding when the buffer is full): the
    /// row fast path reads digits up to a non-digit without checking where the bytes end
    /// (``parsePlainLine(_:_:_:)``). Only after `compact()`, with the buffer ours.
    private mutating func markEnd() {
        buffer.pointer[end] = 0
    }

    /// Reads until the buffer is full or the source is exhausted (once, before sampling rows).
    private mutating func fillBuffer() throws(RecordingError) {
        compact()
        while !sourceExhausted && end < buffer.capacity {
            let n = try source.readChunk(
                into: buffer.pointer + end, count: buffer.capacity - end, at: sourceOffset, path: path)
            if n == 0 {
                sourceExhausted = true
            } else {
                end += n
                sourceOffset += n
            }
        }
        markEnd()
    }

    /// Drops bytes up to and including the next newline (or to the end of the file).
    private mutating func discardLongLine() throws(RecordingError) {
        line += 1
        start = 0
        end = 0
        while true {
            let n = try source.readChunk(
                into: buffer.pointer, count: buffer.capacity, at: sourceOffset, path: path)
            if n == 0 {
                sourceExhausted = true
                markEnd()
                return
            }
            sourceOffset += n
            if let hit = memchr(buffer.pointer, 10, n) {
                start = UnsafeMutableRawPointer(buffer.pointer).distance(to: hit) + 1
                end = n
                markEnd()
                return
            }
        }
    }

    // MARK: - Detection

    private mutating func detect(options: Options) throws(RecordingError) {
        var separatorHint: UInt8?
        var headerLine: [UInt8] = []
        var headerRange = 0..<0
        var headerLineNumber = 0
        while true {
            guard let range = try nextLine() else {
                throw RecordingError(
                    kind: .emptyFile, path: path, line: nil, expected: "a header line or data rows",
                    found: sourceOffset == 0 ? "no bytes" : "only blank lines")
            }
            var bytes = Array(
                UnsafeBufferPointer(start: buffer.pointer + range.lowerBound, count: range.count))
            if line == 1 && bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes.removeFirst(3) }
            while let last = bytes.last, last == 13 || last == 32 || last == 9 { bytes.removeLast() }
            if bytes.isEmpty { continue }
            let lower = bytes.map { $0 | ($0 >= 65 && $0 <= 90 ? 0x20 : 0) }
            if separatorHint == nil && lower.starts(with: Array("sep=".utf8)) && bytes.count <= 6 {
                separatorHint = bytes.count > 4 ? bytes[4] : UInt8(ascii: ",")
                continue
            }
            headerLine = bytes
            headerRange = range
            headerLineNumber = line
            break
        }
        if FormatDetection.isBinary(headerLine) {
            throw RecordingError(
                kind: .notText, path: path, line: headerLineNumber,
                expected:
                    "CSV text (a StepGate, Bangle.js, Oxford, phyphox, Sensor Logger, Physics Toolbox, "
                    + "AndroSensor or SensorLog export, or columns named with --columns)",
                found: "binary data")
        }
        let detected = try FormatDetection.detect(
            line: headerLine, lineNumber: headerLineNumber, separatorHint: separatorHint, path: path,
            forced: options.format, columns: options.columns)
        if detected.firstLineIsData {
            // Oxford has no header: read the examined line again as the first row.
            start = headerRange.lowerBound
            line -= 1
        }
        format = detected.format
        layout = detected.layout
        rowsMayLackAxes = detected.rowsMayLackAxes
        // Sample the first rows from a full buffer, however the source delivers its bytes.
        try fillBuffer()

        // Sensor Logger: `time` damaged by Excel ("1,70136286270131E+018") → seconds_elapsed.
        if let secondsColumn = detected.secondsElapsedColumn,
            let first = peekRows(limit: 1).first,
            !first.timeIsInteger
        {
            layout.timeColumn = secondsColumn
            layout.timeShift = 9
            layout.lastColumn = max(layout.xColumn, layout.yColumn, layout.zColumn, secondsColumn)
        }

        var needsMagnitude = false
        if case .bangleByMagnitude = detected.unit { needsMagnitude = true }
        var guessesGravity = false
        if case .byData = detected.gravity, options.gravityIncluded == nil { guessesGravity = true }
        let rawMagnitude = needsMagnitude || guessesGravity ? meanRawMagnitude() : nil

        switch detected.unit {
        case .fixed(let fixed):
            unit = fixed
        case .bangleByMagnitude:
            unit = (rawMagnitude ?? 8192) > 64 ? .counts(perG: 8192) : .g
        }
        if let forced = options.unit { unit = forced }
        layout.perG = unit.perG

        if let forced = options.gravityIncluded {
            gravityIncluded = forced
        } else {
            switch detected.gravity {
            case .included:
                gravityIncluded = true
            case .removed:
                gravityIncluded = false
            case .byData:
                // Included when the mean magnitude of the first rows is close to 1 g. (Their
                // mean vector would tell gravity from a hard walk's linear acceleration, whose
                // mean magnitude can be 1 g too; docs/detector.md, *Gravity-removed input*, says
                // why the guess is left as it is.)
                gravityIncluded = abs((rawMagnitude ?? unit.perG) / unit.perG - 1) < 0.25
                gravityGuessed = rawMagnitude != nil
            }
        }
        plan = options.rowFastPath ? FastRowPlan(layout) : nil
        if plan != nil {
            ahead = Array(repeating: AccelerationSample(timestamp: 0, x: 0, y: 0, z: 0), count: 128)
        }
    }

    private struct PeekedRow {
        var sample: AccelerationSample
        /// Whether the time cell is an integer; worked out only when peeking at one row.
        var timeIsInteger: Bool
    }

    /// Parses up to `limit` complete rows already in the buffer, without consuming them,
    /// with the axis values left in the file's own unit.
    private func peekRows(limit: Int) -> [PeekedRow] {
        var rows: [PeekedRow] = []
        var raw = layout
        raw.perG = 1
        var position = start
        let base = UnsafePointer(buffer.pointer)
        // The fast path here too: the 200 rows sampled were most of a small file's time.
        let fast = rowFastPath ? FastRowPlan(raw) : nil
        while rows.count < limit && position < end {
            var lineEnd = end
            if let hit = memchr(base + position, 10, end - position) {
                lineEnd = UnsafeRawPointer(base).distance(to: UnsafeRawPointer(hit))
            }
            if lineEnd == end && !sourceExhausted { break }
            var count = lineEnd - position
            if count > 0 && base[position + count - 1] == 13 { count -= 1 }
            var parsed: AccelerationSample?
            if let fast {
                // Integer rows (Bangle.js) by their own path: the line ends at `lineEnd`, the
                // buffer's 0 byte at `end` (markEnd) stops its digit runs.
                if fast.integerRows, let (sample, _) = parseIntegerLineOutlined(base + position, fast) {
                    parsed = sample
                } else {
                    parsed = parsePlainRowOutlined(base + position, count, fast)
                }
            }
            if parsed == nil, case .sample(let sample) = parseRow(base + position, count, raw) {
                parsed = sample
            }
            if let sample = parsed {
                // Only the first row's time cell is looked at (Sensor Logger's damaged `time`):
                // splitting 200 rows into cells was most of a small file's reading time.
                var isInteger = false
                if limit == 1 {
                    let timeCell = FormatDetection.cells(
                        Array(UnsafeBufferPointer(start: base + position, count: count)),
                        separator: raw.separator)
                    isInteger =
                        raw.timeColumn < timeCell.count
                        && timeCell[raw.timeColumn].allSatisfy {
                            ($0 >= 48 && $0 <= 57) || $0 == 32 || $0 == 45
                        }
                }
                rows.append(PeekedRow(sample: sample, timeIsInteger: isInteger))
            } else if count > 0 && limit == 1 {
                // The first row is bad: let the caller decide from it anyway.
                rows.append(
                    PeekedRow(
                        sample: AccelerationSample(timestamp: 0, x: 0, y: 0, z: 0), timeIsInteger: false))
            }
            position = lineEnd + 1
        }
        return rows
    }

    /// The mean magnitude of the first 200 rows in the file's own unit, or nil without rows.
    private func meanRawMagnitude() -> Double? {
        let rows = peekRows(limit: 200)
        if rows.isEmpty { return nil }
        var sum = 0.0
        for row in rows {
            let s = row.sample
            sum += (Double(s.x) * Double(s.x) + Double(s.y) * Double(s.y) + Double(s.z) * Double(s.z))
                .squareRoot()
        }
        return sum / Double(rows.count)
    }

    /// Whether the row's x, y and z cells are all there and all empty or `NaN`: in an export
    /// that writes every enabled sensor in one row, a row with no accelerometer reading.
    @inline(never)
    private func lacksAxes(_ base: UnsafePointer<UInt8>, _ count: Int) -> Bool {
        let cells = FormatDetection.cells(
            Array(UnsafeBufferPointer(start: base, count: count)), separator: layout.separator)
        return [layout.xColumn, layout.yColumn, layout.zColumn].allSatisfy { column in
            guard column < cells.count else { return false }
            let cell = cells[column].filter { $0 != 32 && $0 != 9 }
            return cell.isEmpty || cell.map { $0 | 0x20 } == Array("nan".utf8)
        }
    }

    // MARK: - Errors (cold)

    @inline(never)
    private func timeWentBackwards(_ time: Int64) -> RecordingError {
        RecordingError(
            kind: .timeWentBackwards, path: path, line: line, column: layout.column(layout.timeColumn),
            expected: "a time ≥ \(formatSeconds(previousTime)) s (line \(previousLine))",
            found: "\(formatSeconds(time)) s")
    }

    @inline(never)
    private func error(for failure: RowFailure, _ base: UnsafePointer<UInt8>, _ count: Int) -> RecordingError
    {
        let column = layout.column(failure.column)
        let cell = UnsafeBufferPointer(
            start: base + failure.cellStart, count: failure.cellEnd - failure.cellStart)
        let found = cell.isEmpty ? "an empty cell" : "'\(FormatDetection.display(cell, limit: 60))'"
        switch failure.kind {
        case .tooFewColumns:
            return RecordingError(
                kind: .tooFewColumns, path: path, line: line, column: column,
                expected: "at least \(layout.lastColumn + 1) columns",
                found: "\(failure.columnsFound) column\(failure.columnsFound == 1 ? "" : "s")")
        case .notANumber where spellsNonFinite(cell):
            return RecordingError(
                kind: .notFinite, path: path, line: line, column: column, expected: "a finite number",
                found: found)
        case .notANumber:
            var expected = "a number"
            if layout.separator != 44 && cell.contains(44) {
                expected += " (decimal commas are not supported)"
            }
            return RecordingError(
                kind: .notANumber, path: path, line: line, column: column, expected: expected, found: found)
        case .outOfRange:
            let expected =
                failure.column == layout.timeColumn
                ? "a time within ±292 years" : "a value within ±3.4e38 \(unit)"
            return RecordingError(
                kind: .outOfRange, path: path, line: line, column: column, expected: expected, found: found)
        }
    }
}

/// `-1.250000000` from nanoseconds, exactly.
func formatSeconds(_ nanoseconds: Int64) -> String {
    let magnitude = nanoseconds.magnitude
    let seconds = magnitude / 1_000_000_000
    let fraction = String(magnitude % 1_000_000_000)
    let padded = String(repeating: "0", count: 9 - fraction.count) + fraction
    return "\(nanoseconds < 0 ? "-" : "")\(seconds).\(padded)"
}

// MARK: - Row parsing (hot)

struct RowFailure {
    enum Kind {
        case tooFewColumns
        case notANumber
        case outOfRange
    }
    var kind: Kind
    /// 0-based column; for `tooFewColumns`, the number of columns found.
    var column: Int
    var cellStart: Int
    var cellEnd: Int
    /// For `tooFewColumns`: how many columns the row has.
    var columnsFound = 0
}

enum RowOutcome {
    case sample(AccelerationSample)
    case failure(RowFailure)
}

/// Parses one line (without its line ending) following `layout`.
@inline(__always)
func parseRow(_ p: UnsafePointer<UInt8>, _ count: Int, _ layout: RowLayout) -> RowOutcome {
    let separator = layout.separator
    var i = 0
    var column = 0
    var time: Int64 = 0
    var x = 0.0
    var y = 0.0
    var z = 0.0
    while true {
        let needed =
            column == layout.timeColumn || column == layout.xColumn || column == layout.yColumn
            || column == layout.zColumn
        if needed {
            let cellStart = i
            var scan: NumberScan
            var valid: Bool
            if i < count && p[i] == FormatDetection.quote {
                // Quoted cell (phyphox `""`, Excel `"1,70136286270131E+018"`).
                var close = i &+ 1
                while close < count && p[close] != FormatDetection.quote { close &+= 1 }
                scan = scanNumber(p, from: i &+ 1, to: close)
                valid = scan.hasDigits && scan.next == close && close < count
                i = close < count ? close &+ 1 : close
                while i < count && p[i] == 32 { i &+= 1 }
                valid = valid && (i == count || p[i] == separator)
            } else {
                scan = scanNumber(p, from: i, to: count)
                valid = scan.hasDigits && (scan.next == count || p[scan.next] == separator)
                i = scan.next
            }
            if !valid {
                return .failure(cellFailure(.notANumber, p, count, column, cellStart, separator))
            }
            if column == layout.timeColumn {
                guard let t = scan.number.scaledInt64(shift: layout.timeShift) else {
                    return .failure(cellFailure(.outOfRange, p, count, column, cellStart, separator))
                }
                time = t
            } else {
                let value = scan.number.doubleValue
                if column == layout.xColumn {
                    x = value
                } else if column == layout.yColumn {
                    y = value
                } else {
                    z = value
                }
            }
        } else {
            var inQuotes = false
            while i < count {
                let c = p[i]
                if c == FormatDetection.quote {
                    inQuotes.toggle()
                } else if c == separator && !inQuotes {
                    break
                }
                i &+= 1
            }
        }
        if column == layout.lastColumn { break }
        if i >= count {
            let missing = layout.firstNeededColumn(after: column)
            return .failure(
                RowFailure(
                    kind: .tooFewColumns, column: missing, cellStart: count, cellEnd: count,
                    columnsFound: column &+ 1))
        }
        i &+= 1
        column &+= 1
    }
    let perG = layout.perG
    let fx = Float(x / perG)
    let fy = Float(y / perG)
    let fz = Float(z / perG)
    if !(fx.isFinite && fy.isFinite && fz.isFinite) {
        let bad = !fx.isFinite ? layout.xColumn : !fy.isFinite ? layout.yColumn : layout.zColumn
        return .failure(outOfRangeColumn(p, count, bad, separator))
    }
    return .sample(AccelerationSample(timestamp: time, x: fx, y: fy, z: fz))
}

/// ``parseRow(_:_:_:)`` out of line, for rows the fast path left (it keeps `next()` small).
@inline(never)
func parseRowOutlined(_ p: UnsafePointer<UInt8>, _ count: Int, _ layout: RowLayout) -> RowOutcome {
    parseRow(p, count, layout)
}

/// A failure for the cell at `cellStart`, which ends at the next separator outside quotes.
@inline(never)
func cellFailure(
    _ kind: RowFailure.Kind, _ p: UnsafePointer<UInt8>, _ count: Int, _ column: Int, _ cellStart: Int,
    _ separator: UInt8
) -> RowFailure {
    var end = cellStart
    var inQuotes = false
    while end < count {
        if p[end] == FormatDetection.quote {
            inQuotes.toggle()
        } else if p[end] == separator && !inQuotes {
            break
        }
        end += 1
    }
    return RowFailure(kind: kind, column: column, cellStart: cellStart, cellEnd: end)
}

/// An out-of-range failure for column `target`, locating its cell again.
@inline(never)
func outOfRangeColumn(_ p: UnsafePointer<UInt8>, _ count: Int, _ target: Int, _ separator: UInt8)
    -> RowFailure
{
    var start = 0
    var column = 0
    var inQuotes = false
    var i = 0
    while i < count && column < target {
        if p[i] == FormatDetection.quote {
            inQuotes.toggle()
        } else if p[i] == separator && !inQuotes {
            column += 1
            start = i + 1
        }
        i += 1
    }
    return cellFailure(.outOfRange, p, count, target, start, separator)
}
