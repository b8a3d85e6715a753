import Counting
import Foundation
import SensorInput
import StepDetection
import StepGateTestSupport
import Testing

@testable import Tuning

/// Gravity-removed exports (phyphox "Linear Acceleration", Sensor Logger `Accelerometer.csv`)
/// count as well as total acceleration: the bundled walks, with gravity taken out the way a
/// phone's linear-acceleration sensor does it (a low-passed gravity estimate subtracted per
/// axis), counted as linear acceleration.
@Suite("Gravity-removed input")
struct LinearAccelerationTests {
    static func read(_ name: String) throws -> [AccelerationSample] {
        var reader = try RecordingReader(path: Fixtures.samples.appendingPathComponent(name).path)
        return try reader.readAll()
    }

    /// The samples minus a running gravity estimate (first-order low-pass, `time` seconds).
    static func removingGravity(_ samples: [AccelerationSample], time: Double = 1) -> [AccelerationSample] {
        var g = SIMD3<Double>(Double(samples[0].x), Double(samples[0].y), Double(samples[0].z))
        var last = samples[0].timestamp
        return samples.map { s in
            let a = SIMD3<Double>(Double(s.x), Double(s.y), Double(s.z))
            let alpha = min(1, Double(s.timestamp - last) / 1e9 / time)
            last = s.timestamp
            g += alpha * (a - g)
            let l = a - g
            return AccelerationSample(timestamp: s.timestamp, x: Float(l.x), y: Float(l.y), z: Float(l.z))
        }
    }

    @Test func aGravityRemovedPocketWalkCountsAsWellAsTheOriginal() throws {
        let total = try Self.read("walk-front-pocket-303.csv")
        let linear = Self.removingGravity(total)
        let asTotal = StepDetector.countSteps(in: total)
        let asLinear = StepDetector.countSteps(in: linear, input: .linearAcceleration)
        #expect(abs(asLinear - 303) <= 6, "linear \(asLinear) of 303")
        #expect(abs(asLinear - asTotal) <= 6, "linear \(asLinear), total \(asTotal)")
    }

