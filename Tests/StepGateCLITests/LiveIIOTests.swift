import Foundation
import SensorInput
import StepDetection
import StepGateTestSupport
import StepHistoryStore
import Synchronization
import Testing
import Tuning
import UnlockPolicy

/// End-to-end tests of live IIO input: the real libiio (local backend and iiod) reads an
/// emulated accelerometer in a private mount + network namespace (Tests/Harness/fake-iio.sh).
/// Root only; skipped with the reason elsewhere.
@Suite(
    "live IIO input (emulated device, real libiio)", .serialized,
    .enabled(if: FakeIIO.unavailableReason == nil, "\(FakeIIO.unavailableReason ?? "")"))
struct LiveIIOTests {
    let stepgate = Fixtures.stepgateExecutable.path

    private func temporary(_ name: String) throws -> String {
        try Fixtures.temporaryFolder().appendingPathComponent(name).path
    }

    private func readCSV(_ path: String) throws -> [AccelerationSample] {
        var reader = try RecordingReader(path: path)
        return try reader.readAll()
    }

    private func replayCount(_ path: String) throws -> Int {
        let result = try runProcess(Fixtures.stepgateExecutable, ["replay", "--json", path])
        let line = try #require(result.standardOutput.split(separator: "\n").first)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        return try #require(object["steps"] as? Int)
    }

