import CLinux
import Foundation
import StepGateTestSupport
import Synchronization
import Testing

@testable import Shields

/// The reaper's cost: one round over every process on this machine (not only gated users'),
/// memory maps and descriptors. A measurement, not a check: run with
/// `STEPGATE_REAPER_BENCH=1 swift test --filter ReaperRoundCost`.
@Suite(
    .enabled(if: ProcessInfo.processInfo.environment["STEPGATE_REAPER_BENCH"] != nil, "a measurement"),
    .enabled(if: getuid() == 0, "reads every process's descriptors: needs root"))
struct ReaperRoundCost {
    @Test func aRoundOverEveryProcess() throws {
        var info = stat()
        #expect(stat("/bin/sleep", &info) == 0)
        let files: Set<ExecDenyShield.FileID> = [
            .init(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
        ]
        let processes = (try FileManager.default.contentsOfDirectory(atPath: "/proc")).compactMap(Int32.init)
            .count
        for (name, paths, deep) in [
            ("maps", Set<String>(), false), ("maps and names", ["/usr/bin/sleep"], false),
            ("all, descriptors included", ["/usr/bin/sleep"], true),
        ] {
            var times: [Duration] = []
            for _ in 0..<30 {
                let start = ContinuousClock.now
                _ = RunningProcess.running(files, paths: paths, deep: deep)
                times.append(ContinuousClock.now - start)
            }
            times.sort()
            print("reaper round (\(name)) over \(processes) processes: median \(times[15]), min \(times[0])")
        }
    }
}

/// Found by an attack as the gated user: programs started during an unlock that the reaper did
/// not see at the relock. Each is started as `nobody`, then a reaper round for a store that
/// holds the program must end it.
@Suite(
    .enabled(if: getuid() == 0, "reads other users' processes: needs root"),
    .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"), "needs setpriv"),
    .serialized)
struct ReaperFindsEveryRunningProgram {
    let folder: String

    init() throws {
        folder = try Fixtures.temporaryFolder().path
        chmod(folder, 0o755)
    }

    /// A copy of `source` in the folder, readable and executable by all, and its identity.
    func copy(_ source: String, to name: String) throws -> (path: String, id: ExecDenyShield.FileID) {
        let path = folder + "/" + name
        try FileManager.default.copyItem(atPath: source, toPath: path)
        chmod(path, 0o755)
        var info = stat()
        #expect(stat(path, &info) == 0)
        return (path, .init(device: UInt64(info.st_dev), inode: UInt64(info.st_ino)))
    }

    /// Runs a shell command line as `nobody`; the command ends in an `exec` so the process id
    /// is the program's.
    func start(_ command: String, input: Pipe? = nil) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        process.arguments = ["--reuid=nobody", "--regid=nogroup", "--clear-groups", "/bin/sh", "-c", command]
        process.currentDirectoryURL = URL(fileURLWithPath: folder)
        if let input { process.standardInput = input }
        try process.run()
        return process
    }

    /// Whether `condition` comes true within three seconds.
    func eventually(_ condition: () -> Bool) -> Bool {
        let deadline = ContinuousClock.now + .seconds(3)
        while ContinuousClock.now < deadline {
            if condition() { return true }
            usleep(20_000)
        }
        return condition()
    }

    /// The relock: a reaper given a store of `files` (`paths`), rounds for up to three seconds
    /// until `processes` have ended; whether they all did.
    func endedAtRelock(
        _ processes: [Process], files: Set<ExecDenyShield.FileID>, paths: Set<String>,
        notices: Lines = Lines()
    ) -> Bool {
        let running = processes.filter { $0.isRunning }.count
        #expect(running == processes.count, "a program ended before the relock")
        let reaper = Reaper(
            privilegedGroup: nil, grace: .milliseconds(200),
            notice: { notices.append($0) })
        defer { reaper.stop() }
        reaper.update(["games": (files, paths, .terminate)])
        return eventually {
            reaper.roundNow()
            return processes.allSatisfy { !$0.isRunning }
        }
    }

    /// The bytes of a `/proc` file, read to its end.
    func bytes(_ path: String) -> [UInt8] {
        guard let handle = FileHandle(forReadingAtPath: path) else { return [] }
        defer { try? handle.close() }
        return Array((try? handle.readToEnd()) ?? Data())
    }

    /// Whether the process holds `path` open (its descriptors read as links, for the test).
    func holds(_ pid: Int32, _ path: String) -> Bool {
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []
        return descriptors.contains {
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\($0)")) == path
        }
    }

