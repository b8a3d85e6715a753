internal import StepDetection

#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Musl)
    internal import Musl
#elseif canImport(Darwin)
    internal import Darwin
#endif

// The fast path of row parsing, tried before ``parseRow(_:_:_:)`` on every row.
//
// It accepts only the plain shape nearly every real row has: unquoted cells, numbers written
// `[-]digits[.digits]` with at most 19 digits, and enough columns. For such rows it yields the
// very sample `parseRow` would (the same `DecimalNumber`, converted the same way, bit for bit:
// FastPathTests and the fuzz target check it against `parseRow`); for anything else (quotes, spaces, signs `+`, exponents, long numbers, missing or bad cells,
// values out of range) it returns nil and `parseRow` decides, with its exact errors.

/// Where the four needed cells of a row are, in column order, and how to scale them.
struct FastRowPlan: Sendable {
    var separator: UInt8
    /// Needed columns in increasing order.
    var columns: (Int, Int, Int, Int)
    /// Which of the four (0...3, in column order) holds the time, x, y and z.
    var timeSlot: Int
    var xSlot: Int
    var ySlot: Int
    var zSlot: Int
    var timeShift: Int
    var perG: Double
    /// `1 / perG` when that is exact (perG a power of two: 1 for g, 8192 for Bangle counts);
    /// multiplying by it then gives the very same Double as dividing by perG, and is faster.
    var exactReciprocal: Double?
    /// Whether rows may first be tried by ``parseIntegerLine(_:_:reciprocals:)``: the cells are
    /// time, x, y and z in columns 0 to 3, the reciprocal is exact, small enough that any value
    /// of the integer path (below 10^15) stays a finite Float once scaled (so that path need
    /// not check), and the time shift is 0...18.
    var integerRows: Bool
    /// `10^timeShift` (when ``integerRows``): a time of at most ``maximumTimeDigits`` digits
    /// times it fits in an Int64.
    var timeMultiplier: Int64
    var maximumTimeDigits: Int

    /// The plan for `layout`, or nil when its needed columns are not four different ones or
    /// its separator is not `,` `;` or TAB (a `sep=` line can name any byte, a digit or a
    /// `-` too): then every row goes through `parseRow`.
    init?(_ layout: RowLayout) {
        guard [UInt8(ascii: ","), UInt8(ascii: ";"), 9].contains(layout.separator) else { return nil }
        let needed = [layout.timeColumn, layout.xColumn, layout.yColumn, layout.zColumn]
        let sorted = needed.sorted()
        for index in 1..<4 where sorted[index] == sorted[index - 1] { return nil }
        guard sorted[0] >= 0, sorted[3] == layout.lastColumn else { return nil }
        func slot(_ column: Int) -> Int { sorted.firstIndex(of: column) ?? 0 }
        separator = layout.separator
        columns = (sorted[0], sorted[1], sorted[2], sorted[3])
        timeSlot = slot(layout.timeColumn)
        xSlot = slot(layout.xColumn)
        ySlot = slot(layout.yColumn)
        zSlot = slot(layout.zColumn)
        timeShift = layout.timeShift
        perG = layout.perG
        let reciprocal = 1 / perG
        let powerOfTwo = perG.isNormal && perG > 0 && perG.significandBitPattern == 0
        exactReciprocal = powerOfTwo && reciprocal.isNormal && reciprocal * perG == 1 ? reciprocal : nil
        integerRows =
            needed == [0, 1, 2, 3] && exactReciprocal != nil
            && reciprocal * 1e15 < Double(Float.greatestFiniteMagnitude) && layout.timeShift >= 0
            && layout.timeShift <= 18
        timeMultiplier = integerRows ? Int64(integerPowerOfTen(layout.timeShift)) : 1
        maximumTimeDigits = integerRows ? 18 &- layout.timeShift : 0
    }
}

/// A number scanned by the fast path: `±mantissa / 10^fractionDigits`.
struct PlainNumber {
    var negative: Bool
    var mantissa: UInt64
    var fractionDigits: Int

    /// The same number as ``scanNumber(_:from:to:)`` scans.
    @_transparent
    var decimal: DecimalNumber {
        DecimalNumber(negative: negative, mantissa: mantissa, exponent: 0 &- fractionDigits)
    }

