internal import CLibIIO
import StepDetection

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Reads an accelerometer through an IIO buffer: the device's trigger (or a configured one)
/// drives sampling, scans arrive in blocks of about 50 ms, each with its `in_timestamp`.
///
/// Set-up, in order: trigger; `sampling_frequency` (nearest available value);
/// `current_timestamp_clock` = `monotonic` when writable; enable accel x/y/z and the
/// timestamp; a buffer of `rate / 20` scans (50 ms) with a context timeout of at least 1 s and four
/// block periods (libiio 0.24 drops a partial block on timeout, so the timeout must cover a
/// whole block). Scans are decoded by ``ScanType`` at ``ScanLayout`` offsets (checked against
/// libiio's own at start-up).
final class IIOBufferedReader: IIOReader {
    /// The `IIOError.code` meaning "this device cannot be captured through a buffer".
    static let notBufferable = EOPNOTSUPP

    let mode = "buffered"
    let rate: Double
    let monotonicTimestamps: Bool
    let note: String
    let cancelHandle: (@Sendable () -> Void)?
    private let context: IIOContext
    private let buffer: OpaquePointer
    private let axes: IIOAxes
    private let layout: ScanLayout
    private let axisElements: [ScanLayout.Element]
    private let timestamp: ScanLayout.Element?
    private let scansPerBlock: Int

    init(configuration: IIOAccelerometer.Configuration) throws(IIOError) {
        context = try IIOContext(uri: configuration.uri)
        let device = try context.accelerometer(configuration.device)
        let display = IIODevice.displayName(device)
        axes = try IIOAxes(device: device, context: context)
        guard axes.channels.allSatisfy({ iio_channel_is_scan_element($0) }) else {
            throw IIOError(code: Self.notBufferable, operation: "buffer", subject: "no scan elements")
        }
        // Trigger: the device's own, else the configured one.
        var trigger = IIODevice.trigger(device)
        if trigger == nil, let wanted = configuration.trigger {
            guard let found = context.devices.first(where: { IIODevice.matches($0, wanted) && $0 != device })
            else {
                throw IIOError(
                    code: ENODEV, operation: "find trigger",
                    subject: "no trigger '\(wanted)' in \(context.uri)")
            }
            try check(iio_device_set_trigger(device, found), "iio_device_set_trigger \(wanted)", display)
            trigger = found
        }
        guard let trigger else {
            throw IIOError(code: Self.notBufferable, operation: "buffer", subject: "no trigger")
        }
        let deviceRate = try IIOAxes.setRate(device, requested: configuration.rate)
        // A software trigger (hrtimer) has its own rate.
        let triggerRate = try IIOAxes.setRate(trigger, requested: configuration.rate)
        rate = deviceRate ?? triggerRate ?? configuration.rate
        // Timestamps on CLOCK_MONOTONIC, so they do not jump with NTP.
        var clockNote = ""
        if IIODevice.hasAttribute(device, "current_timestamp_clock") {
            if IIODevice.attribute(device, "current_timestamp_clock") != "monotonic" {
                do {
                    try IIODevice.writeAttribute(device, "current_timestamp_clock", "monotonic")
                } catch {
                    clockNote =
                        " (timestamp clock stays \(IIODevice.attribute(device, "current_timestamp_clock") ?? "?"): \(error.reason))"
                }
            }
            monotonicTimestamps = IIODevice.attribute(device, "current_timestamp_clock") == "monotonic"
        } else {
            monotonicTimestamps = false
        }
        // Channels: exactly x, y, z and the timestamp.
        for channel in IIODevice.channels(device) { iio_channel_disable(channel) }
        for channel in axes.channels { iio_channel_enable(channel) }
        let timestampChannel = IIODevice.channel(device, "timestamp").flatMap {
            iio_channel_is_scan_element($0) ? $0 : nil
        }
        if let timestampChannel { iio_channel_enable(timestampChannel) }
        var enabled: [(id: String, index: Int, type: ScanType)] = []
        for channel in axes.channels + (timestampChannel.map { [$0] } ?? []) {
            guard let type = IIODevice.scanType(channel) else {
                throw IIOError(
                    code: EINVAL, operation: "scan type",
                    subject: "\(display) \(IIODevice.channelID(channel))")
            }
            enabled.append((IIODevice.channelID(channel), Int(iio_channel_get_index(channel)), type))
        }
        var layout = ScanLayout(enabled)
        // Blocks of about 50 ms, and a timeout that covers a whole block with margin.
        scansPerBlock = max(1, min(1024, Int((rate / 20).rounded(.down))))
        try context.setTimeout(milliseconds: max(1000, Int(4000 * Double(scansPerBlock) / rate)))
        errno = 0
        guard let buffer = iio_device_create_buffer(device, scansPerBlock, false) else {
            throw IIOError(code: currentErrno(), operation: "iio_device_create_buffer", subject: display)
        }
        self.buffer = buffer
        let bits = Int(bitPattern: UnsafeRawPointer(buffer))
        cancelHandle = { iio_buffer_cancel(OpaquePointer(bitPattern: bits)) }
        // Our layout must match libiio's; if it ever differs, libiio's offsets win (logged).
        var layoutNote = ""
        if let start = iio_buffer_start(buffer) {
            let libiioOffsets = (axes.channels + (timestampChannel.map { [$0] } ?? [])).map { channel in
                iio_buffer_first(buffer, channel).map { $0 - start } ?? -1
            }
            let step = iio_buffer_step(buffer)
            let ours = layout.elements.map(\.offset)
            if libiioOffsets != ours || step != layout.scanSize {
                layoutNote =
                    " (scan layout differs from libiio's: using libiio's offsets \(libiioOffsets), step \(step))"
                layout = ScanLayout(fixedOffsets: layout.elements, libiioOffsets, scanSize: step)
            }
        }
        self.layout = layout
        axisElements = axes.channels.compactMap { layout.element(IIODevice.channelID($0)) }
        timestamp = layout.element("timestamp")
        note =
            " (trigger \(IIODevice.name(trigger) ?? IIODevice.id(trigger)), \(scansPerBlock) scans per block, "
            + "mount matrix \(axes.matrixSource)\(timestamp == nil ? ", no timestamp channel" : ""))\(clockNote)\(layoutNote)"
    }

