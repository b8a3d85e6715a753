import Foundation
import StepDetection
import Testing

@testable import SensorInput

@Suite("StepGate CSV writer")
struct WriterTests {
    @Test func writesTheDocumentedLayout() throws {
        let path = try temporaryFile("out.csv", "")
        var writer = try StepGateCSVWriter(path: path)
        try writer.write(AccelerationSample(timestamp: 12_345_678_901, x: 0.012345, y: -0.98765, z: 0.1))
        try writer.write(AccelerationSample(timestamp: -1_800_000, x: 1, y: 0, z: -0.0))
        try writer.close(sync: true)
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(
            text == """
                time_s,x_g,y_g,z_g
                12.345678901,0.012345,-0.98765,0.1
                -0.001800000,1.0,0.0,-0.0

                """)
    }

    @Test func roundTripsBitExactly() throws {
        var generator = SystemRandomNumberGenerator()
        var samples: [AccelerationSample] = []
        var time = Int64.random(in: -5_000_000_000...5_000_000_000, using: &generator)
        for index in 0..<50_000 {
            time += Int64.random(in: 0...20_000_000, using: &generator)
            func value() -> Float {
                if index % 10 == 0 {
                    // Any finite Float, including subnormals and extremes.
                    while true {
                        let v = Float(bitPattern: UInt32.random(in: 0...UInt32.max, using: &generator))
                        if v.isFinite { return v }
                    }
                }
                return Float.random(in: -8...8, using: &generator)
            }
            samples.append(AccelerationSample(timestamp: time, x: value(), y: value(), z: value()))
        }
        samples.append(
            AccelerationSample(
                timestamp: Int64.max, x: .greatestFiniteMagnitude, y: -.leastNonzeroMagnitude, z: 0))

        let path = try temporaryFile("roundtrip.csv", "")
        var writer = try StepGateCSVWriter(path: path)
        try writer.write(contentsOf: samples)
        try writer.close()

        var reader = try RecordingReader(path: path)
        #expect(reader.format == .stepgate)
        let read = try reader.readAll()
        #expect(read.count == samples.count)
        for (a, b) in zip(read, samples) where a != b || a.x.bitPattern != b.x.bitPattern {
            Issue.record("\(a) != \(b)")
            break
        }
    }

    @Test func writesToAFileDescriptor() throws {
        let path = try temporaryFile("fd.csv", "")
        let handle = try #require(FileHandle(forWritingAtPath: path))
        var writer = StepGateCSVWriter(fileDescriptor: handle.fileDescriptor, name: "fd.csv")
        try writer.write(AccelerationSample(timestamp: 1, x: 1, y: 2, z: 3))
        try writer.flush()
        try writer.close()
        try handle.close()
        #expect(
            try String(contentsOfFile: path, encoding: .utf8)
                == "time_s,x_g,y_g,z_g\n0.000000001,1.0,2.0,3.0\n")
    }

    @Test func refusesNonFiniteValues() throws {
        var writer = try StepGateCSVWriter(path: try temporaryFile("nan.csv", ""))
        let error = #expect(throws: RecordingError.self) {
            try writer.write(AccelerationSample(timestamp: 0, x: .nan, y: 0, z: 0))
        }
        #expect(error?.kind == .notFinite)
    }

    @Test func cannotOpenAMissingFolder() {
        let error = #expect(throws: RecordingError.self) {
            _ = try StepGateCSVWriter(path: "/nonexistent/folder/out.csv")
        }
        #expect(error?.kind == .cannotOpen)
    }

    @Test func flushesOnDrop() throws {
        let path = try temporaryFile("drop.csv", "")
        do {
            var writer = try StepGateCSVWriter(path: path)
            try writer.write(AccelerationSample(timestamp: 0, x: 0, y: 0, z: 1))
        }
        #expect(try String(contentsOfFile: path, encoding: .utf8).hasSuffix("0.000000000,0.0,0.0,1.0\n"))
    }
}
