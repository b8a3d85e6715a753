public import Foundation
import SensorInput
public import StepDetection
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// An emulated IIO accelerometer for end-to-end tests: `Tests/Harness/fake-iio.sh` builds a
/// fake sysfs tree and a FIFO device node inside a private mount + network namespace, and a
/// ``Feeder`` thread in the test process writes kernel-layout scans into the FIFO from the
/// host side, as the kernel's IIO buffer would. The real libiio local backend (and iiod)
/// read it. Root only; ``unavailableReason`` says why tests must skip.
public final class FakeIIO: Sendable {
    /// The state folder (fake tree, FIFO, PID files).
    public let state: URL
    /// The device folder on the host side.
    public let deviceFolder: URL
    private static let script = Fixtures.packageRoot.appendingPathComponent("Tests/Harness/fake-iio.sh").path

    /// Why namespace tests cannot run here, or nil when they can.
    public static let unavailableReason: String? = {
        if getuid() != 0 { return "needs root for mount namespaces (CI runs as root)" }
        for tool in ["unshare", "nsenter", "iio_info", "iiod", "ip"] where !commandExists(tool) {
            return "'\(tool)' is not installed (bash scripts/install-deps.sh)"
        }
        guard
            let probe = try? runProcess(
                URL(fileURLWithPath: "/usr/bin/unshare"), ["--mount", "--net", "true"]),
            probe.status == 0
        else { return "unshare --mount --net is not permitted here" }
        return nil
    }()

    private static func commandExists(_ name: String) -> Bool {
        ["/usr/bin/", "/usr/sbin/", "/bin/", "/sbin/"].contains {
            FileManager.default.isExecutableFile(atPath: $0 + name)
        }
    }

    /// Brings up a device with the given profile (`lis3dh` or `mpu6050`).
    public init(profile: String = "lis3dh", noTrigger: Bool = false, owner: String? = nil) throws {
        state = FileManager.default.temporaryDirectory.appendingPathComponent(
            "stepgate-fake-iio-\(UUID().uuidString)")
        deviceFolder = state.appendingPathComponent("sys/bus/iio/devices/iio:device0")
        var arguments = [Self.script, "up", state.path, "--profile", profile]
        if noTrigger { arguments.append("--no-trigger") }
        if let owner { arguments += ["--owner", owner] }
        let result = try runProcess(URL(fileURLWithPath: "/bin/bash"), arguments)
        guard result.status == 0 else {
            _ = try? runProcess(URL(fileURLWithPath: "/bin/bash"), [Self.script, "down", state.path])
            throw FakeIIOError(message: "fake-iio.sh up failed: \(result.standardError)")
        }
    }

    deinit { down() }

    /// Stops the namespace holder and iiod and removes the state folder. Idempotent.
    public func down() {
        _ = try? runProcess(URL(fileURLWithPath: "/bin/bash"), [Self.script, "down", state.path])
    }

    /// Runs a command inside the namespaces (it sees the fake device), with a timeout.
    public func exec(_ arguments: [String], timeout: Int = 60) throws -> ProcessResult {
        try runProcess(
            URL(fileURLWithPath: "/usr/bin/timeout"),
            [
                "--preserve-status", "-s", "INT", "-k", "5", String(timeout), "/bin/bash", Self.script,
                "exec", state.path,
            ] + arguments)
    }

    /// Runs a command in the network namespace only (real /sys; reaches iiod at 127.0.0.1).
    public func netexec(_ arguments: [String], timeout: Int = 60) throws -> ProcessResult {
        try runProcess(
            URL(fileURLWithPath: "/usr/bin/timeout"),
            [
                "--preserve-status", "-s", "INT", "-k", "5", String(timeout), "/bin/bash", Self.script,
                "netexec", state.path,
            ] + arguments)
    }

    /// Starts iiod inside the namespaces, listening on the namespace's loopback only.
    public func startIIOD() throws {
        let result = try runProcess(
            URL(fileURLWithPath: "/bin/bash"), [Self.script, "iiod-start", state.path])
        guard result.status == 0 else {
            throw FakeIIOError(message: "iiod-start failed: \(result.standardError)")
        }
    }