    /// Bit for bit ``DecimalNumber/doubleValue`` of ``decimal``, without a branch on the sign
    /// (signs of accelerometer values are random, and a mispredicted branch costs more than
    /// the rest): `Double(mantissa)` divided by an exact power of ten, then the sign applied;
    /// zero gives ±0.
    @_transparent
    var doubleValue: Double {
        var value = Double(mantissa)
        if fractionDigits != 0 {
            if mantissa <= 1 << 53 {
                value /= doublePowerOfTenTable(fractionDigits)
            } else {
                value = DecimalNumber.scaleSlowly(value, 0 &- fractionDigits)
            }
        }
        // Exact: multiplying by -1 only flips the sign (of zero too).
        return value * (negative ? -1 : 1)
    }
}

/// Exact powers of ten, 10^0 to 10^19 as UInt64 and 10^0 to 10^22 as Double: tables the fast
/// path indexes, where a `switch` became an indirect jump that mispredicts. Array literals of
/// constants, which the compiler lays out in the executable: reading them needs no lazy
/// initialisation (a `swift_once` call at every read, 6 % of a decimal file's parsing).
/// FastPathTests checks them against integerPowerOfTen and exactPowerOfTen.
let integerPowersOfTen: [UInt64] = [
    1, 10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000, 1_000_000_000, 10_000_000_000,
    100_000_000_000, 1_000_000_000_000, 10_000_000_000_000, 100_000_000_000_000, 1_000_000_000_000_000,
    10_000_000_000_000_000, 100_000_000_000_000_000, 1_000_000_000_000_000_000, 10_000_000_000_000_000_000,
]
let doublePowersOfTen: [Double] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18,
    1e19, 1e20, 1e21, 1e22,
]

/// 10^k (k in 0...19), without a bounds check.
@_transparent
func integerPowerOfTenTable(_ k: Int) -> UInt64 {
    integerPowersOfTen.withUnsafeBufferPointer { $0[k] }
}

/// 10^k (k in 0...22) as a Double, without a bounds check.
@_transparent
func doublePowerOfTenTable(_ k: Int) -> Double {
    doublePowersOfTen.withUnsafeBufferPointer { $0[k] }
}

/// The digits at `p[i..<count]` (at most 8 of them, stopping at the first other byte) as a
/// number, and how many there are. Reads the 8 bytes at `p + i` whatever `count` is: the
/// caller guarantees they are readable (``ChunkBuffer`` has ``ChunkBuffer/padding`` bytes
/// after its capacity); bytes at or after `count` never change the result.
@_transparent
func eightDigits(_ p: UnsafePointer<UInt8>, _ i: Int, _ count: Int) -> (value: UInt64, digits: Int) {
    let word = UnsafeRawPointer(p + i).loadUnaligned(as: UInt64.self)
    // A byte is a digit when its high nibble is 3 and adding 6 keeps it so. A carry out of a
    // non-digit byte can only disturb the bytes after it, which are not looked at.
    let high = (word & 0xF0F0_F0F0_F0F0_F0F0) ^ 0x3030_3030_3030_3030
    let adjusted = ((word &+ 0x0606_0606_0606_0606) & 0xF0F0_F0F0_F0F0_F0F0) ^ 0x3030_3030_3030_3030
    let remaining = count &- i
    var digits = (high | adjusted).trailingZeroBitCount &>> 3
    if remaining < digits { digits = remaining }
    // The digits to the top bytes (zeros, that is leading zeros, below), then combined in
    // pairs, fours and eights. No digits: a shift by 64 would be one by 0, so mask instead.
    var value = (word &- 0x3030_3030_3030_3030) &<< UInt64(truncatingIfNeeded: (8 &- digits) &* 8)
    value &= digits == 0 ? 0 : ~0
    value = value &* 10 &+ (value &>> 8)
    value =
        ((value & 0x0000_00FF_0000_00FF) &* (100 &+ (1_000_000 &<< 32))
            &+ ((value &>> 16) & 0x0000_00FF_0000_00FF) &* (1 &+ (10_000 &<< 32))) &>> 32
    return (value, digits)
}

/// The run of digits at `p[i..<count]` as a number (wrapping: the caller rejects more than
/// 19 digits) and how many digits there were; `i` moves past them.
@_transparent
func scanDigits(_ p: UnsafePointer<UInt8>, _ i: inout Int, _ count: Int) -> (value: UInt64, digits: Int) {
    var (value, digits) = eightDigits(p, i, count)
    i &+= digits
    if digits < 8 { return (value, digits) }
    while true {
        let (more, moreDigits) = eightDigits(p, i, count)
        value = value &* integerPowerOfTenTable(moreDigits) &+ more
        i &+= moreDigits
        digits &+= moreDigits
        if moreDigits < 8 || digits > 19 { return (value, digits) }
    }
}

