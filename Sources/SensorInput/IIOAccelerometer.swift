public import StepDetection
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A live IIO accelerometer read through libiio, as a ``SampleSource``.
///
/// Reads through a buffer when the device has scan elements and a trigger
/// (``IIOBufferedReader``), otherwise by polling `in_accel_*_raw` at the requested rate
/// (``IIOPolledReader``). libiio's blocking calls run on a dedicated thread, bridged to the
/// consumer by a bounded stream. When the device goes away after capture started (unplugged,
/// driver reloaded, iiod restarted, a read error), the source logs one line, retries with
/// backoff and resumes; samples whose timestamp is not newer than the last one delivered are
/// dropped, so a reconnect never duplicates samples.
public final class IIOAccelerometer: SampleSource {
    /// How to open and read the device.
    public struct Configuration: Sendable {
        /// libiio context URI; `nil` or `local:` for this machine.
        public var uri: String?
        /// Device id, name or label; `nil` for the first accelerometer.
        public var device: String?
        /// Requested sampling rate in Hz; the nearest available one is used.
        public var rate: Double
        /// A trigger to use when the device has none set (its name or id).
        public var trigger: String?
        /// Which reading mode to use.
        public var mode: Mode
        /// Receives one line per notable event (mode chosen, device lost, reconnected).
        public var log: @Sendable (String) -> Void
        /// Longest wait between reconnection attempts, in seconds.
        public var maximumBackoff: Double

        /// A configuration for the given device, 100 Hz, automatic mode.
        public init(
            uri: String? = nil, device: String? = nil, rate: Double = 100, trigger: String? = nil,
            mode: Mode = .automatic, maximumBackoff: Double = 5,
            log: @escaping @Sendable (String) -> Void = { _ in }
        ) {
            self.uri = uri
            self.device = device
            self.rate = rate
            self.trigger = trigger
            self.mode = mode
            self.maximumBackoff = maximumBackoff
            self.log = log
        }
    }

    /// How samples are read.
    public enum Mode: String, Sendable, CaseIterable {
        /// Buffered when possible, else polled.
        case automatic = "auto"
        /// Buffered capture only (fails without scan elements or a trigger).
        case buffered
        /// Poll `in_accel_*_raw`.
        case polled
    }

    /// Counters of a running source.
    public struct Statistics: Sendable, Hashable {
        /// Samples delivered to the consumer.
        public var samples = 0
        /// Samples dropped because their timestamp was not newer than the last one delivered.
        public var duplicatesDropped = 0
        /// Times the device was lost and opened again.
        public var reconnects = 0
        /// The mode in use: `buffered` or `polled`.
        public var mode = ""
        /// The sampling frequency the device was set to, in Hz.
        public var rate = 0.0
        /// Whether timestamps are on `CLOCK_MONOTONIC` (so latency can be measured).
        public var monotonicTimestamps = false
        /// Why the device is being reconnected, and since when; nil while it delivers.
        public var lost: SourceInterruption?
    }

    /// `iio:device0 (lis3dh)`, or with the URI for remote devices.
    public let name: String
    /// The configuration the source was created with.
    public let configuration: Configuration
    private let stats = Locked(Statistics())
    private let running = Locked(0)

    /// Checks that the device exists (so a wrong name or a machine without IIO fails here,
    /// with a clear message) and remembers its name.
    public init(configuration: Configuration) throws(IIOError) {
        let context = try IIOContext(uri: configuration.uri)
        let device = try context.accelerometer(configuration.device)
        let display = IIODevice.displayName(device)
        name = context.uri == "local:" ? display : "\(display) at \(context.uri)"
        self.configuration = configuration
    }

    /// The counters so far.
    public var statistics: Statistics { stats.value }

    /// The device lost after capture started and not back yet (reconnecting), and since when.
    public var interruption: SourceInterruption? { stats.value.lost }

    /// Whether a reader thread is still running (it stops shortly after the stream ends).
    public var isRunning: Bool { running.value > 0 }

