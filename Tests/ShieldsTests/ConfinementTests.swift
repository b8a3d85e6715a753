import CLinux
import Foundation
import StepGateTestSupport
import Testing
import UnlockPolicy

@testable import Shields

/// Programs a gated user starts from an unlocked store's files are kept in a cgroup of the
/// exec shield's and ended with it at relock. Each test has a cgroup of its own
/// (`/stepgate-test-…`), removed at the end. Root only, with cgroup v2.
@Suite(
    .enabled(if: getuid() == 0, "fanotify and cgroups need root"),
    .enabled(if: Freezer.mount != nil, "no cgroup v2 file system is mounted"), .serialized)
struct ConfinementTests {
    let folder: URL
    let cgroup = "/stepgate-test-" + String(UInt32.random(in: 0..<UInt32.max), radix: 16)
    let games = ShieldContext(store: "games")

    init() throws {
        folder = try Fixtures.temporaryFolder()
        chmod(folder.path, 0o755)
    }

    /// An exec shield keeping openers in this test's cgroup, with `files` of store `store`
    /// shielded and unlocked again (watched).
    private func unlockedShield(
        _ files: [String], store: String = "games", running: RunningProgramAction = .terminate
    ) throws -> ExecDenyShield {
        let shield = try ExecDenyShield(
            runningAction: { _ in running }, gracePeriod: .milliseconds(300), confinement: cgroup)
        #expect(shield.confinementProblem == nil)
        let targets = files.map { Target(kind: .executable, value: $0) }
        try shield.apply(targets, context: ShieldContext(store: store))
        try shield.remove(targets, context: ShieldContext(store: store))
        return shield
    }

    /// Kills what is left in this test's cgroups and removes them.
    private func removeCgroups() {
        guard let confinement = try? Confinement(path: cgroup) else { return }
        for group in confinement.groups() { confinement.kill(group) }
        for _ in 0..<500 where !confinement.groups().isEmpty {
            confinement.removeEmpty()
            usleep(10_000)
        }
        rmdir(confinement.root)
    }

    private func group(_ stores: String) -> String { cgroup + "/store-" + stores }

    /// Whether the file at `path` starts growing within 10 s (a loaded machine has taken over 5 s
    /// to start a game through a user namespace and an overlay).
    private func startsBeating(_ path: String) -> Bool {
        for _ in 0..<50 where !isGrowing(path) {}
        return isGrowing(path)
    }

    /// The process ids of `nobody` whose command line contains `text`.
    private func nobodysProcesses(running path: String) -> [Int32] {
        (ProcFile.numbers(in: "/proc") ?? []).filter { pid in
            guard ProcessCredentials(pid: pid)?.uids.first == 65534,
                let line = ProcFile.read("/proc/\(pid)/cmdline", limit: 65_536)
            else { return false }
            return String(decoding: line.bytes, as: UTF8.self).contains(path)
        }
    }