/// Scans `[-]digits[.digits]` (at least one digit, at most 19) at `i`, ending at `count` or at
/// `separator`; moves `i` past it. The number is exactly the one ``scanNumber(_:from:to:)``
/// scans. Nil for any other cell. Reads up to 8 bytes past `count` (see
/// ``eightDigits(_:_:_:)``).
@_transparent
func scanPlainNumber(
    _ p: UnsafePointer<UInt8>, _ i: inout Int, _ count: Int, _ separator: UInt8, endsLine: Bool = false
) -> PlainNumber? {
    var j = i
    let negative = j < count && p[j] == UInt8(ascii: "-")
    j &+= negative ? 1 : 0
    var (mantissa, digits) = scanDigits(p, &j, count)
    var fractionDigits = 0
    if j < count && p[j] == UInt8(ascii: ".") {
        j &+= 1
        let fraction = scanDigits(p, &j, count)
        fractionDigits = fraction.digits
        digits &+= fractionDigits
        if digits <= 19 { mantissa = mantissa &* integerPowerOfTenTable(fractionDigits) &+ fraction.value }
    }
    // At most 19 digits: scanNumber keeps them all (its limit is 19 significant digits), and
    // the mantissa cannot overflow.
    guard
        digits > 0 && digits <= 19
            && (j == count || p[j] == separator || endsLine && (p[j] == 10 || p[j] == 13))
    else { return nil }
    i = j
    return PlainNumber(negative: negative, mantissa: mantissa, fractionDigits: fractionDigits)
}

/// Moves `i` to the start of cell `target` from the start of cell `column`; false when the
/// row ends first or a skipped cell holds a quote (parseRow handles both).
@_transparent
func skipCells(
    _ p: UnsafePointer<UInt8>, _ i: inout Int, _ count: Int, from column: Int, to target: Int,
    _ separator: UInt8
) -> Bool {
    var column = column
    while column < target {
        while i < count {
            let c = p[i]
            if c == separator { break }
            // A quote: parseRow handles quoted cells. A newline: the row has too few cells
            // (only parsePlainLine, which looks past the line, meets one).
            if c == FormatDetection.quote || c == 10 { return false }
            i &+= 1
        }
        if i >= count { return false }
        i &+= 1
        column &+= 1
    }
    return true
}

/// Parses the cells of a row at `p` following `plan`, or returns nil when the row is not
/// plain (see above) and must go through ``parseRow(_:_:_:)``; also returns the index of the
/// byte after the last needed cell. With `lastEndsLine`, `count` is what the buffer holds
/// (the line's end is not known yet), `p[count]` is the buffer's final 0 byte, and the last
/// needed cell may end at a line ending.
@_transparent
func parsePlainCells(_ p: UnsafePointer<UInt8>, _ count: Int, _ plan: FastRowPlan, lastEndsLine: Bool)
    -> (sample: AccelerationSample, end: Int)?
{
    let separator = plan.separator
    var i = 0
    guard skipCells(p, &i, count, from: 0, to: plan.columns.0, separator),
        let n0 = scanPlainCell(p, &i, count, separator, endsLine: false, clamp: !lastEndsLine), i < count
    else { return nil }
    i &+= 1
    guard skipCells(p, &i, count, from: plan.columns.0 &+ 1, to: plan.columns.1, separator),
        let n1 = scanPlainCell(p, &i, count, separator, endsLine: false, clamp: !lastEndsLine), i < count
    else { return nil }
    i &+= 1
    guard skipCells(p, &i, count, from: plan.columns.1 &+ 1, to: plan.columns.2, separator),
        let n2 = scanPlainCell(p, &i, count, separator, endsLine: false, clamp: !lastEndsLine), i < count
    else { return nil }
    i &+= 1
    guard skipCells(p, &i, count, from: plan.columns.2 &+ 1, to: plan.columns.3, separator),
        let n3 = scanPlainCell(p, &i, count, separator, endsLine: lastEndsLine, clamp: !lastEndsLine)
    else { return nil }
    // The slots are the same on every row: these branches are always predicted.
    func number(_ slot: Int) -> PlainNumber {
        switch slot {
        case 0: n0
        case 1: n1
        case 2: n2
        default: n3
        }
    }
    guard let time = number(plan.timeSlot).decimal.scaledInt64(shift: plan.timeShift) else { return nil }
    let x: Float
    let y: Float
    let z: Float
    if let reciprocal = plan.exactReciprocal {
        x = Float(number(plan.xSlot).doubleValue * reciprocal)
        y = Float(number(plan.ySlot).doubleValue * reciprocal)
        z = Float(number(plan.zSlot).doubleValue * reciprocal)
    } else {
        let perG = plan.perG
        x = Float(number(plan.xSlot).doubleValue / perG)
        y = Float(number(plan.ySlot).doubleValue / perG)
        z = Float(number(plan.zSlot).doubleValue / perG)
    }
    guard x.isFinite && y.isFinite && z.isFinite else { return nil }
    return (AccelerationSample(timestamp: time, x: x, y: y, z: z), i)
}

