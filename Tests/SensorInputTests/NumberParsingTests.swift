import Testing

@testable import SensorInput

private func parse(_ text: String) -> (ok: Bool, number: DecimalNumber) {
    let bytes = Array(text.utf8)
    return bytes.withUnsafeBufferPointer { buffer in
        guard let base = buffer.baseAddress else {
            return (false, DecimalNumber(negative: false, mantissa: 0, exponent: 0))
        }
        let scan = scanNumber(base, from: 0, to: buffer.count)
        return (scan.hasDigits && scan.next == buffer.count, scan.number)
    }
}

private func double(_ text: String) -> Double? {
    let result = parse(text)
    return result.ok ? result.number.doubleValue : nil
}

/// One ulp in the range accelerometer data lives in (|x| in 1e-6...1e6, where at most
/// two roundings happen); four ulp for extreme exponents, where scaling takes a few steps.
private func tolerance(_ expected: Double) -> Double {
    let ulp = max(expected.ulp, Double.leastNonzeroMagnitude)
    return abs(expected) >= 1e-6 && abs(expected) <= 1e6 ? ulp : 4 * ulp
}

private func nanoseconds(_ text: String, shift: Int) -> Int64? {
    let result = parse(text)
    return result.ok ? result.number.scaledInt64(shift: shift) : nil
}

@Suite("Number parsing")
struct NumberParsingTests {
    @Test func powersOfTenTableIsExact() {
        var power: UInt64 = 1
        for k in 0...19 {
            #expect(integerPowerOfTen(k) == power, "10^\(k)")
            if k < 19 { power *= 10 }
        }
    }

    @Test(arguments: [
        "0", "-0", "1", "-3417", "+7", "1.5", ".5", "5.", "2.053291537E-3", "9.849455833E0", "1.024176513E1",
        "-1.8e-3", "0.012345", "-0.98765", "1e-05", "3.4028235e+38", "1.1754944e-38", "1e-45", " 42 ",
        "9.8066500000000000000001", "123456789012345678901234567890", "0.000000000000000000000001234",
        "1.7976931348623157e308", "4.9e-324",
    ])
    func matchesTheStandardLibrary(text: String) throws {
        let trimmed = text.trimmingSpaces()
        let expected = try #require(Double(trimmed))
        let value = try #require(double(text))
        #expect(abs(value - expected) <= tolerance(expected), "\(text): \(value) vs \(expected)")
    }

    @Test func randomDoublesAreWithinOneUlp() throws {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<20_000 {
            let value =
                Double.random(in: -200...200, using: &generator) * 10.0.power(Int.random(in: -30...30))
            let text = "\(value)"
            let parsed = try #require(double(text))
            #expect(abs(parsed - value) <= tolerance(value), "\(text)")
        }
    }

    /// What the writer relies on: every finite Float's shortest text parses back bit-exactly.
    @Test func everyFloatTextRoundTrips() {
        var generator = SystemRandomNumberGenerator()
        var failures: [String] = []
        for _ in 0..<200_000 {
            let value = Float(bitPattern: UInt32.random(in: 0...UInt32.max, using: &generator))
            guard value.isFinite else { continue }
            let text = value.description
            if double(text).map(Float.init) != value { failures.append(text) }
        }
        #expect(failures.isEmpty, "\(failures.prefix(10))")
    }

    @Test(arguments: ["", " ", "-", "+", ".", "e5", "1e", "1e+", "abc", "1.2.3", "--1", "1,5", "0x10"])
    func rejectsNonNumbers(text: String) {
        #expect(double(text) == nil)
    }

    @Test func timestampsAreExact() {
        #expect(nanoseconds("1711795430071476200", shift: 0) == 1_711_795_430_071_476_200)
        #expect(nanoseconds("263239144953734", shift: 0) == 263_239_144_953_734)
        #expect(nanoseconds("12.345678901", shift: 9) == 12_345_678_901)
        #expect(nanoseconds("-1.8E-3", shift: 9) == -1_800_000)
        #expect(nanoseconds("85", shift: 6) == 85_000_000)
        #expect(nanoseconds("0.0000000005", shift: 9) == 1)  // half rounds away from zero
        #expect(nanoseconds("-0.0000000004", shift: 9) == 0)
        #expect(nanoseconds("9223372036854775807", shift: 0) == Int64.max)
        #expect(nanoseconds("-9223372036854775808", shift: 0) == Int64.min)
        #expect(nanoseconds("9223372036854775808", shift: 0) == nil)
        #expect(nanoseconds("1e30", shift: 9) == nil)
        #expect(nanoseconds("99999999999", shift: 9) == nil)
        #expect(nanoseconds("1e-400", shift: 9) == 0)
    }

    @Test func hugeExponentsDoNotTrap() {
        #expect(double("1e99999999999999999999")?.isInfinite == true)
        #expect(double("1e-99999999999999999999") == 0)
        #expect(nanoseconds("1e99999999999999999999", shift: 9) == nil)
    }

    @Test(arguments: ["NaN", "nan", "-inf", "Infinity", " +INF ", "∞", "-∞"])
    func recognisesNonFiniteSpellings(text: String) {
        #expect(spellsNonFinite(Array(text.utf8)))
    }

    @Test func unitsParseAndPrint() throws {
        #expect(AccelerationUnit("g") == .g)
        #expect(AccelerationUnit("m/s2") == .metersPerSecondSquared)
        #expect(AccelerationUnit("mps2") == .metersPerSecondSquared)
        #expect(AccelerationUnit("counts:8192") == .counts(perG: 8192))
        #expect(AccelerationUnit.counts(perG: 8192).description == "counts:8192")
        #expect(AccelerationUnit("counts:0") == nil)
        #expect(AccelerationUnit("counts:abc") == nil)
        let error = #expect(throws: RecordingError.self) { try AccelerationUnit.parse("furlongs") }
        #expect(error?.kind == .invalidUnit)
        #expect(error?.description.contains("'furlongs'") == true)
    }
}

extension Double {
    fileprivate func power(_ exponent: Int) -> Double {
        var result = 1.0
        for _ in 0..<abs(exponent) { result *= self }
        return exponent < 0 ? 1 / result : result
    }
}

extension String {
    fileprivate func trimmingSpaces() -> String {
        String(drop(while: { $0 == " " }).reversed().drop(while: { $0 == " " }).reversed())
    }
}
