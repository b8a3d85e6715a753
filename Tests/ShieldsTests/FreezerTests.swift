import CLinux
import Foundation
import StepGateTestSupport
import Testing

@testable import Shields

/// Which cgroup is frozen for a gated process: the user's slice under systemd, the process's
/// own cgroup elsewhere, never the root nor the daemon's own cgroup or an ancestor of it.
@Suite struct FreezerTargetTests {
    let own = "/system.slice/stepgate.service"

    @Test func aLoginSessionFreezesTheUsersSlice() {
        #expect(
            Freezer.target(path: "/user.slice/user-1000.slice/session-2.scope", uid: 1000, own: own)
                == "/user.slice/user-1000.slice")
        #expect(
            Freezer.target(
                path: "/user.slice/user-1000.slice/user@1000.service/app.slice/app-game.scope", uid: 1000,
                own: own)
                == "/user.slice/user-1000.slice")
    }

    @Test func anotherUsersSliceIsNotTaken() {
        // A process of user 1001 in user 1000's slice (su in a session): its own cgroup.
        #expect(
            Freezer.target(path: "/user.slice/user-1000.slice/session-2.scope", uid: 1001, own: own)
                == "/user.slice/user-1000.slice/session-2.scope")
    }

    @Test func neverTheRootNorTheDaemonsOwnCgroupOrAnAncestor() {
        #expect(Freezer.target(path: "/", uid: 1000, own: own) == nil)
        #expect(Freezer.target(path: own, uid: 1000, own: own) == nil)
        #expect(Freezer.target(path: "/system.slice", uid: 1000, own: own) == nil)
        #expect(
            Freezer.target(path: "/system.slice/cron.service", uid: 1000, own: own)
                == "/system.slice/cron.service")
        // A name that only starts like the daemon's cgroup is not an ancestor.
        #expect(Freezer.target(path: "/system.sl", uid: 1000, own: own) == "/system.sl")
        #expect(Freezer.target(path: "/anything", uid: 1000, own: "/") == "/anything")
    }
}

/// Holding processes still for real: a cgroup of their own is frozen (their parent sees no stop),
/// and a user in no cgroup that can be frozen is stopped outright, then goes on, except what
/// was stopped before.
@Suite(
    .enabled(if: getuid() == 0, "freezes cgroups and signals as another user: needs root"),
    .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"), "needs setpriv"),
    .serialized)
struct FreezerTests {
    /// `nobody` spinning in a shell loop, in `cgroup` if given.
    private func spinner(in cgroup: String? = nil) throws -> Process {
        let enter = cgroup.map { "echo $$ > '\($0)/cgroup.procs' && " } ?? ""
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = [
            "-c",
            "\(enter)exec setpriv --reuid=nobody --regid=nogroup --clear-groups /bin/sh -c 'while :; do :; done'",
        ]
        try process.run()
        for _ in 0..<100 where ProcessCredentials(pid: process.processIdentifier)?.uids.first != 65534 {
            usleep(10_000)
        }
        return process
    }

    private func member(_ process: Process) throws -> Freezer.Member {
        let running = try #require(RunningProcess(pid: process.processIdentifier))
        return Freezer.Member(process: running, uid: 65534, gid: 65534)
    }