/// Parses one line (without its line ending) following `plan`, or returns nil when the row
/// is not plain (see above) and must go through ``parseRow(_:_:_:)``.
@_transparent
func parsePlainRow(_ p: UnsafePointer<UInt8>, _ count: Int, _ plan: FastRowPlan) -> AccelerationSample? {
    parsePlainCells(p, count, plan, lastEndsLine: false)?.sample
}

/// Parses the row at the start of the `available` bytes at `p` (the unread part of the
/// buffer) without looking for its end first: the last needed cell must be followed by the
/// line ending, or by a separator and more cells up to one. Returns the sample and the bytes
/// taken, line ending included; nil when the row is not plain or its line ending is not in
/// the buffer yet (then the caller finds the line and parses it the usual way).
@_transparent
func parsePlainLine(_ p: UnsafePointer<UInt8>, _ available: Int, _ plan: FastRowPlan)
    -> (sample: AccelerationSample, taken: Int)?
{
    guard let (sample, end) = parsePlainCells(p, available, plan, lastEndsLine: true), end < available else {
        return nil
    }
    switch p[end] {
    case 10:
        return (sample, end &+ 1)
    case 13:
        // parseRow sees the line without one CR.
        guard end &+ 1 < available && p[end &+ 1] == 10 else { return nil }
        return (sample, end &+ 2)
    default:
        // More cells after the last needed one: parseRow ignores them.
        guard let newline = memchr(p + end, 10, available &- end) else { return nil }
        return (sample, UnsafeRawPointer(p).distance(to: UnsafeRawPointer(newline)) &+ 1)
    }
}

/// The non-digit bytes of `word` as a mask (0 for a digit byte; see ``eightDigits(_:_:_:)``).
@_transparent
func nonDigitBytes(_ word: UInt64) -> UInt64 {
    let high = (word & 0xF0F0_F0F0_F0F0_F0F0) ^ 0x3030_3030_3030_3030
    let adjusted = ((word &+ 0x0606_0606_0606_0606) & 0xF0F0_F0F0_F0F0_F0F0) ^ 0x3030_3030_3030_3030
    return high | adjusted
}

/// All bytes from byte `remaining` of a word on, when that is inside it: they are past the line.
@_transparent
func pastLineBytes(_ remaining: Int) -> UInt64 {
    remaining >= 8 ? 0 : ~0 &<< UInt64(truncatingIfNeeded: remaining &* 8)
}

/// The value of the first `length` (1...8) bytes of `word`, which are digits.
@_transparent
func digitsValue(_ word: UInt64, _ length: Int) -> UInt64 {
    var value = (word &- 0x3030_3030_3030_3030) &<< UInt64(truncatingIfNeeded: (8 &- length) &* 8)
    value = value &* 10 &+ (value &>> 8)
    return
        ((value & 0x0000_00FF_0000_00FF) &* (100 &+ (1_000_000 &<< 32))
        &+ ((value &>> 16) & 0x0000_00FF_0000_00FF) &* (1 &+ (10_000 &<< 32))) &>> 32
}

/// The byte of `word` after its first `length` bytes (0 when `length` is 8).
@_transparent
func byteAfter(_ word: UInt64, _ length: Int) -> UInt8 {
    length < 8 ? UInt8(truncatingIfNeeded: word &>> UInt64(truncatingIfNeeded: length &* 8)) : 0
}

