import CoreCommands
import Counting
import Foundation
import SensorInput
import StepDetection
import StepGateTestSupport
import Testing
import Tuning

@testable import StepGateCLI

/// Every recording in `../shared/data` and `samples/` counts exactly what
/// `Tests/PinnedCounts/pinned-counts.tsv` says under the default configuration, so a change
/// made for speed provably does not change what is counted. The table names the configuration
/// it was made with; after an intended change to the detector or its defaults, regenerate it
/// with `bash scripts/pin-counts.sh` and commit it with that change.
@Suite(.enabled(if: Fixtures.sharedDataAvailable, "../shared/data is not present"))
struct PinnedCountsTests {
    struct Row: Sendable {
        var path: String
        var format: String
        var samples: Int?
        var steps: Int?
    }

    struct Table: Sendable {
        var fingerprint: String
        var configuration: String
        var rows: [Row]
    }

    static let tablePath = Fixtures.packageRoot.appendingPathComponent("Tests/PinnedCounts/pinned-counts.tsv")
    static let regenerate = "regenerate with 'bash scripts/pin-counts.sh' if the change is intended"

    static func loadTable() throws -> Table {
        let text = try String(contentsOf: tablePath, encoding: .utf8)
        var fingerprint = ""
        var configuration = ""
        var rows: [Row] = []
        for (index, line) in text.split(separator: "\n").enumerated() {
            if line.hasPrefix("# configuration fingerprint: ") {
                fingerprint = String(line.dropFirst("# configuration fingerprint: ".count))
            } else if line.hasPrefix("# configuration: ") {
                configuration = String(line.dropFirst("# configuration: ".count))
            } else if !line.hasPrefix("#") {
                let cells = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
                guard cells.count == 4 else {
                    throw TableError(
                        "\(tablePath.path):\(index + 1): expected 4 tab-separated cells, found '\(line)'")
                }
                rows.append(
                    Row(path: cells[0], format: cells[1], samples: Int(cells[2]), steps: Int(cells[3])))
            }
        }
        return Table(fingerprint: fingerprint, configuration: configuration, rows: rows)
    }

    struct TableError: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    /// FNV-1a (64 bit) of the configuration line, as `scripts/pin-counts.sh` computes it.
    static func fingerprint(_ text: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// The default configuration as the script writes it: `stepgate config` without blanks.
    static var defaultConfiguration: String {
        String(encodeDetectorConfiguration(DetectorConfiguration()).filter { $0 != " " && $0 != "\n" })
    }

    @Test func tableWasMadeWithTheDefaultConfiguration() throws {
        let table = try Self.loadTable()
        #expect(
            table.fingerprint == Self.fingerprint(table.configuration),
            "the table's fingerprint line was edited")
        let current = Self.defaultConfiguration
        #expect(
            table.configuration == current,
            """
            pinned-counts.tsv was made with configuration \(table.fingerprint), but the default \
            configuration is now \(Self.fingerprint(current)); \(Self.regenerate)
            """)
    }

    @Test func tableListsEveryRecording() throws {
        let table = try Self.loadTable()
        let root = Fixtures.packageRoot.path + "/"
        var found: [String] = []
        for folder in [Fixtures.sharedData, Fixtures.samples] {
            let enumerator = FileManager.default.enumerator(atPath: folder.path)
            while let name = enumerator?.nextObject() as? String {
                let base = (name as NSString).lastPathComponent
                // Manifests and truth files are not recordings (ipol-waist/steps.csv is per-step truth).
                guard name.hasSuffix(".csv"),
                    !["manifest.csv", "detail.csv", "stats.csv", "stepcounter.csv"].contains(base),
                    name != "ipol-waist/steps.csv"
                else { continue }
                let path = folder.appendingPathComponent(name).standardizedFileURL.path
                found.append(
                    path.hasPrefix(root)
                        ? String(path.dropFirst(root.count)) : "../shared/data/" + name)
            }
        }
        #expect(table.rows.count >= 200)
        #expect(Set(found) == Set(table.rows.map(\.path)), "the recordings changed; \(Self.regenerate)")
    }

    /// Counts every pinned recording with the default detector; reports every difference.
    @Test func everyRecordingCountsAsPinned() throws {
        let table = try Self.loadTable()
        try #require(
            table.configuration == Self.defaultConfiguration,
            "the table was made with another configuration (\(table.fingerprint)); \(Self.regenerate)")
        var differences: [String] = []
        for row in table.rows {
            let path = Fixtures.packageRoot.appendingPathComponent(row.path).path
            let summary: RecordingSummary
            do {
                summary = try countSteps(inFile: path)
                try ReplayArguments.requireSamples(summary, file: path)
            } catch {
                if row.format != "unreadable" { differences.append("\(row.path): \(error)") }
                continue
            }
            let found = "\(summary.format.rawValue) \(summary.samples) samples \(summary.steps) steps"
            let pinned = "\(row.format) \(row.samples ?? -1) samples \(row.steps ?? -1) steps"
            if found != pinned { differences.append("\(row.path): pinned \(pinned), counted \(found)") }
        }
        #expect(
            differences.isEmpty,
            """
            \(differences.count) recordings count differently from pinned-counts.tsv (configuration \
            \(table.fingerprint)); \(Self.regenerate):
            \(differences.joined(separator: "\n"))
            """)
    }
}
