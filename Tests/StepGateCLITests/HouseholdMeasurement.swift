import Foundation
import Glibc
import Household
import StepGateTestSupport
import Testing

/// Figures of the household over MQTT, against a real broker on loopback: how long a step
/// takes from the sensor host's message to the gate's count, and what MQTT costs a daemon
/// reading 100 samples a second. A short run in every test run (so it cannot rot); the figures
/// of docs/household.md come from `bash scripts/figures.sh household`, which runs it longer
/// (`STEPGATE_MEASURE_SECONDS`, `STEPGATE_MEASURE_EXECUTABLE` for the release build,
/// `STEPGATE_FIGURES_OUT` for the Markdown table).
@Suite(
    "MQTT figures",
    .enabled(if: TestBroker.unavailableReason == nil, "\(TestBroker.unavailableReason ?? "")"), .serialized)
struct HouseholdMeasurement {
    let environment = ProcessInfo.processInfo.environment
    var seconds: Double { environment["STEPGATE_MEASURE_SECONDS"].flatMap(Double.init) ?? 3 }
    var executable: String { environment["STEPGATE_MEASURE_EXECUTABLE"] ?? Fixtures.stepgateExecutable.path }

    private func daemon(_ folder: URL, name: String, input: String, mqtt: String?) throws -> (Process, String)
    {
        let home = folder.appendingPathComponent(name)
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        let config = home.appendingPathComponent("config.json").path
        try """
        {
          "input": \(input),
          "policy": {"stores": {"games": {"selection": {"domains": ["example.com"]},
             "gate": {"goals": [{"steps": 100000, "minutes": 1}]}}}},
          "stateDirectory": "\(home.appendingPathComponent("state").path)",
          "controlSocket": "\(home.appendingPathComponent("control.sock").path)",
          "shields": {"domains": {"browserPolicies": false, "path": "\(home.appendingPathComponent("hosts").path)"}}
          \(mqtt.map { ", \"mqtt\": \($0)" } ?? "")
        }
        """.write(toFile: config, atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["daemon", "--config", config]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        return (process, home.appendingPathComponent("control.sock").path)
    }

    private func waitForSocket(_ path: String) {
        for _ in 0..<200 where !FileManager.default.fileExists(atPath: path) { usleep(20_000) }
    }

    private func percentile(_ sorted: [Double], _ p: Double) -> Double {
        sorted.isEmpty ? .nan : sorted[min(sorted.count - 1, Int((Double(sorted.count - 1) * p).rounded()))]
    }

    /// (utime + stime in clock ticks, VmHWM in KiB) of a process.
    private func usage(_ pid: Int32) -> (ticks: Int, peakKiB: Int) {
        let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
        let fields = stat.split(separator: ")").last?.split(separator: " ") ?? []
        let ticks = fields.count > 12 ? (Int(fields[11]) ?? 0) + (Int(fields[12]) ?? 0) : 0
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") } ?? ""
        return (ticks, Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0)
    }

    @Test func stepLatencyThroughTheBrokerAndTheCostOfMQTT() throws {
        let broker = try TestBroker(tls: true)
        let folder = try Fixtures.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        var rows: [String] = []

        // Latency (TLS, as steps over MQTT need): a test client stands for the sensor host, one step per message, 20 a
        // second; the gate's own retained `steps` shows when it counted each.
        let (gate, socket) = try daemon(
            folder, name: "gate", input: #"{"mqtt": "stepgate/sensor"}"#,
            mqtt: #"{\#(broker.connectionJSON), "topicPrefix": "stepgate/gate"}"#)
        defer {
            kill(gate.processIdentifier, SIGKILL)
            gate.waitUntilExit()
        }
        waitForSocket(socket)
        let (sensor, seen) = try testClient(broker, id: "sensor", subscribe: ["stepgate/gate/steps"])
        defer { sensor.stop() }
        #expect(seen.wait { $0.connected() && $0.last("stepgate/gate/steps") != nil })
        let steps = max(20, Int(seconds * 20))
        var latencies: [Double] = []
        for step in 1...steps {
            let sent = ContinuousClock.now
            sensor.publish(
                MQTTMessage(
                    topic: "stepgate/sensor/steps/session/measure",
                    text: #"{"session":"measure","seq":\#(step + 1),"total":\#(step)}"#, retain: true))
            let counted = { (message: MQTTMessage) in
                message.topic == "stepgate/gate/steps" && message.text.contains("\"today\":\(step)}")
            }
            let arrived = seen.wait(5) { $0.arrival(of: counted) != nil }
            #expect(arrived, "step \(step) did not reach the gate's count")
            if let at = seen.arrival(of: counted) {
                let (whole, fraction) = (at - sent).components
                latencies.append(Double(whole) * 1000 + Double(fraction) / 1e15)
            }
            usleep(50_000)
        }
        latencies.sort()
        let median = percentile(latencies, 0.5)
        let p99 = percentile(latencies, 0.99)
        print("MQTT step latency over \(latencies.count) steps: median \(median) ms, p99 \(p99) ms")
        #expect(latencies.count == steps)
        #expect(median < 1000, "median latency \(median) ms")
        rows.append(
            "| step on the sensor host → the gate's count, through the broker and back (\(latencies.count) steps) | median \(String(format: "%.1f", median)) ms, p99 \(String(format: "%.1f", p99)) ms |"
        )

        // Cost: the same daemon reading the pocket walk at 100 samples a second (211 Hz at
        // 0.474 ×), with MQTT (publishing its state and sharing its steps) and without.
        let walk = Fixtures.samples.appendingPathComponent("walk-front-pocket-303.csv").path
        let input = #"{"replay": "\#(walk)", "speed": 0.474}"#
        var figures: [String: (cpu: Double, peak: Int)] = [:]
        for (label, mqtt) in [
            ("without MQTT", nil),
            (
                "with MQTT",
                #"{\#(broker.connectionJSON), "topicPrefix": "stepgate/cost", "shareSteps": true}"#
            ),
        ] as [(String, String?)] {
            let (process, socket) = try daemon(
                folder, name: label.replacingOccurrences(of: " ", with: "-"), input: input, mqtt: mqtt)
            defer {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
            }
            waitForSocket(socket)
            usleep(1_000_000)
            let before = usage(process.processIdentifier)
            let started = Date()
            usleep(useconds_t(seconds * 1_000_000))
            let after = usage(process.processIdentifier)
            let elapsed = Date().timeIntervalSince(started)
            let cpu = Double(after.ticks - before.ticks) / Double(sysconf(Int32(_SC_CLK_TCK))) / elapsed * 100
            figures[label] = (cpu, after.peakKiB)
            print(
                "daemon \(label) at 100 Hz: \(String(format: "%.2f", cpu)) % of a core, peak resident \(after.peakKiB) KiB"
            )
            rows.append(
                "| daemon at 100 Hz input, \(label) (\(Int(seconds)) s) | \(String(format: "%.2f", cpu)) % of a core, peak resident \(String(format: "%.1f", Double(after.peakKiB) / 1024)) MiB |"
            )
        }
        #expect(figures.count == 2)
        if let out = environment["STEPGATE_FIGURES_OUT"] {
            try (["| figure | value |", "|---|---|"] + rows).joined(separator: "\n").appending("\n")
                .write(toFile: out, atomically: true, encoding: .utf8)
        }
    }
}
