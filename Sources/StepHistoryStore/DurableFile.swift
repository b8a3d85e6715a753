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
    /// The system's error number, when the failure came from a system call.
    public var code: Int32?

    public init(operation: String, path: String, reason: String, code: Int32? = nil) {
        self.operation = operation
        self.path = path
        self.reason = reason
        self.code = code
    }

    /// An error from the current `errno`.
    package static func errno(_ operation: String, _ path: String) -> FileError {
        let code = Glibc.errno
        let text = strerror(code).map { String(cString: $0) } ?? "error \(code)"
        return FileError(operation: operation, path: path, reason: text, code: code)
    }

    /// Whether the file system ran out of space or inodes (or the user's quota).
    public var isOutOfSpace: Bool { code == ENOSPC || code == EDQUOT }

    public var description: String { "\(operation) \(path): \(reason)" }
}

/// Whole-file reads and atomic, durable writes, for state files and the files shields manage.
///
/// Neither follows a symbolic link at the file's own path: a read fails (`ELOOP`) and a write
/// refuses, so a link planted where a state file should be cannot point root at another file.
/// Temporary files get unpredictable names and are created exclusively (`O_EXCL|O_NOFOLLOW`),
/// so a link planted at a temporary name is never followed either.
public enum DurableFile {
    /// The system calls whose order makes a write durable, behind a seam so tests can record
    /// the order (`fsync` of the file, `rename`, `fsync` of the folder).
    struct SystemCalls: Sendable {
        var fsync: @Sendable (Int32) -> Int32
        var renameat: @Sendable (Int32, String, Int32, String) -> Int32

        static let live = SystemCalls(
            fsync: { Glibc.fsync($0) }, renameat: { Glibc.renameat($0, $1, $2, $3) })
    }

    /// Reads a whole regular file; `nil` when it does not exist.
    ///
    /// - Parameter limit: Largest size accepted, in bytes; a larger file is an error.
    public static func read(_ path: String, limit: Int = 16 << 20) throws(FileError) -> [UInt8]? {
        // O_NONBLOCK: a FIFO planted at the path must not hang the daemon in open(2).
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        if fd < 0 {
            if Glibc.errno == ENOENT { return nil }
            if Glibc.errno == ELOOP {
                throw FileError(operation: "cannot open", path: path, reason: "it is a symbolic link")
            }
            throw .errno("cannot open", path)
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw .errno("cannot stat", path) }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw FileError(operation: "cannot read", path: path, reason: "not a regular file")
        }
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
    /// file or the new one, never a mix. Every step is relative to one open descriptor of the
    /// directory, so the directory cannot be swapped half-way.
    ///
    /// The temporary file is `NAME.tmp-<random>`, created with `O_CREAT|O_EXCL|O_NOFOLLOW` (a
    /// name that exists is retried with another). A symbolic link, or anything but a regular
    /// file, at `path` is refused rather than followed or replaced.
    ///
    /// - Parameters:
    ///   - mode: Permissions for a new file. An existing file keeps its permissions and owner.
    public static func writeAtomically(_ bytes: [UInt8], to path: String, mode: UInt32 = 0o600)
        throws(FileError)
    {
        try writeAtomically(bytes, to: path, mode: mode, calls: .live)
    }

