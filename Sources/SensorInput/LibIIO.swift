// swift-format-ignore-file: AlwaysUseLowerCamelCase

// (the iio_* functions at the end keep their C names: they stand in for libiio's own)
internal import CLibIIO

#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Musl)
    internal import Musl
#endif

/// libiio, opened when the first IIO context is created rather than when `stepgate` starts.
///
/// Linking libiio makes the dynamic loader map and relocate it and everything it depends on
/// (libxml2, ICU with its 30 MB of data, libsystemd, libusb, avahi, dbus, libgcrypt…) at every
/// start: about 3 ms of CPU and often 10 ms of wall time, paid by `replay`, `eval`, `tune` and
/// every control command that never touch a sensor. So the executable does not link it: the
/// functions StepGate uses are looked up with `dlsym` the first time ``load()`` runs (from
/// ``IIOContext``'s initialisers, the only way into libiio), and the `iio_*` functions below
/// shadow the C declarations of `CLibIIO` (whose header still gives the types), so the code
/// calling them reads as plain libiio. `@unchecked Sendable`: it holds only C function
/// pointers, set once.
struct LibIIO: @unchecked Sendable {
    /// The shared object, as the Debian package `libiio0` installs it.
    static let soname = "libiio.so.0"

    let bufferCancel: @convention(c) (OpaquePointer?) -> Void
    let bufferDestroy: @convention(c) (OpaquePointer?) -> Void
    let bufferEnd: @convention(c) (OpaquePointer?) -> UnsafeMutableRawPointer?
    let bufferFirst: @convention(c) (OpaquePointer?, OpaquePointer?) -> UnsafeMutableRawPointer?
    let bufferRefill: @convention(c) (OpaquePointer?) -> Int
    let bufferStart: @convention(c) (OpaquePointer?) -> UnsafeMutableRawPointer?
    let bufferStep: @convention(c) (OpaquePointer?) -> Int
    let channelAttrRead:
        @convention(c) (OpaquePointer?, UnsafePointer<CChar>?, UnsafeMutablePointer<CChar>?, Int) -> Int
    let channelConvert: @convention(c) (OpaquePointer?, UnsafeMutableRawPointer?, UnsafeRawPointer?) -> Void
    let channelDisable: @convention(c) (OpaquePointer?) -> Void
    let channelEnable: @convention(c) (OpaquePointer?) -> Void
    let channelFindAttr: @convention(c) (OpaquePointer?, UnsafePointer<CChar>?) -> UnsafePointer<CChar>?
    let channelGetDataFormat: @convention(c) (OpaquePointer?) -> UnsafePointer<iio_data_format>?
    let channelGetID: @convention(c) (OpaquePointer?) -> UnsafePointer<CChar>?
    let channelGetIndex: @convention(c) (OpaquePointer?) -> Int
    let channelGetType: @convention(c) (OpaquePointer?) -> iio_chan_type
    let channelIsOutput: @convention(c) (OpaquePointer?) -> Bool
    let channelIsScanElement: @convention(c) (OpaquePointer?) -> Bool
    let contextDestroy: @convention(c) (OpaquePointer?) -> Void
    let contextGetDevice: @convention(c) (OpaquePointer?, UInt32) -> OpaquePointer?
    let contextGetDevicesCount: @convention(c) (OpaquePointer?) -> UInt32
    let contextSetTimeout: @convention(c) (OpaquePointer?, UInt32) -> Int32
    let createContextFromURI: @convention(c) (UnsafePointer<CChar>?) -> OpaquePointer?
    let createLocalContext: @convention(c) () -> OpaquePointer?
    let createXMLContextMem: @convention(c) (UnsafePointer<CChar>?, Int) -> OpaquePointer?
    let deviceAttrRead:
        @convention(c) (OpaquePointer?, UnsafePointer<CChar>?, UnsafeMutablePointer<CChar>?, Int) -> Int
    let deviceAttrWrite: @convention(c) (OpaquePointer?, UnsafePointer<CChar>?, UnsafePointer<CChar>?) -> Int
    let deviceCreateBuffer: @convention(c) (OpaquePointer?, Int, Bool) -> OpaquePointer?
    let deviceFindAttr: @convention(c) (OpaquePointer?, UnsafePointer<CChar>?) -> UnsafePointer<CChar>?
    let deviceFindChannel: @convention(c) (OpaquePointer?, UnsafePointer<CChar>?, Bool) -> OpaquePointer?
    let deviceGetChannel: @convention(c) (OpaquePointer?, UInt32) -> OpaquePointer?
    let deviceGetChannelsCount: @convention(c) (OpaquePointer?) -> UInt32
    let deviceGetID: @convention(c) (OpaquePointer?) -> UnsafePointer<CChar>?
    let deviceGetLabel: @convention(c) (OpaquePointer?) -> UnsafePointer<CChar>?
    let deviceGetName: @convention(c) (OpaquePointer?) -> UnsafePointer<CChar>?
    let deviceGetTrigger: @convention(c) (OpaquePointer?, UnsafeMutablePointer<OpaquePointer?>?) -> Int32
    let deviceSetTrigger: @convention(c) (OpaquePointer?, OpaquePointer?) -> Int32