    @Test func aCgroupOfItsOwnIsFrozenAndThawed() throws {
        guard let mount = Freezer.mount, FileManager.default.isWritableFile(atPath: mount) else {
            print("skipped: no writable cgroup v2 hierarchy")
            return
        }
        let cgroup = mount + "/stepgate-test-\(UUID().uuidString)"
        #expect(mkdir(cgroup, 0o755) == 0)
        defer { rmdir(cgroup) }
        let spinning = try spinner(in: cgroup)
        defer {
            // SIGKILL: a child of the test runner starts with most signals blocked.
            kill(spinning.processIdentifier, SIGKILL)
            spinning.waitUntilExit()
        }
        var frozenInside = false
        var stateInside: Character?
        let loose = Freezer.holding(
            [try member(spinning)], stopping: [],
            keeping: {
                frozenInside = Freezer.isFrozen(cgroup)
                stateInside = RunningProcess(pid: spinning.processIdentifier)?.state
                return []
            })
        #expect(loose.isEmpty)
        #expect(frozenInside)
        #expect(stateInside != "T", "frozen, not stopped: the parent sees nothing")
        #expect(!Freezer.isFrozen(cgroup))
        usleep(50_000)
        #expect(RunningProcess(pid: spinning.processIdentifier)?.state == "R")

        // A daemon that died holding it: the next one thaws it when it starts.
        let freeze = try #require(FileHandle(forWritingAtPath: cgroup + "/cgroup.freeze"))
        try freeze.write(contentsOf: Data("1".utf8))
        try freeze.close()
        // Frozen first, then listed: an exec shield another test makes meanwhile thaws what the
        // list names (as a new daemon would), and a loaded machine takes a while to freeze.
        for _ in 0..<2500 where !Freezer.isFrozen(cgroup) { usleep(2_000) }
        #expect(Freezer.isFrozen(cgroup))
        try (cgroup + "\n").write(toFile: Freezer.ledger, atomically: false, encoding: .utf8)
        _ = Reaper(privilegedGroup: nil, grace: .seconds(1))
        #expect(!Freezer.isFrozen(cgroup))
        #expect(!FileManager.default.fileExists(atPath: Freezer.ledger))
    }

    /// Found by an attack: a cgroup that a gated process shares with root's (a cron job's,
    /// without pam_systemd) was frozen with root's process in it, for as long as the user could
    /// make the scan take; and a cgroup root had frozen was thawed after the scan.
    @Test func neitherACgroupSharedWithRootNorOneFrozenByRootIsTouched() throws {
        guard let mount = Freezer.mount, FileManager.default.isWritableFile(atPath: mount) else {
            print("skipped: no writable cgroup v2 hierarchy")
            return
        }
        let shared = mount + "/stepgate-test-\(UUID().uuidString)"
        let frozen = mount + "/stepgate-test-\(UUID().uuidString)"
        #expect(mkdir(shared, 0o755) == 0 && mkdir(frozen, 0o755) == 0)
        defer {
            rmdir(shared)
            rmdir(frozen)
        }
        let gated = try spinner(in: shared)
        let roots = Process()
        roots.executableURL = URL(fileURLWithPath: "/bin/sh")
        roots.arguments = [
            "-c", "echo $$ > '\(shared)/cgroup.procs' && exec /bin/sh -c 'while :; do :; done'",
        ]
        try roots.run()
        let held = try spinner(in: frozen)
        defer {
            for process in [gated, roots, held] {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
            }
        }
        for _ in 0..<100
        where Freezer.cgroup(of: roots.processIdentifier) != String(shared.dropFirst(mount.count)) {
            usleep(10_000)
        }
        let freeze = try #require(FileHandle(forWritingAtPath: frozen + "/cgroup.freeze"))
        try freeze.write(contentsOf: Data("1".utf8))
        try freeze.close()
        defer {
            if let thaw = FileHandle(forWritingAtPath: frozen + "/cgroup.freeze") {
                try? thaw.write(contentsOf: Data("0".utf8))
                try? thaw.close()
            }
        }
        var sharedFrozen = true
        let loose = Freezer.holding(
            [try member(gated), try member(held)], stopping: [],
            keeping: {
                sharedFrozen = Freezer.isFrozen(shared)
                return []
            })
        #expect(!sharedFrozen, "root's process was frozen with the gated one")
        #expect(loose.map(\.process.pid) == [gated.processIdentifier])
        #expect(Freezer.isFrozenByRequest(frozen), "a cgroup root froze was thawed")
    }

