import Formatting
@preconcurrency import Glibc

/// The `stepgate` executable the user runs is a front door that links no Foundation: it runs
/// `--version`, `run` and `replay` (without `--policy`, `--start` or `--zone`) itself and hands
/// every other command line, unchanged, to the full program, `stepgate-full`, by `execv`. So
/// the live and replay paths do not load Foundation, CoreFoundation and ICU (about 2 MB of
/// memory and a slower start), and every command still answers as one program.
///
/// The full program is found only beside the front door's own file (`/proc/self/exe`, links
/// resolved): never through `$PATH`, the environment or `argv[0]`, because the daemon runs as
/// root. It must be no easier to replace than the front door itself: a file (not a link), the
/// same owner (or root), and not writable by group or others unless the front door is too.
public enum FrontDoor {
    /// What the front door does with a command line.
    public enum Route: Sendable, Equatable {
        /// Prints the version.
        case version
        /// `stepgate run`: counts live, here.
        case run
        /// `stepgate replay` without the policy's options: counts recordings, here.
        case replay
        /// Anything else: the full program runs it.
        case fullProgram
    }

    /// The full program's file name, beside the front door.
    public static let fullProgramName = "stepgate-full"
    /// The front door's file name.
    public static let frontDoorName = "stepgate"

    /// Where a command line (without the program name) goes.
    public static func route(_ arguments: [String]) -> Route {
        guard let first = arguments.first else { return .fullProgram }
        switch first {
        case "--version":
            return .version
        case "run":
            return .run
        case "replay":
            // A command line that does not parse is reported here, as the full program would
            // (same options, same checks in the same order).
            guard
                let parsed = try? ParsedArguments(
                    arguments.dropFirst(), options: ReplayArguments.configuration.options)
            else { return .replay }
            let needsPolicy = ReplayArguments.policyOptions.contains {
                parsed.value($0) != nil || parsed.flag($0)
            }
            return needsPolicy ? .fullProgram : .replay
        default:
            return .fullProgram
        }
    }

    /// This process's executable, links resolved (`/proc/self/exe`); nil without `/proc`.
    public static func executablePath() -> String? {
        var buffer = [UInt8](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = buffer.withUnsafeMutableBufferPointer { storage in
            storage.withMemoryRebound(to: CChar.self) {
                readlink("/proc/self/exe", $0.baseAddress!, $0.count - 1)
            }
        }
        guard count > 0 else { return nil }
        return String(decoding: buffer[0..<count], as: UTF8.self)
    }

    /// The folder part of a path (`/usr/bin` of `/usr/bin/stepgate`).
    static func folder(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// Why the full program cannot be started.
    public struct Problem: Error, Equatable, CustomStringConvertible {
        /// The exit status: 127 when it is missing, 126 when it may not be started.
        public var status: Int32
        public var description: String
    }

    /// The full program beside `frontDoor` (this executable by default), checked.
    public static func fullProgram(besides frontDoor: String? = executablePath()) -> Result<String, Problem> {
        guard let frontDoor else {
            return .failure(
                Problem(
                    status: 127,
                    description:
                        "stepgate: cannot find the full program: /proc/self/exe is unreadable (is /proc mounted?)"
                ))
        }
        // Started as `ld-linux-x86-64.so.2 stepgate …`, this process's executable is the dynamic
        // loader, and the folder beside it is the loader's: say so rather than that the full
        // program is missing.
        let name = frontDoor[
            (frontDoor.lastIndex(of: "/").map { frontDoor.index(after: $0) } ?? frontDoor.startIndex)...]
        if name.hasPrefix("ld-") && name.contains(".so") {
            return .failure(
                Problem(
                    status: 127,
                    description: """
                        stepgate: started through the dynamic loader (\(frontDoor)), so the full \
                        program cannot be found beside it; run stepgate itself
                        """))
        }
        let path = folder(of: frontDoor) + "/" + fullProgramName
        var program = stat()
        // lstat: a link is refused (below), not followed to a file someone else chose.
        guard lstat(path, &program) == 0 else {
            let code = errno
            let reason = String(cString: strerror(code))
            if code != ENOENT && code != ENOTDIR {
                // There, but not to be reached as this user (a folder on the way they may not
                // enter): not "missing", and not something reinstalling mends.
                return .failure(
                    Problem(
                        status: 126,
                        description: "stepgate: cannot reach the full program \(path): \(reason)"))
            }
            return .failure(
                Problem(
                    status: 127,
                    description: """
                        stepgate: the full program \(path) is missing (\(reason)): only 'stepgate run', \
                        'stepgate replay' and 'stepgate --version' work without it. Reinstall the \
                        stepgate package, or build both executables ('swift build' puts stepgate and \
                        \(fullProgramName) side by side in .build/debug/; see README.md, Install).
                        """))
        }
        var door = stat()
        // /proc/self/exe itself when the path no longer names it (replaced during an upgrade).
        guard stat(frontDoor, &door) == 0 || stat("/proc/self/exe", &door) == 0 else {
            return .failure(
                Problem(
                    status: 126,
                    description: "stepgate: cannot check \(frontDoor): \(String(cString: strerror(errno)))"))
        }
        let writableByOthers = mode_t(S_IWGRP | S_IWOTH)
        if (program.st_mode & S_IFMT) != S_IFREG || (program.st_uid != door.st_uid && program.st_uid != 0)
            || (program.st_mode & writableByOthers) & ~(door.st_mode & writableByOthers) != 0
        {
            return .failure(
                Problem(
                    status: 126,
                    description: """
                        stepgate: not starting \(path): it is not a file owned and protected like \
                        \(frontDoor) (owner \(program.st_uid), mode \(String(program.st_mode & 0o7777, radix: 8)))
                        """))
        }
        return .success(path)
    }

    /// Replaces this process with the full program, with the same arguments (`argv[0]`
    /// included), environment and open files; prints why and exits 126 or 127 when it cannot.
    public static func execFullProgram() -> Never {
        switch fullProgram() {
        case .failure(let problem):
            printError(problem.description)
            exit(problem.status)
        case .success(let path):
            execv(path, UnsafePointer(CommandLine.unsafeArgv))
            let code = errno
            printError("stepgate: cannot start the full program \(path): \(String(cString: strerror(code)))")
            exit(code == ENOENT ? 127 : 126)
        }
    }

    /// The front door beside the full program, for figures of what a user runs (`stepgate bench`);
    /// this executable when there is none.
    public static func frontDoorPath() -> String? {
        guard let executable = executablePath() else { return nil }
        let door = folder(of: executable) + "/" + frontDoorName
        return executable.hasSuffix("/" + fullProgramName) && access(door, X_OK) == 0 ? door : executable
    }

    /// Names the full program's process `stepgate`, as the front door that started it was
    /// called (`ps`, `top`, `pgrep -x stepgate`, the journal's `_COMM`), instead of its file name.
    public static func adoptFrontDoorName() {
        let descriptor = open("/proc/self/comm", O_RDWR | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        defer { close(descriptor) }
        var current = [UInt8](repeating: 0, count: 32)
        let count = read(descriptor, &current, current.count)
        guard count > 0, String(decoding: current[0..<count], as: UTF8.self) == fullProgramName + "\n" else {
            return
        }
        var name = Array(frontDoorName.utf8)
        _ = lseek(descriptor, 0, SEEK_SET)
        _ = write(descriptor, &name, name.count)
    }
}
