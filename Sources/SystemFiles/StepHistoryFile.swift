import Foundation
import TypedJSON
public import UnlockPolicy

#if canImport(Glibc)
    import Glibc
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
                let written = Date(timeIntervalSince1970: Double(info.st_mtim.tv_sec))
                legacyHour = clock.dayAndHour(written).hour
            }
            return (file, try StepHistory.decode(bytes, legacyHour: legacyHour))
        } catch {
            file.setAside("\(path): not a StepGate step history: \(error)", warn: warn)
            return (file, StepHistory())
        }
    }

    /// Moves the unreadable file aside; when that fails, refuses to write over it.
    private mutating func setAside(_ problem: String, warn: (String) -> Void) {
        let aside = "\(path).corrupt-\(Int(Date().timeIntervalSince1970))"
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
        let directory = (path as NSString).deletingLastPathComponent
        if !directory.isEmpty, !FileManager.default.fileExists(atPath: directory) {
            do {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            } catch {
                throw FileError(
                    operation: "cannot create", path: directory, reason: "\(error.localizedDescription)")
            }
        }
        try DurableFile.writeAtomically(history.encoded(), to: path, mode: 0o644)
    }
}