    /// Waits until the reader thread has closed the device (buffer disabled), at most
    /// `timeout` seconds.
    public func waitUntilStopped(timeout: Double = 2) async {
        let deadline = ContinuousClock.now + .milliseconds(Int(timeout * 1000))
        while isRunning && ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(10)) }
    }

    public func samples() -> AsyncThrowingStream<AccelerationSample, any Error> {
        let (stream, continuation) = AsyncThrowingStream.makeStream(
            of: AccelerationSample.self, throwing: (any Error).self, bufferingPolicy: .bufferingNewest(4096))
        let control = ReaderControl()
        continuation.onTermination = { _ in control.stop() }
        running.update { $0 += 1 }
        let configuration = configuration
        let name = name
        let stats = stats
        let started = startThread(named: "stepgate-iio") { [running] in
            defer { running.update { $0 -= 1 } }
            Self.readLoop(configuration: configuration, name: name, stats: stats, control: control) {
                continuation.yield($0)
            } finish: {
                continuation.finish(throwing: $0)
            }
        }
        if let code = started {
            running.update { $0 -= 1 }
            continuation.finish(throwing: IIOError(code: code, operation: "pthread_create", subject: name))
        }
        return stream
    }

    /// Opens the device, reads until stopped, and reconnects with backoff after a failure.
    private static func readLoop(
        configuration: Configuration, name: String, stats: Locked<Statistics>, control: ReaderControl,
        yield: (AccelerationSample) -> Void, finish: ((any Error)?) -> Void
    ) {
        var everStarted = false
        var backoff = 0.25
        var last = Int64.min
        var batch: [AccelerationSample] = []
        batch.reserveCapacity(1024)
        while !control.isStopped {
            do {
                let reader = try openReader(configuration)
                control.setCancel(reader.cancelHandle)
                // Clear the cancel handle before the reader (and its buffer) is released.
                defer { withExtendedLifetime(reader) { control.setCancel(nil) } }
                let rate = reader.rate
                let mode = reader.mode
                let monotonic = reader.monotonicTimestamps
                stats.update {
                    $0.mode = mode
                    $0.rate = rate
                    $0.monotonicTimestamps = monotonic
                    if everStarted { $0.reconnects += 1 }
                    $0.lost = nil
                }
                configuration.log(
                    everStarted
                        ? "\(name): reconnected (\(mode), \(formatRate(rate)) Hz)"
                        : "\(name): \(mode) capture at \(formatRate(rate)) Hz\(reader.note)")
                everStarted = true
                backoff = 0.25
                while !control.isStopped {
                    batch.removeAll(keepingCapacity: true)
                    try reader.read(into: &batch)
                    var delivered = 0
                    var dropped = 0
                    for sample in batch {
                        if sample.timestamp <= last {
                            dropped += 1
                            continue
                        }
                        last = sample.timestamp
                        yield(sample)
                        delivered += 1
                    }
                    stats.update {
                        $0.samples += delivered
                        $0.duplicatesDropped += dropped
                    }
                }
            } catch {
                if control.isStopped { break }
                guard everStarted else {
                    finish(error)
                    return
                }
                configuration.log("\(name): \(error); retrying in \(formatRate(backoff)) s")
                stats.update {
                    $0.lost = SourceInterruption(reason: "\(error)", since: $0.lost?.since ?? wallSeconds())
                }
                control.sleep(seconds: backoff)
                backoff = min(configuration.maximumBackoff, backoff * 2)
            }
        }
        finish(nil)
    }

    private static func openReader(_ configuration: Configuration) throws(IIOError) -> any IIOReader {
        switch configuration.mode {
        case .polled:
            return try IIOPolledReader(configuration: configuration)
        case .buffered:
            return try IIOBufferedReader(configuration: configuration)
        case .automatic:
            do {
                return try IIOBufferedReader(configuration: configuration)
            } catch let error where error.code == IIOBufferedReader.notBufferable {
                return try IIOPolledReader(configuration: configuration, note: " (\(error.subject))")
            }
        }
    }
}

func formatRate(_ value: Double) -> String {
    value == value.rounded() ? String(Int(value)) : String((value * 100).rounded() / 100)
}

/// One open device, read on the reader thread.
protocol IIOReader: AnyObject {
    /// `buffered` or `polled`.
    var mode: String { get }
    /// The sampling frequency in Hz.
    var rate: Double { get }
    /// Whether timestamps are on `CLOCK_MONOTONIC`.
    var monotonicTimestamps: Bool { get }
    /// Extra text for the start-up log line.
    var note: String { get }
    /// Something another thread may call to interrupt a blocking read.
    var cancelHandle: (@Sendable () -> Void)? { get }
    /// Appends the next samples (blocking, about 100 ms worth).
    func read(into samples: inout [AccelerationSample]) throws(IIOError)
}

/// A value behind a `Mutex`, shareable between threads.
final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    var value: Value { mutex.withLock { $0 } }
    func update(_ body: (inout Value) -> Void) { mutex.withLock { body(&$0) } }
}

/// Stop flag and cancellation shared between the consumer side and the reader thread.
final class ReaderControl: Sendable {
    private let stopped = Atomic(false)
    private let cancel = Mutex<(@Sendable () -> Void)?>(nil)

    var isStopped: Bool { stopped.load(ordering: .acquiring) }

    func stop() {
        stopped.store(true, ordering: .releasing)
        cancel.withLock { $0?() }
    }

    /// Set while a reader is open; cleared (under the lock) before it is closed, so `stop`
    /// never touches a closed buffer.
    func setCancel(_ handle: (@Sendable () -> Void)?) { cancel.withLock { $0 = handle } }

    /// Sleeps, waking early when stopped.
    func sleep(seconds: Double) {
        let deadline = monotonicNanoseconds() + Int64(seconds * 1e9)
        while !isStopped && monotonicNanoseconds() < deadline { usleep(20_000) }
    }
}

/// The wall clock in seconds since 1970.
func wallSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// `CLOCK_MONOTONIC` in nanoseconds: the timeline of IIO timestamps once
/// `current_timestamp_clock` is `monotonic`.
public func monotonicNanoseconds() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
}