    /// Stops iiod (as a restart would).
    public func stopIIOD() {
        _ = try? runProcess(URL(fileURLWithPath: "/bin/bash"), [Self.script, "iiod-stop", state.path])
    }

    /// Reads a device attribute file on the host side (NULs and newline stripped).
    public func attribute(_ name: String) -> String {
        let data =
            FileManager.default.contents(atPath: deviceFolder.appendingPathComponent(name).path) ?? Data()
        return String(decoding: data.filter { $0 != 0 && $0 != 10 }, as: UTF8.self)
    }

    /// Writes a device attribute file on the host side.
    public func setAttribute(_ name: String, _ value: String) throws {
        try (value + "\n").write(
            to: deviceFolder.appendingPathComponent(name), atomically: false, encoding: .utf8)
    }

    /// The FIFO's host-side path.
    public var fifo: String { state.appendingPathComponent("dev/iio:device0").path }
}

/// A harness failure.
public struct FakeIIOError: Error, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}

/// Writes scans into the fake device's FIFO for one reader session, on its own thread: waits
/// for the reader to open the node and enable the buffer, lays out the enabled scan elements
/// from the `*_en`/`*_index`/`*_type` files, converts each sample (g, sensor frame) to raw
/// counts with the channel's scale, and writes it with its timestamp.
public final class Feeder: Sendable {
    /// How to time the scans.
    public enum Timing: Sendable {
        /// As fast as the reader takes them; timestamps from the samples.
        case fast
        /// Paced at `rate` Hz; timestamps are `CLOCK_MONOTONIC` when written (the sample's own
        /// timestamps are ignored), as a real sensor with `current_timestamp_clock=monotonic`.
        case live(rate: Double)
    }

    /// What to do after the last sample.
    public enum Ending: Sendable {
        /// Keep the node open until the reader disables the buffer (clean end).
        case waitForDisable
        /// Close at once: the reader sees nothing more (the device vanished).
        case vanish
    }

    private let written = Atomic(0)
    private let done = Atomic(false)
    private let failure = Mutex<String?>(nil)

    /// Scans written so far.
    public var scansWritten: Int { written.load(ordering: .acquiring) }
    /// Whether the session ended.
    public var isDone: Bool { done.load(ordering: .acquiring) }
    /// What went wrong, if anything.
    public var error: String? { failure.withLock { $0 } }

    /// Starts a session on `device`.
    public init(
        _ device: FakeIIO, samples: [AccelerationSample], timing: Timing = .fast,
        ending: Ending = .waitForDisable,
        timeout: Double = 60
    ) {
        signal(SIGPIPE, SIG_IGN)
        let folder = device.deviceFolder.path
        let fifo = device.fifo
        let thread = Thread { [self] in
            do {
                try self.session(
                    folder: folder, fifo: fifo, samples: samples, timing: timing, ending: ending,
                    timeout: timeout)
            } catch {
                self.failure.withLock { $0 = "\(error)" }
            }
            self.done.store(true, ordering: .releasing)
        }
        thread.start()
    }

    /// Waits until the session ended, at most `timeout` seconds.
    public func wait(timeout: Double = 30) {
        let deadline = Date().addingTimeInterval(timeout)
        while !isDone && Date() < deadline { usleep(10_000) }
    }

    private static func read(_ path: String) -> String {
        let data = FileManager.default.contents(atPath: path) ?? Data()
        return String(decoding: data.filter { $0 != 0 && $0 != 10 }, as: UTF8.self)
    }