    static func writeAtomically(_ bytes: [UInt8], to path: String, mode: UInt32 = 0o600, calls: SystemCalls)
        throws(FileError)
    {
        let directory: String
        let name: String
        if let slash = path.lastIndex(of: "/") {
            directory = slash == path.startIndex ? "/" : String(path[..<slash])
            name = String(path[path.index(after: slash)...])
        } else {
            directory = "."
            name = path
        }
        guard !name.isEmpty, name != ".", name != ".." else {
            throw FileError(operation: "cannot write", path: path, reason: "not a file name")
        }
        let dfd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard dfd >= 0 else { throw .errno("cannot open directory", directory) }
        defer { close(dfd) }

        var existing = stat()
        let exists: Bool
        if fstatat(dfd, name, &existing, AT_SYMLINK_NOFOLLOW) == 0 {
            switch existing.st_mode & S_IFMT {
            case S_IFREG: exists = true
            case S_IFLNK:
                throw FileError(
                    operation: "cannot replace", path: path,
                    reason: "it is a symbolic link; StepGate never writes through or over one")
            default:
                throw FileError(operation: "cannot replace", path: path, reason: "not a regular file")
            }
        } else if Glibc.errno == ENOENT {
            exists = false
        } else {
            throw .errno("cannot stat", path)
        }

        let createMode = exists ? existing.st_mode & 0o7777 : mode_t(mode)
        var temporary = ""
        var fd: Int32 = -1
        for _ in 0..<100 {
            temporary = "\(name).tmp-\(randomSuffix())"
            fd = openat(dfd, temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, createMode)
            if fd >= 0 || Glibc.errno != EEXIST { break }
        }
        let temporaryPath = directory == "/" ? "/" + temporary : "\(directory)/\(temporary)"
        guard fd >= 0 else { throw .errno("cannot create", temporaryPath) }
        func fail(_ operation: String) -> FileError {
            let error = FileError.errno(operation, temporaryPath)
            close(fd)
            unlinkat(dfd, temporary, 0)
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
        if calls.fsync(fd) != 0 { throw fail("cannot fsync") }
        close(fd)
        // rename(2) replaces whatever is at the name (even a link planted since the check
        // above) and never follows it.
        if calls.renameat(dfd, temporary, dfd, name) != 0 {
            let error = FileError.errno("cannot rename onto", path)
            unlinkat(dfd, temporary, 0)
            throw error
        }
        if calls.fsync(dfd) != 0 { throw .errno("cannot fsync directory", directory) }
    }

    /// Removes the temporary files of writes that never finished (the process was killed, or the
    /// power cut, between creating the temporary file and renaming it): regular files in
    /// `folder` named as ``writeAtomically(_:to:mode:)`` names them, `NAME.tmp-` and 16
    /// lowercase hex digits, and, with `file`, only those of that file. Nothing else is touched,
    /// and no link is followed. Call it before the first write, in a folder that is the
    /// caller's own.
    ///
    /// - Returns: The names removed.
    @discardableResult
    public static func removeLeftovers(in folder: String, of file: String? = nil) -> [String] {
        let dfd = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard dfd >= 0 else { return [] }
        guard let listing = fdopendir(dfd) else {
            close(dfd)
            return []
        }
        defer { closedir(listing) }
        var removed: [String] = []
        while let entry = readdir(listing) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { bytes in
                String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard let base = leftoverBase(name), file == nil || base == file else { continue }
            var info = stat()
            guard fstatat(dfd, name, &info, AT_SYMLINK_NOFOLLOW) == 0, info.st_mode & S_IFMT == S_IFREG,
                unlinkat(dfd, name, 0) == 0
            else { continue }
            removed.append(name)
        }
        return removed.sorted()
    }

    /// The file a temporary file's name belongs to (`steps.json` for
    /// `steps.json.tmp-0123456789abcdef`), or nil for any other name.
    static func leftoverBase(_ name: String) -> String? {
        let bytes = Array(name.utf8)
        let marker = Array(".tmp-".utf8)
        guard bytes.count > marker.count + 16 else { return nil }
        let suffix = bytes.suffix(16)
        guard suffix.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }),
            Array(bytes.dropLast(16).suffix(marker.count)) == marker
        else { return nil }
        return String(decoding: bytes.dropLast(16 + marker.count), as: UTF8.self)
    }

    /// 64 random bits in hex, from the system's random source.
    private static func randomSuffix() -> String {
        var generator = SystemRandomNumberGenerator()
        let value = generator.next()
        let hex = String(value, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}