    @Test(.enabled(if: Fixtures.sharedDataAvailable, "../shared/data is not present"))
    func handHeldWalksWithGravityRemovedCountAsWellAsWithIt() throws {
        let url = Fixtures.sharedData.appendingPathComponent("manifest.csv")
        let walks = try LabelledSet.manifest(text: String(contentsOf: url, encoding: .utf8), path: url.path)
            .filter { $0.kind == .walk && $0.placement == "hand" }
        #expect(walks.count >= 10)
        var errors: (total: Double, linear: Double, naive: Double) = (0, 0, 0)
        for walk in walks {
            var reader = try RecordingReader(path: walk.path, options: .init(format: walk.format))
            let total = try reader.readAll()
            let linear = Self.removingGravity(total)
            func error(_ n: Int) -> Double { abs(Double(n - walk.truth)) / Double(walk.truth) * 100 }
            errors.total += error(StepDetector.countSteps(in: total))
            errors.linear += error(StepDetector.countSteps(in: linear, input: .linearAcceleration))
            errors.naive += error(StepDetector.countSteps(in: linear))
        }
        let n = Double(walks.count)
        // Linear acceleration along its principal axis: within a point and a half of total
        // acceleration; its rectified magnitude, read as if it were total acceleration, is not.
        #expect(
            errors.linear / n <= errors.total / n + 1.5,
            "MAPE linear \(errors.linear / n) %, total \(errors.total / n) %")
        #expect(errors.naive / n >= 10, "MAPE of the magnitude \(errors.naive / n) %")
    }

    @Test func aPhyphoxLinearAccelerationExportIsCountedOnItsPrincipalAxis() throws {
        // The pocket walk written as phyphox writes "Acceleration (without g)": m/s², relative
        // seconds, quoted header. The reader says gravity is removed; the count follows.
        let linear = Self.removingGravity(try Self.read("walk-front-pocket-303.csv"))
        let first = linear[0].timestamp
        var text =
            "\"Time (s)\",\"Linear Acceleration x (m/s^2)\",\"Linear Acceleration y (m/s^2)\","
            + "\"Linear Acceleration z (m/s^2)\",\"Absolute acceleration (m/s^2)\"\n"
        for s in linear {
            let g = 9.806_65
            let (x, y, z) = (Double(s.x) * g, Double(s.y) * g, Double(s.z) * g)
            text +=
                "\(Double(s.timestamp - first) / 1e9),\(x),\(y),\(z),\((x * x + y * y + z * z).squareRoot())\n"
        }
        let folder = try Fixtures.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("Raw Data.csv").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        let summary = try countSteps(inFile: path)
        #expect(summary.format == .phyphox)
        #expect(!summary.gravityIncluded)
        #expect(abs(summary.steps - 303) <= 6, "\(summary.steps) of 303")
    }

    @Test func stillLinearInputCountsNothing() {
        var state: UInt64 = 5
        let samples = (0..<6000).map { i in
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let n = Float(Double(state >> 11) * 0x1p-53 - 0.5) * 0.02
            return AccelerationSample(timestamp: Int64(i) * 10_000_000, x: n, y: -n, z: n * 0.5)
        }
        #expect(StepDetector.countSteps(in: samples, input: .linearAcceleration) == 0)
    }

    @Test func theProjectionFollowsTheAxisOfMostMovement() {
        var projection = GravityFreeProjection(time: 1)
        for i in 0..<1000 {
            let t = Double(i) / 100
            let v = Float(0.3 * sin(2 * Double.pi * 1.8 * t))
            // Mostly along (0, 0.6, 0.8), a little along x.
            _ = projection.value(
                AccelerationSample(
                    timestamp: Int64(t * 1e9), x: 0.05 * Float(cos(7 * t)), y: 0.6 * v, z: 0.8 * v))
        }
        let axis = projection.principalAxis
        #expect(abs(abs(axis.y) - 0.6) < 0.05 && abs(abs(axis.z) - 0.8) < 0.05, "\(axis)")
    }

    /// Real exports carrying both signals of one recording, made by the phone's own fusion: the
    /// accelerometer (read as detected) and its gravity-removed twin (read by `--columns`, told
    /// gravity is removed) count alike.
    @Test(.enabled(if: Fixtures.sharedDataAvailable, "../shared/data is not present"))
    func theTwoSignalsOfAPhoneExportCountAlike() throws {
        let folder = Fixtures.sharedData.appendingPathComponent("formats")
        let pairs: [(file: String, linear: String)] = [
            (
                "androsensor/tez4__fhnw-ds-cdl1__walking_test_jg.csv",
                "time=Time since start in ms:ms,x=LINEAR ACCELERATION X (m/s²),y=LINEAR ACCELERATION Y (m/s²),"
                    + "z=LINEAR ACCELERATION Z (m/s²),unit=m/s2"
            ),
            (
                "physicstoolbox/tez4__fhnw-ds-cdl1__physics_toolbox_suite_multi_record.csv",
                "time=time:s,x=ax,y=ay,z=az,unit=m/s2"
            ),
            (
                "sensorlog/tez4__fhnw-ds-cdl1__2022-09-27_12_59_37_nz_iOS_device.csv",
                "time=motionTimestamp_sinceReboot(s):s,x=motionUserAccelerationX(G),"
                    + "y=motionUserAccelerationY(G),z=motionUserAccelerationZ(G),unit=g"
            ),
        ]
        for pair in pairs {
            let path = folder.appendingPathComponent(pair.file).path
            let total = try countSteps(inFile: path)
            let linear = try countSteps(
                inFile: path,
                options: .init(columns: ColumnLayout(parsing: pair.linear), gravityIncluded: false))
            #expect(total.gravityIncluded && !linear.gravityIncluded && !linear.gravityGuessed)
            #expect(total.steps >= 40, "\(pair.file): \(total.steps)")
            #expect(
                abs(linear.steps - total.steps) * 100 <= 6 * total.steps,
                "\(pair.file): accelerometer \(total.steps), gravity removed \(linear.steps)")
        }
    }

    @Test func removingGravityLeavesTheMotionOfATiltedPhone() {
        // Tilted 30° about x, bouncing 0.2 g along the vertical at 1.8 Hz: what is left is the
        // bounce, whatever the tilt.
        let up = SIMD3<Double>(0, sin(Double.pi / 6), cos(Double.pi / 6))
        let samples = (0..<2000).map { i in
            let t = Double(i) / 100
            let a = up * (1 + 0.2 * sin(2 * Double.pi * 1.8 * t))
            return AccelerationSample(
                timestamp: Int64(i) * 10_000_000, x: Float(a.x), y: Float(a.y), z: Float(a.z))
        }
        let linear = GravityRemoval.removingGravity(samples)
        for i in stride(from: 300, to: 1700, by: 7) {
            let t = Double(i) / 100
            let expected = up * 0.2 * sin(2 * Double.pi * 1.8 * t)
            let s = linear[i]
            let error = SIMD3(Double(s.x), Double(s.y), Double(s.z)) - expected
            #expect((error * error).sum().squareRoot() < 0.02, "at \(t) s: \(s)")
        }
    }
}
