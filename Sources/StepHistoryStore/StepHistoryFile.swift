import TypedJSON

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The step history on disk (`steps.json` in the state folder): read once at start, written
/// atomically and durably (``DurableFile``).
///
/// A file that cannot be read or is not a history is moved aside (`steps.json.corrupt-<time>`)
/// and reported, never silently reset; when even that fails, the history is kept in memory only
/// and never written over the file. Nothing here can hold up enforcement: the gate's own step
/// count is in the policy state, and the history is only what the person sees.
public struct StepHistoryFile: Sendable {
    /// The largest history file read, in bytes (a full one is under 70 KB).
    public static let limit = 1 << 20

    public let path: String
    /// Why the file must not be written (the unreadable original could not be moved aside).
    public private(set) var saveRefused: String?

    /// Reads `path`: a missing file is an empty history, a version 1 `steps.json` is migrated
    /// (its steps go to the hour it was last written), anything else unreadable is moved aside.
    public static func load(path: String, clock: LocalClock, warn: (String) -> Void) -> (
        StepHistoryFile, StepHistory
    ) {
        var file = StepHistoryFile(path: path, saveRefused: nil)
        let bytes: [UInt8]
        do {
            guard let contents = try DurableFile.read(path, limit: limit) else {
                return (file, StepHistory())
            }
            bytes = contents
        } catch {
            file.setAside("\(error)", warn: warn)
            return (file, StepHistory())
        }
        do {
            var legacyHour = 23
            var info = stat()
            if lstat(path, &info) == 0 {
                legacyHour = clock.dayAndHour(secondsSince1970: Double(info.st_mtim.tv_sec)).hour
            }
            return (file, try StepHistory.decode(bytes, legacyHour: legacyHour))
        } catch {
            file.setAside("\(path): not a StepGate step history: \(error)", warn: warn)
            return (file, StepHistory())
        }
    }

    /// Moves the unreadable file aside; when that fails, refuses to write over it.
    private mutating func setAside(_ problem: String, warn: (String) -> Void) {
        let aside = "\(path).corrupt-\(Int(wallClockSeconds()))"
        if rename(path, aside) == 0 {
            warn("\(problem); moved aside to \(aside), starting the history empty")
        } else {
            let reason = String(cString: strerror(errno))
            saveRefused =
                "\(path) is unreadable and cannot be moved aside (\(reason)); the history is kept in memory"
            warn("\(problem); \(saveRefused!)")
        }
    }

    /// Writes the history atomically (creating the folder).
    public func save(_ history: StepHistory) throws(FileError) {
        if let saveRefused { throw FileError(operation: "not writing", path: path, reason: saveRefused) }
        let directory = parentFolder(of: path)
        if !directory.isEmpty, let code = createFolders(directory) {
            throw FileError(
                operation: "cannot create", path: directory, reason: foundationReason(code), code: code)
        }
        try DurableFile.writeAtomically(history.encoded(), to: path, mode: 0o644)
    }
}

/// The folder part of a path, as Foundation's `deletingLastPathComponent` gives it: `a/b` for
/// `a/b/steps.json` (and `a/b/c/`), `/` for `/steps.json`, empty for `steps.json`.
func parentFolder(of path: String) -> String {
    var text = Substring(path)
    while text.count > 1 && text.hasSuffix("/") { text = text.dropLast() }
    guard let slash = text.lastIndex(of: "/") else { return "" }
    var folder = text[..<slash]
    while folder.count > 1 && folder.hasSuffix("/") { folder = folder.dropLast() }
    return folder.isEmpty ? "/" : String(folder)
}

/// Creates `path` and any missing folders above it (mode 0777 less the umask), as
/// `FileManager.createDirectory(atPath:withIntermediateDirectories:)` does: nil when it exists
/// or was created, else the error number.
func createFolders(_ path: String) -> Int32? {
    var info = stat()
    if stat(path, &info) == 0 { return nil }
    let parent = parentFolder(of: path)
    if !parent.isEmpty && parent != path, let code = createFolders(parent) { return code }
    if mkdir(path, 0o777) != 0 && errno != EEXIST { return errno }
    return nil
}

/// What Foundation's `FileManager` said for a folder it could not create (the text the
/// history's warning has always shown).
func foundationReason(_ code: Int32) -> String {
    let reason: String
    switch code {
    case ENOENT: reason = "The file doesn’t exist."
    case EPERM, EACCES: reason = "You don’t have permission."
    case ENAMETOOLONG: reason = "The file name is invalid."
    case EROFS: reason = "The volume is read only."
    case ENOSPC, EDQUOT: reason = "There isn’t enough space."
    default: return "The operation could not be completed. (NSCocoaErrorDomain error 512.)"
    }
    return "The operation could not be completed. " + reason
}
