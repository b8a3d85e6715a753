internal import CMosquitto

#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Musl)
    internal import Musl
#endif

/// libmosquitto, opened when a daemon with an `mqtt` section starts, not when `stepgate` does.
///
/// Linking it would make the loader map libmosquitto and OpenSSL (about 5 MB of libcrypto) at
/// every start of every command, for the few machines that talk to a broker. So, as with
/// libiio, the functions are looked up with `dlsym` once, by ``load()``; `CMosquitto`'s header
/// gives the types and constants. `@unchecked Sendable`: only C function pointers, set once.
struct LibMosquitto: @unchecked Sendable {
    /// The shared object, as the Debian package `libmosquitto1` installs it.
    static let soname = "libmosquitto.so.1"

    typealias Client = OpaquePointer
    typealias ConnectCallback = @convention(c) (Client?, UnsafeMutableRawPointer?, Int32) -> Void
    typealias SubscribeCallback =
        @convention(c) (Client?, UnsafeMutableRawPointer?, Int32, Int32, UnsafePointer<Int32>?) -> Void
    typealias MessageCallback =
        @convention(c) (Client?, UnsafeMutableRawPointer?, UnsafePointer<mosquitto_message>?) -> Void
    typealias PasswordCallback =
        @convention(c) (UnsafeMutablePointer<CChar>?, Int32, Int32, UnsafeMutableRawPointer?) -> Int32

    let libInit: @convention(c) () -> Int32
    let libVersion:
        @convention(c) (
            UnsafeMutablePointer<Int32>?, UnsafeMutablePointer<Int32>?, UnsafeMutablePointer<Int32>?
        )
            -> Int32
    let new: @convention(c) (UnsafePointer<CChar>?, Bool, UnsafeMutableRawPointer?) -> Client?
    let destroy: @convention(c) (Client?) -> Void
    let threadedSet: @convention(c) (Client?, Bool) -> Int32
    let intOption: @convention(c) (Client?, mosq_opt_t, Int32) -> Int32
    let usernamePasswordSet: @convention(c) (Client?, UnsafePointer<CChar>?, UnsafePointer<CChar>?) -> Int32
    let willSet:
        @convention(c) (Client?, UnsafePointer<CChar>?, Int32, UnsafeRawPointer?, Int32, Bool) -> Int32
    let tlsSet:
        @convention(c) (
            Client?, UnsafePointer<CChar>?, UnsafePointer<CChar>?, UnsafePointer<CChar>?,
            UnsafePointer<CChar>?,
            PasswordCallback?
        ) -> Int32
    let connect: @convention(c) (Client?, UnsafePointer<CChar>?, Int32, Int32) -> Int32
    let reconnect: @convention(c) (Client?) -> Int32
    let disconnect: @convention(c) (Client?) -> Int32
    let loop: @convention(c) (Client?, Int32, Int32) -> Int32
    let publish:
        @convention(c) (
            Client?, UnsafeMutablePointer<Int32>?, UnsafePointer<CChar>?, Int32, UnsafeRawPointer?, Int32,
            Bool
        )
            -> Int32
    /// `mosquitto_subscribe_v5` (the properties, never used, as a raw pointer).
    let subscribe:
        @convention(c) (
            Client?, UnsafeMutablePointer<Int32>?, UnsafePointer<CChar>?, Int32, Int32, UnsafeRawPointer?
        ) -> Int32
    let subscribeCallbackSet: @convention(c) (Client?, SubscribeCallback?) -> Void
    let connectCallbackSet: @convention(c) (Client?, ConnectCallback?) -> Void
    let disconnectCallbackSet: @convention(c) (Client?, ConnectCallback?) -> Void
    let messageCallbackSet: @convention(c) (Client?, MessageCallback?) -> Void
    let userDataSet: @convention(c) (Client?, UnsafeMutableRawPointer?) -> Void
    let strerror: @convention(c) (Int32) -> UnsafePointer<CChar>?
    let reasonString: @convention(c) (Int32) -> UnsafePointer<CChar>?

