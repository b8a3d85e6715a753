import StepDetection
import Testing

@testable import SensorInput

@Suite("Reading each format")
struct FormatReadingTests {
    @Test func stepgate() throws {
        let (reader, samples) = try readFile(
            "time_s,x_g,y_g,z_g,label\n12.345678901,0.012345,-0.98765,0.1,walk\n12.355678901,0,-1,1e-05,walk\n"
        )
        #expect(reader.format == .stepgate)
        #expect(reader.unit == .g)
        #expect(reader.gravityIncluded)
        #expect(
            samples == [
                AccelerationSample(timestamp: 12_345_678_901, x: 0.012345, y: -0.98765, z: 0.1),
                AccelerationSample(timestamp: 12_355_678_901, x: 0, y: -1, z: 1e-05),
            ])
    }

    @Test func bangleCounts() throws {
        let (reader, samples) = try readFile("Time (ms),X,Y,Z\n85,-3417,-346,-7526\n165,8192,0,-4096\n")
        #expect(reader.format == .bangle)
        #expect(reader.unit == .counts(perG: 8192))
        #expect(samples.count == 2)
        #expect(
            samples[0]
                == AccelerationSample(timestamp: 85_000_000, x: -3417 / 8192, y: -346 / 8192, z: -7526 / 8192)
        )
        #expect(samples[1] == AccelerationSample(timestamp: 165_000_000, x: 1, y: 0, z: -0.5))
    }

    @Test func bangleWithTotalInG() throws {
        let (reader, samples) = try readFile(
            "Time (ms),X,Y,Z,Total\n85,-0.41,-0.04,-0.91,1.0\n165,0.5,0,-0.8,0.94\n")
        #expect(reader.format == .bangle)
        #expect(reader.unit == .g)
        #expect(samples[0] == AccelerationSample(timestamp: 85_000_000, x: -0.41, y: -0.04, z: -0.91))
    }

    @Test func bangleWithTotalInCounts() throws {
        let (reader, samples) = try readFile("Time (ms),X,Y,Z,Total\n85,-3417,-346,-7526,8272\n")
        #expect(reader.unit == .counts(perG: 8192))
        #expect(samples[0].x == Float(-3417) / 8192)
    }

    @Test func oxfordExactNanoseconds() throws {
        let (reader, samples) = try readFile(
            "263239144953734,2,1.9400482,5.161789,10.162003\r\n263239149989134,2,1.5179749,4.9763947,9.898788\r\n",
            name: "accelerometer.csv")
        #expect(reader.format == .oxford)
        #expect(reader.unit == .metersPerSecondSquared)
        #expect(reader.gravityIncluded)
        #expect(samples.map(\.timestamp) == [263_239_144_953_734, 263_239_149_989_134])
        #expect(samples[0].x == Float(1.9400482 / standardGravity))
        #expect(samples[0].z == Float(10.162003 / standardGravity))
    }

    @Test(arguments: [",", ";", "\t"])
    func phyphoxWithGravity(separator: String) throws {
        let header = [
            "Time (s)", "Acceleration x (m/s^2)", "Acceleration y (m/s^2)", "Acceleration z (m/s^2)",
            "Absolute acceleration (m/s^2)",
        ].map { "\"\($0)\"" }.joined(separator: separator)
        let rows = [
            ["-1.8E-3", "2.053291537E-3", "9.849455833E0", "1.024176513E1", "9.9E0"],
            ["-1.8E-3", "0.0", "9.8", "0", "9.8"],
        ].map { $0.joined(separator: separator) }
        let (reader, samples) = try readFile(
            ([header] + rows).joined(separator: "\n") + "\n", name: "Raw Data.csv")
        #expect(reader.format == .phyphox)
        #expect(reader.gravityIncluded)
        #expect(samples.count == 2)
        #expect(samples[0].timestamp == -1_800_000)
        #expect(samples[1].timestamp == -1_800_000)  // duplicate timestamps are fine
        #expect(samples[0].y == Float(9.849455833 / standardGravity))
    }

    @Test func phyphoxLinear() throws {
        let (reader, samples) = try readFile(
            """
            "Time (s)","Linear Acceleration x (m/s^2)","Linear Acceleration y (m/s^2)","Linear Acceleration z (m/s^2)","Absolute acceleration (m/s^2)"
            0.0E0,1.0E-1,-2.0E-1,3.0E-1,3.7E-1

            """, name: "pocket_walk(1).csv")
        #expect(reader.format == .phyphox)
        #expect(!reader.gravityIncluded)
        #expect(samples.count == 1)
    }

    @Test func phyphoxNewStyleDecidesGravityByMagnitude() throws {
        let still =
            "\"Time (s)\";\"X (m/s^2)\";\"Y (m/s^2)\";\"Z (m/s^2)\"\n0;0.1;0.2;9.8\n0.01;0.1;0.3;9.7\n"
        let moving =
            "\"Time (s)\";\"X (m/s^2)\";\"Y (m/s^2)\";\"Z (m/s^2)\"\n0;0.1;0.2;0.8\n0.01;0.1;0.3;-0.7\n"
        #expect(try readFile(still, name: "data.csv").reader.gravityIncluded)
        #expect(try !readFile(moving, name: "data.csv").reader.gravityIncluded)
        // The set name wins over the magnitude.
        #expect(try !readFile(still, name: "Linear Accelerometer.csv").reader.gravityIncluded)
        #expect(try readFile(moving, name: "Accelerometer.csv").reader.gravityIncluded)
    }

    @Test func phyphoxNaNCellIsAnError() throws {
        let text = "\"Time (s)\",\"X (m/s^2)\",\"Y (m/s^2)\",\"Z (m/s^2)\"\n0,1,2,9\n0.01,NaN,2,9\n"
        let error = try #require(readError(text))
        #expect(error.kind == .notFinite)
        #expect(error.line == 3)
        #expect(error.column == RecordingError.Column(index: 2, name: "X (m/s^2)"))
        #expect(
            error.description == "walk.csv:3: column 2 'X (m/s^2)': expected a finite number, found 'NaN'")
    }

    @Test func sensorLoggerReadsColumnsByName() throws {
        let (reader, samples) = try readFile(
            "time,seconds_elapsed,z,y,x\n1711795430071476200,0.0,9.0,2.0,1.0\n1711795430081476201,0.01,8.0,2.0,1.0\n",
            name: "TotalAcceleration.csv")
        #expect(reader.format == .sensorLogger)
        #expect(reader.gravityIncluded)
        #expect(samples[0].timestamp == 1_711_795_430_071_476_200)
        #expect(samples[1].timestamp == 1_711_795_430_081_476_201)
        #expect(samples[0].x == Float(1 / standardGravity))
        #expect(samples[0].z == Float(9 / standardGravity))
    }

    @Test func sensorLoggerVersion2AndAccelerometerIsGravityFree() throws {
        let (reader, samples) = try readFile(
            "time,z,y,x\n1711795430071476200,0.1,0.2,0.3\n", name: "Accelerometer.csv")
        #expect(reader.format == .sensorLogger)
        #expect(!reader.gravityIncluded)
        #expect(samples.count == 1)
    }

    @Test func sensorLoggerFallsBackToSecondsElapsedWhenExcelDamagedTime() throws {
        let (reader, samples) = try readFile(
            "time,seconds_elapsed,z,y,x\r\n\"1,70136286270131E+018\",0.5,9.8,0,0\r\n\"1,70136286270131E+018\",0.51,9.8,0,0\r\n",
            name: "TotalAcceleration.csv")
        #expect(reader.format == .sensorLogger)
        #expect(samples.map(\.timestamp) == [500_000_000, 510_000_000])
    }

    @Test func sensorLoggerGravityByMagnitudeForOtherNames() throws {
        let text = "time,seconds_elapsed,z,y,x\n1,0,9.8,0.1,0.1\n2,0.01,9.7,0.1,0.1\n"
        #expect(try readFile(text, name: "recording.csv").reader.gravityIncluded)
    }

    @Test func sensorLoggerGyroscopeIsNotAcceleration() {
        let error = readError("time,seconds_elapsed,z,y,x\n1,0,0.1,0.1,0.1\n", name: "Gyroscope.csv")
        #expect(error?.kind == .unknownFormat)
        #expect(error?.description.contains("gyroscope") == true)
    }

    @Test func physicsToolboxGForce() throws {
        let (reader, samples) = try readFile("time,gFx,gFy,gFz,TgF\n0.0040625,0.0257,0.3552,0.7966,0.873\n")
        #expect(reader.format == .physicsToolbox)
        #expect(reader.unit == .g)
        #expect(samples == [AccelerationSample(timestamp: 4_062_500, x: 0.0257, y: 0.3552, z: 0.7966)])
    }

    @Test func physicsToolboxMultiRecordWithBlankFirstLineAndTrailingComma() throws {
        let (reader, samples) = try readFile(
            "\ntime,gFx,gFy,gFz,ax,ay,az,Gain,\n0.098210,0.0009,-0.0011,0.9963,0.0,0.0,0.0,-∞,\n")
        #expect(reader.format == .physicsToolbox)
        #expect(samples == [AccelerationSample(timestamp: 98_210_000, x: 0.0009, y: -0.0011, z: 0.9963)])
    }

    @Test func forcedFormatAndUnit() throws {
        let options = RecordingReader.Options(format: .bangle, unit: .counts(perG: 4096))
        let (reader, samples) = try readFile("Time (ms),X,Y,Z\n85,4096,0,0\n", options: options)
        #expect(reader.unit == .counts(perG: 4096))
        #expect(samples[0].x == 1)
    }

    @Test func forcedOxfordSkipsAHeaderLine() throws {
        let options = RecordingReader.Options(format: .oxford)
        let (_, samples) = try readFile("timestamp,accuracy,x,y,z\n100,3,0,0,9.80665\n", options: options)
        #expect(samples == [AccelerationSample(timestamp: 100, x: 0, y: 0, z: 1)])
    }

    @Test func headerOnlyFileHasNoSamples() throws {
        let (reader, samples) = try readFile("Time (ms),X,Y,Z\n")
        #expect(reader.format == .bangle)
        #expect(samples.isEmpty)
    }

    @Test func progressCounters() throws {
        var reader = try RecordingReader(
            path: try temporaryFile("p.csv", "Time (ms),X,Y,Z\n1,1,1,1\n2,2,2,2\n"))
        #expect(reader.fileSize == 32)
        _ = try reader.readAll()
        #expect(reader.bytesRead == 32)
        #expect(reader.line == 3)
    }

    @Test func missingFileSaysWhy() {
        let error = #expect(throws: RecordingError.self) {
            _ = try RecordingReader(path: "/nonexistent/walk.csv")
        }
        #expect(error?.kind == .cannotOpen)
        #expect(error?.description.contains("No such file or directory") == true)
        #expect(error?.description.hasPrefix("/nonexistent/walk.csv: cannot open") == true)
    }

    @Test func directoryIsNotAFile() throws {
        let folder = try temporaryFile("x.csv", "").folder
        let error = #expect(throws: RecordingError.self) { _ = try RecordingReader(path: folder) }
        #expect(error?.kind == .cannotOpen)
    }

    /// Small buffers and reads force every refill path; the samples must not change.
    @Test(arguments: [24, 25, 31, 64, 100])
    func chunkingDoesNotChangeResults(bufferSize: Int) throws {
        var text = "\u{FEFF}Time (ms),X,Y,Z\r\n"
        for i in 0..<200 { text += "\(i * 80),\(i * 3 - 300),\(-i),\(8192 - i)\r\n" }
        let reference = try readMemory(text).samples
        for maximumRead in [1, 3, 7, 1000] {
            var options = RecordingReader.Options()
            options.bufferSize = bufferSize
            options.maximumRead = maximumRead
            #expect(try readMemory(text, options: options).samples == reference)
        }
    }
}

extension String {
    fileprivate var folder: String {
        guard let slash = lastIndex(of: "/") else { return "." }
        return String(self[..<slash])
    }
}
