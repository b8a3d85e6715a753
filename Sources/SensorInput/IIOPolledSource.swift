internal import CLibIIO
import StepDetection

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Reads an accelerometer by polling `in_accel_{x,y,z}_raw` at the requested rate: the
/// fallback for devices with no trigger (no interrupt line wired) or no buffer. Timestamps
/// are `CLOCK_MONOTONIC` at the moment of the read.
final class IIOPolledReader: IIOReader {
    let mode = "polled"
    let rate: Double
    let monotonicTimestamps = true
    let note: String
    let cancelHandle: (@Sendable () -> Void)? = nil
    private let context: IIOContext
    private let axes: IIOAxes
    private let period: Int64
    private var next: Int64
    private let perRead: Int

    init(configuration: IIOAccelerometer.Configuration, note: String = "") throws(IIOError) {
        context = try IIOContext(uri: configuration.uri)
        let device = try context.accelerometer(configuration.device)
        axes = try IIOAxes(device: device, context: context)
        // The sensor's own rate should be at least the polling rate.
        let deviceRate = try IIOAxes.setRate(device, requested: configuration.rate)
        let rate = max(0.1, configuration.rate)
        self.rate = rate
        period = Int64(1e9 / rate)
        perRead = max(1, Int(rate / 10))
        next = monotonicNanoseconds()
        self.note = note + (deviceRate.map { $0 != rate ? " (sensor at \(formatRate($0)) Hz)" : "" } ?? "")
        // Fail now, not in the loop, if the raw files cannot be read.
        _ = try readRaw()
    }

    private func readRaw() throws(IIOError) -> (Int64, Int64, Int64) {
        var values: [Int64] = []
        for channel in axes.channels {
            let text = try IIODevice.readChannelAttribute(channel, "raw")
            guard let value = Int64(text) else {
                throw IIOError(
                    code: EINVAL, operation: "parse \(IIODevice.channelID(channel)) raw",
                    subject: "'\(text)' is not an integer")
            }
            values.append(value)
        }
        return (values[0], values[1], values[2])
    }

    func read(into samples: inout [AccelerationSample]) throws(IIOError) {
        for _ in 0..<perRead {
            var now = monotonicNanoseconds()
            if next > now {
                var ts = timespec(tv_sec: Int(next / 1_000_000_000), tv_nsec: Int(next % 1_000_000_000))
                while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nil) == EINTR {}
                now = monotonicNanoseconds()
            } else if now - next > period * 10 {
                next = now  // fell far behind (suspend, stall): do not burst to catch up
            }
            next += period
            let (x, y, z) = try readRaw()
            samples.append(axes.sample(timestamp: now, x: x, y: y, z: z))
        }
    }
}
