import Foundation
import SensorInput
public import StepDetection

/// A labelled recording read into memory once, for evaluating many configurations.
public struct TuningRecording: Sendable {
    public var labelled: LabelledRecording
    public var samples: [AccelerationSample]
    /// Length, in hours (first to last sample).
    public var hours: Double
    /// The time of every true step, in nanoseconds on the recording's clock, when the set has
    /// per-step truth (the Oxford foot-switch files); `nil` otherwise.
    public var stepTimes: [Int64]?
    /// Whether the samples hold total or gravity-removed acceleration.
    public var input: StepDetector.Input

    public init(
        labelled: LabelledRecording, samples: [AccelerationSample], stepTimes: [Int64]? = nil,
        input: StepDetector.Input = .totalAcceleration
    ) {
        self.labelled = labelled
        self.samples = samples
        self.input = input
        let span = samples.count > 1 ? samples[samples.count - 1].timestamp &- samples[0].timestamp : 0
        hours = Double(span) / 3.6e12
        self.stepTimes = stepTimes
    }

    /// Reads the recording, and its per-step truth when a `stepcounter.csv` lies beside it (the
    /// Oxford foot switches) or a `steps.csv` in its folder lists its steps.
    public static func load(_ labelled: LabelledRecording) throws -> TuningRecording {
        var reader = try labelled.reading {
            try RecordingReader(path: labelled.path, options: .init(format: labelled.format))
        }
        var samples = try labelled.reading { try reader.readAll() }
        let truthPath = StepTruth.companionPath(of: labelled.path)
        var times: [Int64]?
        if let truthPath, FileManager.default.fileExists(atPath: truthPath) {
            times = try StepTruth.read(path: truthPath)
        } else {
            times = try StepTruth.listed(for: labelled.path)
        }
        if let stretch = labelled.stretch, let first = samples.first?.timestamp,
            let last = samples.last?.timestamp
        {
            let from = first &+ Int64((stretch.lowerBound * 1e9).rounded())
            let to = first &+ Int64((stretch.upperBound * 1e9).rounded())
            samples.removeAll { $0.timestamp < from || $0.timestamp > to }
            times = times?.filter { $0 >= from && $0 <= to }
            if samples.count < 2 {
                let length = LabelledSet.shortDecimal((Double(last &- first) / 1e8).rounded() / 10)
                let message =
                    "\(labelled.name): the stretch holds fewer than two samples (the file is \(length) s long)"
                throw labelled.origin.map { LabelledSetError(path: $0.path, line: $0.line, message: message) }
                    ?? LabelledSetError(path: labelled.path, message: message)
            }
        }
        return TuningRecording(
            labelled: labelled, samples: samples, stepTimes: times,
            input: reader.gravityIncluded ? .totalAcceleration : .linearAcceleration)
    }

    /// Evaluation of this recording given a count.
    public func result(counted: Int) -> EvaluationResult {
        EvaluationResult(recording: labelled, counted: counted, hours: hours, samples: samples.count)
    }
}

/// Per-step truth from a foot-switch file (the Oxford data set's `stepcounter.csv`: no header,
/// `timestamp_ns, foot1, foot2`): every 0→1 transition of either switch after the first row is
/// one step.
public enum StepTruth {
    /// `…/stepcounter.csv` beside an `…/accelerometer.csv`; `nil` for other names.
    public static func companionPath(of path: String) -> String? {
        guard path.hasSuffix("accelerometer.csv") else { return nil }
        return String(path.dropLast("accelerometer.csv".count)) + "stepcounter.csv"
    }

