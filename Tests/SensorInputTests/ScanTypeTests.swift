import Testing

@testable import SensorInput

@Suite("IIO scan types, layouts and mount matrices")
struct ScanTypeTests {
    @Test(arguments: [
        ("le:s12/16>>4", false, ScanType.Sign.signed, 12, 16, 4, 1),
        ("be:s16/16>>0", true, .signed, 16, 16, 0, 1),
        ("le:s64/64>>0", false, .signed, 64, 64, 0, 1),
        ("le:U10/16>>6", false, .unsigned, 10, 16, 6, 1),
        ("be:u8/8X4>>0", true, .unsigned, 8, 8, 0, 4),
        ("le:s24/32>>8\n\0", false, .signed, 24, 32, 8, 1),
        ("le:f32/32>>0", false, .float, 32, 32, 0, 1),
    ])
    func parses(
        text: String, bigEndian: Bool, sign: ScanType.Sign, bits: Int, storage: Int, shift: Int, repeats: Int
    )
        throws
    {
        let type = try ScanType(parsing: text)
        #expect(type.isBigEndian == bigEndian)
        #expect(type.sign == sign)
        #expect(type.bits == bits && type.storageBits == storage && type.shift == shift)
        #expect(type.repeatCount == repeats)
        #expect(try ScanType(parsing: type.description) == type)
    }

    @Test(arguments: [
        ("", "'le:' or 'be:' first"),
        ("xe:s12/16>>4", "'le:' or 'be:' first"),
        ("le:q12/16>>4", "'s', 'u' or 'f'"),
        ("le:s12-16>>4", "'/' after the number of bits"),
        ("le:s12/12>>0", "8, 16, 32 or 64 storage bits"),
        ("le:s16/16>>4", "bits + shift no larger"),
        ("le:s12/16>4", "'>>shift'"),
        ("le:s12/16>>4 junk", "nothing after the shift"),
        ("le:s0/16>>0", "bits + shift"),
        ("le:s12/16X0>>4", "repeat count of at least 1"),
        ("le:s99999/16>>0", "the number of bits"),
    ])
    func rejectsWithAClearMessage(text: String, expected: String) {
        let error = #expect(throws: ScanTypeError.self) { try ScanType(parsing: text) }
        #expect(error?.description.contains(expected) == true, "\(String(describing: error))")
        #expect(error?.description.hasPrefix("invalid IIO scan type") == true)
    }

    @Test func decodesTheLIS3DHLeftJustifiedLayout() throws {
        let type = try ScanType(parsing: "le:s12/16>>4")
        // -1 g on a 12-bit value: -1000 counts stored as (-1000 << 4) little-endian.
        var bytes: [UInt8] = []
        type.encode(-1000, into: &bytes)
        #expect(bytes == [0x80, 0xC1])
        #expect(bytes.withUnsafeBytes { type.decode($0) } == -1000)
        // The low 4 bits are noise the shift discards.
        #expect(([0x8F, 0xC1] as [UInt8]).withUnsafeBytes { type.decode($0) } == -1000)
    }

    @Test func decodesBigEndianAndTimestamps() throws {
        let be = try ScanType(parsing: "be:s16/16>>0")
        #expect(([0xC0, 0x00] as [UInt8]).withUnsafeBytes { be.decode($0) } == -16384)
        let ts = try ScanType(parsing: "le:s64/64>>0")
        var bytes: [UInt8] = []
        ts.encode(1_234_567_890_123_456_789, into: &bytes)
        #expect(bytes.withUnsafeBytes { ts.decode($0) } == 1_234_567_890_123_456_789)
        let u = try ScanType(parsing: "le:u12/16>>4")
        #expect(([0xF0, 0xFF] as [UInt8]).withUnsafeBytes { u.decode($0) } == 4095)
    }

    /// Every type string, many bit patterns: our decoder agrees with libiio's
    /// `iio_channel_convert`, and libiio parses the type string to the same fields.
    @Test(arguments: [
        "le:s12/16>>4", "be:s16/16>>0", "le:s64/64>>0", "le:u12/16>>4", "be:u10/16>>6", "le:s16/16>>0",
        "be:s24/32>>8", "le:u8/8>>0", "le:s8/8>>0", "be:s12/16>>4", "le:s32/32>>0", "le:u14/16>>2",
    ])
    func agreesWithIIOChannelConvert(text: String) throws {
        let type = try ScanType(parsing: text)
        var generator = SystemRandomNumberGenerator()
        var patterns: [[UInt8]] = [
            [UInt8](repeating: 0, count: type.storageBytes),
            [UInt8](repeating: 0xFF, count: type.storageBytes),
            [UInt8](repeating: 0x80, count: type.storageBytes),
            [UInt8](repeating: 0x7F, count: type.storageBytes),
        ]
        for _ in 0..<200 {
            patterns.append((0..<type.storageBytes).map { _ in UInt8.random(in: 0...255, using: &generator) })
        }
        for bytes in patterns {
            let (expected, format) = try LibIIOConversion.convert(bytes, type: text)
            #expect(format?.isBigEndian == type.isBigEndian && format?.bits == type.bits)
            #expect(format?.storageBits == type.storageBits && format?.shift == type.shift)
            let ours = bytes.withUnsafeBytes { type.decode($0) }
            #expect(ours == expected, "\(text) \(bytes): ours \(ours), libiio \(expected)")
        }
    }