/// The run of digits at `p + start` (whose first 8 bytes are `first`) up to 16 long: its
/// value, its length, and the byte after it (meaningless when the run reaches `count`; 0 when
/// it is 16 long, which callers leave to ``scanPlainNumber(_:_:_:_:)``). With `clamp`, the
/// run stops at `count`; without, the caller knows that `p[count]` is not a digit (the
/// reader's buffer ends with a 0 byte, see ``RecordingReader``'s `markEnd()`), which saves
/// the masking.
@_transparent
func digitRun(_ p: UnsafePointer<UInt8>, _ start: Int, _ count: Int, _ first: UInt64, clamp: Bool) -> (
    value: UInt64, length: Int, after: UInt8
) {
    let remaining = count &- start
    let length = (nonDigitBytes(first) | (clamp ? pastLineBytes(remaining) : 0)).trailingZeroBitCount &>> 3
    if length < 8 {
        return (length == 0 ? 0 : digitsValue(first, length), length, byteAfter(first, length))
    }
    let second = UnsafeRawPointer(p + (start &+ 8)).loadUnaligned(as: UInt64.self)
    let more =
        (nonDigitBytes(second) | (clamp ? pastLineBytes(remaining &- 8) : 0)).trailingZeroBitCount &>> 3
    let value =
        digitsValue(first, 8) &* integerPowerOfTenTable(more) &+ (more == 0 ? 0 : digitsValue(second, more))
    return (value, 8 &+ more, byteAfter(second, more))
}

/// ``scanPlainNumber(_:_:_:_:)`` for the common cell, in few dependent steps (each cell's
/// start waits for the end of the one before): one or two 8-byte loads give the sign, the
/// integer digits and the byte after them, and one or two more the fraction. Longer cells go
/// on in ``scanPlainNumber(_:_:_:_:)``.
@_transparent
func scanPlainCell(
    _ p: UnsafePointer<UInt8>, _ i: inout Int, _ count: Int, _ separator: UInt8, endsLine: Bool,
    clamp: Bool = true
) -> PlainNumber? {
    let word = UnsafeRawPointer(p + i).loadUnaligned(as: UInt64.self)
    let negative = word & 0xFF == UInt64(UInt8(ascii: "-"))
    // The sign byte becomes a leading "0".
    let unsigned = word ^ (negative ? UInt64(UInt8(ascii: "-") ^ UInt8(ascii: "0")) : 0)
    let remaining = count &- i
    let (integer, length, after) = digitRun(p, i, count, unsigned, clamp: clamp)
    let integerDigits = length &- (negative ? 1 : 0)
    if length < 16 && length < remaining && after == UInt8(ascii: ".") {
        let start = i &+ length &+ 1
        let (fraction, fractionDigits, fractionAfter) = digitRun(
            p, start, count, UnsafeRawPointer(p + start).loadUnaligned(as: UInt64.self), clamp: clamp)
        let digits = integerDigits &+ fractionDigits
        guard
            digits > 0 && digits <= 19 && fractionDigits < 16
                && (fractionDigits == count &- start || fractionAfter == separator
                    || endsLine && (fractionAfter == 10 || fractionAfter == 13))
        else { return scanLongPlainNumber(p, &i, count, separator, endsLine: endsLine) }
        i = start &+ fractionDigits
        return PlainNumber(
            negative: negative, mantissa: integer &* integerPowerOfTenTable(fractionDigits) &+ fraction,
            fractionDigits: fractionDigits)
    }
    guard
        integerDigits > 0 && length < 16
            && (length == remaining || after == separator || endsLine && (after == 10 || after == 13))
    else {
        return scanLongPlainNumber(p, &i, count, separator, endsLine: endsLine)
    }
    i &+= length
    return PlainNumber(negative: negative, mantissa: integer, fractionDigits: 0)
}

/// ``scanPlainNumber(_:_:_:_:)`` out of line: the rare long cells of ``scanPlainCell(_:_:_:_:)``.
@inline(never)
func scanLongPlainNumber(
    _ p: UnsafePointer<UInt8>, _ i: inout Int, _ count: Int, _ separator: UInt8, endsLine: Bool
) -> PlainNumber? {
    scanPlainNumber(p, &i, count, separator, endsLine: endsLine)
}