    private func session(
        folder: String, fifo: String, samples: [AccelerationSample], timing: Timing, ending: Ending,
        timeout: Double
    ) throws {
        let deadline = Date().addingTimeInterval(timeout)
        // Wait for a reader: a non-blocking open fails with ENXIO until one has the node open.
        var descriptor: Int32 = -1
        while descriptor < 0 {
            descriptor = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
            if descriptor < 0 {
                guard Date() < deadline else { throw FakeIIOError(message: "no reader opened \(fifo)") }
                usleep(2000)
            }
        }
        defer { close(descriptor) }
        _ = fcntl(descriptor, F_SETFL, 0)
        let enable = folder + "/buffer/enable"
        while Self.read(enable) != "1" {
            guard Date() < deadline else {
                throw FakeIIOError(message: "the reader never enabled the buffer")
            }
            usleep(1000)
        }
        // The enabled scan elements, from the files libiio wrote.
        let scan = folder + "/scan_elements"
        var enabled: [(id: String, index: Int, type: ScanType)] = []
        for file in try FileManager.default.contentsOfDirectory(atPath: scan) where file.hasSuffix("_en") {
            let id = String(file.dropFirst(3).dropLast(3))
            guard Self.read("\(scan)/\(file)") == "1" else { continue }
            let type = try ScanType(parsing: Self.read("\(scan)/in_\(id)_type"))
            enabled.append((id, Int(Self.read("\(scan)/in_\(id)_index")) ?? 0, type))
        }
        let layout = ScanLayout(enabled)
        func scale(_ id: String) -> Double {
            let perChannel = Self.read("\(folder)/in_\(id)_scale")
            let shared = Self.read("\(folder)/in_\(id.split(separator: "_")[0])_scale")
            return Double(perChannel.isEmpty ? shared : perChannel) ?? 1
        }
        let scales = Dictionary(uniqueKeysWithValues: layout.elements.map { ($0.id, scale($0.id)) })
        var chunk: [UInt8] = []
        var index = 0
        let perChunk: Int
        var nextTime = monotonic()
        let period: Int64
        switch timing {
        case .fast:
            perChunk = 64
            period = 0
        case .live(let rate):
            perChunk = max(1, Int(rate / 100))
            period = Int64(1e9 / rate)
        }
        while index < samples.count {
            if period > 0 {
                let wait = nextTime - monotonic()
                if wait > 0 { usleep(UInt32(wait / 1000)) }
            }
            chunk.removeAll(keepingCapacity: true)
            let end = min(samples.count, index + perChunk)
            for i in index..<end {
                var sample = samples[i]
                if period > 0 { sample.timestamp = monotonic() - Int64(end - 1 - i) * period }
                Self.encode(sample, layout: layout, scales: scales, into: &chunk)
            }
            nextTime += period * Int64(end - index)
            let ok = chunk.withUnsafeBytes { bytes -> Bool in
                var offset = 0
                while offset < bytes.count {
                    let n = write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                    if n < 0 && errno == EINTR { continue }
                    if n <= 0 { return false }
                    offset += n
                }
                return true
            }
            guard ok else { return }  // the reader went away
            index = end
            written.store(index, ordering: .releasing)
            if Self.read(enable) != "1" { return }
        }
        if case .waitForDisable = ending {
            while Self.read(enable) == "1" && Date() < deadline { usleep(5000) }
        }
    }

    private func monotonic() -> Int64 { monotonicNanoseconds() }

    /// One scan in kernel layout.
    static func encode(
        _ sample: AccelerationSample, layout: ScanLayout, scales: [String: Double], into bytes: inout [UInt8]
    ) {
        let start = bytes.count
        bytes.append(contentsOf: repeatElement(0, count: layout.scanSize))
        for element in layout.elements {
            let value: Int64
            switch element.id {
            case "timestamp": value = sample.timestamp
            case "accel_x", "accel_y", "accel_z":
                let g = element.id == "accel_x" ? sample.x : element.id == "accel_y" ? sample.y : sample.z
                let raw = (Double(g) * standardGravity / (scales[element.id] ?? 1)).rounded()
                let limit = Double((Int64(1) << Int64(element.type.bits - 1)) - 1)
                value = Int64(min(limit, max(-limit - 1, raw)))
            case "temp": value = 2500
            default: value = 0
            }
            var encoded: [UInt8] = []
            element.type.encode(value, into: &encoded)
            for (k, byte) in encoded.enumerated() { bytes[start + element.offset + k] = byte }
        }
    }
}
