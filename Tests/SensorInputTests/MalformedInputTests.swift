import StepDetection
import Testing

@testable import SensorInput

@Suite("Malformed input")
struct MalformedInputTests {
    @Test func nonNumericCell() throws {
        let real = try #require(readError("time_s,x_g,y_g,z_g\n0,1,2,3\n0.1,1,abc,3\n"))
        #expect(real.kind == .notANumber)
        #expect(real.line == 3)
        #expect(real.column == RecordingError.Column(index: 3, name: "y_g"))
        #expect(real.description == "walk.csv:3: column 3 'y_g': expected a number, found 'abc'")
    }

    @Test func emptyCell() throws {
        let error = try #require(readError("Time (ms),X,Y,Z\n85,1,,3\n"))
        #expect(error.kind == .notANumber)
        #expect(error.line == 2)
        #expect(error.column?.index == 3)
        #expect(error.description == "walk.csv:2: column 3 'Y': expected a number, found an empty cell")
    }

    @Test func infiniteValue() throws {
        let error = try #require(readError("Time (ms),X,Y,Z\n85,1,2,3\n165,1,2,-Infinity\n"))
        #expect(error.kind == .notFinite)
        #expect(error.line == 3)
        #expect(error.column?.index == 4)
    }

    @Test func valueTooLargeForFloat() throws {
        let error = try #require(readError("time_s,x_g,y_g,z_g\n0,1e39,0,0\n"))
        #expect(error.kind == .outOfRange)
        #expect(error.column == RecordingError.Column(index: 2, name: "x_g"))
    }

    @Test func timeTooLargeForNanoseconds() throws {
        let error = try #require(readError("time_s,x_g,y_g,z_g\n1e12,0,0,0\n"))
        #expect(error.kind == .outOfRange)
        #expect(error.line == 2)
        #expect(error.column?.index == 1)
    }

    @Test func tooFewColumns() throws {
        let error = try #require(readError("Time (ms),X,Y,Z\n85,1,2,3\n165,1,2\n"))
        #expect(error.kind == .tooFewColumns)
        #expect(error.line == 3)
        #expect(error.column == RecordingError.Column(index: 4, name: "Z"))
        #expect(error.description == "walk.csv:3: column 4 'Z': expected at least 4 columns, found 3 columns")
    }

    @Test func timeGoingBackwardsShowsBothTimes() throws {
        let error = try #require(readError("Time (ms),X,Y,Z\n85,1,2,3\n165,1,2,3\n165,1,2,3\n160,1,2,3\n"))
        #expect(error.kind == .timeWentBackwards)
        #expect(error.line == 5)
        #expect(error.column?.index == 1)
        #expect(
            error.description
                == "walk.csv:5: column 1 'Time (ms)': time went backwards: expected a time ≥ 0.165000000 s "
                + "(line 4), found 0.160000000 s")
    }

    @Test(arguments: ["", "\n\n", "\u{FEFF}", "sep=;\n", "  \r\n\t\n"])
    func emptyFile(text: String) throws {
        let error = try #require(readError(text))
        #expect(error.kind == .emptyFile)
        #expect(error.description.hasPrefix("walk.csv: empty file"))
    }

    @Test func unknownFormatListsTheFormatsAndTheLine() throws {
        let error = try #require(readError("\nts(txt),sample(N)\n1,2\n"))
        #expect(error.kind == .unknownFormat)
        #expect(error.line == 2)
        for format in RecordingFormat.allCases { #expect(error.description.contains(format.rawValue)) }
        #expect(error.description.contains("--columns"))
        #expect(error.description.contains("found 'ts(txt),sample(N)'"))
    }

    @Test func headerlessNumbersThatAreNotOxfordAreUnknown() {
        #expect(readError("85,-6037,-470,-5587\n")?.kind == .unknownFormat)
    }

    @Test func forcedFormatWithoutItsHeader() throws {
        let error = try #require(readError("85,-6037,-470,-5587\n", options: .init(format: .bangle)))
        #expect(error.kind == .missingHeader)
        #expect(error.line == 1)
        #expect(error.description.contains("Time (ms),X,Y,Z"))
        #expect(error.description.contains("found '85,-6037,-470,-5587'"))
    }

    @Test func decimalCommaGetsAHint() throws {
        let error = try #require(
            readError("\"Time (s)\";\"X (m/s^2)\";\"Y (m/s^2)\";\"Z (m/s^2)\"\n0,5;1;2;9\n"))
        #expect(error.kind == .notANumber)
        #expect(error.description.contains("decimal commas are not supported"))
    }

    @Test func nonUTF8HeaderBytesAreTolerated() throws {
        var bytes: [UInt8] =
            Array("Time (ms),X,Y,Z,Extra ".utf8) + [0xEC, 0x9B] + Array("\n85,1,2,3,4\n".utf8)
        var reader = try RecordingReader(bytes: bytes, name: "walk.csv")
        #expect(try reader.readAll().count == 1)
        bytes = [0xFF, 0xFE, 0x41, 10]
        #expect(throws: RecordingError.self) { _ = try RecordingReader(bytes: bytes) }
    }

    @Test func lineLongerThanTheBufferIsAnError() throws {
        var options = RecordingReader.Options()
        options.bufferSize = 64
        let long = "1," + String(repeating: "1", count: 100) + ",2,3"
        let text = "Time (ms),X,Y,Z\n85,1,2,3\n\(long)\n200,1,2,3\n"
        let error = try #require(readError(text, options: options))
        #expect(error.kind == .lineTooLong)
        #expect(error.line == 3)
        options.skipBadRows = true
        let (reader, samples) = try readMemory(text, options: options)
        #expect(samples.map(\.timestamp) == [85_000_000, 200_000_000])
        #expect(reader.skipped[.lineTooLong] == 1)
        #expect(reader.skipped.firstLine(of: .lineTooLong) == 3)
        #expect(reader.line == 4)
    }
}

