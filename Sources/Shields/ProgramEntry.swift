import CLinux
import Glibc

/// One entry of a selection's `executables`, as the user wrote it:
///
/// - a program: an absolute path (`/usr/games/supertuxkart`) or a name on the search path;
/// - a folder, written with a final `/` (`/usr/games/`): every program directly in it, including
///   one installed there while the store is shielded (its folder is guarded);
/// - a shell pattern (`/opt/*/bin/game*`, with `*`, `?` or `[…]`, as glob(7) matches them):
///   every program its matches name; the folders they lie in are guarded.
///
/// A program here is a regular file (links followed) with an execute permission. Folders and
/// patterns are absolute; a folder is not searched below its own entries.
package enum ProgramEntry: Equatable, Sendable {
    case program(String)
    case folder(String)
    case pattern(String)

    /// Whether the entry names one program (not a folder or a pattern).
    package var isProgram: Bool {
        if case .program = self { return true }
        return false
    }

    /// Whether the entry is a folder (`/usr/games/`).
    package var isFolder: Bool {
        if case .folder = self { return true }
        return false
    }

    package init(_ value: String) {
        if value.hasPrefix("/"), value.contains(where: { $0 == "*" || $0 == "?" || $0 == "[" }) {
            self = .pattern(value)
        } else if value.hasPrefix("/"), value.count > 1, value.hasSuffix("/") {
            var folder = value
            while folder.count > 1, folder.hasSuffix("/") { folder.removeLast() }
            self = .folder(folder)
        } else {
            self = .program(value)
        }
    }

    /// What the entry stands for now: the program paths it matches (sorted; for `.program`,
    /// the entry itself), the folders to guard so a program added later is noticed at once,
    /// and why it matches nothing (`nil` when it matches something, or is a folder that exists
    /// and is empty).
    func expand() -> (programs: [String], folders: [String], problem: String?) {
        switch self {
        case .program(let name):
            return ([name], [], nil)
        case .folder(let folder):
            var info = stat()
            guard stat(folder, &info) == 0 else { return ([], [], "\(folder)/: not found") }
            guard info.st_mode & S_IFMT == S_IFDIR else { return ([], [], "\(folder)/: not a folder") }
            let base = folder == "/" ? "" : folder
            let programs = Self.entries(of: folder).map { base + "/" + $0 }.filter(Self.isProgram)
            return (programs.sorted(), [folder], nil)
        case .pattern(let pattern):
            let programs = Self.glob(pattern).filter(Self.isProgram).sorted()
            // The folders that hold (or could hold) a match: those the folder part matches.
            let slash = pattern.lastIndex(of: "/") ?? pattern.startIndex
            let folderPattern = slash == pattern.startIndex ? "/" : String(pattern[..<slash])
            let folders = Self.glob(folderPattern).filter(Self.isFolder).sorted()
            return (programs, folders, programs.isEmpty ? "\(pattern): matches no program" : nil)
        }
    }

    /// Whether `path` leads (links followed) to a regular file with an execute permission.
    static func isProgram(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFREG && info.st_mode & 0o111 != 0
    }

    private static func isFolder(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFDIR
    }

    /// The names in a folder, without `.` and `..`.
    private static func entries(of folder: String) -> [String] {
        guard let directory = opendir(folder) else { return [] }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// The paths a shell pattern matches now (glob(3), without sorting or escapes).
    private static func glob(_ pattern: String) -> [String] {
        var result = glob_t()
        defer { globfree(&result) }
        guard Glibc.glob(pattern, GLOB_NOSORT | GLOB_NOESCAPE, nil, &result) == 0 else { return [] }
        var paths: [String] = []
        for index in 0..<Int(result.gl_pathc) {
            if let path = result.gl_pathv[index] { paths.append(String(cString: path)) }
        }
        return paths
    }
}

extension ProgramEntry {
    /// The search path the exec shield resolves program names on (``ExecDenyShield``'s default).
    package static let defaultSearchPath =
        "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/games:/usr/local/games"

    /// What `daemon --check` says of one `executables` entry: a `problem` where the shield would
    /// fail on it at run time (nothing there, not a program, a pattern matching nothing), or what
    /// it stands for now (`matches`, for a folder or a pattern).
    package static func check(_ value: String, searchPath: String = defaultSearchPath) -> (
        problem: String?, matches: [String]
    ) {
        let entry = ProgramEntry(value)
        guard case .program(let name) = entry else {
            let (programs, _, problem) = entry.expand()
            return (problem, programs)
        }
        let path: String
        if name.hasPrefix("/") {
            path = name
        } else {
            let found = searchPath.split(separator: ":").map { "\($0)/\(name)" }.first(where: isProgram)
            guard let found else { return ("\(name): no program of that name on \(searchPath)", []) }
            path = found
        }
        var info = stat()
        guard stat(path, &info) == 0 else { return ("\(path): not found", []) }
        if info.st_mode & S_IFMT == S_IFDIR {
            return ("\(path): a folder; write \"\(path)/\" to shield every program in it", [])
        }
        guard isProgram(path) else {
            return ("\(path): not a program (a regular file with an execute permission)", [])
        }
        return (nil, [])
    }
}