    /// Opens libiio and looks up every function; the error names what is missing.
    private init(handle: UnsafeMutableRawPointer) throws(IIOError) {
        func symbol<Function>(_ name: String, _: Function.Type) throws(IIOError) -> Function {
            guard let address = dlsym(handle, name) else {
                throw IIOError(
                    code: ENOSYS, operation: "dlsym",
                    subject: "\(name) is missing from \(LibIIO.soname) (StepGate needs libiio 0.24 or later)")
            }
            // The C prototype in iio.h and `Function` describe the same function: the
            // declarations above are transcribed from it, and LibIIOTests calls through them.
            return unsafeBitCast(address, to: Function.self)
        }
        bufferCancel = try symbol("iio_buffer_cancel", type(of: bufferCancel))
        bufferDestroy = try symbol("iio_buffer_destroy", type(of: bufferDestroy))
        bufferEnd = try symbol("iio_buffer_end", type(of: bufferEnd))
        bufferFirst = try symbol("iio_buffer_first", type(of: bufferFirst))
        bufferRefill = try symbol("iio_buffer_refill", type(of: bufferRefill))
        bufferStart = try symbol("iio_buffer_start", type(of: bufferStart))
        bufferStep = try symbol("iio_buffer_step", type(of: bufferStep))
        channelAttrRead = try symbol("iio_channel_attr_read", type(of: channelAttrRead))
        channelConvert = try symbol("iio_channel_convert", type(of: channelConvert))
        channelDisable = try symbol("iio_channel_disable", type(of: channelDisable))
        channelEnable = try symbol("iio_channel_enable", type(of: channelEnable))
        channelFindAttr = try symbol("iio_channel_find_attr", type(of: channelFindAttr))
        channelGetDataFormat = try symbol("iio_channel_get_data_format", type(of: channelGetDataFormat))
        channelGetID = try symbol("iio_channel_get_id", type(of: channelGetID))
        channelGetIndex = try symbol("iio_channel_get_index", type(of: channelGetIndex))
        channelGetType = try symbol("iio_channel_get_type", type(of: channelGetType))
        channelIsOutput = try symbol("iio_channel_is_output", type(of: channelIsOutput))
        channelIsScanElement = try symbol("iio_channel_is_scan_element", type(of: channelIsScanElement))
        contextDestroy = try symbol("iio_context_destroy", type(of: contextDestroy))
        contextGetDevice = try symbol("iio_context_get_device", type(of: contextGetDevice))
        contextGetDevicesCount = try symbol("iio_context_get_devices_count", type(of: contextGetDevicesCount))
        contextSetTimeout = try symbol("iio_context_set_timeout", type(of: contextSetTimeout))
        createContextFromURI = try symbol("iio_create_context_from_uri", type(of: createContextFromURI))
        createLocalContext = try symbol("iio_create_local_context", type(of: createLocalContext))
        createXMLContextMem = try symbol("iio_create_xml_context_mem", type(of: createXMLContextMem))
        deviceAttrRead = try symbol("iio_device_attr_read", type(of: deviceAttrRead))
        deviceAttrWrite = try symbol("iio_device_attr_write", type(of: deviceAttrWrite))
        deviceCreateBuffer = try symbol("iio_device_create_buffer", type(of: deviceCreateBuffer))
        deviceFindAttr = try symbol("iio_device_find_attr", type(of: deviceFindAttr))
        deviceFindChannel = try symbol("iio_device_find_channel", type(of: deviceFindChannel))
        deviceGetChannel = try symbol("iio_device_get_channel", type(of: deviceGetChannel))
        deviceGetChannelsCount = try symbol("iio_device_get_channels_count", type(of: deviceGetChannelsCount))
        deviceGetID = try symbol("iio_device_get_id", type(of: deviceGetID))
        deviceGetLabel = try symbol("iio_device_get_label", type(of: deviceGetLabel))
        deviceGetName = try symbol("iio_device_get_name", type(of: deviceGetName))
        deviceGetTrigger = try symbol("iio_device_get_trigger", type(of: deviceGetTrigger))
        deviceSetTrigger = try symbol("iio_device_set_trigger", type(of: deviceSetTrigger))
    }

