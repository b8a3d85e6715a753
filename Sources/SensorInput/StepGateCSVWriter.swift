public import StepDetection

#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Musl)
    internal import Musl
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// Writes samples in StepGate's own CSV format, which ``RecordingReader`` reads back
/// bit-exactly:
///
/// ```
/// time_s,x_g,y_g,z_g
/// 12.345678901,0.012345,-0.98765,0.1
/// ```
///
/// Time is written in seconds with all nine decimals (nanosecond precision); values use the
/// shortest text that round-trips the Float. Output is buffered (64 KiB): call ``flush(sync:)``
/// to push it to the file, and ``close(sync:)`` at the end to see write errors. Dropping the
/// writer without `close` flushes on a best-effort basis and ignores errors.
public struct StepGateCSVWriter: ~Copyable {
    /// The header line (without newline).
    public static let header = "time_s,x_g,y_g,z_g"

    /// The path written to, or the name given with a file descriptor.
    public let path: String
    private let descriptor: Int32
    private let closesDescriptor: Bool
    private var buffer: [UInt8] = []
    private var closed = false
    private static let capacity = 64 * 1024

    /// Creates (or truncates) the file at `path` and writes the header.
    public init(path: String) throws(RecordingError) {
        var descriptor: Int32 = -1
        repeat {
            descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        } while descriptor < 0 && errno == EINTR
        if descriptor < 0 {
            throw RecordingError(
                kind: .cannotOpen, path: path, expected: "a writable file", found: systemError())
        }
        self.init(fileDescriptor: descriptor, name: path, closeWhenDone: true)
    }

    /// Writes to an open file descriptor (for example 1 for stdout), header first. The
    /// descriptor is closed by ``close(sync:)`` only when `closeWhenDone` is true.
    public init(fileDescriptor: Int32, name: String = "<output>", closeWhenDone: Bool = false) {
        descriptor = fileDescriptor
        path = name
        closesDescriptor = closeWhenDone
        buffer.reserveCapacity(Self.capacity + 64)
        buffer.append(contentsOf: Self.header.utf8)
        buffer.append(10)
    }

    /// Appends one row. Throws `notFinite` for NaN or infinite values (the reader would
    /// reject them), or `cannotWrite` when a full buffer cannot be written.
    public mutating func write(_ sample: AccelerationSample) throws(RecordingError) {
        guard sample.x.isFinite && sample.y.isFinite && sample.z.isFinite else {
            throw RecordingError(
                kind: .notFinite, path: path, expected: "finite values to write",
                found: "\(sample.x),\(sample.y),\(sample.z)")
        }
        appendTime(sample.timestamp)
        buffer.append(44)
        buffer.append(contentsOf: sample.x.description.utf8)
        buffer.append(44)
        buffer.append(contentsOf: sample.y.description.utf8)
        buffer.append(44)
        buffer.append(contentsOf: sample.z.description.utf8)
        buffer.append(10)
        if buffer.count >= Self.capacity { try writeBuffer() }
    }

    /// Appends every sample of a sequence.
    public mutating func write(contentsOf samples: some Sequence<AccelerationSample>) throws(RecordingError) {
        for sample in samples { try write(sample) }
    }

    /// Writes the buffered rows to the file, then, with `sync`, waits for the storage
    /// device (`fsync`).
    public mutating func flush(sync: Bool = false) throws(RecordingError) {
        try writeBuffer()
        if sync && fsync(descriptor) != 0 && errno != EINVAL {
            throw RecordingError(
                kind: .cannotWrite, path: path, expected: "fsync to succeed", found: systemError())
        }
    }

    /// Flushes (with `sync`, also `fsync`s) and closes the file if the writer owns it.
    public consuming func close(sync: Bool = false) throws(RecordingError) {
        closed = true
        try flush(sync: sync)
        if closesDescriptor && closeDescriptor(descriptor) != 0 {
            throw RecordingError(
                kind: .cannotWrite, path: path, expected: "close to succeed", found: systemError())
        }
    }

    deinit {
        guard !closed else { return }
        buffer.withUnsafeBytes { bytes in _ = Self.writeAll(descriptor, bytes) }
        if closesDescriptor { _ = closeDescriptor(descriptor) }
    }

    private mutating func writeBuffer() throws(RecordingError) {
        let failed = buffer.withUnsafeBytes { bytes in !Self.writeAll(descriptor, bytes) }
        buffer.removeAll(keepingCapacity: true)
        if failed {
            throw RecordingError(
                kind: .cannotWrite, path: path, expected: "the rows to be written", found: systemError())
        }
    }

    /// Writes all bytes, retrying on EINTR and short writes; false (errno set) on failure.
    private static func writeAll(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer) -> Bool {
        guard var pointer = bytes.baseAddress else { return true }
        var remaining = bytes.count
        while remaining > 0 {
            let n = writeBytes(descriptor, pointer, remaining)
            if n < 0 {
                if errno == EINTR { continue }
                return false
            }
            pointer += n
            remaining -= n
        }
        return true
    }

    /// Appends nanoseconds as seconds with nine decimals: `-1.250000000`.
    private mutating func appendTime(_ nanoseconds: Int64) {
        if nanoseconds < 0 { buffer.append(45) }
        let magnitude = nanoseconds.magnitude
        appendDigits(magnitude / 1_000_000_000, minimumCount: 1)
        buffer.append(46)
        appendDigits(magnitude % 1_000_000_000, minimumCount: 9)
    }

    /// Appends the decimal digits of `value`, zero-padded to `minimumCount` digits.
    private mutating func appendDigits(_ value: UInt64, minimumCount: Int) {
        var divisor: UInt64 = 1
        var count = 1
        while count < 20 && (value / divisor >= 10 || count < minimumCount) {
            divisor *= 10
            count += 1
        }
        var rest = value
        while true {
            buffer.append(UInt8(truncatingIfNeeded: 48 &+ rest / divisor))
            rest %= divisor
            if divisor == 1 { break }
            divisor /= 10
        }
    }
}

private func closeDescriptor(_ descriptor: Int32) -> Int32 { close(descriptor) }

private func writeBytes(_ descriptor: Int32, _ pointer: UnsafeRawPointer, _ count: Int) -> Int {
    write(descriptor, pointer, count)
}