    /// Parses a foot-switch file.
    public static func parse(text: String, path: String) throws(LabelledSetError) -> [Int64] {
        var times: [Int64] = []
        var previous: (Bool, Bool)?
        var number = 0
        for line in text.split(
            omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" })
        {
            number += 1
            let trimmed = line.hasSuffix("\r") ? line.dropLast() : line
            if trimmed.isEmpty { continue }
            let cells = trimmed.split(separator: ",", omittingEmptySubsequences: false)
            guard cells.count >= 3, let time = Int64(cells[0].trimmingSpaces()),
                let a = Int(cells[1].trimmingSpaces()), let b = Int(cells[2].trimmingSpaces()),
                (0...1).contains(a), (0...1).contains(b)
            else {
                throw LabelledSetError(
                    path: path, line: number,
                    message: "expected timestamp_ns,foot1,foot2 with switches 0 or 1, found '\(trimmed)'")
            }
            let state = (a == 1, b == 1)
            if let previous {
                if state.0 && !previous.0 { times.append(time) }
                if state.1 && !previous.1 { times.append(time) }
            }
            previous = state
        }
        return times
    }

    /// The step times a `steps.csv` in the recording's folder lists for it (columns
    /// `path,step_time_s`: the file's name and each step's time on the file's own clock, in
    /// seconds, as the ipol-waist set gives every footstep's initial contact); `nil` when there
    /// is no such file or it lists no step of this recording.
    public static func listed(for recordingPath: String) throws(LabelledSetError) -> [Int64]? {
        let slash = recordingPath.lastIndex(of: "/")
        let folder = slash.map { String(recordingPath[...$0]) } ?? ""
        let name = slash.map { String(recordingPath[recordingPath.index(after: $0)...]) } ?? recordingPath
        let path = folder + "steps.csv"
        guard name != "steps.csv", let data = FileManager.default.contents(atPath: path) else { return nil }
        var times: [Int64] = []
        for (index, line) in String(decoding: data, as: UTF8.self).split(
            whereSeparator: { $0 == "\n" || $0 == "\r\n" }
        ).enumerated() {
            let row = line
            if index == 0 {
                guard row == "path,step_time_s" else {
                    throw LabelledSetError(
                        path: path, line: 1, message: "expected the header path,step_time_s")
                }
                continue
            }
            let cells = row.split(separator: ",", omittingEmptySubsequences: false)
            guard cells.count == 2, let seconds = Double(cells[1]), seconds.isFinite, seconds >= 0 else {
                throw LabelledSetError(
                    path: path, line: index + 1, message: "expected FILE,SECONDS, found '\(row)'")
            }
            if cells[0] == name { times.append(Int64((seconds * 1e9).rounded())) }
        }
        return times.isEmpty ? nil : times.sorted()
    }

    /// Reads a foot-switch file.
    public static func read(path: String) throws(LabelledSetError) -> [Int64] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw LabelledSetError(path: path, message: "cannot read the file")
        }
        return try parse(text: String(decoding: data, as: UTF8.self), path: path)
    }
}

extension Substring {
    func trimmingSpaces() -> String { String(self).trimmingSpaces() }
}

