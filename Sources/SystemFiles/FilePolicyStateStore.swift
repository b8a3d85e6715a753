import StepHistoryStore
public import UnlockPolicy

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The daemon's state file, written atomically: a temporary file in the same directory,
/// `fsync`, `rename` over the old file, then `fsync` of the directory.
///
/// The file is only ever overwritten when it was read and decoded, or is absent. A file from a
/// newer StepGate, or one that could not be read (`EACCES`, `EIO`, …), is never overwritten:
/// every save fails, so the engine stays locked and says why, until an administrator acts. A
/// corrupt or oversized file is moved aside to `PATH.corrupt` before the first save; if that
/// move fails, the save fails too.
public struct FilePolicyStateStore: PolicyStateStore, Sendable {
    /// The state file's path.
    public let path: String
    private var refusal: PolicyStateError?
    private var corruptFound = false
    /// Reads the file (a seam for tests: read failures other than a missing file).
    var readFile: @Sendable (String) throws(FileError) -> [UInt8]? = { path throws(FileError) in
        try DurableFile.read(path)
    }

    /// Creates a store for the file at `path` (its directory must exist).
    public init(path: String) { self.path = path }

    public mutating func load() -> Result<PolicyState?, PolicyStateError> {
        refusal = nil
        corruptFound = false
        let bytes: [UInt8]
        do {
            guard let contents = try readFile(path) else { return .success(nil) }
            bytes = contents
        } catch {
            if error.reason.hasPrefix("larger than") {
                corruptFound = true
                return .failure(.corrupt("the file is \(error.reason)"))
            }
            // Unreadable: what it holds (the emergency log, running locks) is unknown, so it
            // must not be replaced.
            let failure = PolicyStateError.io("\(error); not overwriting it")
            refusal = failure
            return .failure(failure)
        }
        do throws(PolicyStateError) {
            return .success(try PolicyState.decode(bytes: bytes))
        } catch {
            switch error {
            case .newerVersion: refusal = error
            case .corrupt: corruptFound = true
            case .io: refusal = error
            }
            return .failure(error)
        }
    }

    public mutating func save(_ state: PolicyState) throws(PolicyStateError) {
        if let refusal { throw refusal }
        if corruptFound {
            let aside = path + ".corrupt"
            if rename(path, aside) != 0 && errno != ENOENT {
                let error = FileError.errno("cannot move the corrupt state file aside to", aside)
                throw .io("\(error); not overwriting \(path)")
            }
            corruptFound = false
        }
        do {
            try DurableFile.writeAtomically(Array(state.encoded().utf8), to: path)
        } catch {
            throw .io(error.description)
        }
    }
}