    /// Where `needle` first occurs in `haystack`.
    func offset(of needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard !needle.isEmpty, haystack.count >= needle.count else { return nil }
        return (0...(haystack.count - needle.count)).first {
            haystack[$0..<($0 + needle.count)].elementsEqual(needle)
        }
    }

    /// The folder of the C library this process maps (system libraries to preload).
    var libraryFolder: String? {
        let maps = String(decoding: bytes("/proc/self/maps"), as: UTF8.self)
        guard let line = maps.split(separator: "\n").first(where: { $0.hasSuffix("/libc.so.6") }),
            let path = line.split(separator: " ").last
        else { return nil }
        return String(path.dropLast("/libc.so.6".count))
    }

    /// Found by an attack: the memory map was read with one `read` of a page, so a game mapped
    /// past the first 4 KiB of it (run through the dynamic loader with libraries preloaded)
    /// ran on after the relock.
    @Test func aGameMappedPastTheFirstPageOfItsMapIsEnded() throws {
        let game = try copy("/bin/sleep", to: "game")
        let loader = try #require(
            ["/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1"].first {
                FileManager.default.isExecutableFile(atPath: $0)
            }, "no dynamic loader found")
        let libraries = try #require(libraryFolder, "the C library's folder not found")
        let preload = [
            "libacl.so.1", "libattr.so.1", "libblkid.so.1", "libbz2.so.1.0", "libcap.so.2", "libcrypt.so.1",
            "libexpat.so.1", "libffi.so.8", "libgmp.so.10", "liblzma.so.5", "libm.so.6", "libpcre2-8.so.0",
            "libresolv.so.2", "libuuid.so.1", "libz.so.1", "libzstd.so.1", "libselinux.so.1", "libmount.so.1",
        ].map { libraries + "/" + $0 }.filter { FileManager.default.fileExists(atPath: $0) }
        let played = try start(
            "LD_PRELOAD='\(preload.joined(separator: " "))' exec \(loader) '\(game.path)' 30")
        defer { if played.isRunning { kill(played.processIdentifier, SIGKILL) } }
        let pid = played.processIdentifier
        // The loader maps the game, then the libraries before it.
        _ = eventually { (offset(of: Array(game.path.utf8), in: bytes("/proc/\(pid)/maps")) ?? 0) > 4096 }
        let at = offset(of: Array(game.path.utf8), in: bytes("/proc/\(pid)/maps")) ?? 0
        try #require(at > 4096, "the game is mapped at byte \(at) of the map, within its first page")
        let notices = Lines()
        #expect(
            endedAtRelock([played], files: [game.id], paths: [game.path], notices: notices), "the game ran on"
        )
        // The journal says what the relock ended.
        let logged = notices.all
        #expect(
            logged.contains { $0.contains("games shielded again: ended 1 running program: pid \(pid) (") },
            "\(logged)")
    }

    /// Found by an attack: `/proc` text that is not UTF-8 hid a process (a program run through
    /// a link named with the byte 0xff, whose name is then the process's; a library preloaded
    /// from a folder so named).
    @Test func aNameThatIsNotUTF8DoesNotHideAProgram() throws {
        let game = try copy("/bin/sleep", to: "game")
        let libraries = try #require(libraryFolder, "the C library's folder not found")
        let setUp = try runProcess(
            URL(fileURLWithPath: "/bin/sh"),
            [
                "-c",
                "cd '\(folder)' && ln -s game \"$(printf '\\377')\" && mkdir \"$(printf 'd\\377')\" && "
                    + "cp '\(libraries)/libm.so.6' \"$(printf 'd\\377')/\" && chmod -R a+rX .",
            ])
        try #require(setUp.status == 0, "\(setUp.standardError)")
        let linked = try start("exec \"./$(printf '\\377')\" 30")
        let preloaded = try start("LD_PRELOAD=\"$PWD/$(printf 'd\\377')/libm.so.6\" exec ./game 30")
        defer {
            for process in [linked, preloaded] where process.isRunning {
                kill(process.processIdentifier, SIGKILL)
            }
        }
        for process in [linked, preloaded] {
            let pid = process.processIdentifier
            #expect(eventually { offset(of: Array(game.path.utf8), in: bytes("/proc/\(pid)/maps")) != nil })
        }
        #expect(
            bytes("/proc/\(linked.processIdentifier)/stat").contains(0xFF), "the name is not the byte 0xff")
        #expect(endedAtRelock([linked, preloaded], files: [game.id], paths: [game.path]))
        #expect(!linked.isRunning, "the game run through the link ran on")
        #expect(!preloaded.isRunning, "the game with the library ran on")
    }

    /// Found by an attack: an interpreter that reads its script and closes it (`python3
    /// /opt/game/main.py`; `awk -f` here) neither maps nor holds it, and ran on after the
    /// relock. Its command line names the script, relative to its working folder or not.
    @Test func aScriptAnInterpreterClosedIsEnded() throws {
        let script = "BEGIN { while ((getline line < \"/dev/stdin\") > 0) {} }\n"
        try script.write(toFile: folder + "/game.awk", atomically: true, encoding: .utf8)
        try script.write(toFile: folder + "/other.awk", atomically: true, encoding: .utf8)
        chmod(folder + "/game.awk", 0o644)
        chmod(folder + "/other.awk", 0o644)
        try FileManager.default.createDirectory(atPath: folder + "/sub", withIntermediateDirectories: false)
        var info = stat()
        #expect(stat(folder + "/game.awk", &info) == 0)
        let id = ExecDenyShield.FileID(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
        let inputs = [Pipe(), Pipe(), Pipe()]
        let relative = try start("exec awk -f game.awk", input: inputs[0])
        let absolute = try start("exec awk -f '\(folder)//./sub/../game.awk'", input: inputs[1])
        let other = try start("exec awk -f other.awk", input: inputs[2])
        defer {
            for process in [relative, absolute, other] where process.isRunning {
                kill(process.processIdentifier, SIGKILL)
            }
        }
        for process in [relative, absolute, other] {
            let pid = process.processIdentifier
            #expect(eventually { offset(of: Array(".awk".utf8), in: bytes("/proc/\(pid)/cmdline")) != nil })
        }
        usleep(100_000)  // awk has read its script and closed it
        #expect(!holds(relative.processIdentifier, folder + "/game.awk"), "awk holds its script open")
        #expect(
            endedAtRelock([relative, absolute], files: [id], paths: [folder + "/game.awk"]),
            "the script ran on")
        #expect(other.isRunning, "another script was ended")
    }

    static let userNamespaces: Bool = {
        let result = try? runProcess(
            URL(fileURLWithPath: "/usr/bin/setpriv"),
            ["--reuid=nobody", "--regid=nogroup", "--clear-groups", "unshare", "-Urm", "true"])
        return result?.status == 0
    }()

    /// Found by an attack: a descriptor kept from the unlock in a mount namespace of the user's
    /// own (`unshare -Urm`) has other mount ids, and went unnoticed; so does one opened through
    /// a mount since detached (`umount -l`), which no mount table shows.
    @Test(.enabled(if: userNamespaces, "unprivileged user namespaces are off"))
    func aDescriptorKeptInAMountNamespaceOfItsOwnIsFound() throws {
        let game = try copy("/bin/true", to: "game")
        let other = try copy("/bin/true", to: "other")
        let kept = try start("exec unshare -Urm sh -c \"exec 3< '\(game.path)'; exec sleep 30\"")
        let detached = try start(
            "exec unshare -Urm sh -c \"mount --bind '\(folder)' /mnt && exec 3< /mnt/game && umount -l /mnt && exec sleep 30\""
        )
        let unrelated = try start("exec unshare -Urm sh -c \"exec 3< '\(other.path)'; exec sleep 30\"")
        defer {
            for process in [kept, detached, unrelated] where process.isRunning {
                kill(process.processIdentifier, SIGKILL)
            }
        }
        for process in [kept, detached, unrelated] {
            let pid = process.processIdentifier
            #expect(eventually { String(decoding: bytes("/proc/\(pid)/comm"), as: UTF8.self) == "sleep\n" })
        }
        #expect(
            endedAtRelock([kept, detached], files: [game.id], paths: [game.path]), "the descriptor was kept")
        #expect(unrelated.isRunning, "a process holding another file was ended")
    }

    /// The state letter of the process's first thread.
    func leaderState(_ pid: Int32) -> UInt8? {
        let stat = bytes("/proc/\(pid)/stat")
        guard let close = stat.lastIndex(of: UInt8(ascii: ")")), close + 2 < stat.count else { return nil }
        return stat[close + 2]
    }

    static let perlThreads: Bool = {
        (try? runProcess(URL(fileURLWithPath: "/usr/bin/perl"), ["-Mthreads", "-e", "1"]))?.status == 0
    }()

    /// Found by an attack: a multi-threaded game whose first thread has ended (a zombie with an
    /// empty memory map and descriptor table) ran on in its other threads after the relock.
    @Test(.enabled(if: perlThreads, "needs perl with threads"))
    func aGameWhoseFirstThreadEndedIsEnded() throws {
        let game = try copy("/usr/bin/perl", to: "mtgame")
        let held = try copy("/bin/true", to: "held")
        #if arch(x86_64)
            let exit = 60
        #else
            let exit = 93
        #endif
        let body = "use threads; threads->create(sub { sleep 30 }); sleep 1; syscall(\(exit), 0)"
        let mapped = try start("exec '\(game.path)' -e '\(body)'")
        let holding = try start("exec perl -e 'open(my $f, \"<\", \"held\") or die; \(body)'")
        defer {
            for process in [mapped, holding] where process.isRunning {
                kill(process.processIdentifier, SIGKILL)
            }
        }
        for process in [mapped, holding] {
            let pid = process.processIdentifier
            #expect(eventually { leaderState(pid) == UInt8(ascii: "Z") }, "the first thread has not ended")
            #expect(bytes("/proc/\(pid)/maps").isEmpty, "the first thread's map is not empty")
        }
        #expect(endedAtRelock([mapped], files: [game.id], paths: [game.path]), "the mapped game ran on")
        #expect(endedAtRelock([holding], files: [held.id], paths: [held.path]), "the held file was kept")
    }
}