/// ``parsePlainRow(_:_:_:)`` out of line, for the rows ``parsePlainLine(_:_:_:)`` left: those
/// whose line ending was not in the buffer yet, or that end the file without one.
@inline(never)
func parsePlainRowOutlined(_ p: UnsafePointer<UInt8>, _ count: Int, _ plan: FastRowPlan)
    -> AccelerationSample?
{
    parsePlainRow(p, count, plan)
}

/// The run of digits at `p + start` (stopping at the first other byte) as a number, and how
/// many digits there are; 0 digits also when there are more than `maximum` (at most 15), which
/// callers reject like an empty cell. Reads 8 bytes at `p + start` (16 for runs of 8 or more):
/// the caller's bytes must end with a non-digit followed by readable bytes (the reader's 0 byte
/// and ``ChunkBuffer/padding``), and bytes after the first non-digit never change the result.
/// Runs of 8 digits or more are read in line with `inlineLong` (time cells, which grow to 8
/// digits after 2.8 hours of milliseconds), else out of line, to keep the common path and its
/// registers small.
///
/// One subtraction gives every byte's digit value and, with one addition, its non-digit bit:
/// a byte below "0" borrows (its top bit set), one above "9" carries into the top bit when
/// 0x46 is added. The borrow or carry of a non-digit byte only disturbs the bytes after it,
/// which are not looked at.
@_transparent
func integerDigits(_ p: UnsafePointer<UInt8>, _ start: Int, maximum: Int, inlineLong: Bool = false) -> (
    value: UInt64, digits: Int
) {
    let word = UnsafeRawPointer(p + start).loadUnaligned(as: UInt64.self)
    let values = word &- 0x3030_3030_3030_3030
    let nonDigits = ((word &+ 0x4646_4646_4646_4646) | values) & 0x8080_8080_8080_8080
    if nonDigits == 0 {
        return inlineLong
            ? longIntegerDigits(p, start, maximum: maximum)
            : longIntegerDigitsOutlined(p, start, maximum: maximum)
    }
    let bit = nonDigits.trailingZeroBitCount
    return (leadingDigitsValue(values, bit: bit), bit &>> 3)
}

/// The number written by the digit values (0...9, the first digit in the lowest byte) of the
/// bytes of `values` below bit `bit` (8 × digits + 7, 1 to 8 digits; bytes above are ignored):
/// the digits are moved to the top bytes (the bytes below become leading zeros), then
/// combined in pairs, fours and eights.
@_transparent
func leadingDigitsValue(_ values: UInt64, bit: Int) -> UInt64 {
    // 64 − 8 × digits, masked to 0...63 by the shift (8 digits: no shift).
    var value = values &<< UInt64(truncatingIfNeeded: 71 &- bit)
    value = value &* 10 &+ (value &>> 8)
    return
        ((value & 0x0000_00FF_0000_00FF) &* (100 &+ (1_000_000 &<< 32))
        &+ ((value &>> 16) & 0x0000_00FF_0000_00FF) &* (1 &+ (10_000 &<< 32))) &>> 32
}

/// ``integerDigits(_:_:maximum:inlineLong:)`` for a run whose first 8 bytes are digits: the
/// 8 bytes after them give the run's length, then the last 8 digits (the 8 bytes ending at the
/// run's end) and the ones before them (at most 7) are two numbers of at most 8 digits, with
/// no table of powers of ten.
@_transparent
func longIntegerDigits(_ p: UnsafePointer<UInt8>, _ start: Int, maximum: Int) -> (value: UInt64, digits: Int)
{
    let word = UnsafeRawPointer(p + (start &+ 8)).loadUnaligned(as: UInt64.self)
    let values = word &- 0x3030_3030_3030_3030
    let nonDigits = ((word &+ 0x4646_4646_4646_4646) | values) & 0x8080_8080_8080_8080
    let bit = nonDigits.trailingZeroBitCount
    let more = bit &>> 3
    // 16 digits or more (no non-digit: the count is 64), or more than `maximum`.
    guard nonDigits != 0 && 8 &+ more <= maximum else { return (0, 0) }
    let last = leadingDigitsValue(
        UnsafeRawPointer(p + (start &+ more)).loadUnaligned(as: UInt64.self) &- 0x3030_3030_3030_3030, bit: 71
    )
    let first =
        more == 0
        ? 0
        : leadingDigitsValue(
            UnsafeRawPointer(p + start).loadUnaligned(as: UInt64.self) &- 0x3030_3030_3030_3030, bit: bit)
    return (first &* 100_000_000 &+ last, 8 &+ more)
}

