import Foundation
import StepDetection
import StepGateTestSupport

@testable import SensorInput

/// Writes `contents` to a fresh temporary folder under `name` and returns the path.
func temporaryFile(_ name: String, bytes: [UInt8]) throws -> String {
    let folder = try TemporaryFolders.make("sensorinput")
    let url = folder.appendingPathComponent(name)
    try Data(bytes).write(to: url)
    return url.path
}

func temporaryFile(_ name: String, _ contents: String) throws -> String {
    try temporaryFile(name, bytes: Array(contents.utf8))
}

/// Reads `contents` from a temporary file named `name`.
func readFile(
    _ contents: String, name: String = "walk.csv", options: RecordingReader.Options = .init()
) throws -> (reader: RecordingReader, samples: [AccelerationSample]) {
    var reader = try RecordingReader(path: try temporaryFile(name, contents), options: options)
    let samples = try reader.readAll()
    return (reader, samples)
}

/// Reads `contents` in memory, under the name `walk.csv` for messages.
func readMemory(
    _ contents: String, name: String = "walk.csv", options: RecordingReader.Options = .init()
) throws(RecordingError) -> (reader: RecordingReader, samples: [AccelerationSample]) {
    var reader = try RecordingReader(bytes: Array(contents.utf8), name: name, options: options)
    let samples = try reader.readAll()
    return (reader, samples)
}

/// The error reading `contents` in memory throws, or nil.
func readError(
    _ contents: String, name: String = "walk.csv", options: RecordingReader.Options = .init()
) -> RecordingError? {
    do {
        _ = try readMemory(contents, name: name, options: options)
        return nil
    } catch {
        return error
    }
}

/// The package root, derived from this file's path.
let packageRoot = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// `../shared/data` next to the package root, where the labelled recordings live.
let sharedData = packageRoot.deletingLastPathComponent().appendingPathComponent("shared/data")

let sharedDataAvailable = FileManager.default.fileExists(
    atPath: sharedData.appendingPathComponent("manifest.csv").path)

/// Lines in a file that hold something (what `wc -l` counts, plus an unterminated last line).
func nonEmptyLineCount(_ path: String) throws -> Int {
    let data = try Data(contentsOf: URL(fileURLWithPath: path))
    return data.split(separator: 10, omittingEmptySubsequences: true)
        .filter { !($0.count == 1 && $0.first == 13) }.count
}
