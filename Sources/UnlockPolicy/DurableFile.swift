#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A file operation that failed: what was done, to which path, and the system's reason.
public struct FileError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What was attempted, e.g. "cannot rename onto".
    public var operation: String
    public var path: String
    /// The `strerror` text, or another reason.
    public var reason: String

    public init(operation: String, path: String, reason: String) {
        self.operation = operation
        self.path = path
        self.reason = reason
    }

    /// An error from the current `errno`.
    static func errno(_ operation: String, _ path: String) -> FileError {
        let code = Glibc.errno
        let text = strerror(code).map { String(cString: $0) } ?? "error \(code)"
        return FileError(operation: operation, path: path, reason: text)
    }

    public var description: String { "\(operation) \(path): \(reason)" }
}

/// Whole-file reads and atomic, durable writes, for state files and the files shields manage.
public enum DurableFile {
    /// Reads a whole file; `nil` when it does not exist.
    ///
    /// - Parameter limit: Largest size accepted, in bytes; a larger file is an error.
    public static func read(_ path: String, limit: Int = 16 << 20) throws(FileError) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            if Glibc.errno == ENOENT { return nil }
            throw .errno("cannot open", path)
        }
        defer { close(fd) }
        var result: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if Glibc.errno == EINTR { continue }
                throw .errno("cannot read", path)
            }
            if n == 0 { break }
            result += buffer[0..<n]
            if result.count > limit {
                throw FileError(operation: "cannot read", path: path, reason: "larger than \(limit) bytes")
            }
        }
        return result
    }

    /// Replaces `path` with `bytes` atomically and durably: write a temporary file beside it,
    /// `fsync`, `rename` over the old one, `fsync` the directory. A crash leaves either the old
    /// file or the new one, never a mix.
    ///
    /// - Parameters:
    ///   - mode: Permissions for a new file. An existing file keeps its permissions and owner.
    public static func writeAtomically(_ bytes: [UInt8], to path: String, mode: UInt32 = 0o600)
        throws(FileError)
    {
        let directory: String
        if let slash = path.lastIndex(of: "/") {
            directory = slash == path.startIndex ? "/" : String(path[..<slash])
        } else {
            directory = "."
        }
        var existing = stat()
        let exists = stat(path, &existing) == 0
        let temporary = "\(path).tmp-\(getpid())"
        let fd = open(
            temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
            exists ? existing.st_mode & 0o7777 : mode_t(mode))
        guard fd >= 0 else { throw .errno("cannot create", temporary) }
        func fail(_ operation: String) -> FileError {
            let error = FileError.errno(operation, temporary)
            close(fd)
            unlink(temporary)
            return error
        }
        if exists {
            // Keep the old file's owner and exact mode (umask may have narrowed the create mode).
            if fchmod(fd, existing.st_mode & 0o7777) != 0 { throw fail("cannot set the mode of") }
            if fchown(fd, existing.st_uid, existing.st_gid) != 0 && Glibc.errno != EPERM {
                throw fail("cannot set the owner of")
            }
        }
        var written = 0
        while written < bytes.count {
            let n = bytes.withUnsafeBytes {
                write(fd, $0.baseAddress.map { $0 + written }, $0.count - written)
            }
            if n < 0 {
                if Glibc.errno == EINTR { continue }
                throw fail("cannot write")
            }
            written += n
        }
        if fsync(fd) != 0 { throw fail("cannot fsync") }
        close(fd)
        if rename(temporary, path) != 0 {
            let error = FileError.errno("cannot rename onto", path)
            unlink(temporary)
            throw error
        }
        let dfd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard dfd >= 0 else { throw .errno("cannot open directory", directory) }
        defer { close(dfd) }
        if fsync(dfd) != 0 { throw .errno("cannot fsync directory", directory) }
    }
}