    private init(handle: UnsafeMutableRawPointer) throws(MQTTError) {
        func symbol<Function>(_ name: String, _: Function.Type) throws(MQTTError) -> Function {
            guard let address = dlsym(handle, name) else {
                throw MQTTError(
                    "\(name) is missing from \(LibMosquitto.soname) (StepGate needs libmosquitto 2.0)")
            }
            // The prototypes above are transcribed from mosquitto.h; MQTTClientTests calls
            // through every one of them against a real broker.
            return unsafeBitCast(address, to: Function.self)
        }
        libInit = try symbol("mosquitto_lib_init", type(of: libInit))
        libVersion = try symbol("mosquitto_lib_version", type(of: libVersion))
        new = try symbol("mosquitto_new", type(of: new))
        destroy = try symbol("mosquitto_destroy", type(of: destroy))
        threadedSet = try symbol("mosquitto_threaded_set", type(of: threadedSet))
        intOption = try symbol("mosquitto_int_option", type(of: intOption))
        usernamePasswordSet = try symbol("mosquitto_username_pw_set", type(of: usernamePasswordSet))
        willSet = try symbol("mosquitto_will_set", type(of: willSet))
        tlsSet = try symbol("mosquitto_tls_set", type(of: tlsSet))
        connect = try symbol("mosquitto_connect", type(of: connect))
        reconnect = try symbol("mosquitto_reconnect", type(of: reconnect))
        disconnect = try symbol("mosquitto_disconnect", type(of: disconnect))
        loop = try symbol("mosquitto_loop", type(of: loop))
        publish = try symbol("mosquitto_publish", type(of: publish))
        subscribe = try symbol("mosquitto_subscribe_v5", type(of: subscribe))
        subscribeCallbackSet = try symbol("mosquitto_subscribe_callback_set", type(of: subscribeCallbackSet))
        connectCallbackSet = try symbol("mosquitto_connect_callback_set", type(of: connectCallbackSet))
        disconnectCallbackSet = try symbol(
            "mosquitto_disconnect_callback_set", type(of: disconnectCallbackSet))
        messageCallbackSet = try symbol("mosquitto_message_callback_set", type(of: messageCallbackSet))
        userDataSet = try symbol("mosquitto_user_data_set", type(of: userDataSet))
        strerror = try symbol("mosquitto_strerror", type(of: strerror))
        reasonString = try symbol("mosquitto_reason_string", type(of: reasonString))
    }

    /// libmosquitto opened and initialised once, by the first caller.
    private static let opened: Result<LibMosquitto, MQTTError> = {
        guard let handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL) else {
            let reason = dlerror().map { String(cString: $0) } ?? "not found"
            return .failure(MQTTError("\(soname): \(reason) (install the Debian package libmosquitto1)"))
        }
        return Result { () throws(MQTTError) in
            let library = try LibMosquitto(handle: handle)
            var major: Int32 = 0
            _ = library.libVersion(&major, nil, nil)
            guard major >= 2 else {
                throw MQTTError("\(soname) is version \(major); StepGate needs libmosquitto 2.0 or later")
            }
            _ = library.libInit()
            return library
        }
    }()

    /// The library, opened (once) if needed; throws if it or one of its functions is missing.
    static func load() throws(MQTTError) -> LibMosquitto { try opened.get() }

    /// libmosquitto's words for an error code (`MOSQ_ERR_*`); errno's for `MOSQ_ERR_ERRNO`.
    func describe(_ code: Int32) -> String {
        if code == Int32(MOSQ_ERR_ERRNO.rawValue) {
            let number = errno
            return String(cString: Glibc.strerror(number)) + " (errno \(number))"
        }
        return strerror(code).map { String(cString: $0) } ?? "error \(code)"
    }
}

/// Something the MQTT link could not do, in words for the journal and `daemon --check`.
package struct MQTTError: Error, CustomStringConvertible, Equatable, Sendable {
    package let description: String
    package init(_ description: String) { self.description = description }
}
