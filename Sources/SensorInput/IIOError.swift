#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Musl)
    internal import Musl
#endif

/// An error reported by libiio or by the IIO files it reads: the positive `errno`, the
/// operation that failed and what it was applied to.
///
/// libiio has two conventions, both mapped here: constructors return `NULL` and set `errno`;
/// most other calls return `-errno`. `description` is the message shown to the user; for
/// "permission denied" it names the udev rule that grants access.
public struct IIOError: Error, Hashable, CustomStringConvertible {
    /// The error number, positive (`EACCES`, `ENOENT`, `ETIMEDOUT`…).
    public var code: Int32
    /// The C function or step that failed, e.g. `iio_buffer_refill`.
    public var operation: String
    /// What it was applied to, e.g. `iio:device0 (lis3dh)`, or a fuller explanation.
    public var subject: String

    /// Creates an error from a positive error number.
    public init(code: Int32, operation: String, subject: String = "") {
        self.code = code
        self.operation = operation
        self.subject = subject
    }

    /// The udev rule shipped in `udev/` that gives the `stepgate` group access to IIO
    /// accelerometers.
    public static let udevRule = "udev/60-stepgate-iio.rules"

    /// Whether the error means the user may not use the device.
    public var isPermissionDenied: Bool { code == EACCES || code == EPERM }

    /// The system's text for ``code``.
    public var reason: String {
        guard let text = strerror(code) else { return "error \(code)" }
        return String(cString: text)
    }

    /// The message shown to the user.
    public var description: String {
        var text = subject.isEmpty ? "\(operation): " : "\(subject): \(operation): "
        text += "\(reason) (errno \(code))"
        if isPermissionDenied {
            text +=
                "; this user may not use the IIO device: install \(Self.udevRule) "
                + "(sudo cp udev/60-stepgate-iio.rules /etc/udev/rules.d/ && sudo udevadm trigger -s iio), "
                + "add yourself to the 'stepgate' group and log in again"
        }
        return text
    }
}

/// Throws ``IIOError`` when a libiio call returned a negative error number.
@discardableResult
func check(_ result: Int32, _ operation: String, _ subject: String = "") throws(IIOError) -> Int32 {
    guard result >= 0 else { throw IIOError(code: -result, operation: operation, subject: subject) }
    return result
}

/// Throws ``IIOError`` when a libiio call returned a negative byte count.
@discardableResult
func check(_ result: Int, _ operation: String, _ subject: String = "") throws(IIOError) -> Int {
    guard result >= 0 else {
        throw IIOError(code: Int32(truncatingIfNeeded: -result), operation: operation, subject: subject)
    }
    return result
}

/// The current `errno`, or `EIO` when a failing call left it at 0.
func currentErrno() -> Int32 { errno == 0 ? EIO : errno }
