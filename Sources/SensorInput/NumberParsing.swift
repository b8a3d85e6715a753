// Decimal number parsing over raw bytes: the hot path of every reader.
//
// A cell is scanned once into an exact decimal form (sign, up to 19 significant digits,
// power of ten). Timestamps are turned into Int64 nanoseconds exactly; axis values into a
// Double, correctly rounded in the common case (Clinger's fast path) and within a few ulp
// otherwise, which is far below accelerometer noise.

/// An exactly scanned decimal number: `(negative ? -1 : 1) * mantissa * 10^exponent`.
struct DecimalNumber {
    var negative: Bool
    var mantissa: UInt64
    var exponent: Int
}

/// The result of scanning a number at the start of a cell.
struct NumberScan {
    /// The number, meaningful only when `hasDigits`.
    var number: DecimalNumber
    /// Whether at least one digit was found (otherwise the cell is empty or not a number).
    var hasDigits: Bool
    /// The index of the first byte after the number and any trailing spaces.
    var next: Int
}

private let space = UInt8(ascii: " ")

/// Scans a decimal number (`[spaces][+|-]digits[.digits][(e|E)[+|-]digits][spaces]`) in
/// `bytes[from..<to]`, stopping at the first byte that does not belong to it.
///
/// The caller checks that `next` is at the end of the cell. At most 19 significant digits
/// are kept (the rest only shift the exponent), so the mantissa never overflows.
///
/// `@_transparent` rather than `@inline(__always)`, which the optimiser did not honour here:
/// called out of line, the 40-byte result went through memory and reading it back stalled on
/// store forwarding, a third of the reader's time. Inlined, it stays in registers.
@_transparent
func scanNumber(_ bytes: UnsafePointer<UInt8>, from: Int, to: Int) -> NumberScan {
    var i = from
    while i < to && bytes[i] == space { i &+= 1 }
    var negative = false
    if i < to {
        let c = bytes[i]
        if c == UInt8(ascii: "-") {
            negative = true
            i &+= 1
        } else if c == UInt8(ascii: "+") {
            i &+= 1
        }
    }
    var mantissa: UInt64 = 0
    var significant = 0
    var exponent = 0
    var hasDigits = false
    while i < to {
        let digit = bytes[i] &- UInt8(ascii: "0")
        if digit > 9 { break }
        hasDigits = true
        if significant < 19 {
            mantissa = mantissa &* 10 &+ UInt64(digit)
            if mantissa != 0 { significant &+= 1 }
        } else {
            exponent &+= 1
        }
        i &+= 1
    }
    if i < to && bytes[i] == UInt8(ascii: ".") {
        i &+= 1
        while i < to {
            let digit = bytes[i] &- UInt8(ascii: "0")
            if digit > 9 { break }
            hasDigits = true
            if significant < 19 {
                mantissa = mantissa &* 10 &+ UInt64(digit)
                if mantissa != 0 { significant &+= 1 }
                exponent &-= 1
            }
            i &+= 1
        }
    }
    if hasDigits && i < to && (bytes[i] | 0x20) == UInt8(ascii: "e") {
        var j = i &+ 1
        var exponentNegative = false
        if j < to && (bytes[j] == UInt8(ascii: "-") || bytes[j] == UInt8(ascii: "+")) {
            exponentNegative = bytes[j] == UInt8(ascii: "-")
            j &+= 1
        }
        var value = 0
        var exponentDigits = false
        while j < to {
            let digit = bytes[j] &- UInt8(ascii: "0")
            if digit > 9 { break }
            exponentDigits = true
            if value < 100_000 { value = value &* 10 &+ Int(digit) }
            j &+= 1
        }
        // "1e" or "1e+" is not a number: leave `i` at the "e" so the caller rejects the cell.
        if exponentDigits {
            exponent &+= exponentNegative ? -value : value
            i = j
        }
    }
    while i < to && bytes[i] == space { i &+= 1 }
    return NumberScan(
        number: DecimalNumber(negative: negative, mantissa: mantissa, exponent: exponent),
        hasDigits: hasDigits,
        next: i
    )
}

/// 10^k as a Double for k in 0...22, where every value is exact.
@inline(__always)
func exactPowerOfTen(_ k: Int) -> Double {
    switch k {
    case 0: 1e0
    case 1: 1e1
    case 2: 1e2
    case 3: 1e3
    case 4: 1e4
    case 5: 1e5
    case 6: 1e6
    case 7: 1e7
    case 8: 1e8
    case 9: 1e9
    case 10: 1e10
    case 11: 1e11
    case 12: 1e12
    case 13: 1e13
    case 14: 1e14
    case 15: 1e15
    case 16: 1e16
    case 17: 1e17
    case 18: 1e18
    case 19: 1e19
    case 20: 1e20
    case 21: 1e21
    default: 1e22
    }
}