    /// Found by an attack: the helper that stops every process of a user ran as that user for
    /// a moment, and the user, stopping all of their own processes in a loop (`kill -STOP -1`),
    /// stopped it too: the reaper waited on it for good. (A uid of its own here, so that the
    /// loop stops no other test's processes.)
    @Test func aUserStoppingEverythingOfTheirsCannotHoldTheStop() throws {
        let uid: UInt32 = 4242
        func start(_ script: String) throws -> Process {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            process.arguments = [
                "--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "/bin/sh", "-c", script,
            ]
            try process.run()
            return process
        }
        let spinning = try start("while :; do :; done")
        let stopper = try start("while :; do kill -STOP -1 2>/dev/null; done")
        defer {
            kill(stopper.processIdentifier, SIGKILL)
            for process in Freezer.processes(of: uid) { process.signal(SIGKILL) }
            // A helper held by the loop (before the fix) goes on, so the test can end.
            for process in RunningProcess.withDescendants([RunningProcess(pid: getpid())!])
            where process.state == "T" {
                process.signal(SIGCONT)
            }
            spinning.waitUntilExit()
        }
        for _ in 0..<100 where ProcessCredentials(pid: spinning.processIdentifier)?.uids.first != uid {
            usleep(10_000)
        }
        let member = Freezer.Member(
            process: try #require(RunningProcess(pid: spinning.processIdentifier)), uid: uid, gid: uid)
        let done = DispatchSemaphore(value: 0)
        let rounds = 200
        DispatchQueue.global().async {
            for _ in 0..<rounds {
                Freezer.holding([member], stopping: [uid], settle: .milliseconds(5), keeping: { [] })
            }
            done.signal()
        }
        #expect(done.wait(timeout: .now() + 60) == .success, "the stop helper was held by the user")
    }

    /// Found by an attack: where no cgroup can be frozen, stopping every process of the gated
    /// user stopped root's `runuser` (`su`, `sudo`) above one of them too (it stops itself when
    /// its child stops, passing the job-control stop on), and only the child was continued: the
    /// `runuser` stayed stopped for good. Its stand-in here does what `runuser` does: waits for
    /// its child with `WUNTRACED`, stops itself when the child stops, continues the child when
    /// continued. (A uid of its own, so that no other test's processes are stopped.)
    @Test(
        .enabled(
            if: FileManager.default.isExecutableFile(atPath: "/usr/bin/python3"), "needs /usr/bin/python3"))
    func rootsParentOfAStoppedUserGoesOnWithThem() throws {
        let uid: UInt32 = 4243
        let runuser = try startNestedRunuserStandIns(uid: uid, depth: 1)
        defer { end(runuser, uid: uid) }
        for _ in 0..<250 where Freezer.processes(of: uid).isEmpty { usleep(20_000) }
        let child = try #require(Freezer.processes(of: uid).first)
        let member = Freezer.Member(process: child, uid: uid, gid: uid)
        var stoppedAll: [(UInt32, [RunningProcess])] = []
        var during: (Character?, Character?)
        Freezer.holding(
            [member], stopping: [uid],
            keeping: {
                // The stand-in stops itself once it sees its child stop.
                for _ in 0..<100 where RunningProcess(pid: runuser.processIdentifier)?.state != "T" {
                    usleep(5_000)
                }
                during = (
                    RunningProcess(pid: child.pid)?.state,
                    RunningProcess(pid: runuser.processIdentifier)?.state
                )
                return []
            }, stoppedAll: { stoppedAll.append(($0, $1)) })
        guard !stoppedAll.isEmpty else {
            print("skipped: this test's processes are in a cgroup that can be frozen")
            return
        }
        #expect(during.0 == "T" && during.1 == "T", "\(during)")
        let states = {
            (RunningProcess(pid: child.pid)?.state, RunningProcess(pid: runuser.processIdentifier)?.state)
        }
        for _ in 0..<50 where states().0 == "T" || states().1 == "T" { usleep(20_000) }
        #expect(states().0 == "S", "the user's process did not go on: \(states())")
        #expect(states().1 == "S", "root's parent of it stayed stopped: \(states())")
        #expect(stoppedAll.map(\.0) == [uid])
        #expect(stoppedAll.first?.1.map(\.pid) == [runuser.processIdentifier])
    }

    /// Found by an attack: a chain of them (`script -c 'runuser -u gated …'`, `runuser -u root --
    /// runuser -u gated …`) passes the stop up more than one level, and only the direct parent
    /// was continued: the grandparent stayed stopped for good. Two stand-ins here, one above the
    /// other. (A uid of its own, so that no other test's processes are stopped.)
    @Test(
        .enabled(
            if: FileManager.default.isExecutableFile(atPath: "/usr/bin/python3"), "needs /usr/bin/python3"))
    func rootsAncestorsOfAStoppedUserGoOnWithThem() throws {
        let uid: UInt32 = 4244
        let outer = try startNestedRunuserStandIns(uid: uid)
        defer { end(outer, uid: uid) }
        for _ in 0..<250 where Freezer.processes(of: uid).isEmpty { usleep(20_000) }
        let child = try #require(Freezer.processes(of: uid).first)
        let inner = try #require(Freezer.table()[child.pid]?.parent)
        #expect(Freezer.table()[inner]?.parent == outer.processIdentifier)
        let chain = [child.pid, inner, outer.processIdentifier]
        let states = { chain.map { RunningProcess(pid: $0)?.state } }
        var stoppedAll: [(UInt32, [RunningProcess])] = []
        var during: [Character?] = []
        Freezer.holding(
            [Freezer.Member(process: child, uid: uid, gid: uid)], stopping: [uid],
            keeping: {
                // The stop goes up one stand-in at a time.
                for _ in 0..<100 where states()[2] != "T" { usleep(5_000) }
                during = states()
                return []
            }, stoppedAll: { stoppedAll.append(($0, $1)) })
        guard !stoppedAll.isEmpty else {
            print("skipped: this test's processes are in a cgroup that can be frozen")
            return
        }
        #expect(during == ["T", "T", "T"], "\(during)")
        for _ in 0..<50 where states().contains("T") { usleep(20_000) }
        #expect(states() == ["S", "S", "S"], "the user's process, root's parent, root's grandparent")
        #expect(stoppedAll.map(\.0) == [uid])
        #expect(Set(stoppedAll.first?.1.map(\.pid) ?? []) == [inner, outer.processIdentifier])
    }

    /// Found by an attack (round 15): a gated process that ignores SIGTERM, started by root's
    /// `runuser`, is stopped and killed at relock; `runuser` saw its child stop, stopped itself
    /// (passing the job-control stop on) and, its child dead, was never continued: root's
    /// `runuser` (a cron job, an admin's terminal) hung for good. Its stand-in does what it does;
    /// two levels of them here, five times over (it is a race between the stop and the kill).
    @Test(
        .enabled(
            if: FileManager.default.isExecutableFile(atPath: "/usr/bin/python3"), "needs /usr/bin/python3"))
    func rootsAncestorsOfAKilledProcessGoOn() throws {
        let uid: UInt32 = 4244
        var stuck: [[Character?]] = []
        for _ in 0..<5 {
            let outer = try startNestedRunuserStandIns(uid: uid)
            defer { end(outer, uid: uid) }
            for _ in 0..<250 where Freezer.processes(of: uid).isEmpty { usleep(20_000) }
            let child = try #require(Freezer.processes(of: uid).first)
            let inner = try #require(Freezer.table()[child.pid]?.parent)
            ExecDenyShield.stopAndKill(kill: true) { found in
                if RunningProcess(pid: child.pid) == child { found(child) }
            }
            // Both stand-ins see their child end and end too.
            let states = { [inner, outer.processIdentifier].map { RunningProcess(pid: $0)?.state } }
            for _ in 0..<100 where outer.isRunning { usleep(20_000) }
            if outer.isRunning { stuck.append(states()) }
        }
        #expect(stuck.isEmpty, "root's stand-ins stayed stopped above a killed process: \(stuck)")
    }

    /// Found by an attack: the stop-all, sent with the user's id as effective one, reaches every
    /// process whose real or saved user id is the user's (the kernel's rule), root's after
    /// `setresuid(0, U, U)` or `setresuid(0, 0, U)` too; only those whose real id is the user's
    /// were continued, so root's stayed stopped for good. (A uid of its own, so that no other
    /// test's processes are stopped.)
    @Test(
        .enabled(
            if: FileManager.default.isExecutableFile(atPath: "/usr/bin/python3"), "needs /usr/bin/python3"))
    func rootsProcessesWithTheUsersSavedIdGoOn() throws {
        let uid: UInt32 = 4244
        func start(_ executable: String, _ arguments: [String]) throws -> Process {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = arguments
            try process.run()
            return process
        }
        let gated = try start(
            "/usr/bin/setpriv",
            ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "/bin/sleep", "200"])
        let roots = try ["0, \(uid), \(uid)", "0, 0, \(uid)"].map { ids in
            try start(
                "/usr/bin/python3", ["-E", "-c", "import os, time; os.setresuid(\(ids)); time.sleep(200)"])
        }
        defer {
            for process in [gated] + roots {
                kill(process.processIdentifier, SIGCONT)
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
            }
        }
        for process in [gated] + roots {
            for _ in 0..<250 where ProcessCredentials(pid: process.processIdentifier)?.uids[2] != uid {
                usleep(20_000)
            }
        }
        #expect(roots.map { ProcessCredentials(pid: $0.processIdentifier)?.uids.first } == [0, 0])
        let member = Freezer.Member(
            process: try #require(RunningProcess(pid: gated.processIdentifier)), uid: uid, gid: uid)
        let states = { ([gated] + roots).map { RunningProcess(pid: $0.processIdentifier)?.state } }
        var stoppedAll: [UInt32] = []
        var during: [Character?] = []
        Freezer.holding(
            [member], stopping: [uid],
            keeping: {
                during = states()
                return []
            }, stoppedAll: { uid, _ in stoppedAll.append(uid) })
        guard !stoppedAll.isEmpty else {
            print("skipped: this test's processes are in a cgroup that can be frozen")
            return
        }
        #expect(during == ["T", "T", "T"], "the stop reached them: \(during)")
        for _ in 0..<50 where states().contains("T") { usleep(20_000) }
        #expect(states() == ["S", "S", "S"], "the user's process, root's with the user's saved id")
    }

    /// Which stopped ancestors go on: at any depth, only those stopped by the stop-all (the walk
    /// up ends at one that runs or was stopped before), never init, none above a process that
    /// stays stopped on purpose.
    @Test func onlyAncestorsTheStopAllStoppedGoOn() throws {
        var table: Freezer.Table = [:]
        /// Adds a process (started at tick `start`, its id by default) below `parent`.
        @discardableResult
        func process(_ pid: Int32, _ state: Character, below parent: Int32, start: Int32? = nil)
            -> RunningProcess
        {
            // `pid (comm) state` and 19 more fields, the last the start time.
            let process = RunningProcess(
                pid: pid,
                stat: "\(pid) (p) \(state) " + Array(repeating: "0 ", count: 18).joined() + "\(start ?? pid)")!
            table[pid] = (process, parent)
            return process
        }
        var reached: [RunningProcess] = []
        // Three levels up, all stopped by it.
        process(10, "T", below: 9)
        process(11, "T", below: 10)
        process(12, "T", below: 11)
        reached.append(process(13, "S", below: 12))
        // Cut at one stopped before (and at init, which has no parent here).
        process(20, "T", below: 1)
        let before = process(21, "T", below: 20)
        process(22, "T", below: 21)
        reached.append(process(23, "S", below: 22))
        // Cut at one that runs.
        process(30, "T", below: 1)
        process(31, "S", below: 30)
        process(32, "T", below: 31)
        reached.append(process(33, "S", below: 32))
        // Above a process kept stopped: none, up to where its chain meets another.
        process(40, "T", below: 1)
        process(41, "T", below: 40)
        let kept = process(42, "T", below: 41)
        reached.append(kept)
        process(43, "T", below: 40)
        reached.append(process(44, "S", below: 43))
        // Never init.
        process(1, "T", below: 0, start: 1)
        process(50, "T", below: 1)
        reached.append(process(51, "S", below: 50))
        // A parent younger than its child holds a reused id.
        process(60, "T", below: 1, start: 100)
        reached.append(process(61, "S", below: 60))
        // Continued by an earlier look (running again): walked through.
        process(70, "T", below: 1)
        let continued = process(71, "S", below: 70)
        reached.append(process(72, "S", below: 71))
        // A process the stop-all reached ends a walk; its own walk goes on above it.
        process(80, "T", below: 1)
        reached.append(process(81, "S", below: 80))
        process(82, "T", below: 81)
        reached.append(process(83, "S", below: 82))
        let found = Freezer.ancestorsToContinue(
            of: reached, in: table, stoppedBefore: [before], kept: [kept], continued: [continued])
        #expect(found.map(\.pid) == [10, 11, 12, 22, 32, 43, 50, 70, 80, 82])
    }

    @Test func aUserInNoCgroupOfItsOwnIsStoppedOnlyWhenAsked() throws {
        let spinning = try spinner()
        let stoppedBefore = try spinner()
        defer {
            for process in [spinning, stoppedBefore] {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
            }
        }
        kill(stoppedBefore.processIdentifier, SIGSTOP)
        usleep(50_000)
        let members = [try member(spinning), try member(stoppedBefore)]
        var state: Character?
        let loose = Freezer.holding(
            members, stopping: [],
            keeping: {
                state = RunningProcess(pid: spinning.processIdentifier)?.state
                return []
            })
        guard loose.count == 2 else {
            print("skipped: this test's processes are in a cgroup that can be frozen")
            return
        }
        #expect(state == "R", "stopped though not asked")
        let held = Freezer.holding(
            members, stopping: [65534],
            keeping: {
                state = RunningProcess(pid: spinning.processIdentifier)?.state
                return []
            })
        #expect(held.isEmpty)
        #expect(state == "T")
        usleep(50_000)
        #expect(RunningProcess(pid: spinning.processIdentifier)?.state == "R")
        #expect(
            RunningProcess(pid: stoppedBefore.processIdentifier)?.state == "T",
            "what was stopped before goes on")

        // What the body stops on purpose (the `stop` mode's finds) stays stopped.
        kill(stoppedBefore.processIdentifier, SIGCONT)
        Freezer.holding(
            members, stopping: [65534],
            keeping: {
                let found = members[0].process
                kill(found.pid, SIGSTOP)
                return [found]
            })
        usleep(50_000)
        #expect(RunningProcess(pid: spinning.processIdentifier)?.state == "T", "a find of the body went on")
        #expect(RunningProcess(pid: stoppedBefore.processIdentifier)?.state == "R")
    }
}

