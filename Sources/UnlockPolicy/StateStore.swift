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
        do {
            guard let contents = try DurableFile.read(path) else { return .success(nil) }
            bytes = contents
        } catch {
            return .failure(
                error.reason.hasPrefix("larger than") ? .corrupt(error.reason) : .io(error.description))
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
        do {
            try DurableFile.writeAtomically(Array(state.encoded().utf8), to: path)
        } catch {
            throw .io(error.description)
        }
    }
}
