internal import CLibIIO

#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Musl)
    internal import Musl
#endif

/// What `stepgate devices` shows about one IIO accelerometer: everything needed to tell
/// whether and how StepGate can read it.
public struct IIODeviceInfo: Sendable, Hashable {
    /// One input channel of the device.
    public struct Channel: Sendable, Hashable {
        /// libiio's channel id: `accel_x`, `anglvel_z`, `temp`, `timestamp`.
        public var id: String
        /// The scan type (`le:s12/16>>4`) when the channel can be captured in a buffer.
        public var scanType: ScanType?
        /// The `*_index` position in a scan, when buffered.
        public var index: Int?
        /// The `scale` attribute as the kernel wrote it, if any.
        public var scale: String?
        /// The `offset` attribute, if any.
        public var offset: String?
    }

    /// `iio:device0`.
    public var id: String
    /// The driver's name for the device, `lis3dh`.
    public var name: String?
    /// The device-tree or ACPI label, if any.
    public var label: String?
    /// Input channels, in libiio's order.
    public var channels: [Channel]
    /// The `sampling_frequency` attribute, in Hz, as text.
    public var samplingFrequency: String?
    /// The values `sampling_frequency_available` lists.
    public var availableFrequencies: [String]
    /// The current trigger's name, if a trigger is set.
    public var trigger: String?
    /// The mount matrix and where it came from (`udev ACCEL_MOUNT_MATRIX`, `mount_matrix`,
    /// `in_accel_mount_matrix`, or `identity (none given)`).
    public var mountMatrix: MountMatrix
    /// Where ``mountMatrix`` came from; for an invalid value, the parse error.
    public var mountMatrixSource: String
    /// `current_timestamp_clock`, if the device has one.
    public var timestampClock: String?
    /// Whether the accelerometer can be captured through a buffer (scan elements for x, y, z
    /// and a trigger).
    public var bufferedCapture: Bool
    /// Why buffered capture is or is not possible.
    public var captureNote: String
    /// For local devices: whether this user may capture (writes `buffer/enable`, opens
    /// `/dev/iio:deviceN`); `nil` over the network.
    public var accessProblem: String?

    /// `iio:device0 (lis3dh)`.
    public var displayName: String { name.map { "\(id) (\($0))" } ?? id }

    /// Every accelerometer of the local machine or of `uri`.
    public static func list(uri: String? = nil) throws(IIOError) -> [IIODeviceInfo] {
        let context = try IIOContext(uri: uri)
        return list(in: context)
    }

    /// Every accelerometer of a context.
    public static func list(in context: IIOContext) -> [IIODeviceInfo] {
        context.devices.filter(IIODevice.isAccelerometer).map { describe($0, context: context) }
    }

    static func describe(_ device: OpaquePointer, context: IIOContext) -> IIODeviceInfo {
        let channels = IIODevice.channels(device).filter { !iio_channel_is_output($0) }.map { channel in
            let scan = IIODevice.scanType(channel)
            return Channel(
                id: IIODevice.channelID(channel), scanType: scan,
                index: scan == nil ? nil : Int(iio_channel_get_index(channel)),
                scale: IIODevice.channelAttribute(channel, "scale"),
                offset: IIODevice.channelAttribute(channel, "offset"))
        }
        let trigger = IIODevice.trigger(device)
        let axesBuffered = ["accel_x", "accel_y", "accel_z"].allSatisfy { id in
            channels.contains { $0.id == id && $0.scanType != nil }
        }
        let note: String
        switch (axesBuffered, trigger) {
        case (true, .some): note = "buffered (trigger \(IIODevice.name(trigger!) ?? "?"))"
        case (true, nil): note = "polled: the device has a buffer but no trigger (give --trigger NAME)"
        case (false, _): note = "polled: the device has no scan elements for accel_x/y/z"
        }
        let (matrix, source) = mountMatrix(device, context: context)
        let id = IIODevice.id(device)
        return IIODeviceInfo(
            id: id, name: IIODevice.name(device), label: IIODevice.label(device), channels: channels,
            samplingFrequency: IIODevice.attribute(device, "sampling_frequency"),
            availableFrequencies: (IIODevice.attribute(device, "sampling_frequency_available") ?? "")
                .split(separator: " ").map(String.init),
            trigger: trigger.flatMap(IIODevice.name), mountMatrix: matrix, mountMatrixSource: source,
            timestampClock: IIODevice.attribute(device, "current_timestamp_clock"),
            bufferedCapture: axesBuffered && trigger != nil, captureNote: note,
            accessProblem: context.uri == "local:" ? localAccessProblem(id: id, buffered: axesBuffered) : nil)
    }

    /// The mount matrix: udev's `ACCEL_MOUNT_MATRIX` (local devices), else the sysfs
    /// `mount_matrix` or `in_accel_mount_matrix`, else the identity. An unparsable value
    /// gives the identity, with the error as the source.
    static func mountMatrix(_ device: OpaquePointer, context: IIOContext) -> (MountMatrix, String) {
        var candidates: [(String, String)] = []
        if context.uri == "local:",
            let text = udevProperty(deviceID: IIODevice.id(device), "ACCEL_MOUNT_MATRIX")
        {
            candidates.append((text, "udev ACCEL_MOUNT_MATRIX"))
        }
        if let text = IIODevice.attribute(device, "mount_matrix") {
            candidates.append((text, "mount_matrix"))
        } else if let x = IIODevice.channel(device, "accel_x"),
            let text = IIODevice.channelAttribute(x, "mount_matrix")
        {
            candidates.append((text, "in_accel_mount_matrix"))
        }
        guard let (text, source) = candidates.first else { return (.identity, "identity (none given)") }
        do {
            return (try MountMatrix(parsing: text), source)
        } catch {
            return (.identity, "identity (\(source): \(error))")
        }
    }

    /// A property udev recorded for the device's `/dev` node (`/run/udev/data/c<maj>:<min>`).
    static func udevProperty(deviceID: String, _ key: String) -> String? {
        guard let dev = readTextFile("/sys/bus/iio/devices/\(deviceID)/dev"),
            let data = readTextFile("/run/udev/data/c\(dev.trimmingIIOWhitespace())")
        else { return nil }
        return udevProperty(in: data, key)
    }

    /// Finds `E:KEY=value` in a udev database entry.
    static func udevProperty(in database: String, _ key: String) -> String? {
        for line in database.split(separator: "\n") where line.hasPrefix("E:\(key)=") {
            return String(line.dropFirst(key.count + 3))
        }
        return nil
    }

    /// Why this user could not capture from a local device, or nil.
    static func localAccessProblem(id: String, buffered: Bool) -> String? {
        let node = "/dev/\(id)"
        let sys = "/sys/bus/iio/devices/\(id)"
        if buffered {
            for path in [node, "\(sys)/buffer/enable", "\(sys)/buffer/length"]
            where access(path, R_OK | W_OK) != 0 {
                if errno == ENOENT && path == node { return "\(node) does not exist" }
                return
                    "no permission to write \(path); install \(IIOError.udevRule) and join the 'stepgate' group"
            }
        } else if access("\(sys)/in_accel_x_raw", R_OK) != 0 {
            return "no permission to read \(sys)/in_accel_x_raw; install \(IIOError.udevRule)"
        }
        return nil
    }
}
