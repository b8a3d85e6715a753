#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Where the policy state lives between runs: a file for the daemon, memory for `simulate`
/// and tests. Both go through the same JSON encoding, so a simulated restart is a real one.
public protocol PolicyStateStore {
    /// The saved state; `.success(nil)` when nothing was saved yet. A corrupt file or one from
    /// a newer StepGate is a `.failure`: the engine then starts locked and says why.
    mutating func load() -> Result<PolicyState?, PolicyStateError>
    /// Saves the state, replacing the previous one atomically.
    mutating func save(_ state: PolicyState) throws(PolicyStateError)
}

/// Keeps the encoded state in memory; can be told to fail, to test fail-closed behaviour.
public struct InMemoryPolicyStateStore: PolicyStateStore, Sendable {
    /// The last saved text, exactly as a file would hold it.
    public var text: String?
    /// When set, `save` throws this reason (a simulated full disk).
    public var failure: String?
    private var refusal: PolicyStateError?

    /// Creates a store, optionally holding some text already (which may be corrupt).
    public init(text: String? = nil) { self.text = text }

    public mutating func load() -> Result<PolicyState?, PolicyStateError> {
        guard let text else { return .success(nil) }
        do throws(PolicyStateError) {
            return .success(try PolicyState.decode(text))
        } catch {
            if case .newerVersion = error { refusal = error }
            return .failure(error)
        }
    }

    public mutating func save(_ state: PolicyState) throws(PolicyStateError) {
        if let failure { throw .io(failure) }
        if let refusal { throw refusal }
        text = state.encoded()
    }
}

/// The daemon's state file, written atomically: a temporary file in the same directory,
/// `fsync`, `rename` over the old file, then `fsync` of the directory.
///
/// A file from a newer StepGate is never overwritten. A corrupt file is moved aside to
/// `PATH.corrupt` before the first save, so it can be inspected.
public struct FilePolicyStateStore: PolicyStateStore, Sendable {
    /// The state file's path.
    public let path: String
    private var refusal: PolicyStateError?
    private var corruptFound = false

    /// Creates a store for the file at `path` (its directory must exist).
    public init(path: String) { self.path = path }

    public mutating func load() -> Result<PolicyState?, PolicyStateError> {
        let bytes: [UInt8]
        switch readFile(path) {
        case .success(let b?): bytes = b
        case .success(nil): return .success(nil)
        case .failure(let error): return .failure(error)
        }
        do throws(PolicyStateError) {
            return .success(try PolicyState.decode(bytes: bytes))
        } catch {
            switch error {
            case .newerVersion: refusal = error
            case .corrupt: corruptFound = true
            case .io: break
            }
            return .failure(error)
        }
    }

    public mutating func save(_ state: PolicyState) throws(PolicyStateError) {
        if let refusal { throw refusal }
        if corruptFound {
            _ = rename(path, path + ".corrupt")
            corruptFound = false
        }
        try writeAtomically(Array(state.encoded().utf8), to: path)
    }
}

private func errnoText(_ what: String, _ path: String) -> PolicyStateError {
    let code = errno
    let message = strerror(code).map { String(cString: $0) } ?? "error \(code)"
    return .io("\(what) \(path): \(message)")
}

/// Reads a whole file; `nil` when it does not exist.
func readFile(_ path: String) -> Result<[UInt8]?, PolicyStateError> {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    if fd < 0 {
        if errno == ENOENT { return .success(nil) }
        return .failure(errnoText("cannot open", path))
    }
    defer { close(fd) }
    var result: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65_536)
    while true {
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n < 0 {
            if errno == EINTR { continue }
            return .failure(errnoText("cannot read", path))
        }
        if n == 0 { break }
        result += buffer[0..<n]
        if result.count > 16_777_216 { return .failure(.corrupt("larger than 16 MiB")) }
    }
    return .success(result)
}

/// Writes `bytes` to `path` atomically and durably.
func writeAtomically(_ bytes: [UInt8], to path: String) throws(PolicyStateError) {
    let directory: String
    if let slash = path.lastIndex(of: "/") {
        directory = slash == path.startIndex ? "/" : String(path[..<slash])
    } else {
        directory = "."
    }
    let temporary = "\(path).tmp-\(getpid())"
    let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    guard fd >= 0 else { throw errnoText("cannot create", temporary) }
    var written = 0
    while written < bytes.count {
        let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress.map { $0 + written }, $0.count - written) }
        if n < 0 {
            if errno == EINTR { continue }
            let error = errnoText("cannot write", temporary)
            close(fd)
            unlink(temporary)
            throw error
        }
        written += n
    }
    if fsync(fd) != 0 {
        let error = errnoText("cannot fsync", temporary)
        close(fd)
        unlink(temporary)
        throw error
    }
    close(fd)
    if rename(temporary, path) != 0 {
        let error = errnoText("cannot rename onto", path)
        unlink(temporary)
        throw error
    }
    let dfd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    guard dfd >= 0 else { throw errnoText("cannot open directory", directory) }
    defer { close(dfd) }
    if fsync(dfd) != 0 { throw errnoText("cannot fsync directory", directory) }
}
