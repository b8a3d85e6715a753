/// The storage format of one IIO scan element, parsed from its `scan_elements/*_type` file.
///
/// The kernel writes `[be|le]:[s|u]bits/storagebits[Xrepeat]>>shift`, for example
/// `le:s12/16>>4` (a 12-bit left-justified little-endian value, as on the LIS3DH),
/// `be:s16/16>>0` (MPU-6050) or `le:s64/64>>0` (the timestamp). Upper-case `S`/`U` mark a
/// fully defined value and decode like their lower-case forms; `f` (float) is recognised and
/// rejected by ``decode(_:)`` only for storage sizes other than 32 and 64 bits.
public struct ScanType: Hashable, Sendable, CustomStringConvertible {
    /// Whether the stored bytes are big-endian.
    public var isBigEndian: Bool
    /// How the value is represented.
    public var sign: Sign
    /// Significant bits, after the shift.
    public var bits: Int
    /// Bits the value occupies in the scan (8, 16, 32 or 64).
    public var storageBits: Int
    /// Right shift to apply before masking to ``bits``.
    public var shift: Int
    /// How many consecutive values of this type the element holds (1 unless `X` is given).
    public var repeatCount: Int

    /// How a scan element's bits represent a number.
    public enum Sign: Hashable, Sendable {
        /// Two's complement, sign-extended from ``ScanType/bits``.
        case signed
        /// Non-negative.
        case unsigned
        /// IEEE 754 (kernel `f`).
        case float
    }

    /// A scan type from its parts.
    public init(
        isBigEndian: Bool, sign: Sign, bits: Int, storageBits: Int, shift: Int, repeatCount: Int = 1
    ) {
        self.isBigEndian = isBigEndian
        self.sign = sign
        self.bits = bits
        self.storageBits = storageBits
        self.shift = shift
        self.repeatCount = repeatCount
    }

    /// Parses a `*_type` string such as `le:s12/16>>4`; surrounding white space and NUL
    /// bytes (libiio writes them) are ignored.
    ///
    /// - Throws: ``ScanTypeError`` naming what was expected, for anything else.
    public init(parsing text: String) throws(ScanTypeError) {
        let trimmed = text.trimmingIIOWhitespace()
        var rest = Substring(trimmed)
        func fail(_ expected: String) -> ScanTypeError { ScanTypeError(text: trimmed, expected: expected) }
        if rest.hasPrefix("le:") {
            isBigEndian = false
        } else if rest.hasPrefix("be:") {
            isBigEndian = true
        } else {
            throw fail("'le:' or 'be:' first")
        }
        rest = rest.dropFirst(3)
        switch rest.first {
        case "s", "S": sign = .signed
        case "u", "U": sign = .unsigned
        case "f": sign = .float
        default: throw fail("'s', 'u' or 'f' after the endianness")
        }
        rest = rest.dropFirst()
        func number(_ what: String) throws(ScanTypeError) -> Int {
            let digits = rest.prefix(while: { $0.isASCII && $0.isNumber })
            guard !digits.isEmpty, digits.count <= 4, let value = Int(digits) else { throw fail(what) }
            rest = rest.dropFirst(digits.count)
            return value
        }
        bits = try number("the number of bits")
        guard rest.first == "/" else { throw fail("'/' after the number of bits") }
        rest = rest.dropFirst()
        storageBits = try number("the number of storage bits")
        if rest.first == "X" {
            rest = rest.dropFirst()
            repeatCount = try number("a repeat count after 'X'")
        } else {
            repeatCount = 1
        }
        if rest.isEmpty {
            shift = 0
        } else {
            guard rest.hasPrefix(">>") else { throw fail("'>>shift' after the storage bits") }
            rest = rest.dropFirst(2)
            shift = try number("a shift after '>>'")
        }
        guard rest.isEmpty else { throw fail("nothing after the shift") }
        guard [8, 16, 32, 64].contains(storageBits) else { throw fail("8, 16, 32 or 64 storage bits") }
        guard bits >= 1, bits + shift <= storageBits else {
            throw fail("bits + shift no larger than the storage bits")
        }
        guard repeatCount >= 1 else { throw fail("a repeat count of at least 1") }
        if sign == .float && bits != storageBits { throw fail("a float filling its storage") }
    }

    /// Bytes one value occupies in the scan.
    public var storageBytes: Int { storageBits / 8 }