    deinit { iio_buffer_destroy(buffer) }

    func read(into samples: inout [AccelerationSample]) throws(IIOError) {
        let n = iio_buffer_refill(buffer)
        try check(n, "iio_buffer_refill")
        guard let start = iio_buffer_start(buffer), let end = iio_buffer_end(buffer) else { return }
        let step = layout.scanSize
        let total = (end - start) / step
        let now = monotonicNanoseconds()
        let period = Int64(1e9 / rate)
        let raw = UnsafeRawBufferPointer(start: start, count: end - start)
        let ex = axisElements[0]
        let ey = axisElements[1]
        let ez = axisElements[2]
        for i in 0..<total {
            let base = i * step
            let x = ex.type.decode(UnsafeRawBufferPointer(rebasing: raw[(base + ex.offset)...]))
            let y = ey.type.decode(UnsafeRawBufferPointer(rebasing: raw[(base + ey.offset)...]))
            let z = ez.type.decode(UnsafeRawBufferPointer(rebasing: raw[(base + ez.offset)...]))
            let time =
                timestamp.map { $0.type.decode(UnsafeRawBufferPointer(rebasing: raw[(base + $0.offset)...])) }
                ?? now - Int64(total - 1 - i) * period
            samples.append(axes.sample(timestamp: time, x: x, y: y, z: z))
        }
    }
}

extension ScanLayout {
    /// A layout with the given offsets (libiio's) instead of computed ones.
    init(fixedOffsets elements: [Element], _ offsets: [Int], scanSize: Int) {
        self.init([])
        self.replace(
            elements: zip(elements, offsets).map { e, o in
                Element(id: e.id, index: e.index, type: e.type, offset: o)
            }, scanSize: scanSize)
    }
}
