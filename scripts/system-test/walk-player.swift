// The system test's walker: plays a recorded walk into the registers of a LIS3DH emulated by
// the kernel's i2c-stub, at the rate the IIO device is set to, so the real st_accel driver
// reads it as it would read a sensor (in_accel_*_raw, polled: i2c-stub raises no interrupt).
//
//   walk-player CSV BUS DEVICE [SECONDS]     play the walk (the first SECONDS of it)
//   walk-player --still BUS DEVICE SECONDS   hold the sensor still (1 g on z)
//
// CSV: rows `timestamp_ns,accuracy,x,y,z` in m/s² (the Android/Oxford format of
// samples/walk-front-pocket-303.csv). BUS: the i2c-stub bus number; DEVICE: the IIO device's
// sysfs folder (its sampling_frequency and in_accel_x_scale give the rate and the units).
// Built by scripts/system-test.sh with swiftc, run in the guest.
import Glibc

func fail(_ message: String) -> Never {
    fputs("walk-player: \(message)\n", stderr)
    exit(1)
}

func readText(_ path: String) -> String {
    guard let file = fopen(path, "r") else { fail("cannot open \(path): \(String(cString: strerror(errno)))") }
    defer { fclose(file) }
    var text = ""
    var buffer = [CChar](repeating: 0, count: 4096)
    while fgets(&buffer, Int32(buffer.count), file) != nil {
        text += String(cString: buffer)
    }
    return text
}

func readNumber(_ path: String) -> Double {
    let text = readText(path).split(whereSeparator: { $0 == " " || $0 == "\n" }).first.map(String.init) ?? ""
    guard let value = Double(text) else { fail("\(path): expected a number, found '\(text)'") }
    return value
}

func monotonicNanoseconds() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
}

var arguments = Array(CommandLine.arguments.dropFirst())
let still = arguments.first == "--still"
if still { arguments.removeFirst() }
guard arguments.count >= 3 || (still && arguments.count == 3) else {
    fail("usage: walk-player CSV BUS DEVICE [SECONDS] | --still BUS DEVICE SECONDS")
}
let csvPath = still ? "" : arguments.removeFirst()
guard let bus = Int(arguments[0]) else { fail("bus '\(arguments[0])' is not a number") }
let device = arguments[1]
var limit = Double.infinity
if arguments.count > 2 {
    guard let seconds = Double(arguments[2]) else { fail("seconds '\(arguments[2])' is not a number") }
    limit = seconds
}

// The walk: (seconds since the first row, x, y, z) in m/s².
var walk: [(Double, Double, Double, Double)] = []
if still {
    walk = [(0, 0, 0, 9.80665), (limit, 0, 0, 9.80665)]
} else {
    var first: Double?
    for (number, line) in readText(csvPath).split(whereSeparator: \.isNewline).enumerated() {
        let fields = line.split(separator: ",", omittingEmptySubsequences: false).map {
            Double(String($0.filter { $0 != " " && $0 != "\r" }))
        }
        guard fields.count == 5, let ns = fields[0], let x = fields[2], let y = fields[3], let z = fields[4] else {
            if number == 0 { continue }  // a header
            fail("\(csvPath):\(number + 1): expected timestamp_ns,accuracy,x,y,z")
        }
        let t = (ns - (first ?? ns)) / 1e9
        first = first ?? ns
        if t > limit { break }
        walk.append((t, x, y, z))
    }
}
guard walk.count >= 2 else { fail("\(csvPath): fewer than two samples") }

let rate = readNumber(device + "/sampling_frequency")
let scale = readNumber(device + "/in_accel_x_scale")  // m/s² per count
guard rate > 0, scale > 0 else { fail("\(device): rate \(rate) Hz, scale \(scale)") }

let bus_path = "/dev/i2c-\(bus)"
let fd = open(bus_path, O_RDWR)
guard fd >= 0 else { fail("cannot open \(bus_path): \(String(cString: strerror(errno)))") }
let I2C_SLAVE_FORCE: UInt = 0x0706
let I2C_SMBUS: UInt = 0x0720
guard ioctl(fd, I2C_SLAVE_FORCE, 0x18) == 0 else { fail("I2C_SLAVE_FORCE 0x18: \(String(cString: strerror(errno)))") }

// struct i2c_smbus_ioctl_data { u8 read_write; u8 command; u32 size; union i2c_smbus_data *data; }
let request = UnsafeMutableRawPointer.allocate(byteCount: 16, alignment: 8)
let block = UnsafeMutableRawPointer.allocate(byteCount: 34, alignment: 8)
/// Writes `bytes` to consecutive registers from `register` (I2C_SMBUS_I2C_BLOCK_DATA).
func write(register: UInt8, _ bytes: [UInt8]) {
    request.initializeMemory(as: UInt8.self, repeating: 0, count: 16)
    request.storeBytes(of: 0, toByteOffset: 0, as: UInt8.self)  // I2C_SMBUS_WRITE
    request.storeBytes(of: register, toByteOffset: 1, as: UInt8.self)
    request.storeBytes(of: 8, toByteOffset: 4, as: UInt32.self)  // I2C_SMBUS_I2C_BLOCK_DATA
    request.storeBytes(of: block, toByteOffset: 8, as: UnsafeMutableRawPointer.self)
    block.storeBytes(of: UInt8(bytes.count), toByteOffset: 0, as: UInt8.self)
    for (i, byte) in bytes.enumerated() { block.storeBytes(of: byte, toByteOffset: 1 + i, as: UInt8.self) }
    guard ioctl(fd, I2C_SMBUS, request) == 0 else {
        fail("block write at 0x\(String(register, radix: 16)): \(String(cString: strerror(errno)))")
    }
}

/// The output registers of a 12-bit left-justified LIS3DH reading, little-endian.
func registers(_ value: Double) -> [UInt8] {
    let counts = Int((value / scale).rounded())
    let clamped = Int16(max(-2048, min(2047, counts))) << 4
    let bits = UInt16(bitPattern: clamped)
    return [UInt8(bits & 0xff), UInt8(bits >> 8)]
}

let period = Int64(1e9 / rate)
let start = monotonicNanoseconds()
var next = start
var index = 0
var written = 0
let end = walk[walk.count - 1].0
while true {
    let t = Double(next - start) / 1e9
    if t > end { break }
    while index + 1 < walk.count && walk[index + 1].0 <= t { index += 1 }
    let (_, x, y, z) = walk[index]
    let bytes = registers(x) + registers(y) + registers(z)
    write(register: 0x28 | 0x80, bytes)  // what st_sensors reads (multi-byte read flag)
    write(register: 0x28, bytes)
    written += 1
    next += period
    var ts = timespec(tv_sec: Int(next / 1_000_000_000), tv_nsec: Int(next % 1_000_000_000))
    while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nil) == EINTR {}
}
let seconds = Double(monotonicNanoseconds() - start) / 1e9
print("walk-player: \(written) samples in \(Int(seconds)) s at \(rate) Hz (scale \(scale))")
