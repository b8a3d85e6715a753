import Foundation
import StepDetection
import Testing

@testable import SensorInput

/// The labelled recordings in `../shared/data` (see its README): every one must open,
/// detect as the manifest says, and give one sample per data line.
@Suite("Real recordings in ../shared/data")
struct SharedDataTests {
    struct Entry: Sendable, CustomStringConvertible {
        var path: String
        var format: String
        var description: String { path }
    }

    static let manifest: [Entry] = {
        guard
            let text = try? String(
                contentsOf: sharedData.appendingPathComponent("manifest.csv"), encoding: .utf8)
        else { return [] }
        return text.split(whereSeparator: \.isNewline).dropFirst().compactMap { line in
            let cells = line.split(separator: ",", omittingEmptySubsequences: false)
            guard cells.count >= 2 else { return nil }
            return Entry(path: String(cells[0]), format: String(cells[1]))
        }
    }()

    @Test(.enabled(if: sharedDataAvailable, "../shared/data not present"))
    func manifestIsComplete() {
        #expect(Self.manifest.count == 74)
    }

    @Test(.enabled(if: sharedDataAvailable, "../shared/data not present"), arguments: manifest)
    func recordingReadsCompletely(entry: Entry) throws {
        let path = sharedData.appendingPathComponent(entry.path).path
        var reader = try RecordingReader(path: path)
        let expectedFormat: RecordingFormat = entry.format == "oxford-ns" ? .oxford : .bangle
        #expect(reader.format == expectedFormat)
        #expect(reader.unit == (expectedFormat == .oxford ? .metersPerSecondSquared : .counts(perG: 8192)))
        #expect(reader.gravityIncluded)
        var count = 0
        var previous = Int64.min
        var magnitude = 0.0
        while let sample = try reader.next() {
            #expect(sample.timestamp >= previous)
            previous = sample.timestamp
            magnitude += Double(sample.magnitude)
            count += 1
        }
        let lines = try nonEmptyLineCount(path)
        #expect(count == lines - (expectedFormat == .bangle ? 1 : 0))
        #expect(reader.skipped.total == 0)
        #expect(reader.bytesRead == reader.fileSize)
        // Gravity included, in g: the mean magnitude is close to 1.
        #expect(abs(magnitude / Double(count) - 1) < 0.2)
    }

    static let formatsFolder = sharedData.appendingPathComponent("formats")

    @Test(
        .enabled(if: sharedDataAvailable, "../shared/data not present"),
        arguments: [
            // 32 columns, `sep=;`, NaN and empty cells in other columns, no final newline.
            ("androsensor/tez4__fhnw-ds-cdl1__walking_test_jg.csv", RecordingFormat.androSensor, 5427),
            // 82 columns, 16.8 Hz.
            ("sensorlog/tez4__fhnw-ds-cdl1__2022-09-27_12_59_37_nz_iOS_device.csv", .sensorLog, 1683),
        ])
    func phoneExportReads(file: String, format: RecordingFormat, rows: Int) throws {
        let path = Self.formatsFolder.appendingPathComponent(file).path
        var reader = try RecordingReader(path: path)
        #expect(reader.format == format)
        #expect(reader.unit == (format == .androSensor ? .metersPerSecondSquared : .g))
        #expect(reader.gravityIncluded)
        let samples = try reader.readAll()
        #expect(samples.count == rows)
        #expect(try nonEmptyLineCount(path) == rows + (format == .androSensor ? 2 : 1))
        #expect(reader.skipped.total == 0)
        #expect(reader.skipped.withoutAcceleration == 0)
        #expect(zip(samples, samples.dropFirst()).allSatisfy { $0.timestamp <= $1.timestamp })
        // In g with gravity, walking: about 1.1 to 1.3.
        let mean = samples.map { Double($0.magnitude) }.reduce(0, +) / Double(samples.count)
        #expect(mean > 1 && mean < 1.4, "\(mean)")
    }

    @Test(
        .enabled(if: sharedDataAvailable, "../shared/data not present"),
        arguments: [
            ("tez4__fhnw-ds-cdl1__physics_toolbox_suite_g-force_meter.csv", 1342),
            ("tez4__fhnw-ds-cdl1__physics_toolbox_suite_multi_record.csv", 5688),
        ])
    func physicsToolboxReads(file: String, rows: Int) throws {
        let path = Self.formatsFolder.appendingPathComponent("physicstoolbox/\(file)").path
        var reader = try RecordingReader(path: path)
        #expect(reader.format == .physicsToolbox)
        #expect(reader.unit == .g)
        let samples = try reader.readAll()
        #expect(samples.count == rows)
        // In g with gravity: about 1 (the Multi Record walk is vigorous, about 1.8).
        let mean = samples.map { Double($0.magnitude) }.reduce(0, +) / Double(samples.count)
        #expect(mean > 0.8 && mean < 2.5)
    }

    /// Prints parse speed (no assertion: timing depends on the machine and build mode).
    @Test(.enabled(if: sharedDataAvailable, "../shared/data not present"))
    func printsParseSpeed() throws {
        let path = sharedData.appendingPathComponent("bangle-wrist/uncontrolled/10134.csv").path
        let clock = ContinuousClock()
        var result = (samples: 0, bytes: 0)
        let elapsed = try clock.measure { result = try RecordingReader.countSamples(path: path) }
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        print(
            "10134.csv: \(result.samples) samples, \(Int(Double(result.bytes) / seconds / 1e6)) MB/s (this build)"
        )
    }
}
