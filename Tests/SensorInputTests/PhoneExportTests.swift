import Foundation
import StepDetection
import Testing

@testable import SensorInput

/// The cuts of real exports in `Exports/` (origin and licence in Exports/NOTICE.md).
func exportFixture(_ name: String) throws -> [UInt8] {
    let url = packageRoot.appendingPathComponent("Tests/SensorInputTests/Exports/\(name)")
    return Array(try Data(contentsOf: url))
}

let androSensorCut = "androsensor-walking_test_jg-head.csv"
let sensorLogCut = "sensorlog-2022-09-27_12_59_37-head.csv"

/// Reads `bytes` in memory as `name`; the reader and its samples.
func readBytes(
    _ bytes: [UInt8], name: String = "export.csv", options: RecordingReader.Options = .init()
) throws(RecordingError) -> (reader: RecordingReader, samples: [AccelerationSample]) {
    var reader = try RecordingReader(bytes: bytes, name: name, options: options)
    let samples = try reader.readAll()
    return (reader, samples)
}

/// `bytes` with every occurrence of `old` replaced by `new`.
func replacing(_ old: [UInt8], with new: [UInt8], in bytes: [UInt8]) -> [UInt8] {
    var result: [UInt8] = []
    var index = 0
    while index < bytes.count {
        if index + old.count <= bytes.count && Array(bytes[index..<index + old.count]) == old {
            result += new
            index += old.count
        } else {
            result.append(bytes[index])
            index += 1
        }
    }
    return result
}

@Suite("AndroSensor and SensorLog exports")
struct PhoneExportTests {
    static let androSensorHeader =
        "ACCELEROMETER X (m/s²);ACCELEROMETER Y (m/s²);ACCELEROMETER Z (m/s²);LINEAR ACCELERATION X (m/s²);"
        + "LINEAR ACCELERATION Y (m/s²);LINEAR ACCELERATION Z (m/s²);MAGNETIC FIELD X (μT);"
        + "LOCATION Altitude-google ( m);Satellites in range;GPS NMEA;Time since start in ms ;"
        + "YYYY-MO-DD HH-MI-SS_SSS"

