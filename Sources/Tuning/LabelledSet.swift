public import SensorInput

/// One recording with its true step count.
public struct LabelledRecording: Sendable, Hashable {
    /// What the recording holds, which decides how its error is scored.
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        /// Walking only: scored by absolute percentage error of the total.
        case walk
        /// A day with some walking: scored by absolute percentage error.
        case mixed
        /// No walking (drive, train, desk): scored by false steps per hour.
        case nowalk
    }

    /// The file to read.
    public var path: String
    /// The path as written in the manifest (or the file name), for reports.
    public var name: String
    /// Format from the manifest, or `nil` to detect it.
    public var format: RecordingFormat?
    /// Where the sensor was carried (`hand`, `wrist`, `back-pocket`, …), or `unknown`.
    public var placement: String
    public var kind: Kind
    /// The true number of steps.
    public var truth: Int
    /// The set it belongs to (a manifest or folder given on the command line; a manifest holding
    /// several formats is one set per format), for per-set scores and leave-one-set-out.
    public var set: String
    /// The recording session: recordings of one wearer's session stay in one fold together.
    public var session: String
    /// The stretch of the file that is the recording, in seconds from its first sample (a
    /// manifest's `start_s` and `end_s`), or `nil` for the whole file.
    public var stretch: ClosedRange<Double>?
    /// The manifest and line that named the recording, if a manifest did.
    public var origin: (path: String, line: Int)? {
        get { originPath.map { ($0, originLine) } }
        set {
            originPath = newValue?.path
            originLine = newValue?.line ?? 0
        }
    }
    private var originPath: String?
    private var originLine = 0

    /// Runs `body` (which reads the recording); an error it throws is reported at the manifest
    /// line that named the recording, so a missing or broken file can be found and fixed.
    public func reading<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch {
            guard let origin else { throw error }
            throw LabelledSetError(path: origin.path, line: origin.line, message: "\(name): \(error)")
        }
    }

    public init(
        path: String, name: String, format: RecordingFormat?, placement: String, kind: Kind, truth: Int,
        set: String = "", session: String = ""
    ) {
        self.path = path
        self.name = name
        self.format = format
        self.placement = placement
        self.kind = kind
        self.truth = truth
        self.set = set
        self.session = session.isEmpty ? path : session
    }
}

/// A problem with a labelled set: a manifest row, a file name without a count, a missing file.
public struct LabelledSetError: Error, Hashable, CustomStringConvertible {
    public var path: String
    public var line: Int?
    public var message: String

    public init(path: String, line: Int? = nil, message: String) {
        self.path = path
        self.line = line
        self.message = message
    }

    public var description: String { line.map { "\(path):\($0): \(message)" } ?? "\(path): \(message)" }
}

/// Reads labelled sets: manifests and folders whose file names carry the truth.
public enum LabelledSet {
    /// The columns a manifest must have (others, such as `device` and `truth_source`, are kept
    /// out of scoring).
    public static let requiredColumns = ["path", "kind", "truth_steps"]