/// ``longIntegerDigits(_:_:maximum:)`` out of line.
@inline(never)
func longIntegerDigitsOutlined(_ p: UnsafePointer<UInt8>, _ start: Int, maximum: Int) -> (
    value: UInt64, digits: Int
) {
    longIntegerDigits(p, start, maximum: maximum)
}

/// One cell `[-]digits` (1 to 15 characters with the sign) at `p + i`: its magnitude, 1 when
/// it is negative (else 0), its number of digits (0 when it is not such a cell) and the index
/// of the byte after it, which the caller checks. See ``integerDigits(_:_:maximum:inlineLong:)``
/// for the bytes it reads and `inlineLong`.
@_transparent
func integerCell(_ p: UnsafePointer<UInt8>, _ i: Int, inlineLong: Bool = false) -> (
    magnitude: UInt64, negative: Int, digits: Int, end: Int
) {
    let negative = p[i] == UInt8(ascii: "-") ? 1 : 0
    let start = i &+ negative
    let (magnitude, digits) = integerDigits(p, start, maximum: 15 &- negative, inlineLong: inlineLong)
    return (magnitude, negative, digits, start &+ digits)
}

/// ``parsePlainLine(_:_:_:)`` for a row of four integer cells (time, x, y, z) and its line
/// ending, for a plan with ``FastRowPlan/integerRows``: the same sample, written to `sample`,
/// and the same bytes taken (returned), with no fraction, no column skipping and the time
/// scaled by one multiply. Nil for any other row (then ``parsePlainLine(_:_:_:)`` decides; the
/// memory at `sample` may have been written). Each value is written as soon as its cell is
/// read: the loop then keeps no cell's value or sign in a register while it reads the next.
/// `p` must be followed by a non-digit byte within the bytes the caller owns and 16 readable
/// bytes after it (the reader's 0 byte and padding), like ``parsePlainLine(_:_:_:)``.
///
/// `reciprocals` points to the plan's exact reciprocal and its negation: a cell's value times
/// the one its sign picks is the value with the sign applied times the reciprocal, bit for bit
/// (rounding is symmetric; "-0" gives -0.0). Picked by a load, with no branch on the sign
/// (signs are random: a branch would mispredict; a Double has no conditional move), as long as
/// the compiler cannot see the two values: callers pass memory they filled elsewhere.
@_transparent
func parseIntegerLine(
    _ p: UnsafePointer<UInt8>, separator: UInt8, maximumTimeDigits: Int, timeMultiplier: Int64,
    reciprocals: UnsafeRawPointer, into sample: UnsafeMutablePointer<AccelerationSample>
) -> Int? {
    // As PlainNumber's doubleValue times the exact reciprocal, bit for bit. The magnitudes
    // (below 10^15) are converted as Int64s: one instruction instead of the several of a
    // UInt64, the same Double. Always finite (see FastRowPlan.integerRows).
    func axis(_ cell: (magnitude: UInt64, negative: Int, digits: Int, end: Int)) -> Float {
        Float(
            Double(Int64(truncatingIfNeeded: cell.magnitude))
                * reciprocals.load(fromByteOffset: cell.negative &* 8, as: Double.self))
    }
    let t = integerCell(p, 0, inlineLong: true)
    guard t.digits != 0 && t.digits <= maximumTimeDigits && p[t.end] == separator else { return nil }
    // At most 18 digits after scaling: no overflow. "-0" is 0, as scaledInt64 gives.
    let magnitude = Int64(truncatingIfNeeded: t.magnitude) &* timeMultiplier
    let signMask = 0 &- Int64(truncatingIfNeeded: t.negative)
    let time = (magnitude ^ signMask) &- signMask
    let x = integerCell(p, t.end &+ 1)
    guard x.digits != 0 && p[x.end] == separator else { return nil }
    sample.pointer(to: \.x)!.initialize(to: axis(x))
    let y = integerCell(p, x.end &+ 1)
    guard y.digits != 0 && p[y.end] == separator else { return nil }
    sample.pointer(to: \.y)!.initialize(to: axis(y))
    let z = integerCell(p, y.end &+ 1)
    // An LF, or a CR and an LF (parseRow sees the line without one CR).
    let cr = p[z.end] == 13 ? 1 : 0
    guard z.digits != 0 && p[z.end &+ cr] == 10 else { return nil }
    sample.pointer(to: \.z)!.initialize(to: axis(z))
    sample.pointer(to: \.timestamp)!.initialize(to: time)
    return z.end &+ cr &+ 1
}