/// 10^k as a UInt64 for k in 0...19.
@inline(__always)
func integerPowerOfTen(_ k: Int) -> UInt64 {
    switch k {
    case 0: 1
    case 1: 10
    case 2: 100
    case 3: 1000
    case 4: 10000
    case 5: 100_000
    case 6: 1_000_000
    case 7: 10_000_000
    case 8: 100_000_000
    case 9: 1_000_000_000
    case 10: 10_000_000_000
    case 11: 100_000_000_000
    case 12: 1_000_000_000_000
    case 13: 10_000_000_000_000
    case 14: 100_000_000_000_000
    case 15: 1_000_000_000_000_000
    case 16: 10_000_000_000_000_000
    case 17: 100_000_000_000_000_000
    case 18: 1_000_000_000_000_000_000
    default: 10_000_000_000_000_000_000
    }
}

extension DecimalNumber {
    /// The nearest Double: correctly rounded when the mantissa has at most 53 bits and the
    /// exponent is within ±22, otherwise within a few ulp. Overflows to ±infinity.
    /// (`@_transparent`: see ``scanNumber(_:from:to:)``.)
    @_transparent
    var doubleValue: Double {
        if mantissa == 0 { return negative ? -0.0 : 0.0 }
        var value = Double(mantissa)
        let e = exponent
        if e == 0 {
            // Integer: nothing to scale.
        } else if e < 0 && e >= -22 && mantissa <= 1 << 53 {
            value /= exactPowerOfTen(-e)
        } else if e > 0 && e <= 22 && mantissa <= 1 << 53 {
            value *= exactPowerOfTen(e)
        } else {
            value = Self.scaleSlowly(value, e)
        }
        return negative ? -value : value
    }

    @inline(never)
    static func scaleSlowly(_ start: Double, _ exponent: Int) -> Double {
        var value = start
        var k = exponent
        while k > 22 && value.isFinite {
            value *= 1e22
            k -= 22
        }
        while k < -22 && value != 0 {
            value /= 1e22
            k += 22
        }
        if k >= 0 {
            return value * exactPowerOfTen(min(k, 22))
        }
        return value / exactPowerOfTen(min(-k, 22))
    }

    /// `self * 10^shift` rounded to the nearest integer (half away from zero), or nil when
    /// it does not fit in an Int64. Exact: never goes through a Double.
    /// (`@_transparent`: see ``scanNumber(_:from:to:)``.)
    @_transparent
    func scaledInt64(shift: Int) -> Int64? {
        var magnitude = mantissa
        if magnitude == 0 { return 0 }
        let k = exponent &+ shift
        if k > 0 {
            if k > 19 { return nil }
            let (product, overflow) = magnitude.multipliedReportingOverflow(by: integerPowerOfTen(k))
            if overflow { return nil }
            magnitude = product
        } else if k < 0 {
            if k < -19 {
                magnitude = 0
            } else {
                let divisor = integerPowerOfTen(-k)
                let (quotient, remainder) = magnitude.quotientAndRemainder(dividingBy: divisor)
                magnitude = quotient
                if remainder >= divisor - remainder { magnitude &+= 1 }
            }
        }
        if negative {
            if magnitude > UInt64(Int64.max) &+ 1 { return nil }
            return Int64(truncatingIfNeeded: 0 &- magnitude)
        }
        if magnitude > UInt64(Int64.max) { return nil }
        return Int64(magnitude)
    }
}

/// Whether a cell spells a non-finite value: `NaN`, `inf`, `Infinity` or `∞`, optionally
/// signed and padded with spaces, in any case. Used only to choose an error message.
func spellsNonFinite(_ cell: some Collection<UInt8>) -> Bool {
    var bytes = Array(cell)
    while let last = bytes.last, last == space { bytes.removeLast() }
    var start = 0
    while start < bytes.count && bytes[start] == space { start += 1 }
    if start < bytes.count && (bytes[start] == UInt8(ascii: "-") || bytes[start] == UInt8(ascii: "+")) {
        start += 1
    }
    let word = bytes[start...].map { $0 | ($0 >= 0x41 && $0 <= 0x5A ? 0x20 : 0) }
    return word == Array("nan".utf8) || word == Array("inf".utf8) || word == Array("infinity".utf8)
        || word == [0xE2, 0x88, 0x9E]
}