    @Test func androSensorCutReadsTheAccelerometerInMetresPerSecondSquared() throws {
        // `sep=;`, 32 columns, NaN and empty cells in other sensors' columns, no final newline.
        let (reader, samples) = try readBytes(exportFixture(androSensorCut))
        #expect(reader.format == .androSensor)
        #expect(reader.unit == .metersPerSecondSquared)
        #expect(reader.gravityIncluded)
        #expect(samples.count == 20)
        #expect(reader.line == 22)
        // First row: `1.176276;2.872466;10.834406;…;22;2022-09-28 12:08:36:526` (the
        // LINEAR ACCELERATION columns hold 1.882707;0.80746;-0.149855).
        #expect(
            samples[0]
                == AccelerationSample(
                    timestamp: 22_000_000, x: Float(1.176276 / standardGravity),
                    y: Float(2.872466 / standardGravity), z: Float(10.834406 / standardGravity)))
        #expect(samples[1].timestamp == 33_000_000)
        #expect(reader.skipped.total == 0)
        #expect(reader.skipped.withoutAcceleration == 0)
    }

    @Test func sensorLogCutReadsTheAccelerometerInG() throws {
        let (reader, samples) = try readBytes(exportFixture(sensorLogCut))
        #expect(reader.format == .sensorLog)
        #expect(reader.unit == .g)
        #expect(reader.gravityIncluded)
        #expect(samples.count == 10)
        // `accelerometerTimestamp_sinceReboot(s)` 21752.44500766667, then the three
        // `accelerometerAcceleration…(G)` cells; not motionUserAcceleration or motionGravity.
        #expect(
            samples[0]
                == AccelerationSample(
                    timestamp: 21_752_445_007_667, x: 0.0441741943359375, y: -0.560882568359375,
                    z: -0.88018798828125))
        // 16.8 Hz.
        #expect(abs(Double(samples[1].timestamp - samples[0].timestamp) / 1e9 - 0.05956) < 0.0001)
    }

    @Test(arguments: [androSensorCut, sensorLogCut])
    func slowPathReadsTheSameAsTheFastPath(_ name: String) throws {
        var slow = RecordingReader.Options()
        slow.rowFastPath = false
        let bytes = try exportFixture(name)
        #expect(try readBytes(bytes, options: slow).samples == readBytes(bytes).samples)
    }

    @Test func androSensorWithCommasFewerSensorsAndOtherColumnOrder() throws {
        // The columns of the enabled sensors only, in the app's order: the accelerometer need
        // not come first, and LINEAR ACCELERATION (gravity removed) is never read for it.
        let text = """
            LINEAR ACCELERATION X (m/s²),LINEAR ACCELERATION Y (m/s²),LINEAR ACCELERATION Z (m/s²),\
            ACCELEROMETER X (m/s²),ACCELEROMETER Y (m/s²),ACCELEROMETER Z (m/s²),PROXIMITY (m),\
            Satellites in range,Time since start in ms ,YYYY-MO-DD HH-MI-SS_SSS
            0.1,0.2,0.3,0.0,0.0,9.80665,5.0,0 / 6,500,2016-03-01 10:00:00:500
            0.1,0.2,0.3,9.80665,0.0,0.0,5.0,0 / 6,1000,2016-03-01 10:00:01:000
            """
        let (reader, samples) = try readBytes(Array(text.utf8))
        #expect(reader.format == .androSensor)
        #expect(
            samples == [
                AccelerationSample(timestamp: 500_000_000, x: 0, y: 0, z: 1),
                AccelerationSample(timestamp: 1_000_000_000, x: 1, y: 0, z: 0),
            ])
    }

    @Test func androSensorHeaderDamagedByALegacyEncodingStillReads() throws {
        // Re-saved by Excel: `²` became the byte 0xEC and `°` 0x9B (not UTF-8), `0 / 6` a date.
        let damaged = replacing(
            Array("0 / 0".utf8), with: Array("Nov-23".utf8),
            in: replacing(
                Array("°".utf8), with: [0x9B],
                in: replacing(Array("²".utf8), with: [0xEC], in: try exportFixture(androSensorCut))))
        #expect(String(validating: damaged, as: UTF8.self) == nil)
        let (reader, samples) = try readBytes(damaged)
        #expect(reader.format == .androSensor)
        #expect(samples == (try readBytes(exportFixture(androSensorCut)).samples))
        // Its names in messages: each byte that is not UTF-8 as one Latin-1 character.
        let bad = damaged + Array("\n0.1;x".utf8)
        let error = #expect(throws: RecordingError.self) { try readBytes(bad) }
        #expect(error?.column == RecordingError.Column(index: 2, name: "ACCELEROMETER Y (m/s\u{EC})"))
    }

    @Test func aSensorsRowWithoutAccelerometerValuesIsPassedOverAndCounted() throws {
        // AndroSensor writes one row for all enabled sensors; missing values are empty or NaN.
        let text =
            Self.androSensorHeader + "\n"
            + ";;;;;;-13.8;NaN;0 / 0;;10;2022-09-28 12:08:36:516\n"
            + "NaN;NaN;NaN;;;;-13.8;NaN;0 / 0;;15;2022-09-28 12:08:36:521\n"
            + "0;0;9.80665;0;0;0;-13.8;NaN;0 / 0;;22;2022-09-28 12:08:36:526\n"
        let (reader, samples) = try readBytes(Array(text.utf8))
        #expect(samples == [AccelerationSample(timestamp: 22_000_000, x: 0, y: 0, z: 1)])
        #expect(reader.skipped.withoutAcceleration == 2)
        #expect(reader.skipped.firstWithoutAcceleration == 2)
        #expect(reader.skipped.total == 0)
        #expect(
            reader.skipped.withoutAccelerationNote
                == "2 rows without accelerometer values passed over (first at line 2)")
    }

    @Test func aSensorLogRowWithoutAccelerometerValuesIsPassedOver() throws {
        let text = """
            loggingTime(txt),accelerometerTimestamp_sinceReboot(s),accelerometerAccelerationX(G),\
            accelerometerAccelerationY(G),accelerometerAccelerationZ(G),motionUserAccelerationX(G)
            2022-09-27T12:59:37.054+02:00,,,,,0.1
            2022-09-27T12:59:37.114+02:00,21752.5,0,0,-1,0.1

            """
        let (reader, samples) = try readBytes(Array(text.utf8))
        #expect(reader.format == .sensorLog)
        #expect(samples == [AccelerationSample(timestamp: 21_752_500_000_000, x: 0, y: 0, z: -1)])
        #expect(reader.skipped.withoutAcceleration == 1)
    }

    @Test(arguments: [
        ("1;;9.8", 2, "an empty cell", RecordingError.Kind.notANumber),
        ("1;2;NaN", 3, "'NaN'", .notFinite),
        ("1;abc;9.8", 2, "'abc'", .notANumber),
    ])
    func aRowMissingOnlySomeAxesIsAnError(axes: String, column: Int, found: String, kind: RecordingError.Kind)
        throws
    {
        let text =
            Self.androSensorHeader + "\n" + "0;0;9.8;0;0;0;-13.8;NaN;0 / 0;;10;x\n" + axes
            + ";0;0;0;-13.8;NaN;0 / 0;;20;x"
        let error = try #require(readError(text))
        #expect(error.kind == kind)
        #expect(error.line == 3)
        #expect(error.column?.index == column)
        #expect(error.description.hasPrefix("walk.csv:3: column \(column) 'ACCELEROMETER "))
        #expect(error.description.hasSuffix("found \(found)"))
        // Skipped with --skip-bad-rows, not passed over as a row without values.
        let skipping = try readMemory(text, options: .init(skipBadRows: true)).reader.skipped
        #expect(skipping.total == 1)
        #expect(skipping.withoutAcceleration == 0)
    }

    @Test func otherFormatsStillRejectEmptyAxisCells() throws {
        // Only the exports that write every sensor in one row have rows without the accelerometer.
        let error = try #require(readError("time_s,x_g,y_g,z_g\n0,0,0,1\n0.01,,,\n"))
        #expect(error.kind == .notANumber)
        #expect(error.line == 3)
    }

    @Test func gravityFreeColumnsAloneAreNotReadInstead() throws {
        let androSensor = try #require(
            readError(
                "LINEAR ACCELERATION X (m/s²);LINEAR ACCELERATION Y (m/s²);LINEAR ACCELERATION Z (m/s²);"
                    + "Time since start in ms \n0.1;0.2;0.3;10\n"))
        #expect(androSensor.kind == .unknownFormat)
        #expect(
            androSensor.description.contains("ACCELEROMETER X/Y/Z (m/s²) columns of an AndroSensor export"))
        let sensorLog = try #require(
            readError(
                "loggingTime(txt),loggingSample(N),motionUserAccelerationX(G),motionUserAccelerationY(G),"
                    + "motionUserAccelerationZ(G)\nx,1,0.1,0.2,0.3\n"))
        #expect(sensorLog.kind == .unknownFormat)
        #expect(
            sensorLog.description.contains("accelerometerAcceleration X/Y/Z(G) columns of a SensorLog export")
        )
    }

    @Test func forcedAndroSensorWithoutItsHeader() throws {
        let error = try #require(
            readError("time_s,x_g,y_g,z_g\n0,0,0,1\n", options: .init(format: .androSensor)))
        #expect(error.kind == .missingHeader)
        #expect(error.description.contains("the androsensor header 'ACCELEROMETER X (m/s²);"))
    }

    @Test func formatNamesExcludeColumns() {
        #expect(RecordingFormat(name: "androsensor") == .androSensor)
        #expect(RecordingFormat(name: "sensorlog") == .sensorLog)
        #expect(RecordingFormat(name: "columns") == nil)
        #expect(!RecordingFormat.named.contains(.columns))
    }
}