    @Test func layoutsAlignEachElementToItsSize() throws {
        let s12 = try ScanType(parsing: "le:s12/16>>4")
        let s64 = try ScanType(parsing: "le:s64/64>>0")
        let lis3dh = ScanLayout([
            ("timestamp", 3, s64), ("accel_x", 0, s12), ("accel_y", 1, s12), ("accel_z", 2, s12),
        ])
        #expect(lis3dh.elements.map(\.offset) == [0, 2, 4, 8])
        #expect(lis3dh.scanSize == 16)
        let be16 = try ScanType(parsing: "be:s16/16>>0")
        let mpu = ScanLayout(
            [("accel_x", 0, be16), ("accel_y", 1, be16), ("accel_z", 2, be16), ("temp", 3, be16)]
                + [
                    ("anglvel_x", 4, be16), ("anglvel_y", 5, be16), ("anglvel_z", 6, be16),
                    ("timestamp", 7, s64),
                ])
        #expect(mpu.element("timestamp")?.offset == 16)
        #expect(mpu.scanSize == 24)
        let axesOnly = ScanLayout([("accel_x", 0, s12), ("accel_y", 1, s12), ("accel_z", 2, s12)])
        #expect(axesOnly.scanSize == 6)
        let u8 = try ScanType(parsing: "le:u8/8>>0")
        let mixed = ScanLayout([("a", 0, u8), ("b", 1, s64)])
        #expect(mixed.elements.map(\.offset) == [0, 8])
        #expect(mixed.scanSize == 16)
    }

    // Mount matrices, tested like iio-sensor-proxy's test-mount-matrix.c.
    @Test func identityMatrixLeavesVectorsAlone() throws {
        let m = try MountMatrix(parsing: "1, 0, 0; 0, 1, 0; 0, 0, 1\n")
        #expect(m.isIdentity)
        let v = m.apply(x: 0.1, y: -0.2, z: 0.98)
        #expect(v.x == 0.1 && v.y == -0.2 && v.z == 0.98)
    }

    @Test func swapMatrixRotatesAxes() throws {
        let m = try MountMatrix(parsing: "0, 1, 0; -1, 0, 0; 0, 0, 1")
        let v = m.apply(x: 1, y: 2, z: 3)
        #expect(v.x == 2 && v.y == -1 && v.z == 3)
        #expect(m.description == "0, 1, 0; -1, 0, 0; 0, 0, 1")
        let compact = try MountMatrix(parsing: "0,1,0;-1,0,0;0,0,1")
        #expect(compact == m)
        let fractional = try MountMatrix(parsing: "0.7071, -0.7071, 0; 0.7071, 0.7071, 0; 0, 0, 1")
        #expect(abs(fractional.apply(x: 1, y: 0, z: 0).y - 0.7071) < 1e-6)
    }

    @Test(arguments: [
        "", "1, 0, 0; 0, 1, 0", "1, 0; 0, 1; 0, 0", "a, 0, 0; 0, 1, 0; 0, 0, 1", "0, 0, 0; 0, 0, 0; 0, 0, 0",
        "1, 0, 0; 0, 1, 0; 0, 0, 1; 0, 0, 0", "nan, 0, 0; 0, 1, 0; 0, 0, 1", "1, 0, 0, 0; 0, 1, 0; 0, 0, 1",
    ])
    func invalidMatricesAreRejected(text: String) {
        let error = #expect(throws: MountMatrixError.self) { try MountMatrix(parsing: text) }
        #expect(error?.description.hasPrefix("invalid mount matrix") == true)
    }

    @Test func udevDatabaseLookup() {
        let db =
            "S:iio/foo\nE:ID_PATH=platform-1c2b000.i2c\nE:ACCEL_MOUNT_MATRIX=0, -1, 0; 1, 0, 0; 0, 0, 1\nG:systemd\n"
        #expect(IIODeviceInfo.udevProperty(in: db, "ACCEL_MOUNT_MATRIX") == "0, -1, 0; 1, 0, 0; 0, 0, 1")
        #expect(IIODeviceInfo.udevProperty(in: db, "ACCEL_LOCATION") == nil)
    }
}