    @Test func lis3dhRecordedWalkCountsLikeReplay() throws {
        let original = Fixtures.samples.appendingPathComponent("walk-front-pocket-303.csv").path
        var samples = try readCSV(original)
        samples.removeLast(samples.count % 100)  // whole 100 ms blocks at any rate used here
        let truth = try Fixtures.temporaryFolder().appendingPathComponent("walk.csv").path
        var writer = try StepGateCSVWriter(path: truth)
        try writer.write(contentsOf: samples)
        try writer.close()
        let device = try FakeIIO(profile: "lis3dh")
        defer { device.down() }
        // ±8 g (4 mg per count): the pocket walk peaks above the ±2 g default range.
        for axis in ["x", "y", "z"] { try device.setAttribute("in_accel_\(axis)_scale", "0.039226") }

        let feeder = Feeder(device, samples: samples)
        let out = try temporary("recorded.csv")
        let record = try device.exec([stepgate, "record", "-o", out, "--samples", "\(samples.count)"])
        feeder.wait()
        #expect(record.status == 0, "\(record.standardError)")
        #expect(record.standardError.contains("buffered capture at 100 Hz"), "\(record.standardError)")
        #expect(feeder.error == nil)
        let recorded = try readCSV(out)
        #expect(recorded.count == samples.count)
        #expect(recorded.map(\.timestamp) == samples.map(\.timestamp))
        // 12-bit quantisation: within half a count (2 mg) of the input.
        let worst =
            zip(recorded, samples).map { max(abs($0.x - $1.x), abs($0.y - $1.y), abs($0.z - $1.z)) }.max()
            ?? 1
        #expect(worst <= 0.0021)
        #expect(device.attribute("sampling_frequency") == "100")
        #expect(device.attribute("current_timestamp_clock") == "monotonic")
        #expect(device.attribute("buffer/enable") == "0")

        let feeder2 = Feeder(device, samples: samples)
        let ledger = try temporary("steps.json")
        let run = try device.exec([
            stepgate, "run", "--json", "--ledger", ledger, "--samples", "\(samples.count)",
        ])
        feeder2.wait()
        #expect(run.status == 0, "\(run.standardError)")
        let summary = try #require(run.standardOutput.split(separator: "\n").last)
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(summary.utf8)) as? [String: Any])
        let live = try #require(object["steps"] as? Int)
        let replayOfRecording = try replayCount(out)
        let replayOfOriginal = try replayCount(truth)
        #expect(live == replayOfRecording)
        #expect(live == replayOfOriginal)
        #expect(abs(live - 303) <= 10)
        // The step history holds the live count (in today's hours; the walk took minutes).
        let history = try StepHistory.decode(Array(try String(contentsOfFile: ledger, encoding: .utf8).utf8))
        #expect(history.total == live)
    }

    @Test func daemonUnlocksWhenTheEmulatedDeviceWalks() throws {
        var samples = try readCSV(Fixtures.samples.appendingPathComponent("walk-front-pocket-303.csv").path)
        samples.removeLast(samples.count % 100)
        let device = try FakeIIO(profile: "lis3dh")
        defer { device.down() }
        for axis in ["x", "y", "z"] { try device.setAttribute("in_accel_\(axis)_scale", "0.039226") }
        let folder = try Fixtures.temporaryFolder()
        let hosts = folder.appendingPathComponent("hosts").path
        try "127.0.0.1 localhost\n".write(toFile: hosts, atomically: true, encoding: .utf8)
        let socket = folder.appendingPathComponent("control.sock").path
        let config = folder.appendingPathComponent("config.json").path
        try """
        {
          "input": {"rate": 100},
          "policy": {"stores": {"games": {"selection": {"domains": ["example.com"]},
             "gate": {"goals": [{"steps": 100, "minutes": 5}]}}}},
          "stateDirectory": "\(folder.appendingPathComponent("state").path)",
          "controlSocket": "\(socket)",
          "shields": {"domains": {"browserPolicies": false, "path": "\(hosts)"}}
        }
        """.write(toFile: config, atomically: true, encoding: .utf8)
        let feeder = Feeder(device, samples: samples)
        let log = folder.appendingPathComponent("daemon.log").path
        let started = try device.exec([
            "/bin/sh", "-c", "\(stepgate) daemon --config \(config) > \(log) 2>&1 & echo $!",
        ])
        let pid = try #require(Int32(started.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)))
        defer {
            kill(pid, SIGTERM)
            feeder.wait(timeout: 5)
        }
        func store() -> [String: Any]? {
            guard
                let result = try? runProcess(
                    Fixtures.stepgateExecutable, ["status", "--json", "--socket", socket]),
                result.status == 0,
                let object = try? JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8))
                    as? [String: Any]
            else { return nil }
            return (object["stores"] as? [[String: Any]])?.first
        }
        var opened = false
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline && !opened {
            opened = store()?["shielded"] as? Bool == false
            if !opened { usleep(200_000) }
        }
        let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        #expect(opened, "the walk on the emulated device did not unlock the store; log:\n\(text)")
        #expect(text.contains("reading "), "\(text)")
        // Status tells what the policy requires now; the shield follows as its worker applies it.
        var hostsText = try String(contentsOfFile: hosts, encoding: .utf8)
        let applied = Date().addingTimeInterval(5)
        while hostsText.contains("0.0.0.0 example.com") && Date() < applied {
            usleep(50_000)
            hostsText = try String(contentsOfFile: hosts, encoding: .utf8)
        }
        #expect(!hostsText.contains("0.0.0.0 example.com"))
    }

    @Test func mpu6050BigEndianWithGyroTemperatureAndMountMatrix() throws {
        let device = try FakeIIO(profile: "mpu6050")
        defer { device.down() }
        let devices = try device.exec([stepgate, "devices", "--json"])
        #expect(devices.status == 0, "\(devices.standardError)")
        #expect(devices.standardOutput.contains("\"type\":\"be:s16/16>>0\""))
        #expect(devices.standardOutput.contains("\"id\":\"anglvel_z\""))
        #expect(devices.standardOutput.contains("\"id\":\"temp\""))
        #expect(devices.standardOutput.contains("\"mount_matrix_source\":\"in_accel_mount_matrix\""))
        let samples = (0..<200).map {
            AccelerationSample(timestamp: 1_000_000_000 + Int64($0) * 10_000_000, x: 0.5, y: 0.25, z: -1)
        }
        let feeder = Feeder(device, samples: samples)
        let out = try temporary("mpu.csv")
        let record = try device.exec([
            stepgate, "record", "-o", out, "--samples", "200", "--device", "mpu6050",
        ])
        feeder.wait()
        #expect(record.status == 0, "\(record.standardError)")
        let recorded = try readCSV(out)
        #expect(recorded.count == 200)
        // Sensor (0.5, 0.25, -1) through "0, 1, 0; -1, 0, 0; 0, 0, 1" is (0.25, -0.5, -1).
        let first = try #require(recorded.first)
        #expect(abs(first.x - 0.25) < 0.0002 && abs(first.y + 0.5) < 0.0002 && abs(first.z + 1) < 0.0002)
        #expect(device.attribute("scan_elements/in_anglvel_x_en") == "0")
    }

    @Test func polledFallbackWithoutTrigger() throws {
        let device = try FakeIIO(profile: "lis3dh", noTrigger: true)
        defer { device.down() }
        try device.setAttribute("in_accel_x_raw", "100")
        try device.setAttribute("in_accel_y_raw", "-200")
        let out = try temporary("polled.csv")
        let started = Date()
        let record = try device.exec([stepgate, "record", "-o", out, "--samples", "25", "--rate", "50"])
        let elapsed = Date().timeIntervalSince(started)
        #expect(record.status == 0, "\(record.standardError)")
        #expect(record.standardError.contains("polled capture at 50 Hz"), "\(record.standardError)")
        let recorded = try readCSV(out)
        #expect(recorded.count == 25)
        let g = Float(0.009806 / 9.80665)
        #expect(
            recorded.allSatisfy {
                abs($0.x - 100 * g) < 1e-5 && abs($0.y + 200 * g) < 1e-5 && abs($0.z - 1000 * g) < 1e-4
            })
        let intervals = zip(recorded.dropFirst(), recorded).map { Double($0.timestamp - $1.timestamp) / 1e6 }
        // Paced at the rate: strictly increasing, the typical interval 20 ms (one late wake-up
        // on a loaded machine is not a pacing fault).
        #expect(intervals.allSatisfy { $0 > 0 }, "\(intervals)")
        let median = intervals.sorted()[intervals.count / 2]
        #expect(median > 10 && median < 40, "\(intervals)")
        #expect(elapsed >= 0.4)
    }

    @Test func iiodOverLoopbackInAPrivateNetworkNamespace() throws {
        let device = try FakeIIO(profile: "lis3dh")
        defer { device.down() }
        try device.startIIOD()
        let devices = try device.netexec([stepgate, "devices", "--uri", "ip:127.0.0.1"])
        #expect(devices.status == 0, "\(devices.standardError)")
        #expect(devices.standardOutput.contains("iio:device0 (lis3dh)"))
        let samples = SyntheticWalk().samples(steps: 20)
        let count = samples.count - samples.count % 100
        let feeder = Feeder(device, samples: Array(samples.prefix(count)))
        let out = try temporary("net.csv")
        let record = try device.netexec([
            stepgate, "record", "--uri", "ip:127.0.0.1", "-o", out, "--samples", "\(count)",
        ])
        feeder.wait()
        #expect(record.status == 0, "\(record.standardError)")
        #expect(try readCSV(out).map(\.timestamp) == samples.prefix(count).map(\.timestamp))
    }

    @Test func deviceVanishingMidCaptureLosesAndDuplicatesNothing() throws {
        let device = try FakeIIO(profile: "lis3dh")
        defer { device.down() }
        let samples = Array(SyntheticWalk().samples(steps: 40).prefix(2000))
        let first = Feeder(device, samples: Array(samples.prefix(1000)), ending: .vanish)
        let hidden = device.state.appendingPathComponent("hidden-device")
        let orchestrator = Thread {
            first.wait()
            // The driver goes away for a while, then comes back.
            try? FileManager.default.moveItem(at: device.deviceFolder, to: hidden)
            Thread.sleep(forTimeInterval: 2)
            try? FileManager.default.moveItem(at: hidden, to: device.deviceFolder)
            _ = Feeder(device, samples: Array(samples.suffix(1000)))
        }
        orchestrator.start()
        let out = try temporary("gap.csv")
        let record = try device.exec([stepgate, "record", "-o", out, "--samples", "2000"], timeout: 60)
        #expect(record.status == 0, "\(record.standardError)")
        #expect(record.standardError.contains("reconnected"), "\(record.standardError)")
        #expect(record.standardError.contains("retrying in"))
        let recorded = try readCSV(out)
        #expect(recorded.count == 2000)
        #expect(recorded.map(\.timestamp) == samples.map(\.timestamp))
    }

    @Test func runStopsOnSIGINTWithASummaryAndLatencyAtOneHundredHertz() throws {
        let device = try FakeIIO(profile: "lis3dh")
        defer { device.down() }
        var walk = SyntheticWalk()
        walk.stillBefore = 1
        let samples = walk.samples(steps: 24)
        let feeder = Feeder(device, samples: samples, timing: .live(rate: 100))
        let ledger = try temporary("steps.json")
        // The feed starts when `run` enables the buffer; SIGINT comes `timeout` seconds after
        // the start. 10 s of it for starting: a full parallel test run has taken over 5 s, and
        // SIGINT then cut the walk off.
        let seconds = Double(samples.count) / 100 + 1.5 + 10
        let run = try device.exec(
            [stepgate, "run", "--json", "--ledger", ledger, "--goal", "20"], timeout: Int(seconds))
        feeder.wait()
        #expect(run.status == 0, "\(run.standardError)")
        let lines = run.standardOutput.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        let summary = try #require(lines.last)
        #expect(summary["stopped"] as? String == "SIGINT")
        let steps = try #require(summary["steps"] as? Int)
        #expect(abs(steps - 24) <= 2)
        // Steps after the walk is confirmed are reported one by one: their latency from the
        // filtered peak is the detector's delay (the signal falling by the prominence, about a
        // quarter of a step period) plus at most one 50 ms block and the scheduling of the test.
        let latencies = lines.filter { $0["event"] as? String == "step" }.compactMap {
            $0["latency_ms"] as? Double
        }
        // A run that started late reads a backlog first (latencies falling by a step period
        // each): one by one means from where it caught up.
        let oneByOne = latencies.suffix(max(0, latencies.count - 8)).drop { $0 > 350 }
        #expect(!oneByOne.isEmpty)
        #expect(oneByOne.allSatisfy { $0 <= 350 }, "\(latencies)")
        // A restart continues today's count.
        let feeder2 = Feeder(device, samples: samples, timing: .fast)
        let again = try device.exec([
            stepgate, "run", "--json", "--ledger", ledger, "--samples",
            "\(samples.count - samples.count % 100)",
        ])
        feeder2.wait()
        let today = try #require(again.standardOutput.split(separator: "\n").last)
        #expect(
            today.contains(
                "\"today\":\(steps + (try #require((try JSONSerialization.jsonObject(with: Data(today.utf8)) as? [String: Any])?["steps"] as? Int)))"
            ))
    }

    @Test func permissionDeniedAsANonRootUserNamesTheUdevRule() throws {
        let device = try FakeIIO(profile: "lis3dh")
        defer { device.down() }
        // Copies nobody may run, outside the build folder: the front door and, beside it, the
        // full program, which runs `record` and `devices`.
        let folder = "/tmp/stepgate-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        chmod(folder, 0o755)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let copy = folder + "/stepgate"
        try FileManager.default.copyItem(atPath: stepgate, toPath: copy)
        try FileManager.default.copyItem(
            atPath: Fixtures.fullProgramExecutable.path, toPath: folder + "/stepgate-full")
        let output = "/tmp/nobody-\(UUID().uuidString).csv"
        defer { unlink(output) }
        let record = try device.exec([
            "runuser", "-u", "nobody", "--", copy, "record", "-o", output, "--samples", "10",
        ])
        #expect(record.status == 1)
        #expect(record.standardError.contains("Permission denied"), "\(record.standardError)")
        #expect(record.standardError.contains("udev/60-stepgate-iio.rules"))
        let devices = try device.exec(["runuser", "-u", "nobody", "--", copy, "devices"])
        #expect(devices.standardOutput.contains("no permission"), "\(devices.standardOutput)")
    }
}

