import Foundation
import StepDetection
import Testing

@testable import SensorInput

@Suite("Named columns (--columns)")
struct ColumnLayoutTests {
    func layout(_ text: String) throws -> ColumnLayout { try ColumnLayout(parsing: text) }

    func parseError(_ text: String) -> String? {
        do {
            _ = try ColumnLayout(parsing: text)
            return nil
        } catch {
            return error.description
        }
    }

    @Test func parsesEveryKey() throws {
        let parsed = try layout("time=Time_ms:ms,x=ax,y=ay,z=az,unit=m/s2,delimiter=;")
        #expect(
            parsed
                == ColumnLayout(
                    time: .name("Time_ms"), timeUnit: .ms, x: .name("ax"), y: .name("ay"), z: .name("az"),
                    unit: .metersPerSecondSquared, delimiter: UInt8(ascii: ";")))
        #expect(parsed.description == "time=Time_ms:ms,x=ax,y=ay,z=az,unit=m/s2,delimiter=semicolon")
        #expect(try layout(parsed.description) == parsed)
    }

    @Test func numbersAreColumnsFromOneAndSpacesAroundAreIgnored() throws {
        let parsed = try layout(" time = Time (ms):MS , x=2, y = 3 ,Z=4,unit=counts:8192,delimiter=tab")
        #expect(parsed.time == .name("Time (ms)"))
        #expect(parsed.timeUnit == .ms)
        #expect([parsed.x, parsed.y, parsed.z] == [.index(2), .index(3), .index(4)])
        #expect(parsed.unit == .counts(perG: 8192))
        #expect(parsed.delimiter == 9)
        // A name may hold ':' (the time's unit is after the last one) and '='.
        #expect(try layout("time=a:b=c:us,x=LOCATION Latitude : ,y=b,z=c,unit=g").time == .name("a:b=c"))
        #expect(try layout("time=t:ns,x=a,y=b,z=c,unit=g").delimiter == nil)
        for (name, byte) in [("comma", 44), ("space", 32), ("|", 124), ("\\t", 9)] {
            #expect(try layout("time=t:s,x=a,y=b,z=c,unit=g,delimiter=\(name)").delimiter == UInt8(byte))
        }
    }

    @Test(arguments: [
        ("time=t:s,x=a,y=b", "missing z=COLUMN, unit=UNIT (expected time=COLUMN:UNIT,x=COLUMN,"),
        ("x=a,y=b,z=c,unit=g", "missing time=COLUMN:UNIT (expected"),
        ("time=t,x=a,y=b,z=c,unit=g", "time=t: expected COLUMN:UNIT with UNIT s, ms, us or ns"),
        ("time=t:min,x=a,y=b,z=c,unit=g", "time=t:min: expected COLUMN:UNIT with UNIT s, ms, us or ns"),
        ("time=:s,x=a,y=b,z=c,unit=g", "time=: expected a column name or a 1-based column number"),
        ("time=t:s,x=0,y=b,z=c,unit=g", "x=0: expected a column number from 1"),
        ("time=t:s,x=a,y=b,z=c,unit=furlongs", "unit=furlongs: expected g, m/s2 or counts:<counts per g>"),
        (
            "time=t:s,x=a,y=b,z=c,unit=g,delimiter=,",
            "delimiter=: expected comma, semicolon, tab, space or one"
        ),
        (
            "time=t:s,x=a,y=b,z=c,unit=g,delimiter=.",
            "delimiter=.: expected comma, semicolon, tab, space or one"
        ),
        (
            "time=t:s,x=a,y=b,z=c,unit=g,speed=1",
            "unknown key 'speed': expected time, x, y, z, unit or delimiter"
        ),
        ("time=t:s,x=a,x=b,z=c,unit=g", "x given twice"),
        ("time=t:s,x=a,y=A,z=c,unit=g", "x and y name the same column 'A': expected four different columns"),
        ("time=t:s,x=a,,y=b,z=c,unit=g", "expected key=value items separated by commas, found an empty item"),
        ("time=t:s,x,y=b,z=c,unit=g", "expected key=value, found 'x'"),
    ])
    func badLayoutsSayWhatWasExpected(text: String, message: String) {
        let error = parseError(text)
        #expect(error?.hasPrefix(message) == true, "\(error ?? "no error")")
    }

    // MARK: - Reading

    func read(_ text: String, _ columns: String, name: String = "walk.csv") throws -> (
        reader: RecordingReader, samples: [AccelerationSample]
    ) {
        try readMemory(text, name: name, options: .init(columns: layout(columns)))
    }

    func readingError(_ text: String, _ columns: String) throws -> RecordingError? {
        readError(text, options: .init(columns: try layout(columns)))
    }

    @Test func readsColumnsByNameInAnyCaseAndOrder() throws {
        let (reader, samples) = try read(
            "ax;Time since start in ms ;AY;az;label\n0;10;0;9.80665;walk\n4.903325;20;0;0;walk\n",
            "time=time since start in ms:ms,x=ax,y=ay,z=az,unit=m/s2")
        #expect(reader.format == .columns)
        #expect(reader.unit == .metersPerSecondSquared)
        #expect(reader.gravityIncluded)
        #expect(
            samples == [
                AccelerationSample(timestamp: 10_000_000, x: 0, y: 0, z: 1),
                AccelerationSample(timestamp: 20_000_000, x: 0.5, y: 0, z: 0),
            ])
    }

    @Test(arguments: [
        (ColumnLayout.TimeUnit.s, Int64(1_500_000_000)), (.ms, 1_500_000), (.us, 1_500), (.ns, 2),
    ])
    func timeUnits(unit: ColumnLayout.TimeUnit, nanoseconds: Int64) throws {
        let (_, samples) = try read("t,x,y,z\n1.5,0,0,1\n", "time=t:\(unit.rawValue),x=x,y=y,z=z,unit=g")
        #expect(samples.first?.timestamp == nanoseconds)
    }

    @Test func numberedColumnsWithoutAHeaderReadTheFirstLineAsData() throws {
        let (reader, samples) = try read(
            "7|100|4096|0|0\n7|200|0|0|8192\n", "time=2:ms,x=3,y=4,z=5,unit=counts:8192,delimiter=|")
        #expect(reader.line == 2)
        #expect(samples.map(\.timestamp) == [100_000_000, 200_000_000])
        #expect(samples[0].x == 0.5)
        #expect(samples[1].z == 1)
    }

    @Test func numberedColumnsSkipAHeaderAndNameItsColumnsInErrors() throws {
        let text = "time,a,b,c\n0,0,0,1\n0.01,0,zz,1\n"
        let error = try #require(try readingError(text, "time=1:s,x=2,y=3,z=4,unit=g"))
        #expect(error.description == "walk.csv:3: column 3 'b': expected a number, found 'zz'")
    }

    @Test func gravityFreeColumnsAreRecognisedByTheirMagnitude() throws {
        // Named by mistake, they are still counted as what they are (docs/detector.md).
        let (reader, _) = try read(
            "t,lx,ly,lz\n0,0.1,0.2,0.3\n0.01,-0.1,0.1,-0.2\n", "time=t:s,x=lx,y=ly,z=lz,unit=m/s2")
        #expect(!reader.gravityIncluded)
    }

    @Test func aColumnNotInTheHeaderIsNamed() throws {
        let error = try #require(
            try readingError("\nt;acc_x;ay;az\n0;0;0;1\n", "time=t:s,x=ax,y=ay,z=az,unit=g"))
        #expect(error.kind == .columnNotFound)
        #expect(
            error.description
                == "walk.csv:2: column not found: expected a column named 'ax' (x=ax in --columns), "
                + "found 't;acc_x;ay;az'")
        let beyond = try #require(try readingError("0,0,0,1\n", "time=1:s,x=2,y=3,z=7,unit=g"))
        #expect(beyond.kind == .columnNotFound)
        #expect(
            beyond.description
                == "walk.csv:1: column not found: expected at least 7 columns (z=7 in --columns), found 4: '0,0,0,1'"
        )
    }

    @Test func aNameOfSeveralColumnsOrOneColumnTwiceIsAmbiguous() throws {
        let twice = try #require(try readingError("t,x,x,y,z\n0,0,0,0,1\n", "time=t:s,x=x,y=y,z=z,unit=g"))
        #expect(twice.kind == .ambiguousColumn)
        #expect(
            twice.description.hasSuffix(
                "expected one column named 'x' (x=x in --columns; name it by number), found columns 2, 3"))
        let same = try #require(try readingError("t,x,y,z\n0,0,0,1\n", "time=t:s,x=x,y=2,z=z,unit=g"))
        #expect(same.kind == .ambiguousColumn)
        #expect(same.description.hasSuffix("found x and y both column 2"))
    }

    @Test func theDelimiterGivenWinsOverTheSepLine() throws {
        let (_, samples) = try read(
            "sep=;\nt,x,y,z\n0,0,0,1\n", "time=t:s,x=x,y=y,z=z,unit=g,delimiter=comma")
        #expect(samples == [AccelerationSample(timestamp: 0, x: 0, y: 0, z: 1)])
    }

    @Test func aKnownRecordingReadByItsColumnsGivesTheSameSamples() throws {
        let path = packageRoot.appendingPathComponent("samples/walk-wrist-100.csv").path
        var detected = try RecordingReader(path: path)
        var named = try RecordingReader(
            path: path, options: .init(columns: layout("time=Time (ms):ms,x=X,y=Y,z=Z,unit=counts:8192")))
        #expect(named.format == .columns)
        #expect(try named.readAll() == detected.readAll())
    }

    @Test(.enabled(if: sharedDataAvailable, "../shared/data not present"))
    func realExportsReadByTheirColumnsGiveTheSameSamples() throws {
        let formats = sharedData.appendingPathComponent("formats")
        let cases = [
            (
                "androsensor/tez4__fhnw-ds-cdl1__walking_test_jg.csv",
                "time=Time since start in ms:ms,x=ACCELEROMETER X (m/s²),y=ACCELEROMETER Y (m/s²),"
                    + "z=ACCELEROMETER Z (m/s²),unit=m/s2,delimiter=;"
            ),
            (
                "sensorlog/tez4__fhnw-ds-cdl1__2022-09-27_12_59_37_nz_iOS_device.csv",
                "time=accelerometerTimestamp_sinceReboot(s):s,x=22,y=23,z=24,unit=g"
            ),
        ]
        for (file, columns) in cases {
            let path = formats.appendingPathComponent(file).path
            var detected = try RecordingReader(path: path)
            var named = try RecordingReader(path: path, options: .init(columns: layout(columns)))
            #expect(try named.readAll() == detected.readAll(), "\(file)")
        }
    }
}