    @Test func aProgramStartedDuringTheUnlockIsKeptInItsStoresCgroupAndEndedWithIt() throws {
        defer { removeCgroups() }
        let game = folder.appendingPathComponent("game").path
        try FileManager.default.copyItem(atPath: "/bin/sleep", toPath: game)
        let shield = try unlockedShield([game])
        let played = try startAsNobody([game, "600"])
        defer {
            kill(played.processIdentifier, SIGKILL)
            played.waitUntilExit()
        }
        var pids: [Int32] = []
        for _ in 0..<200 where pids.isEmpty {
            usleep(10_000)
            pids = nobodysProcesses(running: game)
        }
        #expect(pids.count == 1)
        // Once setpriv has started the game (its own command line names it too).
        for _ in 0..<200 where !pids.allSatisfy({ Freezer.cgroup(of: $0) == group("games") }) {
            usleep(10_000)
        }
        #expect(pids.allSatisfy { Freezer.cgroup(of: $0) == group("games") })
        // Root's run of it is not kept (nor are the admin group's).
        let ownCgroup = Freezer.cgroup(of: getpid())
        #expect(try runProcess(URL(fileURLWithPath: game), ["0"]).status == 0)
        #expect(Freezer.cgroup(of: getpid()) == ownCgroup)

        // A gated process in the cgroup cannot leave it: not to the root cgroup, not to its
        // parent, not from a user namespace of its own.
        let mount = try #require(Freezer.mount)
        let attempts = try asNobody(
            """
            exec 3< '\(game)'
            for target in '\(mount)' '\(mount)\(cgroup)'; do
              echo $$ > "$target/cgroup.procs" 2>/dev/null && echo "left for $target"
            done
            unshare -Ur sh -c 'echo $$ > "\(mount)/cgroup.procs"' 2>/dev/null && echo "left from a namespace"
            cat /proc/self/cgroup
            """)
        #expect(!attempts.standardOutput.contains("left"), "\(attempts.standardOutput)")
        #expect(attempts.standardOutput.contains("0::\(group("games"))"), "\(attempts.standardOutput)")

        try shield.apply([Target(kind: .executable, value: game)], context: games)
        for _ in 0..<50 where pids.contains(where: { kill($0, 0) == 0 }) {
            _ = shield.recheck()
            usleep(100_000)
        }
        #expect(!pids.contains { kill($0, 0) == 0 }, "the game runs after the relock")
        let folder = Freezer.mount! + group("games")
        for _ in 0..<20 where FileManager.default.fileExists(atPath: folder) {
            _ = shield.recheck()
            usleep(50_000)
        }
        #expect(!FileManager.default.fileExists(atPath: folder), "the empty group stays")
    }