    /// Parses a manifest CSV (the columns of `shared/data/manifest.csv`: `path, format,
    /// placement, device, kind, truth_steps, truth_source`). Paths are relative to the
    /// manifest's folder. `format` and `placement` are optional columns, and so are `start_s`
    /// and `end_s`: a row with them is the stretch of its file between those times, in seconds
    /// from the file's first sample (named `FILE#t=START,END`), so one long log can give
    /// several labelled recordings without being cut.
    public static func manifest(text: String, path: String) throws(LabelledSetError) -> [LabelledRecording] {
        let folder = directory(of: path)
        var lines = text.split(
            omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }
        )
        .map { $0.hasSuffix("\r") ? String($0.dropLast()) : String($0) }
        if let first = lines.first, first.hasPrefix("\u{FEFF}") { lines[0] = String(first.dropFirst()) }
        guard let header = lines.first, !header.isEmpty else {
            throw LabelledSetError(
                path: path, line: 1,
                message: "expected a header with columns \(requiredColumns.joined(separator: ", "))")
        }
        let columns = splitCSV(header).map { $0.trimmingSpaces().lowercased() }
        for required in requiredColumns where !columns.contains(required) {
            var found = columns.joined(separator: ", ")
            if found.count > 100 { found = String(found.prefix(100)) + "…" }
            throw LabelledSetError(
                path: path, line: 1,
                message: "missing column '\(required)' (found: \(found)); expected a manifest with the "
                    + "columns \(requiredColumns.joined(separator: ", ")) (a recording is not a labelled set: "
                    + "put it in a folder whose file names carry the true count, or count it with 'stepgate replay')"
            )
        }
        func index(_ name: String) -> Int? { columns.firstIndex(of: name) }
        var recordings: [LabelledRecording] = []
        for (offset, line) in lines.enumerated().dropFirst() where !line.trimmingSpaces().isEmpty {
            let number = offset + 1
            let cells = splitCSV(line)
            func cell(_ name: String) -> String? {
                guard let i = index(name), i < cells.count else { return nil }
                return cells[i].trimmingSpaces()
            }
            guard let relative = cell("path"), !relative.isEmpty else {
                throw LabelledSetError(
                    path: path, line: number, message: "column 'path': expected a file path")
            }
            guard let kindText = cell("kind"), let kind = LabelledRecording.Kind(rawValue: kindText) else {
                throw LabelledSetError(
                    path: path, line: number,
                    message: "column 'kind': expected walk, mixed or nowalk, found '\(cell("kind") ?? "")'")
            }
            guard let truthText = cell("truth_steps"), let truth = Int(truthText), truth >= 0 else {
                throw LabelledSetError(
                    path: path, line: number,
                    message:
                        "column 'truth_steps': expected a whole number ≥ 0, found '\(cell("truth_steps") ?? "")'"
                )
            }
            var format: RecordingFormat?
            if let text = cell("format"), !text.isEmpty {
                format = manifestFormat(text)
                if format == nil {
                    throw LabelledSetError(
                        path: path, line: number,
                        message:
                            "column 'format': expected one of \(RecordingFormat.named.map(\.rawValue).joined(separator: ", ")), oxford-ns, found '\(text)'"
                    )
                }
            }
            let placement = cell("placement").flatMap { $0.isEmpty ? nil : $0 } ?? "unknown"
            let full = relative.hasPrefix("/") ? relative : folder + relative
            var recording = LabelledRecording(
                path: full, name: relative, format: format, placement: placement, kind: kind, truth: truth)
            let start = cell("start_s") ?? ""
            let end = cell("end_s") ?? ""
            if !start.isEmpty || !end.isEmpty {
                guard let from = Double(start), let to = Double(end), from.isFinite, to.isFinite, from >= 0,
                    to > from
                else {
                    throw LabelledSetError(
                        path: path, line: number,
                        message:
                            "columns 'start_s', 'end_s': expected seconds from the file's first sample, 0 ≤ start < end, found '\(start)', '\(end)'"
                    )
                }
                recording.stretch = from...to
                recording.name = relative + "#t=" + shortDecimal(from) + "," + shortDecimal(to)
            }
            recording.origin = (path, number)
            recordings.append(recording)
        }
        return recordings
    }

    /// `120`, `12.5`: seconds as a manifest would write them.
    static func shortDecimal(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }

    /// Format names as manifests write them.
    static func manifestFormat(_ text: String) -> RecordingFormat? {
        if let format = RecordingFormat(name: text) { return format }
        switch text.lowercased() {
        case "oxford-ns", "android", "android-ns": return .oxford
        case "stepgate-csv": return .stepgate
        default: return nil
        }
    }

    /// The true count carried by a file name: `100_3.csv` → 100 (a leading number), else the
    /// last number field, `HughB-walk-1834.csv` → 1834, `drive-0.csv` → 0. `nil` when the name
    /// carries no count.
    public static func truth(fromFileName name: String) -> Int? {
        var stem = Substring(name)
        if let slash = stem.lastIndex(of: "/") { stem = stem[stem.index(after: slash)...] }
        if let dot = stem.lastIndex(of: "."), dot != stem.startIndex { stem = stem[..<dot] }
        let fields = stem.split(whereSeparator: { $0 == "_" || $0 == "-" || $0 == " " })
        if let first = fields.first, let value = Int(first), stem.first?.isNumber == true { return value }
        for field in fields.reversed() {
            if let value = Int(field) { return value }
        }
        return nil
    }

    /// A labelled recording for a file whose name carries its truth; kind `nowalk` when the
    /// truth is 0, else `walk`.
    public static func recording(fileNamed path: String) throws(LabelledSetError) -> LabelledRecording {
        guard let truth = truth(fromFileName: path) else {
            throw LabelledSetError(
                path: path,
                message: "the file name carries no step count (expected e.g. 100_3.csv or walk-1834.csv)")
        }
        let name = path.split(separator: "/").last.map(String.init) ?? path
        return LabelledRecording(
            path: path, name: name, format: nil, placement: "unknown", kind: truth == 0 ? .nowalk : .walk,
            truth: truth)
    }

    static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "" }
        return String(path[...slash])
    }

    /// Splits one CSV line, honouring double quotes.
    static func splitCSV(_ line: String) -> [String] {
        var cells: [String] = []
        var current = ""
        var quoted = false
        var iterator = line.makeIterator()
        while let c = iterator.next() {
            if c == "\"" {
                quoted.toggle()
            } else if c == "," && !quoted {
                cells.append(current)
                current = ""
            } else {
                current.append(c)
            }
        }
        cells.append(current)
        return cells
    }
}

extension String {
    func trimmingSpaces() -> String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" { s = s.dropLast() }
        return String(s)
    }
}
