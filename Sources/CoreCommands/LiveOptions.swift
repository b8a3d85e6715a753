import Formatting
package import SensorInput

/// The options every live command takes to choose and open an IIO accelerometer.
package struct LiveOptions: Sendable {
    package static let specs: [OptionSpec] = [
        .option("device", "device", help: "IIO device id, name or label (default: the first accelerometer)."),
        .option("uri", "uri", help: "libiio context: local: (default), ip:HOST[:PORT], usb:…"),
        .option("rate", "hz", help: "Sampling rate; the nearest available is used (default 100)."),
        .option("trigger", "name", help: "Trigger to use when the device has none set."),
        .option("mode", "mode", help: "auto (default: buffered when possible), buffered or polled."),
        .option("duration", "seconds", help: "Stop after this many seconds."),
        .option("samples", "count", help: "Stop after this many samples."),
    ]

    package var device: String?
    package var uri: String?
    package var rate: Double
    package var trigger: String?
    package var mode: IIOAccelerometer.Mode
    package var duration: Double?
    package var sampleLimit: Int?

    package init(_ arguments: ParsedArguments) throws(UsageError) {
        device = arguments.value("device")
        uri = arguments.value("uri")
        rate =
            try arguments.value("rate", expected: "a rate in Hz between 0.1 and 10000") { text in
                Double(text).flatMap { (0.1...10_000).contains($0) ? $0 : nil }
            } ?? 100
        trigger = arguments.value("trigger")
        mode =
            try arguments.value("mode", expected: "auto, buffered or polled", IIOAccelerometer.Mode.init)
            ?? .automatic
        duration = try arguments.value("duration", expected: "a positive number of seconds") { text in
            Double(text).flatMap { $0 > 0 && $0.isFinite ? $0 : nil }
        }
        sampleLimit = try arguments.value("samples", expected: "a positive whole number") { text in
            Int(text).flatMap { $0 > 0 ? $0 : nil }
        }
    }

    /// Opens the source (checks that the device exists), logging to standard error.
    package func source() throws(IIOError) -> IIOAccelerometer {
        try IIOAccelerometer(
            configuration: .init(
                uri: uri, device: device, rate: rate, trigger: trigger, mode: mode,
                log: { printError("stepgate: \($0)") }))
    }
}
