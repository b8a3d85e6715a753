#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Musl)
    internal import Musl
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// A fixed-size byte buffer shared copy-on-write between copies of a reader.
///
/// `@unchecked Sendable`: the memory is written only by a reader that holds the only
/// reference (checked with `isKnownUniquelyReferenced` before every write), like Array.
final class ChunkBuffer: @unchecked Sendable {
    let pointer: UnsafeMutablePointer<UInt8>
    let capacity: Int
    /// Zero bytes after the capacity, so that the row fast path may read 8 or 16 bytes from
    /// any place in a line without checking where the buffer ends (``digitRun(_:_:_:_:)``).
    static let padding = 64

    init(capacity: Int) {
        self.capacity = max(capacity, 1)
        pointer = .allocate(capacity: self.capacity + Self.padding)
        (pointer + self.capacity).initialize(repeating: 0, count: Self.padding)
    }

    func copy() -> ChunkBuffer {
        let other = ChunkBuffer(capacity: capacity)
        other.pointer.update(from: pointer, count: capacity)
        return other
    }

    deinit { pointer.deallocate() }
}

/// An open file descriptor, closed when the last reader copy goes away.
///
/// `@unchecked Sendable`: the descriptor never changes, and reads use `pread` at an offset
/// each reader keeps itself, so copies never disturb one another (pipes excepted).
final class OpenFile: @unchecked Sendable {
    let descriptor: Int32
    let seekable: Bool
    let size: Int

    init(descriptor: Int32, seekable: Bool, size: Int) {
        self.descriptor = descriptor
        self.seekable = seekable
        self.size = size
    }

    deinit { _ = close(descriptor) }
}

/// Where a reader's bytes come from.
enum ByteSource: Sendable {
    case file(OpenFile)
    /// In-memory bytes; `maximumRead` limits each read to exercise the refill logic in tests.
    case memory([UInt8], maximumRead: Int)

    static func openFile(path: String) throws(RecordingError) -> ByteSource {
        var descriptor: Int32 = -1
        repeat {
            descriptor = open(path, O_RDONLY | O_CLOEXEC)
        } while descriptor < 0 && errno == EINTR
        if descriptor < 0 {
            throw RecordingError(
                kind: .cannotOpen, path: path, expected: "a readable file", found: systemError())
        }
        var status = stat()
        if fstat(descriptor, &status) != 0 {
            let found = systemError()
            _ = close(descriptor)
            throw RecordingError(kind: .cannotOpen, path: path, expected: "a readable file", found: found)
        }
        let isDirectory = (status.st_mode & S_IFMT) == S_IFDIR
        if isDirectory {
            _ = close(descriptor)
            throw RecordingError(
                kind: .cannotOpen, path: path, expected: "a readable file", found: "a directory")
        }
        let isRegular = (status.st_mode & S_IFMT) == S_IFREG
        return .file(
            OpenFile(descriptor: descriptor, seekable: isRegular, size: isRegular ? Int(status.st_size) : 0))
    }

    /// The total size in bytes, or 0 when unknown (pipes).
    var size: Int {
        switch self {
        case .file(let file): file.size
        case .memory(let bytes, _): bytes.count
        }
    }

    /// Reads up to `count` bytes at `offset` into `destination`; 0 means end of file.
    func readChunk(into destination: UnsafeMutablePointer<UInt8>, count: Int, at offset: Int, path: String)
        throws(RecordingError) -> Int
    {
        switch self {
        case .memory(let bytes, let maximumRead):
            let n = min(count, bytes.count - offset, maximumRead)
            if n <= 0 { return 0 }
            bytes.withUnsafeBufferPointer { source in
                guard let base = source.baseAddress else { return }
                destination.update(from: base + offset, count: n)
            }
            return n
        case .file(let file):
            while true {
                let n =
                    file.seekable
                    ? pread(file.descriptor, destination, count, off_t(offset))
                    : read(file.descriptor, destination, count)
                if n >= 0 { return n }
                if errno == EINTR { continue }
                throw RecordingError(
                    kind: .cannotRead, path: path, expected: "readable data", found: systemError())
            }
        }
    }
}

/// The text of the current `errno`, for example `No such file or directory (errno 2)`.
func systemError() -> String {
    let code = errno
    return "\(String(cString: strerror(code))) (errno \(code))"
}