@Suite("Export quirks")
struct QuirkTests {
    private let expected = [
        AccelerationSample(timestamp: 85_000_000, x: 1, y: 0, z: -1),
        AccelerationSample(timestamp: 165_000_000, x: 0.5, y: 0, z: -1),
    ]

    @Test(arguments: [
        "Time (ms),X,Y,Z\n85,8192,0,-8192\n165,4096,0,-8192\n",  // plain
        "Time (ms),X,Y,Z\r\n85,8192,0,-8192\r\n165,4096,0,-8192\r\n",  // CRLF
        "\u{FEFF}Time (ms),X,Y,Z\n85,8192,0,-8192\n165,4096,0,-8192\n",  // BOM
        "Time (ms),X,Y,Z\n85,8192,0,-8192\n165,4096,0,-8192",  // no final newline
        "Time (ms),X,Y,Z\r\n85,8192,0,-8192\r\n165,4096,0,-8192",  // CRLF, no final newline
        "sep=,\nTime (ms),X,Y,Z\n85,8192,0,-8192\n165,4096,0,-8192\n",  // Excel separator line
        "\n\r\nTime (ms),X,Y,Z\n85,8192,0,-8192\n165,4096,0,-8192\n",  // blank first lines
        "Time (ms),X,Y,Z,\n85,8192,0,-8192,\n165,4096,0,-8192,\n",  // trailing empty column
        "\"Time (ms)\" , \"X\",\"Y \",Z  \n85, 8192 ,0,-8192\n165,4096,0,-8192\n",  // quotes and spaces
        "Time (ms),X,Y,Z\n85,8192,0,-8192\n\n165,4096,0,-8192\n\n\n",  // blank lines between and after
        "Time (ms),X,Y,Z\n85,\"8192\",0,-8192\n165,4096,0,-8192\n",  // quoted number
    ])
    func quirk(text: String) throws {
        #expect(try readFile(text).samples == expected)
    }

    @Test func semicolonSeparatorLine() throws {
        let text =
            "sep=;\n\"Time (s)\";\"Acceleration x (m/s^2)\";\"Acceleration y (m/s^2)\";\"Acceleration z (m/s^2)\"\n0;0;0;9.80665\n"
        let (reader, samples) = try readFile(text)
        #expect(reader.format == .phyphox)
        #expect(samples == [AccelerationSample(timestamp: 0, x: 0, y: 0, z: 1)])
    }

    @Test func blankLinesAreCountedButNotBad() throws {
        let (reader, _) = try readMemory("Time (ms),X,Y,Z\n85,1,2,3\n\n   \n165,1,2,3\n")
        #expect(reader.skipped.blankLines == 2)
        #expect(reader.skipped.total == 0)
    }

    @Test func lineNumbersCountHeaderAndPreamble() throws {
        let error = try #require(readError("sep=,\n\nTime (ms),X,Y,Z\n85,1,2,3\nx,1,2,3\n"))
        #expect(error.line == 5)
    }
}

@Suite("Skipping bad rows")
struct SkipBadRowsTests {
    @Test func countsEveryReasonWithItsFirstLine() throws {
        let text = """
            Time (ms),X,Y,Z
            85,1,2,3
            Time,1,2,3
            165,1,2
            245,NaN,2,3
            325,1,2,3
            300,1,2,3
            405,1e40,2,3
            485,1,2,3
            Time,1,2,3
            565,1,2,3
            """
        let options = RecordingReader.Options(unit: .g, skipBadRows: true)
        let (reader, samples) = try readMemory(text, options: options)
        #expect(samples.map(\.timestamp) == [85, 325, 485, 565].map { Int64($0) * 1_000_000 })
        let skipped = reader.skipped
        #expect(skipped.total == 6)
        #expect(skipped[.notANumber] == 2)
        #expect(skipped.firstLine(of: .notANumber) == 3)
        #expect(skipped[.tooFewColumns] == 1)
        #expect(skipped.firstLine(of: .tooFewColumns) == 4)
        #expect(skipped[.notFinite] == 1)
        #expect(skipped.firstLine(of: .notFinite) == 5)
        #expect(skipped[.timeWentBackwards] == 1)
        #expect(skipped.firstLine(of: .timeWentBackwards) == 7)
        #expect(skipped[.outOfRange] == 1)
        #expect(skipped.firstLine(of: .outOfRange) == 8)
        #expect(
            skipped.description
                == "6 rows skipped: 1 too few columns (first at line 4), 2 not a number (first at line 3), "
                + "1 not finite (first at line 5), 1 out of range (first at line 8), "
                + "1 time went backwards (first at line 7)")
        #expect(
            skipped.firstErrors[.notANumber]?.description
                == "walk.csv:3: column 1 'Time (ms)': expected a number, found 'Time'")
    }

    @Test func fileLevelErrorsStillThrow() {
        let options = RecordingReader.Options(skipBadRows: true)
        #expect(readError("hello\n", options: options)?.kind == .unknownFormat)
        #expect(readError("", options: options)?.kind == .emptyFile)
    }

    @Test func noSkipsGivesCleanReport() throws {
        let (reader, _) = try readMemory("Time (ms),X,Y,Z\n85,1,2,3\n", options: .init(skipBadRows: true))
        #expect(reader.skipped.total == 0)
        #expect(reader.skipped.description == "no rows skipped")
    }
}