/// Resource use of `stepgate run` on an emulated 100 Hz walk; run on demand with
/// `STEPGATE_MEASURE_SECONDS=600 swift test --filter ResourceMeasurement` (root). Prints CPU
/// (utime+stime from /proc/PID/stat over the run) and peak resident memory (VmHWM).
/// `STEPGATE_MEASURE_EXECUTABLE` measures another build, such as the release static one.
@Suite(
    "resource measurement (on demand)",
    .enabled(
        if: FakeIIO.unavailableReason == nil
            && ProcessInfo.processInfo.environment["STEPGATE_MEASURE_SECONDS"] != nil,
        "set STEPGATE_MEASURE_SECONDS to measure (root)"))
struct ResourceMeasurement {
    @Test func cpuAndMemoryOfALiveRun() throws {
        let seconds = Double(ProcessInfo.processInfo.environment["STEPGATE_MEASURE_SECONDS"] ?? "") ?? 60
        let executable =
            ProcessInfo.processInfo.environment["STEPGATE_MEASURE_EXECUTABLE"]
            ?? Fixtures.stepgateExecutable.path
        let device = try FakeIIO(profile: "lis3dh")
        defer { device.down() }
        var walk = SyntheticWalk()
        walk.cadence = 1.8
        let samples = walk.samples(duration: seconds + 5, steps: Int(seconds * 1.8))
        let feeder = Feeder(device, samples: samples, timing: .live(rate: 100))
        let ledger = "/tmp/stepgate-measure-\(UUID().uuidString).json"
        defer { unlink(ledger) }
        let report = Mutex<String>("")
        let watcher = Thread {
            var pid: Int32 = 0
            for _ in 0..<500 where pid == 0 {
                usleep(20_000)
                let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
                for entry in entries {
                    guard let n = Int32(entry),
                        let data = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline")
                    else { continue }
                    let text = String(decoding: data.map { $0 == 0 ? 32 : $0 }, as: UTF8.self)
                    if text.hasPrefix(executable) && text.contains(ledger) { pid = n }
                }
            }
            func ticks() -> Double {
                let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
                let fields = stat.split(separator: ")").last?.split(separator: " ") ?? []
                return fields.count > 13 ? (Double(fields[11]) ?? 0) + (Double(fields[12]) ?? 0) : 0
            }
            Thread.sleep(forTimeInterval: 3)  // past start-up
            let start = ticks()
            let t0 = Date()
            Thread.sleep(forTimeInterval: seconds - 4)
            let used = (ticks() - start) / Double(sysconf(Int32(_SC_CLK_TCK)))
            let wall = Date().timeIntervalSince(t0)
            let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
            let hwm = status.split(separator: "\n").first { $0.hasPrefix("VmHWM") } ?? "?"
            let rss = status.split(separator: "\n").first { $0.hasPrefix("VmRSS") } ?? "?"
            report.withLock {
                $0 = "CPU \(used) s in \(wall) s = \(100 * used / wall) % of one core; \(hwm); \(rss)"
            }
        }
        watcher.start()
        let run = try device.exec(
            [executable, "run", "--json", "--ledger", ledger], timeout: Int(seconds))
        feeder.wait(timeout: 5)
        print("measurement: \(report.withLock { $0 })")
        print("measurement: \(run.standardOutput.split(separator: "\n").last ?? "")")
        #expect(run.status == 0)
    }
}
