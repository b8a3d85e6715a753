internal import CLibIIO

#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Musl)
    internal import Musl
#endif

/// Owns a libiio context: the devices of this machine (`local:`), of a remote iiod
/// (`ip:HOST`), of a USB device (`usb:…`), or of an XML description.
///
/// Not `Sendable`: create, use and destroy it on one thread (the reader thread for live
/// capture). The context is destroyed with the object.
public final class IIOContext {
    let handle: OpaquePointer
    /// The URI the context was created from; `local:` for this machine.
    public let uri: String

    /// Opens the local IIO devices, or those at `uri` (`local:`, `ip:HOST[:PORT]`, `usb:…`).
    ///
    /// The corresponding libiio functions are `iio_create_local_context` and
    /// `iio_create_context_from_uri`.
    ///
    /// - Throws: ``IIOError``; for the local context, `ENOENT` becomes a message explaining
    ///   that the kernel has no IIO devices.
    public init(uri: String? = nil) throws(IIOError) {
        try LibIIO.load()
        errno = 0
        let requested = uri ?? "local:"
        let created: OpaquePointer?
        if requested == "local:" {
            created = iio_create_local_context()
        } else {
            created = iio_create_context_from_uri(requested)
        }
        guard let created else {
            let code = currentErrno()
            if requested == "local:" && code == ENOENT {
                throw IIOError(
                    code: code, operation: "iio_create_local_context",
                    subject:
                        "no IIO devices on this machine (/sys/bus/iio does not exist: the kernel has no IIO "
                        + "support loaded, or no sensor driver is bound; see 'Debugging your sensor' in docs/sensors.md)"
                )
            }
            throw IIOError(
                code: code,
                operation: requested == "local:" ? "iio_create_local_context" : "iio_create_context_from_uri",
                subject: requested)
        }
        handle = created
        self.uri = requested
    }

    /// A context described by libiio XML, for tests without devices.
    ///
    /// The corresponding libiio function is `iio_create_xml_context_mem`.
    init(xml: String) throws(IIOError) {
        try LibIIO.load()
        errno = 0
        let created = xml.withCString { iio_create_xml_context_mem($0, strlen($0)) }
        guard let created else {
            throw IIOError(code: currentErrno(), operation: "iio_create_xml_context_mem")
        }
        handle = created
        uri = "xml:"
    }

    deinit { iio_context_destroy(handle) }

    /// Every device of the context (sensors and triggers).
    ///
    /// The corresponding libiio functions are `iio_context_get_devices_count` and
    /// `iio_context_get_device`.
    var devices: [OpaquePointer] {
        (0..<iio_context_get_devices_count(handle)).compactMap { iio_context_get_device(handle, $0) }
    }

    /// Sets the timeout of blocking operations (buffer refills), in milliseconds; 0 waits
    /// forever.
    ///
    /// The corresponding libiio function is `iio_context_set_timeout`.
    func setTimeout(milliseconds: Int) throws(IIOError) {
        try check(
            iio_context_set_timeout(handle, UInt32(clamping: milliseconds)), "iio_context_set_timeout", uri)
    }

    /// The device whose id, name or label is `selector`, or the first accelerometer when
    /// `selector` is nil.
    func accelerometer(_ selector: String?) throws(IIOError) -> OpaquePointer {
        let accelerometers = devices.filter(IIODevice.isAccelerometer)
        if let selector {
            if let device = accelerometers.first(where: { IIODevice.matches($0, selector) }) { return device }
            let known = accelerometers.map(IIODevice.displayName).joined(separator: ", ")
            throw IIOError(
                code: ENODEV, operation: "find device",
                subject:
                    "no IIO accelerometer '\(selector)' in \(uri) (found: \(known.isEmpty ? "none" : known))")
        }
        guard let first = accelerometers.first else {
            throw IIOError(
                code: ENODEV, operation: "find device",
                subject:
                    "no IIO accelerometer in \(uri) (run 'stepgate devices' and see 'Debugging your sensor')")
        }
        return first
    }
}

@available(*, unavailable) extension IIOContext: Sendable {}

/// Helpers over libiio's device and channel handles (all `OpaquePointer`s owned by a
/// context, valid while it lives).
enum IIODevice {
    static func string(_ pointer: UnsafePointer<CChar>?) -> String? {
        guard let pointer else { return nil }
        return String(cString: pointer)
    }

    static func id(_ device: OpaquePointer) -> String { string(iio_device_get_id(device)) ?? "?" }
    static func name(_ device: OpaquePointer) -> String? { string(iio_device_get_name(device)) }
    static func label(_ device: OpaquePointer) -> String? { string(iio_device_get_label(device)) }