/// Expands the sets given on the command line.
public enum LabelledSets {
    /// Manifests, folders whose file names carry the truth, and folders of Oxford-style
    /// recordings (`accelerometer.csv` with a `stepcounter.csv` beside it), mixed freely.
    /// `warn` receives a line for each file that cannot be scored.
    public static func load(_ sets: [String], warn: (String) -> Void) throws -> [LabelledRecording] {
        var recordings: [LabelledRecording] = []
        for set in sets {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: set, isDirectory: &isDirectory) else {
                throw LabelledSetError(path: set, message: "no such file or folder")
            }
            var loaded: [LabelledRecording]
            if isDirectory.boolValue {
                loaded = try folder(set, warn: warn)
            } else {
                guard let data = FileManager.default.contents(atPath: set) else {
                    throw LabelledSetError(path: set, message: "cannot read the file")
                }
                guard let text = String(validating: data, as: UTF8.self), !text.contains("\0") else {
                    throw LabelledSetError(
                        path: set,
                        message: "not a text manifest: expected a CSV manifest (columns "
                            + "\(LabelledSet.requiredColumns.joined(separator: ", "))…) or a folder, found binary data"
                    )
                }
                loaded = try LabelledSet.manifest(text: text, path: set)
            }
            let groups = try splitGroups(besideManifest: set)
            let name = setName(set)
            let formats = Set(loaded.map { $0.format?.rawValue ?? "" })
            for i in loaded.indices {
                loaded[i].set =
                    formats.count > 1 ? name + "/" + (loaded[i].format?.rawValue ?? "detected") : name
                loaded[i].session = session(of: loaded[i], groups: groups)
            }
            recordings += loaded
        }
        return recordings
    }

    /// A set's display name: the folder's name, or the manifest's folder's name.
    static func setName(_ argument: String) -> String {
        var path = argument
        if !path.hasPrefix("/") { path = FileManager.default.currentDirectoryPath + "/" + path }
        var parts = path.split(separator: "/").map(String.init).filter { $0 != "." }
        if let last = parts.last, last.lowercased().hasSuffix(".csv") && parts.count > 1 {
            parts.removeLast()
        }
        return parts.last ?? argument
    }

    /// A recording's session: its `split_group` in a `detail.csv` beside the manifest (name
    /// without `.csv`); else, for Oxford-style recordings (one folder per session), the folder;
    /// else the file itself.
    static func session(of recording: LabelledRecording, groups: [String: String]) -> String {
        var file = recording.name
        if let slash = file.lastIndex(of: "/") { file = String(file[file.index(after: slash)...]) }
        let stem = file.lowercased().hasSuffix(".csv") ? String(file.dropLast(4)) : file
        if let group = groups[stem] { return recording.set + ":" + group }
        if file == "accelerometer.csv" { return String(recording.path.dropLast(file.count)) }
        return recording.path
    }

    /// `name → split_group` from a `detail.csv` beside a manifest (empty when there is none).
    static func splitGroups(besideManifest path: String) throws -> [String: String] {
        guard path.lowercased().hasSuffix(".csv") else { return [:] }
        let detail = LabelledSet.directory(of: path) + "detail.csv"
        guard let data = FileManager.default.contents(atPath: detail) else { return [:] }
        let lines = String(decoding: data, as: UTF8.self).split(whereSeparator: { $0 == "\n" || $0 == "\r\n" }
        )
        guard let header = lines.first else { return [:] }
        let columns = LabelledSet.splitCSV(String(header)).map { $0.trimmingSpaces().lowercased() }
        guard let nameColumn = columns.firstIndex(of: "name"),
            let groupColumn = columns.firstIndex(of: "split_group")
        else { return [:] }
        var groups: [String: String] = [:]
        for line in lines.dropFirst() {
            let cells = LabelledSet.splitCSV(String(line))
            guard cells.count > max(nameColumn, groupColumn) else { continue }
            groups[cells[nameColumn].trimmingSpaces()] = cells[groupColumn].trimmingSpaces()
        }
        return groups
    }

    static func folder(_ set: String, warn: (String) -> Void) throws -> [LabelledRecording] {
        let base = set.hasSuffix("/") ? set : set + "/"
        guard let enumerator = FileManager.default.enumerator(atPath: set) else {
            throw LabelledSetError(path: set, message: "cannot list the folder")
        }
        var files: [String] = []
        for case let relative as String in enumerator where relative.lowercased().hasSuffix(".csv") {
            files.append(relative)
        }
        var recordings: [LabelledRecording] = []
        for relative in files.sorted() {
            let name = relative.split(separator: "/").last.map(String.init) ?? relative
            if name == "stepcounter.csv" || name == "manifest.csv" || name == "stats.csv" { continue }
            if let truthPath = StepTruth.companionPath(of: base + relative),
                FileManager.default.fileExists(atPath: truthPath)
            {
                let truth = try StepTruth.read(path: truthPath).count
                let folderName = relative.split(separator: "/").dropLast().last.map(String.init) ?? ""
                recordings.append(
                    LabelledRecording(
                        path: base + relative, name: relative, format: nil,
                        placement: placement(fromName: folderName), kind: truth == 0 ? .nowalk : .walk,
                        truth: truth))
                continue
            }
            guard LabelledSet.truth(fromFileName: relative) != nil else {
                warn("\(base + relative): not scored: the file name carries no step count")
                continue
            }
            var recording = try LabelledSet.recording(fileNamed: base + relative)
            recording.name = relative
            recordings.append(recording)
        }
        return recordings
    }

    /// The carrying position named in an Oxford folder name (`Pixel_Jamie_Hard_BackPocket_1`).
    public static func placement(fromName name: String) -> String {
        let lower = name.lowercased()
        let known: [(String, String)] = [
            ("swingingarm", "hand-swinging"), ("inhand", "hand"), ("armband", "armband"),
            ("backpocket", "back-pocket"), ("frontpocket", "front-pocket"), ("neckpouch", "neck-pouch"),
            ("purse", "bag"), ("bag", "bag"), ("wrist", "wrist"),
        ]
        for (needle, placement) in known where lower.contains(needle) { return placement }
        return "unknown"
    }
}
