internal import CSystemd
import Glibc

/// sd-bus from libsystemd, opened when the first desktop notice is sent, not when `stepgate`
/// starts.
///
/// Linking libsystemd made the loader map it and the six libraries it needs (libgcrypt,
/// libgpg-error, libcap, liblzma, libzstd, liblz4) and resolve their symbols at every start of
/// every command: about 40 % of the instructions `stepgate replay` spent before reading its file.
/// So, as with libiio and libmosquitto, the functions are looked up with `dlsym` once, by
/// ``load()``; `CSystemd`'s header gives the types. Only `stepgate notify-helper` (and the tests)
/// ever open it. `@unchecked Sendable`: only C function pointers, set once.
struct LibSystemd: @unchecked Sendable {
    /// The shared object, as the Debian package `libsystemd0` installs it.
    static let soname = "libsystemd.so.0"

    typealias Bus = OpaquePointer
    typealias Message = OpaquePointer
    typealias Slot = OpaquePointer

    let new: @convention(c) (UnsafeMutablePointer<Bus?>?) -> Int32
    let setAddress: @convention(c) (Bus?, UnsafePointer<CChar>?) -> Int32
    let setBusClient: @convention(c) (Bus?, Int32) -> Int32
    let setMethodCallTimeout: @convention(c) (Bus?, UInt64) -> Int32
    let start: @convention(c) (Bus?) -> Int32
    let closeUnref: @convention(c) (Bus?) -> Bus?
    let callAsync:
        @convention(c) (
            Bus?, UnsafeMutablePointer<Slot?>?, Message?, sd_bus_message_handler_t?, UnsafeMutableRawPointer?,
            UInt64
        ) -> Int32
    let process: @convention(c) (Bus?, UnsafeMutablePointer<Message?>?) -> Int32
    let wait: @convention(c) (Bus?, UInt64) -> Int32
    let slotUnref: @convention(c) (Slot?) -> Slot?
    let newMethodCall:
        @convention(c) (
            Bus?, UnsafeMutablePointer<Message?>?, UnsafePointer<CChar>?, UnsafePointer<CChar>?,
            UnsafePointer<CChar>?, UnsafePointer<CChar>?
        ) -> Int32
    let messageUnref: @convention(c) (Message?) -> Message?
    let getError: @convention(c) (Message?) -> UnsafePointer<sd_bus_error>?
    let isMethodError: @convention(c) (Message?, UnsafePointer<CChar>?) -> Int32
    let appendBasic: @convention(c) (Message?, CChar, UnsafeRawPointer?) -> Int32
    let openContainer: @convention(c) (Message?, CChar, UnsafePointer<CChar>?) -> Int32
    let closeContainer: @convention(c) (Message?) -> Int32
    let readBasic: @convention(c) (Message?, CChar, UnsafeMutableRawPointer?) -> Int32

    private init(handle: UnsafeMutableRawPointer) throws(NotificationError) {
        func symbol<Function>(_ name: String, _: Function.Type) throws(NotificationError) -> Function {
            guard let address = dlsym(handle, name) else {
                throw NotificationError("\(name) is missing from \(LibSystemd.soname)")
            }
            // The prototypes above are transcribed from sd-bus.h; NotificationTests calls through
            // every one of them against a notification server on a bus of the test's own.
            return unsafeBitCast(address, to: Function.self)
        }
        new = try symbol("sd_bus_new", type(of: new))
        setAddress = try symbol("sd_bus_set_address", type(of: setAddress))
        setBusClient = try symbol("sd_bus_set_bus_client", type(of: setBusClient))
        setMethodCallTimeout = try symbol("sd_bus_set_method_call_timeout", type(of: setMethodCallTimeout))
        start = try symbol("sd_bus_start", type(of: start))
        closeUnref = try symbol("sd_bus_close_unref", type(of: closeUnref))
        callAsync = try symbol("sd_bus_call_async", type(of: callAsync))
        process = try symbol("sd_bus_process", type(of: process))
        wait = try symbol("sd_bus_wait", type(of: wait))
        slotUnref = try symbol("sd_bus_slot_unref", type(of: slotUnref))
        newMethodCall = try symbol("sd_bus_message_new_method_call", type(of: newMethodCall))
        messageUnref = try symbol("sd_bus_message_unref", type(of: messageUnref))
        getError = try symbol("sd_bus_message_get_error", type(of: getError))
        isMethodError = try symbol("sd_bus_message_is_method_error", type(of: isMethodError))
        appendBasic = try symbol("sd_bus_message_append_basic", type(of: appendBasic))
        openContainer = try symbol("sd_bus_message_open_container", type(of: openContainer))
        closeContainer = try symbol("sd_bus_message_close_container", type(of: closeContainer))
        readBasic = try symbol("sd_bus_message_read_basic", type(of: readBasic))
    }

    /// libsystemd opened once, by the first caller.
    private static let opened: Result<LibSystemd, NotificationError> = {
        guard let handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL) else {
            let reason = dlerror().map { String(cString: $0) } ?? "not found"
            return .failure(
                NotificationError("\(soname): \(reason) (install the Debian package libsystemd0)"))
        }
        return Result { () throws(NotificationError) in try LibSystemd(handle: handle) }
    }()

    /// The library, opened (once) if needed; throws if it or one of its functions is missing.
    static func load() throws(NotificationError) -> LibSystemd { try opened.get() }
}