    /// Attack round 9 (C1): a game started through the dynamic loader during the unlock, whose
    /// preloaded library copied the game's mappings to anonymous memory, blanked its command
    /// line and forked away from the process that had opened the game, ran on after the relock:
    /// nothing in `/proc` named the game any more.
    @Test func aHiddenGameStartedThroughTheLoaderIsEndedAtRelock() throws {
        guard let compiler = cCompiler(), let loader = dynamicLoader() else {
            print("skipped: no C compiler or no dynamic loader at a known place")
            return
        }
        defer { removeCgroups() }
        let game = folder.appendingPathComponent("loadedgame").path
        let library = folder.appendingPathComponent("hide.so").path
        let beats = folder.appendingPathComponent("loaded-beats").path
        try """
        #include <fcntl.h>
        #include <stdlib.h>
        #include <unistd.h>
        int main(void) {
            int beats = open(getenv("BEATS"), O_WRONLY | O_APPEND);
            for (;;) { write(beats, "x", 1); usleep(20000); }
        }
        """.write(toFile: game + ".c", atomically: true, encoding: .utf8)
        // Before main: the game's mappings become anonymous copies, its arguments are blanked,
        // and it forks away from the opener.
        try """
        #define _GNU_SOURCE
        #include <stdio.h>
        #include <stdlib.h>
        #include <string.h>
        #include <sys/mman.h>
        #include <unistd.h>
        \(copyMappingsC)
        __attribute__((constructor)) static void hide(int argc, char **argv) {
            copy_mappings_of(getenv("GAME"));
            for (int i = 0; i < argc; i++) memset(argv[i], 0, strlen(argv[i]));
            if (fork() > 0) _exit(0);
            setsid();
        }
        """.write(toFile: library + ".c", atomically: true, encoding: .utf8)
        #expect(try runProcess(compiler, ["-O1", "-o", game, game + ".c"]).status == 0)
        #expect(
            try runProcess(compiler, ["-O1", "-shared", "-fPIC", "-o", library, library + ".c"]).status == 0)
        #expect(FileManager.default.createFile(atPath: beats, contents: nil))
        chown(beats, 65534, 65534)
        let shield = try unlockedShield([game])
        // Not waited for: the game forks away holding what the shell inherited.
        let started = try startAsNobody([
            "/bin/sh", "-c",
            "GAME='\(game)' BEATS='\(beats)' LD_PRELOAD='\(library)' exec '\(loader)' '\(game)'",
        ])
        defer { withExtendedLifetime(started) {} }
        #expect(startsBeating(beats), "the game did not start")
        #expect(nobodysProcesses(running: game).isEmpty, "a command line still names the game")
        #expect(
            try fallsSilentAfterRelock(game, beats: beats, shield: shield),
            "still running 8 s after the relock")
    }

    /// Attack round 9 (C2, C3): a game run during the unlock through an overlay mount in a
    /// namespace of the user's own (its executable is on another device), which forks away and
    /// then serves: every 20 ms a new child writes a beat. It ran on after the relock, and
    /// started new games from its memory.
    @Test func aForkServerRunThroughAnOverlayInAUserNamespaceIsEndedAtRelock() throws {
        guard let compiler = cCompiler() else {
            print("skipped: no C compiler")
            return
        }
        let probe = try asNobody("unshare -Urm true && echo yes")
        guard probe.standardOutput.contains("yes") else {
            print("skipped: unprivileged user namespaces are off here (the attack needs them)")
            return
        }
        defer { removeCgroups() }
        let lower = folder.appendingPathComponent("lower").path
        try FileManager.default.createDirectory(atPath: lower, withIntermediateDirectories: false)
        chmod(lower, 0o755)
        let game = lower + "/forkserver"
        let beats = folder.appendingPathComponent("server-beats").path
        let scratch = folder.appendingPathComponent("scratch").path
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: false)
        chown(scratch, 65534, 65534)
        try """
        #include <fcntl.h>
        #include <stdlib.h>
        #include <sys/wait.h>
        #include <unistd.h>
        int main(void) {
            int beats = open(getenv("BEATS"), O_WRONLY | O_APPEND);
            if (fork() > 0) _exit(0);
            setsid();
            for (;;) {
                if (fork() == 0) { write(beats, "x", 1); _exit(0); }
                while (waitpid(-1, 0, WNOHANG) > 0) {}
                usleep(20000);
            }
        }
        """.write(toFile: game + ".c", atomically: true, encoding: .utf8)
        #expect(try runProcess(compiler, ["-O1", "-o", game, game + ".c"]).status == 0)
        #expect(FileManager.default.createFile(atPath: beats, contents: nil))
        chown(beats, 65534, 65534)
        let shield = try unlockedShield([game])
        let started = try startAsNobody([
            "/usr/bin/unshare", "-Urm", "/bin/sh", "-c",
            """
            mkdir -p \(scratch)/up \(scratch)/work \(scratch)/m &&
            mount -t overlay overlay -o lowerdir=\(lower),upperdir=\(scratch)/up,workdir=\(scratch)/work \(scratch)/m &&
            BEATS=\(beats) exec \(scratch)/m/forkserver
            """,
        ])
        defer { withExtendedLifetime(started) {} }
        #expect(startsBeating(beats), "the game did not start")
        #expect(
            try fallsSilentAfterRelock(game, beats: beats, shield: shield),
            "still running 8 s after the relock")
    }

    /// A process made with `clone(CLONE_FILES)` before its parent opened the game shares the
    /// parent's descriptors (and, with `CLONE_VM`, its memory): it is moved with the parent.
    @Test func processesSharingTheOpenersDescriptorsAreKeptWithIt() throws {
        guard let compiler = cCompiler() else {
            print("skipped: no C compiler")
            return
        }
        defer { removeCgroups() }
        let program = folder.appendingPathComponent("sharer").path
        try """
        #define _GNU_SOURCE
        #include <sched.h>
        #include <signal.h>
        #include <stdio.h>
        #include <sys/syscall.h>
        #include <unistd.h>
        int main(void) {
            long child = syscall(SYS_clone, CLONE_FILES | SIGCHLD, 0, 0, 0, 0);
            if (child == 0) { for (;;) pause(); }
            printf("%ld\\n", child);
            fflush(stdout);
            for (;;) pause();
        }
        """.write(toFile: program + ".c", atomically: true, encoding: .utf8)
        #expect(try runProcess(compiler, ["-O1", "-o", program, program + ".c"]).status == 0)
        let output = folder.appendingPathComponent("sharer.out").path
        let process = try BackgroundProcess([program], output: output)
        defer { withExtendedLifetime(process) {} }
        var child: Int32?
        for _ in 0..<200 where child == nil {
            usleep(10_000)
            child = (try? String(contentsOfFile: output, encoding: .utf8))
                .flatMap { Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        }
        let sharer = try #require(child)
        // First: the parent is not waited for while a process holds what it was started with.
        defer { kill(sharer, SIGKILL) }
        let unrelated = try BackgroundProcess(["/bin/sleep", "600"])
        defer { withExtendedLifetime(unrelated) {} }
        let confinement = try Confinement(path: cgroup)
        try confinement.confine(process.process.processIdentifier, into: ["games"], sharers: true)
        #expect(Freezer.cgroup(of: process.process.processIdentifier) == group("games"))
        #expect(Freezer.cgroup(of: sharer) == group("games"))
        #expect(Freezer.cgroup(of: unrelated.process.processIdentifier) != group("games"))
        // Opening a file of a second store: the group of both.
        try confinement.confine(process.process.processIdentifier, into: ["social"], sharers: true)
        #expect(Freezer.cgroup(of: process.process.processIdentifier) == group("games+social"))
        #expect(Freezer.cgroup(of: sharer) == group("games+social"))
    }

    /// Attack round 10: a chain of processes sharing the opener's memory (`clone(CLONE_VM)`),
    /// each cloning the next and ending at once, behind 3,000 idle processes that slow every
    /// pass over `/proc`: the pass never found the live link, the open was allowed, and the last
    /// link ran the game's code from a copy outside the cgroup after the relock. Now the open is
    /// refused, or the link is in the group. `STEPGATE_CHAIN_PADDERS` sets the idle processes
    /// (300 by default, to keep a full parallel run light; the attack used 3,000, with which the
    /// search as it was let the link out, and so does `STEPGATE_CHAIN_PADDERS=3000`).
    @Test func aChainOfMemorySharersCannotHopPastTheSearch() throws {
        guard let compiler = cCompiler() else {
            print("skipped: no C compiler")
            return
        }
        defer { removeCgroups() }
        let program = folder.appendingPathComponent("chain").path
        // Everything it makes ends by itself: the links when told (or after 60 s), the padders with
        // their parent.
        try """
        #define _GNU_SOURCE
        #include <sched.h>
        #include <signal.h>
        #include <stdio.h>
        #include <stdlib.h>
        #include <sys/mman.h>
        #include <sys/prctl.h>
        #include <sys/syscall.h>
        #include <time.h>
        #include <unistd.h>
        #define STACKS 16
        #define STACK (64 * 1024)
        static volatile int stop, claimed;
        static volatile time_t deadline;
        static char *stacks[STACKS];
        static volatile unsigned next;
        static int link_fn(void *unused) {
            for (;;) {
                if (stop && __sync_bool_compare_and_swap(&claimed, 0, 1)) {
                    char text[32];
                    int n = snprintf(text, sizeof text, "link %ld\\n", syscall(SYS_getpid));
                    write(1, text, n);
                    while (time(0) < deadline) pause();
                    syscall(SYS_exit, 0);
                }
                if (stop || time(0) > deadline) syscall(SYS_exit, 0);
                unsigned i = __sync_fetch_and_add(&next, 1) % STACKS;
                if (clone(link_fn, stacks[i] + STACK, CLONE_VM | SIGCHLD, 0) > 0) syscall(SYS_exit, 0);
            }
        }
        static void finish(int signal) { stop = 1; }
        int main(int argc, char **argv) {
            prctl(PR_SET_CHILD_SUBREAPER, 1);
            signal(SIGCHLD, SIG_IGN);
            pid_t opener = fork();
            if (opener > 0) {
                for (int i = atoi(argv[1]); i > 0; i--) {
                    if (fork() == 0) { prctl(PR_SET_PDEATHSIG, SIGKILL); for (;;) pause(); }
                }
                printf("opener %d\\n", opener);
                fflush(stdout);
                for (;;) pause();
            }
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            deadline = time(0) + 60;
            signal(SIGUSR1, finish);
            sigset_t usr1;  // the test runner starts its children with signals blocked
            sigemptyset(&usr1);
            sigaddset(&usr1, SIGUSR1);
            sigprocmask(SIG_UNBLOCK, &usr1, 0);
            for (int i = 0; i < STACKS; i++)
                stacks[i] = mmap(0, STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            clone(link_fn, stacks[STACKS - 1] + STACK, CLONE_VM | SIGCHLD, 0);
            while (time(0) < deadline + 1) pause();
            return 0;
        }
        """.write(toFile: program + ".c", atomically: true, encoding: .utf8)
        #expect(try runProcess(compiler, ["-O1", "-o", program, program + ".c"]).status == 0)
        let padders = ProcessInfo.processInfo.environment["STEPGATE_CHAIN_PADDERS"].flatMap(Int.init) ?? 300
        let output = folder.appendingPathComponent("chain.out").path
        let chain = try BackgroundProcess([program, "\(padders)"], output: output)
        defer { withExtendedLifetime(chain) {} }
        func number(after word: String) -> Int32? {
            let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
            return text.split(separator: "\n").first { $0.hasPrefix(word + " ") }
                .flatMap { Int32($0.dropFirst(word.count + 1)) }
        }
        var opener: Int32?
        // Once the padders are made (seconds on a loaded machine).
        for _ in 0..<6000 where opener == nil {
            usleep(10_000)
            opener = number(after: "opener")
        }
        let pid = try #require(opener)
        usleep(500_000)  // the padders and the chain under way
        let confinement = try Confinement(path: cgroup)
        var refusal: Confinement.Failure?
        do {
            try confinement.confine(pid, into: ["games"], sharers: true)
        } catch {
            refusal = error
        }
        // The chain stops: its last link says who it is.
        defer { kill(pid, SIGKILL) }
        kill(pid, SIGUSR1)
        var link: Int32?
        for _ in 0..<300 where link == nil {
            usleep(10_000)
            link = number(after: "link")
        }
        let survivor = try #require(link)
        defer { kill(survivor, SIGKILL) }
        if let refusal {
            // Refused: the game would not have been loaded.
            #expect(refusal.description.contains("kept ending"), "\(refusal)")
            return
        }
        #expect(
            Freezer.cgroup(of: survivor) == group("games"), "a process sharing the opener's memory is outside"
        )
    }

    /// A launcher that starts the game with `posix_spawn` (a vfork: the child shares the
    /// launcher's memory until the exec) stays where it is; only the game is kept. Found in
    /// review: the search for sharers would have moved a desktop launcher with every game it
    /// started, and ended it at relock.
    @Test func aLauncherThatVforksTheGameIsNotKeptWithIt() throws {
        guard let compiler = cCompiler() else {
            print("skipped: no C compiler")
            return
        }
        defer { removeCgroups() }
        let game = folder.appendingPathComponent("game").path
        try FileManager.default.copyItem(atPath: "/bin/sleep", toPath: game)
        let launcher = folder.appendingPathComponent("launcher").path
        try """
        #include <spawn.h>
        #include <stdio.h>
        #include <unistd.h>
        extern char **environ;
        int main(int argc, char **argv) {
            pid_t game;
            char *arguments[] = {argv[1], "600", 0};
            if (posix_spawn(&game, argv[1], 0, 0, arguments, environ) != 0) return 1;
            printf("%d\\n", game);
            fflush(stdout);
            for (;;) pause();
        }
        """.write(toFile: launcher + ".c", atomically: true, encoding: .utf8)
        #expect(try runProcess(compiler, ["-O1", "-o", launcher, launcher + ".c"]).status == 0)
        let shield = try unlockedShield([game])
        let output = folder.appendingPathComponent("launcher.out").path
        let started = try BackgroundProcess([launcher, game], asNobody: true, output: output)
        defer { withExtendedLifetime((started, shield)) {} }
        var spawned: Int32?
        for _ in 0..<300 where spawned == nil {
            usleep(10_000)
            spawned = (try? String(contentsOfFile: output, encoding: .utf8))
                .flatMap { Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        }
        let child = try #require(spawned)
        defer { kill(child, SIGKILL) }
        #expect(Freezer.cgroup(of: child) == group("games"))
        #expect(Freezer.cgroup(of: started.process.processIdentifier) != group("games"))
    }

    /// Attack round 10: a process whose first thread had ended (its other thread opening the
    /// game) was compared by the ended thread, which has no memory: it matched the kernel's
    /// threads, and the open was refused. It is compared through its live thread now.
    @Test func anOpenerWhoseFirstThreadEndedIsKept() throws {
        guard let compiler = cCompiler() else {
            print("skipped: no C compiler")
            return
        }
        defer { removeCgroups() }
        let game = folder.appendingPathComponent("game").path
        try FileManager.default.copyItem(atPath: "/bin/true", toPath: game)
        let program = folder.appendingPathComponent("leaderless").path
        try """
        #include <fcntl.h>
        #include <pthread.h>
        #include <stdio.h>
        #include <unistd.h>
        static const char *path;
        static void *opener(void *unused) {
            usleep(200000);  // the first thread has ended by now
            printf(open(path, O_RDONLY) >= 0 ? "opened\\n" : "refused\\n");
            fflush(stdout);
            for (;;) pause();
        }
        int main(int argc, char **argv) {
            path = argv[1];
            pthread_t thread;
            pthread_create(&thread, 0, opener, 0);
            pthread_exit(0);
        }
        """.write(toFile: program + ".c", atomically: true, encoding: .utf8)
        #expect(try runProcess(compiler, ["-O1", "-pthread", "-o", program, program + ".c"]).status == 0)
        let shield = try unlockedShield([game])
        let output = folder.appendingPathComponent("leaderless.out").path
        let started = try BackgroundProcess([program, game], asNobody: true, output: output)
        defer { withExtendedLifetime((started, shield)) {} }
        var said = ""
        for _ in 0..<300 where said.isEmpty {
            usleep(10_000)
            said = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        }
        #expect(said == "opened\n")
        // Its live thread's cgroup (the ended first thread shows the root's).
        let pid = started.process.processIdentifier
        let thread = try #require(ProcFile.numbers(in: "/proc/\(pid)/task")?.first { $0 != pid })
        #expect(Freezer.cgroup(of: thread) == group("games"))
    }

    /// Attack round 11: gated processes whose command lines were pointed (PR_SET_MM_MAP, no
    /// privilege needed) at megabytes of the game's name made each scan of running programs take
    /// 1.6 s per process, and the relock's SIGTERM and `cgroup.kill` waited for the scans: a
    /// game started during the unlock ran 56 s past the relock with 120 of them. The store's
    /// cgroup is ended on its own schedule now, and such command lines are cheap to read.
    @Test func forgedCommandLinesDoNotDelayEndingTheGame() throws {
        defer { removeCgroups() }
        guard let compiler = cCompiler() else {
            print("skipped: no C compiler (clang or cc) to build the padding program")
            return
        }
        let padder = folder.appendingPathComponent("cmdline-padder").path
        try """
        #define _GNU_SOURCE
        #include <linux/prctl.h>
        #include <signal.h>
        #include <stdio.h>
        #include <stdlib.h>
        #include <string.h>
        #include <sys/mman.h>
        #include <sys/prctl.h>
        #include <unistd.h>
        \(moveCommandLineC)
        /* cmdline-padder NAME MIB COUNT SECONDS: COUNT processes whose command line is MIB MiB of
           "NAME\\0" (PR_SET_MM_MAP, no privilege), ending after SECONDS or with their parent. */
        int main(int argc, char **argv) {
            if (argc < 5) return 2;
            size_t size = (size_t)atoi(argv[2]) << 20, step = strlen(argv[1]) + 1, used = 0;
            int count = atoi(argv[3]), seconds = atoi(argv[4]);
            char *line = mmap(0, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            for (; used + step <= size; used += step) memcpy(line + used, argv[1], step);
            if (move_command_line(line, line + used) != 0) return 4;
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            alarm(seconds);
            for (int i = 0; i < count; i++) {
                if (fork() == 0) { prctl(PR_SET_PDEATHSIG, SIGKILL); alarm(seconds); for (;;) pause(); }
            }
            write(1, "ready\\n", 6);
            for (;;) pause();
        }
        """.write(toFile: padder + ".c", atomically: true, encoding: .utf8)
        let built = try runProcess(compiler, ["-O1", "-o", padder, padder + ".c"])
        #expect(built.status == 0, "\(built.standardError)")
        let game = folder.appendingPathComponent("game").path
        try FileManager.default.copyItem(atPath: "/bin/sleep", toPath: game)
        let count = ProcessInfo.processInfo.environment["STEPGATE_CMDLINE_PADDERS"].flatMap(Int.init) ?? 20
        let pipe = Pipe()
        let pads = Process()
        pads.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        pads.arguments = [
            "--reuid=nobody", "--regid=nogroup", "--clear-groups", padder, "game", "8", "\(count)", "300",
        ]
        pads.standardOutput = pipe
        try pads.run()
        defer {
            kill(pads.processIdentifier, SIGKILL)
            pads.waitUntilExit()
        }
        #expect(pipe.fileHandleForReading.readData(ofLength: 6) == Data("ready\n".utf8))
        let line = ProcFile.read(
            "/proc/\(pads.processIdentifier)/cmdline", limit: RunningProcess.commandLineLimit)
        #expect(
            (line?.bytes.count ?? 0) > 8_000_000, "a padded command line is \(line?.bytes.count ?? 0) bytes")

        // Shielded, the scans go over the padded processes every round; the store is unlocked
        // while one is under way, the game started, and the store relocked.
        let shield = try ExecDenyShield(
            runningAction: { _ in .terminate }, gracePeriod: .milliseconds(300), confinement: cgroup)
        let target = [Target(kind: .executable, value: game)]
        try shield.apply(target, context: games)
        usleep(300_000)
        _ = shield.recheck()
        try shield.remove(target, context: games)
        let played = try startAsNobody([game, "600"])
        defer {
            kill(played.processIdentifier, SIGKILL)
            played.waitUntilExit()
        }
        for _ in 0..<200 where Freezer.cgroup(of: played.processIdentifier) != group("games") {
            usleep(10_000)
        }
        var pids = nobodysProcesses(running: game)
        for _ in 0..<200 where !pids.allSatisfy({ Freezer.cgroup(of: $0) == group("games") }) {
            usleep(10_000)
            pids = nobodysProcesses(running: game)
        }
        #expect(!pids.isEmpty && pids.allSatisfy { Freezer.cgroup(of: $0) == group("games") })
        let relocked = ContinuousClock.now
        try shield.apply(target, context: games)
        // (An ended process's command line is empty: a zombie is not counted.)
        while !nobodysProcesses(running: game).isEmpty, ContinuousClock.now - relocked < .seconds(60) {
            usleep(20_000)
        }
        let took = ContinuousClock.now - relocked
        print(
            "with \(count + 1) processes with 8 MiB command lines, the game ended \(took) after the relock (grace 0.3 s)"
        )
        #expect(took < .seconds(3), "the game ran \(took) past the relock")
        // A command line naming the game's file name 1.6 million times, in a folder other than
        // the game's, is read at once and names nothing.
        let named = try shieldedFiles(game)
        let reading = ContinuousClock.now
        #expect(named.named(by: pads.processIdentifier) == false)
        print("an 8 MiB command line was read and looked through in \(ContinuousClock.now - reading)")
    }

    /// A process that opened files of two unlocked stores is ended when either is shielded
    /// again; one that opened only the other store's file runs on.
    @Test func aProgramOfTwoStoresEndsWithEither() throws {
        defer { removeCgroups() }
        let game = folder.appendingPathComponent("game").path
        let chat = folder.appendingPathComponent("chat").path
        try FileManager.default.copyItem(atPath: "/bin/sleep", toPath: game)
        try FileManager.default.copyItem(atPath: "/bin/sleep", toPath: chat)
        let shield = try ExecDenyShield(gracePeriod: .milliseconds(300), confinement: cgroup)
        let social = ShieldContext(store: "social")
        for (file, context) in [(game, games), (chat, social)] {
            try shield.apply([Target(kind: .executable, value: file)], context: context)
            try shield.remove([Target(kind: .executable, value: file)], context: context)
        }
        // One reads the chat program, then runs the game; another runs the game alone.
        let both = try startAsNobody(["/bin/sh", "-c", "exec 3< '\(chat)'; exec '\(game)' 600"])
        let one = try startAsNobody([game, "601"])
        defer {
            for process in [both, one] {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
            }
        }
        for _ in 0..<200 where nobodysProcesses(running: game).count < 2 { usleep(10_000) }
        #expect(Freezer.cgroup(of: both.processIdentifier) == group("games+social"))
        #expect(Freezer.cgroup(of: one.processIdentifier) == group("games"))
        try shield.apply([Target(kind: .executable, value: chat)], context: social)
        for _ in 0..<50 where both.isRunning {
            _ = shield.recheck()
            usleep(100_000)
        }
        #expect(!both.isRunning, "the program that read the chat runs after its relock")
        #expect(one.isRunning, "the game alone was ended with the chat store")
    }

    /// In `stop` mode the cgroup is frozen at relock and thawed at the next unlock.
    @Test func stopModeFreezesTheGroupUntilTheNextUnlock() throws {
        defer { removeCgroups() }
        let game = folder.appendingPathComponent("game").path
        // A copy of the shell under another name (the shell itself is never shielded).
        try FileManager.default.copyItem(
            atPath: URL(fileURLWithPath: "/bin/sh").resolvingSymlinksInPath().path, toPath: game)
        let beats = folder.appendingPathComponent("stop-beats").path
        #expect(FileManager.default.createFile(atPath: beats, contents: nil))
        chown(beats, 65534, 65534)
        let target = Target(kind: .executable, value: game)
        let shield = try unlockedShield([game], running: .stop)
        let played = try startAsNobody([game, "-c", "while :; do echo x >> '\(beats)'; sleep 0.02; done"])
        defer {
            kill(played.processIdentifier, SIGKILL)
            played.waitUntilExit()
        }
        #expect(isGrowing(beats))
        try shield.apply([target], context: games)
        var silent = 0
        for _ in 0..<40 where silent < 3 {
            _ = shield.recheck()
            silent = isGrowing(beats) ? 0 : silent + 1
        }
        #expect(silent >= 3, "the game runs after the relock in stop mode")
        #expect(Freezer.isFrozen(Freezer.mount! + group("games")))
        try shield.remove([target], context: games)
        var growing = false
        for _ in 0..<20 where !growing {
            _ = shield.recheck()
            growing = isGrowing(beats)
        }
        #expect(growing, "the game did not go on at the next unlock")
    }

    /// An opener that cannot be kept in a cgroup is refused, and the recheck says why: locked
    /// when in doubt.
    @Test func anOpenerThatCannotBeConfinedIsRefused() throws {
        defer { removeCgroups() }
        let game = folder.appendingPathComponent("game").path
        try FileManager.default.copyItem(atPath: "/bin/true", toPath: game)
        // A cgroup name longer than a file name may be.
        let store = String(repeating: "s", count: 260)
        let shield = try unlockedShield([game], store: store)
        #expect(try asNobody("'\(game)'").status == 126)
        let problems = shield.recheck()
        #expect(problems[store]?.message.contains("too long") == true, "\(problems)")
    }
}
