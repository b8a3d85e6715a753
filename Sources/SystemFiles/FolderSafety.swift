#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A folder that root must not keep its files in: another user could change it, or a folder
/// (or symbolic link) on the way to it.
public struct UnsafeFolderError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The folder that was checked, as given.
    public var folder: String
    /// The path on the way that failed the check (the folder itself, an ancestor, or a link).
    public var culprit: String
    /// What is wrong with it, e.g. "is owned by nobody (uid 65534), mode 0755".
    public var problem: String

    public init(folder: String, culprit: String, problem: String) {
        self.folder = folder
        self.culprit = culprit
        self.problem = problem
    }

    public var description: String {
        return
            "unsafe folder \(folder): \(culprit) \(problem); expected every folder on the path to be owned by root"
            + " and not writable by group or others (a sticky world-writable folder such as /tmp only"
            + " above it), and every symbolic link on the path to be owned by root"
    }
}

/// Whether root can keep its files in a folder without another user being able to swap them,
/// like OpenSSH's StrictModes.
public enum FolderSafety {
    /// Checks that only root can change `folder` or what its path leads to: every component from
    /// `/` down, following symbolic links, must be a folder owned by root and not writable by its
    /// group or others; a sticky folder (such as `/tmp`) is accepted above the folder but not as
    /// the folder itself. Every symbolic link on the way must be owned by root too (in a sticky
    /// folder, the owner of a link can replace it).
    ///
    /// - Parameter allowMissing: Accept a folder that does not exist yet (its existing ancestors
    ///   are still checked), for a folder that will be created as root and checked again before
    ///   use. Otherwise a missing folder is an error.
    /// - Parameter leafMayBelongToSystemAccount: Accept a folder that belongs to a system account
    ///   (uid 1 to 999, as Debian's `adduser --system` gives: a service's own folder such as
    ///   `/run/mosquitto`, which that service must write in), still writable by no one else. A
    ///   person's account (uid 1000 and up) never qualifies.
    public static func checkOnlyRootCanChange(
        _ folder: String, allowMissing: Bool = false, leafMayBelongToSystemAccount: Bool = false
    ) throws(UnsafeFolderError) {
        func refuse(_ culprit: String, _ problem: String) -> UnsafeFolderError {
            UnsafeFolderError(folder: folder, culprit: culprit, problem: problem)
        }
        var start = folder
        if !start.hasPrefix("/") {
            guard let cwd = getcwd(nil, 0) else {
                throw refuse(folder, "cannot be resolved: no current folder")
            }
            start = String(cString: cwd) + "/" + folder
            free(cwd)
        }
        // Components still to walk, the next one last.
        var pending = components(start).reversed() as [String]
        var current = "/"
        var links = 0
        try check(current, leaf: false, refuse)
        while let name = pending.popLast() {
            if name == ".." {
                current = parent(current)
                continue
            }
            let next = current == "/" ? "/" + name : current + "/" + name
            var info = stat()
            if lstat(next, &info) != 0 {
                if errno == ENOENT && allowMissing { return }
                throw refuse(next, errno == ENOENT ? "does not exist" : "cannot be examined: \(errorText())")
            }
            if info.st_mode & S_IFMT == S_IFLNK {
                guard info.st_uid == 0 else {
                    throw refuse(next, "is a symbolic link owned by \(owner(info.st_uid))")
                }
                links += 1
                guard links <= 40 else { throw refuse(next, "has too many levels of symbolic links") }
                var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
                let length = readlink(next, &buffer, buffer.count - 1)
                guard length >= 0 else { throw refuse(next, "cannot be read: \(errorText())") }
                let target = String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
                if target.hasPrefix("/") { current = "/" }
                pending += components(target).reversed()
                continue
            }
            // The last component is the folder itself, checked below (it may be a system account's).
            try check(next, leaf: false, systemOwner: leafMayBelongToSystemAccount && pending.isEmpty, refuse)
            current = next
        }
        // The folder itself, with the stricter rule (no sticky exception).
        try check(current, leaf: true, systemOwner: leafMayBelongToSystemAccount, refuse)
    }

    /// The uids of system accounts (Debian's `SYS_UID_MIN` is 100, `SYS_UID_MAX` 999; below 100, the static ones).
    static let systemAccounts: ClosedRange<UInt32> = 1...999

    private static func check(
        _ path: String, leaf: Bool, systemOwner: Bool = false, _ refuse: (String, String) -> UnsafeFolderError
    ) throws(UnsafeFolderError) {
        var info = stat()
        guard lstat(path, &info) == 0 else { throw refuse(path, "cannot be examined: \(errorText())") }
        let mode = info.st_mode & 0o7777
        let described = "is owned by \(owner(info.st_uid)), mode \(octal(mode))"
        guard info.st_mode & S_IFMT == S_IFDIR else { throw refuse(path, "is not a folder") }
        guard info.st_uid == 0 || (systemOwner && systemAccounts.contains(info.st_uid)) else {
            throw refuse(path, described)
        }
        let writableByOthers = mode & 0o022 != 0
        let sticky = mode & mode_t(S_ISVTX) != 0
        if writableByOthers && (leaf || !sticky) { throw refuse(path, described) }
    }

    private static func components(_ path: String) -> [String] {
        path.split(separator: "/").map(String.init).filter { $0 != "." }
    }

    private static func parent(_ path: String) -> String {
        guard let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return "/" }
        return String(path[..<slash])
    }

    private static func owner(_ uid: uid_t) -> String {
        if let entry = getpwuid(uid), let name = entry.pointee.pw_name {
            return "\(String(cString: name)) (uid \(uid))"
        }
        return "uid \(uid)"
    }

    private static func octal(_ mode: mode_t) -> String {
        let digits = String(mode, radix: 8)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }

    private static func errorText() -> String {
        strerror(errno).map { String(cString: $0) } ?? "error \(errno)"
    }
}