/// How `/proc` text is read and parsed: as bytes, to the end, within a bound.
@Suite("Proc text")
struct ProcTextTests {
    @Test func aFileIsReadToItsEndWithinTheBound() throws {
        let folder = try Fixtures.temporaryFolder().path
        let path = folder + "/long"
        let text = [UInt8](repeating: UInt8(ascii: "x"), count: 200_000) + [0xFF]
        #expect(FileManager.default.createFile(atPath: path, contents: Data(text)))
        let whole = try #require(ProcFile.read(path, limit: 1 << 20))
        #expect(whole.bytes == text && whole.complete)
        let cut = try #require(ProcFile.read(path, limit: 70_000))
        #expect(cut.bytes.count == 70_000 && !cut.complete)
        #expect(ProcFile.read(folder + "/missing", limit: 10) == nil)
        // A map is read past its first page (Foundation reads one page of a /proc file).
        let maps = try #require(ProcFile.read("/proc/self/maps", limit: RunningProcess.mapsLimit))
        #expect(maps.complete && maps.bytes.count > 4096 && maps.bytes.last == UInt8(ascii: "\n"))
    }

    @Test func mapLinesAreComparedAsBytes() {
        let game = ExecDenyShield.FileID(device: RunningProcess.makeDevice(0xFD, 1), inode: 4242)
        func matches(_ line: [UInt8], replaced: Set<[UInt8]> = []) -> Bool {
            ShieldedFiles.maps(
                Array("7f00-7f01 r--p 00000000 08:01 77      /usr/lib/libc.so.6\n".utf8) + line,
                mention: [game], [4242], replaced)
        }
        let address = Array("55d0-55d1 r-xp 00001000 ".utf8)
        #expect(matches(address + Array("fd:01 4242       /opt/g\u{1}me".utf8) + [0xFF] + Array(" x\n".utf8)))
        #expect(matches(address + Array("fd:01 4242".utf8)))  // no path, no end of line
        #expect(!matches(address + Array("fd:02 4242       /opt/game\n".utf8)), "another device")
        #expect(!matches(address + Array("fd:01 4243       /opt/game\n".utf8)), "another inode")
        let deleted = Array("/opt/my game (deleted)".utf8)
        #expect(matches(address + Array("fd:01 99       ".utf8) + deleted, replaced: [deleted]))
        #expect(!matches(address + Array("fd:01 99       /opt/my game\n".utf8), replaced: [deleted]))
    }

    @Test func pathsAreFoldedAsText() {
        func normal(_ path: String) -> String? {
            ShieldedFiles.normalised(Array(path.utf8)).map { String(decoding: $0, as: UTF8.self) }
        }
        #expect(normal("/opt//game/./x/../main.py") == "/opt/game/main.py")
        #expect(normal("/../..") == "/")
        #expect(normal("main.py") == nil)
    }
}

/// Lines collected from any thread.
final class Lines: Sendable {
    private let lines = Mutex<[String]>([])
    func append(_ line: String) { lines.withLock { $0.append(line) } }
    var all: [String] { lines.withLock { $0 } }
}
