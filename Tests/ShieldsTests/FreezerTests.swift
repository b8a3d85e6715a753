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
        let loose = Freezer.holding([try member(spinning)], stopping: []) {
            frozenInside = Freezer.isFrozen(cgroup)
            stateInside = RunningProcess(pid: spinning.processIdentifier)?.state
        }
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
        try (cgroup + "\n").write(toFile: Freezer.ledger, atomically: false, encoding: .utf8)
        for _ in 0..<100 where !Freezer.isFrozen(cgroup) { usleep(2_000) }
        #expect(Freezer.isFrozen(cgroup))
        _ = Reaper(privilegedGroup: nil, grace: .seconds(1))
        #expect(!Freezer.isFrozen(cgroup))
        #expect(!FileManager.default.fileExists(atPath: Freezer.ledger))
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
        let loose = Freezer.holding(members, stopping: []) {
            state = RunningProcess(pid: spinning.processIdentifier)?.state
        }
        guard loose.count == 2 else {
            print("skipped: this test's processes are in a cgroup that can be frozen")
            return
        }
        #expect(state == "R", "stopped though not asked")
        let held = Freezer.holding(members, stopping: [65534]) {
            state = RunningProcess(pid: spinning.processIdentifier)?.state
        }
        #expect(held.isEmpty)
        #expect(state == "T")
        usleep(50_000)
        #expect(RunningProcess(pid: spinning.processIdentifier)?.state == "R")
        #expect(
            RunningProcess(pid: stoppedBefore.processIdentifier)?.state == "T",
            "what was stopped before goes on")
    }
}
