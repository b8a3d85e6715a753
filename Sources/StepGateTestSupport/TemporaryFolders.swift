public import Foundation

/// Temporary files for tests, which never outlive the test process.
///
/// Every folder lives under one folder per test process, `stepgate-tests-<pid>` in the
/// temporary directory. That folder is removed when the process exits (even when tests failed),
/// and a run removes those left by test processes that no longer exist (killed or crashed), so
/// a test run leaves nothing in `/tmp`. ``withTemporaryFolder(_:)`` removes its folder as soon
/// as its body returns or throws.
public enum TemporaryFolders {
    static let prefix = "stepgate-tests-"

    /// This process's folder (0755 whatever the umask: a daemon run as root refuses folders
    /// others can write).
    public static let root: URL = {
        let base = FileManager.default.temporaryDirectory
        removeAbandoned(in: base)
        let url = base.appendingPathComponent("\(prefix)\(getpid())")
        try? FileManager.default.removeItem(at: url)
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        chmod(url.path, 0o755)
        atexit { TemporaryFolders.removeRoot() }
        return url
    }()

    /// A fresh folder under ``root``.
    public static func make(_ label: String = "test") throws -> URL {
        let url = root.appendingPathComponent("\(label)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        chmod(url.path, 0o755)
        return url
    }

    /// Removes a folder made by ``make(_:)`` (and whatever a test put in it).
    public static func remove(_ url: URL) {
        // A test may leave folders it made read-only; make them writable again first.
        if let paths = FileManager.default.enumerator(atPath: url.path) {
            for case let path as String in paths {
                let full = url.appendingPathComponent(path).path
                var info = stat()
                if lstat(full, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR { chmod(full, 0o700) }
            }
        }
        chmod(url.path, 0o700)
        try? FileManager.default.removeItem(at: url)
    }

    static func removeRoot() { remove(root) }

    /// Removes the folders of test processes that are gone.
    static func removeAbandoned(in base: URL) {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: base.path)) ?? []
        for name in names where name.hasPrefix(prefix) {
            guard let pid = pid_t(name.dropFirst(prefix.count)), pid != getpid() else { continue }
            if kill(pid, 0) != 0 && errno == ESRCH { remove(base.appendingPathComponent(name)) }
        }
    }
}

/// Runs `body` with a fresh temporary folder and removes the folder afterwards, whether `body`
/// returns or throws.
public func withTemporaryFolder<T>(_ body: (URL) throws -> T) throws -> T {
    let folder = try TemporaryFolders.make()
    defer { TemporaryFolders.remove(folder) }
    return try body(folder)
}