    /// `iio:device0 (lis3dh)`.
    static func displayName(_ device: OpaquePointer) -> String {
        name(device).map { "\(id(device)) (\($0))" } ?? id(device)
    }

    static func matches(_ device: OpaquePointer, _ selector: String) -> Bool {
        id(device) == selector || name(device) == selector || label(device) == selector
    }

    static func channels(_ device: OpaquePointer) -> [OpaquePointer] {
        (0..<iio_device_get_channels_count(device)).compactMap { iio_device_get_channel(device, $0) }
    }

    static func isAccelerometer(_ device: OpaquePointer) -> Bool {
        channels(device).contains { iio_channel_get_type($0) == IIO_ACCEL && !iio_channel_is_output($0) }
    }

    /// The input channel with the given id (`accel_x`, `timestamp`).
    static func channel(_ device: OpaquePointer, _ id: String) -> OpaquePointer? {
        iio_device_find_channel(device, id, false)
    }

    static func channelID(_ channel: OpaquePointer) -> String { string(iio_channel_get_id(channel)) ?? "?" }

    /// Whether the device has the attribute.
    static func hasAttribute(_ device: OpaquePointer, _ name: String) -> Bool {
        iio_device_find_attr(device, name) != nil
    }

    /// Reads a device attribute as text (trimmed), or nil when absent or unreadable.
    ///
    /// The corresponding libiio function is `iio_device_attr_read`.
    static func attribute(_ device: OpaquePointer, _ name: String) -> String? {
        guard hasAttribute(device, name) else { return nil }
        return try? readAttribute(device, name)
    }

    /// Reads a device attribute as text (trimmed).
    static func readAttribute(_ device: OpaquePointer, _ name: String) throws(IIOError) -> String {
        var buffer = [CChar](repeating: 0, count: 4096)
        let n = buffer.withUnsafeMutableBufferPointer {
            iio_device_attr_read(device, name, $0.baseAddress, $0.count)
        }
        try check(n, "iio_device_attr_read \(name)", displayName(device))
        return decode(buffer)
    }

    /// Writes a device attribute.
    ///
    /// The corresponding libiio function is `iio_device_attr_write`.
    static func writeAttribute(_ device: OpaquePointer, _ name: String, _ value: String) throws(IIOError) {
        try check(
            iio_device_attr_write(device, name, value), "iio_device_attr_write \(name)=\(value)",
            displayName(device))
    }

    /// Reads a channel attribute (`raw`, `scale`, `offset`, `mount_matrix`…) as text, or nil.
    ///
    /// The corresponding libiio function is `iio_channel_attr_read`.
    static func channelAttribute(_ channel: OpaquePointer, _ name: String) -> String? {
        guard iio_channel_find_attr(channel, name) != nil else { return nil }
        return try? readChannelAttribute(channel, name)
    }

    static func readChannelAttribute(_ channel: OpaquePointer, _ name: String) throws(IIOError) -> String {
        var buffer = [CChar](repeating: 0, count: 1024)
        let n = buffer.withUnsafeMutableBufferPointer {
            iio_channel_attr_read(channel, name, $0.baseAddress, $0.count)
        }
        try check(n, "iio_channel_attr_read \(channelID(channel)) \(name)")
        return decode(buffer)
    }

    /// The text up to the first NUL, trimmed.
    static func decode(_ buffer: [CChar]) -> String {
        let bytes = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        return String(decoding: bytes, as: UTF8.self).trimmingIIOWhitespace()
    }

    /// The channel's scan type, from libiio's parsed `*_type` (`iio_channel_get_data_format`).
    static func scanType(_ channel: OpaquePointer) -> ScanType? {
        guard iio_channel_is_scan_element(channel), let format = iio_channel_get_data_format(channel) else {
            return nil
        }
        let f = format.pointee
        return ScanType(
            isBigEndian: f.is_be, sign: f.is_signed ? .signed : .unsigned, bits: Int(f.bits),
            storageBits: Int(f.length), shift: Int(f.shift), repeatCount: max(1, Int(f.`repeat`)))
    }

    /// The current trigger's name, nil when none is set or it cannot be read.
    ///
    /// The corresponding libiio function is `iio_device_get_trigger`.
    static func trigger(_ device: OpaquePointer) -> OpaquePointer? {
        var trigger: OpaquePointer?
        guard iio_device_get_trigger(device, &trigger) == 0 else { return nil }
        return trigger
    }
}