/// ``parseIntegerLine(_:separator:maximumTimeDigits:timeMultiplier:reciprocals:into:)`` for
/// `plan` (with ``FastRowPlan/integerRows``), out of line: for the rows the reader samples to
/// detect units, and for tests.
@inline(never)
func parseIntegerLineOutlined(_ p: UnsafePointer<UInt8>, _ plan: FastRowPlan) -> (
    sample: AccelerationSample, taken: Int
)? {
    guard plan.integerRows, let reciprocal = plan.exactReciprocal else { return nil }
    var reciprocals = (reciprocal, -reciprocal)
    var sample = AccelerationSample(timestamp: 0, x: 0, y: 0, z: 0)
    let taken = withUnsafeBytes(of: &reciprocals) { reciprocals in
        parseIntegerLine(
            p, separator: plan.separator, maximumTimeDigits: plan.maximumTimeDigits,
            timeMultiplier: plan.timeMultiplier, reciprocals: reciprocals.baseAddress!, into: &sample)
    }
    guard let taken else { return nil }
    return (sample, taken)
}

/// Parses integer rows
/// (``parseIntegerLine(_:separator:maximumTimeDigits:timeMultiplier:reciprocals:into:)``) one
/// after the other from the `available` bytes at `p` into `samples`, up to `capacity`, while
/// time does not go back (from `previous` on); returns how many and the bytes they took. A
/// function of its own, with the plan's few values as arguments: the loop keeps its state in
/// registers, and `reciprocals` stays opaque (see
/// ``parseIntegerLine(_:separator:maximumTimeDigits:timeMultiplier:reciprocals:into:)``).
@inline(never)
func parseIntegerLines(
    _ p: UnsafePointer<UInt8>, _ available: Int, separator: UInt8, maximumTimeDigits: Int,
    timeMultiplier: Int64, reciprocals: UnsafeRawPointer, after previous: Int64,
    into samples: UnsafeMutablePointer<AccelerationSample>, capacity: Int
) -> (count: Int, taken: Int) {
    var row = p
    let end = p + available
    var next = samples
    let last = samples + capacity
    var previous = previous
    while next < last && row < end,
        let used = parseIntegerLine(
            row, separator: separator, maximumTimeDigits: maximumTimeDigits, timeMultiplier: timeMultiplier,
            reciprocals: reciprocals, into: next),
        next.pointee.timestamp >= previous
    {
        previous = next.pointee.timestamp
        next += 1
        row += used
    }
    return (samples.distance(to: next), p.distance(to: row))
}

/// Parses plain rows one after the other from the `available` bytes at `p` (the unread part
/// of the buffer) into `samples`, up to its size, while rows are plain and time does not go
/// back (from `previousTime` on). Returns how many and the bytes they took, line endings
/// included. Compiled on its own, away from the reader's large `next()`, with the loop's
/// state in registers.
@inline(never)
func parsePlainLines(
    _ p: UnsafePointer<UInt8>, _ available: Int, _ plan: FastRowPlan, after previousTime: Int64,
    into samples: UnsafeMutableBufferPointer<AccelerationSample>
) -> (count: Int, taken: Int) {
    guard let base = samples.baseAddress else { return (0, 0) }
    var count = 0
    var taken = 0
    var previous = previousTime
    // Integer rows first while they last (a row that is not one ends the integer loop, so a
    // file of decimals pays for one failed try per batch).
    if plan.integerRows, let reciprocal = plan.exactReciprocal {
        var reciprocals = (reciprocal, -reciprocal)
        (count, taken) = withUnsafeBytes(of: &reciprocals) { reciprocals in
            parseIntegerLines(
                p, available, separator: plan.separator, maximumTimeDigits: plan.maximumTimeDigits,
                timeMultiplier: plan.timeMultiplier, reciprocals: reciprocals.baseAddress!, after: previous,
                into: base, capacity: samples.count)
        }
        if count > 0 { previous = base[count &- 1].timestamp }
    }
    while count < samples.count && taken < available,
        let (sample, used) = parsePlainLine(p + taken, available &- taken, plan),
        sample.timestamp >= previous
    {
        (base + count).pointee = sample
        count &+= 1
        taken &+= used
        previous = sample.timestamp
    }
    return (count, taken)
}