/// Starts root's stand-ins for `depth` nested `runuser`s above a `sleep 200` of `uid`. Each does what
/// `runuser` does: waits for its child with `WUNTRACED`, stops itself when the child stops (passing
/// the job-control stop on to its own parent), continues the child when continued.
private func startNestedRunuserStandIns(uid: UInt32, depth: Int = 2) throws -> Process {
    let outer = Process()
    outer.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
    outer.arguments = [
        "-E", "-c",
        """
        import os, signal
        def runuser(depth):
            child = os.fork()
            if child == 0:
                if depth > 1:
                    runuser(depth - 1)
                    os._exit(0)
                os.setgid(\(uid)); os.setgroups([]); os.setuid(\(uid))
                os.execv("/bin/sleep", ["sleep", "200"])
            while True:
                _, status = os.waitpid(child, os.WUNTRACED)
                if not os.WIFSTOPPED(status):
                    break
                os.kill(os.getpid(), signal.SIGSTOP)
                os.kill(child, signal.SIGCONT)
        runuser(\(depth))
        """,
    ]
    try outer.run()
    return outer
}

/// Ends the stand-ins and every process of `uid`.
private func end(_ outer: Process, uid: UInt32) {
    for process in Freezer.processes(of: uid) { process.signal(SIGKILL) }
    let root = RunningProcess(pid: outer.processIdentifier).map { Set([$0]) } ?? []
    for process in RunningProcess.withDescendants(root) {
        process.signal(SIGCONT)
        process.signal(SIGKILL)
    }
    outer.waitUntilExit()
}