    /// Bytes the whole element (all repeats) occupies in the scan.
    public var totalBytes: Int { storageBytes * repeatCount }

    /// The kernel's text form, e.g. `le:s12/16>>4`.
    public var description: String {
        let s =
            switch sign {
            case .signed: "s"
            case .unsigned: "u"
            case .float: "f"
            }
        let repeatText = repeatCount > 1 ? "X\(repeatCount)" : ""
        return "\(isBigEndian ? "be" : "le"):\(s)\(bits)/\(storageBits)\(repeatText)>>\(shift)"
    }

    /// Decodes the first value stored at the start of `bytes`: byte order, shift, mask and
    /// sign extension, as `iio_channel_convert` does. Floats are returned truncated toward
    /// zero; use ``decodeDouble(_:)`` for them.
    ///
    /// - Precondition: `bytes.count >= storageBytes`.
    @inlinable
    public func decode(_ bytes: UnsafeRawBufferPointer) -> Int64 {
        if sign == .float {
            let value = decodeDouble(bytes)
            return value.isFinite ? Int64(exactly: value.rounded(.towardZero)) ?? 0 : 0
        }
        let stored = storedBits(bytes)
        let shifted = stored >> UInt64(shift)
        if bits >= 64 { return Int64(bitPattern: shifted) }
        let mask: UInt64 = (1 << UInt64(bits)) - 1
        let value = shifted & mask
        if sign == .signed && value & (1 << UInt64(bits - 1)) != 0 {
            return Int64(bitPattern: value | ~mask)
        }
        return Int64(bitPattern: value)
    }

    /// Decodes the first value at the start of `bytes` as a `Double` (exact for integers up
    /// to 2^53 and for `f32`/`f64` elements).
    @inlinable
    public func decodeDouble(_ bytes: UnsafeRawBufferPointer) -> Double {
        guard sign == .float else { return Double(decode(bytes)) }
        let stored = storedBits(bytes)
        return storageBits == 32
            ? Double(Float(bitPattern: UInt32(truncatingIfNeeded: stored))) : Double(bitPattern: stored)
    }

    /// The raw storage word, in host order.
    @inlinable
    func storedBits(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        precondition(bytes.count >= storageBytes, "scan element shorter than its storage size")
        var word: UInt64 = 0
        let n = storageBytes
        if isBigEndian {
            for i in 0..<n { word = word << 8 | UInt64(bytes[i]) }
        } else {
            for i in stride(from: n - 1, through: 0, by: -1) { word = word << 8 | UInt64(bytes[i]) }
        }
        return word
    }

    /// Encodes `value` as the kernel would store it (inverse of ``decode(_:)``), appending
    /// ``storageBytes`` bytes; for tests and emulated devices.
    public func encode(_ value: Int64, into bytes: inout [UInt8]) {
        var word: UInt64
        if sign == .float {
            word = storageBits == 32 ? UInt64(Float(value).bitPattern) : Double(value).bitPattern
        } else {
            let mask: UInt64 = bits >= 64 ? ~0 : (1 << UInt64(bits)) - 1
            word = (UInt64(bitPattern: value) & mask) << UInt64(shift)
        }
        let n = storageBytes
        for i in 0..<n {
            let byteIndex = isBigEndian ? n - 1 - i : i
            bytes.append(UInt8(truncatingIfNeeded: word >> UInt64(8 * byteIndex)))
        }
    }
}

/// A `*_type` string that is not a valid IIO scan type.
public struct ScanTypeError: Error, Hashable, CustomStringConvertible {
    /// The text that was parsed.
    public var text: String
    /// What the parser expected where it stopped.
    public var expected: String

    /// The message shown to the user.
    public var description: String { "invalid IIO scan type '\(text)': expected \(expected)" }
}

extension String {
    /// Drops leading and trailing spaces, tabs, newlines and NUL bytes (libiio writes
    /// attributes with a trailing NUL; the kernel ends them with a newline).
    func trimmingIIOWhitespace() -> String {
        let isSpace: (Character) -> Bool = {
            $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" || $0 == "\0"
        }
        var s = Substring(self)
        while let c = s.first, isSpace(c) { s = s.dropFirst() }
        while let c = s.last, isSpace(c) { s = s.dropLast() }
        return String(s)
    }
}