    /// libiio opened once, by the first caller (Swift runs a global's initialiser once, thread-safely).
    private static let opened: Result<LibIIO, IIOError> = {
        guard let handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL) else {
            let reason = dlerror().map { String(cString: $0) } ?? "not found"
            return .failure(
                IIOError(
                    code: ENOENT, operation: "dlopen",
                    subject: "\(soname): \(reason) (install the Debian package libiio0)"))
        }
        return Result { () throws(IIOError) in try LibIIO(handle: handle) }
    }()

    /// Opens libiio (once); throws if it or one of its functions is missing.
    static func load() throws(IIOError) { _ = try opened.get() }

    /// The loaded library. Every path into libiio starts with an ``IIOContext``, whose
    /// initialisers call ``load()`` first, so this is only reached once loading succeeded.
    static var functions: LibIIO {
        switch opened {
        case .success(let library): library
        case .failure(let error): preconditionFailure("libiio used before IIOContext loaded it: \(error)")
        }
    }
}

// The libiio functions StepGate calls, by their C names and with their C signatures; each
// shadows the declaration imported from CLibIIO and calls through ``LibIIO``.

func iio_buffer_cancel(_ buffer: OpaquePointer?) { LibIIO.functions.bufferCancel(buffer) }
func iio_buffer_destroy(_ buffer: OpaquePointer?) { LibIIO.functions.bufferDestroy(buffer) }
func iio_buffer_end(_ buffer: OpaquePointer?) -> UnsafeMutableRawPointer? {
    LibIIO.functions.bufferEnd(buffer)
}
func iio_buffer_first(_ buffer: OpaquePointer?, _ channel: OpaquePointer?) -> UnsafeMutableRawPointer? {
    LibIIO.functions.bufferFirst(buffer, channel)
}
func iio_buffer_refill(_ buffer: OpaquePointer?) -> Int { LibIIO.functions.bufferRefill(buffer) }
func iio_buffer_start(_ buffer: OpaquePointer?) -> UnsafeMutableRawPointer? {
    LibIIO.functions.bufferStart(buffer)
}
func iio_buffer_step(_ buffer: OpaquePointer?) -> Int { LibIIO.functions.bufferStep(buffer) }
func iio_channel_attr_read(
    _ channel: OpaquePointer?, _ attribute: UnsafePointer<CChar>?,
    _ destination: UnsafeMutablePointer<CChar>?,
    _ length: Int
) -> Int {
    LibIIO.functions.channelAttrRead(channel, attribute, destination, length)
}
func iio_channel_convert(
    _ channel: OpaquePointer?, _ destination: UnsafeMutableRawPointer?, _ source: UnsafeRawPointer?
) {
    LibIIO.functions.channelConvert(channel, destination, source)
}
func iio_channel_disable(_ channel: OpaquePointer?) { LibIIO.functions.channelDisable(channel) }
func iio_channel_enable(_ channel: OpaquePointer?) { LibIIO.functions.channelEnable(channel) }
func iio_channel_find_attr(_ channel: OpaquePointer?, _ name: UnsafePointer<CChar>?) -> UnsafePointer<CChar>?
{
    LibIIO.functions.channelFindAttr(channel, name)
}
func iio_channel_get_data_format(_ channel: OpaquePointer?) -> UnsafePointer<iio_data_format>? {
    LibIIO.functions.channelGetDataFormat(channel)
}
func iio_channel_get_id(_ channel: OpaquePointer?) -> UnsafePointer<CChar>? {
    LibIIO.functions.channelGetID(channel)
}
func iio_channel_get_index(_ channel: OpaquePointer?) -> Int { LibIIO.functions.channelGetIndex(channel) }
func iio_channel_get_type(_ channel: OpaquePointer?) -> iio_chan_type {
    LibIIO.functions.channelGetType(channel)
}
func iio_channel_is_output(_ channel: OpaquePointer?) -> Bool { LibIIO.functions.channelIsOutput(channel) }
func iio_channel_is_scan_element(_ channel: OpaquePointer?) -> Bool {
    LibIIO.functions.channelIsScanElement(channel)
}
func iio_context_destroy(_ context: OpaquePointer?) { LibIIO.functions.contextDestroy(context) }
func iio_context_get_device(_ context: OpaquePointer?, _ index: UInt32) -> OpaquePointer? {
    LibIIO.functions.contextGetDevice(context, index)
}
func iio_context_get_devices_count(_ context: OpaquePointer?) -> UInt32 {
    LibIIO.functions.contextGetDevicesCount(context)
}
func iio_context_set_timeout(_ context: OpaquePointer?, _ milliseconds: UInt32) -> Int32 {
    LibIIO.functions.contextSetTimeout(context, milliseconds)
}
func iio_create_context_from_uri(_ uri: UnsafePointer<CChar>?) -> OpaquePointer? {
    LibIIO.functions.createContextFromURI(uri)
}
func iio_create_local_context() -> OpaquePointer? { LibIIO.functions.createLocalContext() }
func iio_create_xml_context_mem(_ xml: UnsafePointer<CChar>?, _ length: Int) -> OpaquePointer? {
    LibIIO.functions.createXMLContextMem(xml, length)
}
func iio_device_attr_read(
    _ device: OpaquePointer?, _ attribute: UnsafePointer<CChar>?, _ destination: UnsafeMutablePointer<CChar>?,
    _ length: Int
) -> Int {
    LibIIO.functions.deviceAttrRead(device, attribute, destination, length)
}
func iio_device_attr_write(
    _ device: OpaquePointer?, _ attribute: UnsafePointer<CChar>?, _ source: UnsafePointer<CChar>?
) -> Int {
    LibIIO.functions.deviceAttrWrite(device, attribute, source)
}
func iio_device_create_buffer(_ device: OpaquePointer?, _ samples: Int, _ cyclic: Bool) -> OpaquePointer? {
    LibIIO.functions.deviceCreateBuffer(device, samples, cyclic)
}
func iio_device_find_attr(_ device: OpaquePointer?, _ name: UnsafePointer<CChar>?) -> UnsafePointer<CChar>? {
    LibIIO.functions.deviceFindAttr(device, name)
}
func iio_device_find_channel(_ device: OpaquePointer?, _ name: UnsafePointer<CChar>?, _ output: Bool)
    -> OpaquePointer?
{
    LibIIO.functions.deviceFindChannel(device, name, output)
}
func iio_device_get_channel(_ device: OpaquePointer?, _ index: UInt32) -> OpaquePointer? {
    LibIIO.functions.deviceGetChannel(device, index)
}
func iio_device_get_channels_count(_ device: OpaquePointer?) -> UInt32 {
    LibIIO.functions.deviceGetChannelsCount(device)
}
func iio_device_get_id(_ device: OpaquePointer?) -> UnsafePointer<CChar>? {
    LibIIO.functions.deviceGetID(device)
}
func iio_device_get_label(_ device: OpaquePointer?) -> UnsafePointer<CChar>? {
    LibIIO.functions.deviceGetLabel(device)
}
func iio_device_get_name(_ device: OpaquePointer?) -> UnsafePointer<CChar>? {
    LibIIO.functions.deviceGetName(device)
}
func iio_device_get_trigger(_ device: OpaquePointer?, _ trigger: UnsafeMutablePointer<OpaquePointer?>?)
    -> Int32
{
    LibIIO.functions.deviceGetTrigger(device, trigger)
}
func iio_device_set_trigger(_ device: OpaquePointer?, _ trigger: OpaquePointer?) -> Int32 {
    LibIIO.functions.deviceSetTrigger(device, trigger)
}
