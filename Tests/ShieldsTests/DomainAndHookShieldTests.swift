import CLinux
import Foundation
import StepGateTestSupport
import Testing
import UnlockPolicy

@testable import Shields

private func domains(_ names: String...) -> [Target] { names.map { Target(kind: .domain, value: $0) } }

@Suite("Domain shield")
struct DomainShieldTests {
    let folder: URL
    let hosts: String

    init() throws {
        folder = try Fixtures.temporaryFolder()
        hosts = folder.appendingPathComponent("hosts").path
        try "127.0.0.1 localhost\n::1 localhost\n\n# my own\n10.0.0.2 nas\n".write(
            toFile: hosts, atomically: true, encoding: .utf8)
        chmod(hosts, 0o644)
    }

    private var text: String { (try? String(contentsOfFile: hosts, encoding: .utf8)) ?? "" }

    @Test func appliesAManagedBlockAndKeepsTheRestOfTheFile() throws {
        let shield = DomainShield(path: hosts)
        try shield.apply(domains("example.com", "games.example.org"), context: ShieldContext(store: "games"))
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines.prefix(5) == ["127.0.0.1 localhost", "::1 localhost", "", "# my own", "10.0.0.2 nas"])
        #expect(
            lines.contains("0.0.0.0 example.com example.com. www.example.com www.example.com. # store=games"))
        #expect(
            lines.contains(
                ":: games.example.org games.example.org. www.games.example.org www.games.example.org. # store=games"
            ))
        #expect(try shield.inForce() == ["games": Set(domains("example.com", "games.example.org"))])
        var info = stat()
        stat(hosts, &info)
        #expect(info.st_mode & 0o777 == 0o644)
        try shield.remove(domains("example.com", "games.example.org"), context: ShieldContext(store: "games"))
        #expect(text == "127.0.0.1 localhost\n::1 localhost\n\n# my own\n10.0.0.2 nas\n")
        #expect(try shield.inForce().isEmpty)
    }

    @Test func aDomainHeldByTwoStoresStaysUntilBothRemoveIt() throws {
        let shield = DomainShield(path: hosts)
        try shield.apply(domains("example.com"), context: ShieldContext(store: "games"))
        try shield.apply(domains("example.com"), context: ShieldContext(store: "chat"))
        try shield.remove(domains("example.com"), context: ShieldContext(store: "games"))
        #expect(try shield.inForce() == ["chat": Set(domains("example.com"))])
        #expect(text.contains("0.0.0.0 example.com"))
    }

    @Test func writesDnsmasqLinesThatCoverSubdomains() throws {
        let shield = DomainShield(path: hosts, format: .dnsmasq)
        try shield.apply(domains("Example.COM"), context: ShieldContext(store: "games"))
        #expect(text.contains("address=/example.com/0.0.0.0 # store=games"))
        #expect(text.contains("address=/example.com/:: # store=games"))
        // Firefox's DNS-over-HTTPS canary gets a negative answer while anything is blocked.
        #expect(text.contains("\naddress=/use-application-dns.net/ # stepgate"))
        #expect(try shield.inForce() == ["games": Set(domains("example.com"))])
    }

    @Test(arguments: ["", "localhost", "bad domain.com", "evil.com\n1.2.3.4 bank.com", "-x.com", "a..b"])
    func rejectsAnythingButADomainName(name: String) throws {
        let before = text
        let shield = DomainShield(path: hosts)
        #expect(throws: ShieldError.self) {
            try shield.apply([Target(kind: .domain, value: name)], context: ShieldContext(store: "s"))
        }
        #expect(text == before)
    }

    /// One bad name (from an old state file or a caller that skipped the configuration's
    /// check) does not keep the good ones open.
    @Test func theValidDomainsAreBlockedEvenWhenOneIsNot() throws {
        let shield = DomainShield(path: hosts, format: .dnsmasq)
        let error = #expect(throws: ShieldError.self) {
            try shield.apply(
                domains("store.steampowered.com", "*.evil.test", "Example.COM."),
                context: ShieldContext(store: "games"))
        }
        #expect(error?.message.contains("not blocked: *.evil.test: a wildcard") == true)
        #expect(text.contains("address=/store.steampowered.com/0.0.0.0 # store=games"))
        #expect(text.contains("address=/example.com/0.0.0.0 # store=games"))
        #expect(!text.contains("evil"))
    }

    /// The resolver itself, through a private mount of the written file over /etc/hosts: the
    /// name, its `www.` name, other case, and the fully qualified form with a trailing dot
    /// all resolve to 0.0.0.0.
    @Test(
        .enabled(if: getuid() == 0, "needs root to mount a private /etc/hosts"),
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare"), "needs unshare"))
    func theResolverSeesEveryFormOfTheBlockedName() throws {
        let shield = DomainShield(path: hosts)
        try shield.apply(domains("blocked.example"), context: ShieldContext(store: "games"))
        let names = [
            "blocked.example", "www.blocked.example", "BLOCKED.Example", "blocked.example.",
            "www.blocked.example.",
        ]
        let script =
            "mount --bind '\(hosts)' /etc/hosts && for n in \(names.joined(separator: " ")); do "
            + "echo \"$n $(getent ahostsv4 $n | head -n 1 | cut -d ' ' -f 1)\"; done"
        let result = try runProcess(
            URL(fileURLWithPath: "/usr/bin/unshare"), ["-m", "/bin/sh", "-c", script])
        #expect(result.status == 0)
        #expect(result.standardOutput == names.map { "\($0) 0.0.0.0\n" }.joined())
    }

    /// A user fills the file system the block lives on (blocks and inodes) during an unlock:
    /// the relock is still written, from the reserve kept beside the file.
    @Test(
        .enabled(if: getuid() == 0, "needs root to mount a small tmpfs"),
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/mount"), "needs mount"))
    func aFullFileSystemDoesNotKeepTheBlockOff() throws {
        let mountPoint = folder.appendingPathComponent("fs").path
        #expect(mkdir(mountPoint, 0o755) == 0)
        let mounted = try runProcess(
            URL(fileURLWithPath: "/usr/bin/mount"),
            ["-t", "tmpfs", "-o", "size=256k,nr_inodes=64", "tmpfs", mountPoint])
        try #require(mounted.status == 0, "mount: \(mounted.standardError)")
        defer { _ = try? runProcess(URL(fileURLWithPath: "/usr/bin/umount"), ["-l", mountPoint]) }
        let small = mountPoint + "/hosts"
        try "127.0.0.1 localhost\n".write(toFile: small, atomically: false, encoding: .utf8)
        let shield = DomainShield(path: small)
        try shield.apply(domains("example.com"), context: ShieldContext(store: "games"))
        #expect(FileManager.default.fileExists(atPath: mountPoint + "/.hosts.stepgate-reserve"))
        try shield.remove(domains("example.com"), context: ShieldContext(store: "games"))  // the unlock
        // Fill every block, then every inode.
        let filler = open(mountPoint + "/fill", O_WRONLY | O_CREAT, 0o644)
        let chunk = [UInt8](repeating: 7, count: 4096)
        while chunk.withUnsafeBytes({ write(filler, $0.baseAddress, $0.count) }) > 0 {}
        close(filler)
        var opened: [Int32] = []
        while case let fd = open(mountPoint + "/f\(opened.count)", O_WRONLY | O_CREAT | O_CLOEXEC, 0o644),
            fd >= 0
        {
            opened.append(fd)
        }
        #expect(errno == ENOSPC)
        for fd in opened { close(fd) }
        try shield.apply(domains("example.com"), context: ShieldContext(store: "games"))  // the relock
        let text = try String(contentsOfFile: small, encoding: .utf8)
        #expect(text.contains("0.0.0.0 example.com"))
    }

    @Test func aBrokenManagedBlockIsAnErrorNotARewrite() throws {
        try (text + DomainShield.begin + "\n0.0.0.0 x.com # store=s\n").write(
            toFile: hosts, atomically: true, encoding: .utf8)
        let shield = DomainShield(path: hosts)
        let error = #expect(throws: ShieldError.self) {
            try shield.apply(domains("example.com"), context: ShieldContext(store: "s"))
        }
        #expect(error?.message.contains("no end marker") == true)
    }

    @Test func aFailingReloadCommandFailsTheShield() throws {
        let shield = DomainShield(path: hosts, reloadCommand: ["/bin/false"])
        #expect(throws: ShieldError.self) {
            try shield.apply(domains("example.com"), context: ShieldContext(store: "s"))
        }
        let ok = DomainShield(path: hosts, reloadCommand: ["/bin/true"])
        try ok.apply(domains("example.net"), context: ShieldContext(store: "s"))
    }
}

@Suite("Hook shield")
struct HookShieldTests {
    @Test func runsTheHookWithItsEnvironment() throws {
        let folder = try Fixtures.temporaryFolder()
        let log = folder.appendingPathComponent("log").path
        let shield = HookShield(hooks: [
            "pause": .init(command: [
                "/bin/sh", "-c", "env | grep ^STEPGATE_ | sort >> \(log); echo --- >> \(log)",
            ])
        ])
        let until = Date(timeIntervalSince1970: 1_800_000_000)
        let selection = Selection(executables: ["/usr/bin/steam"], hooks: ["pause"])
        let context = ShieldContext(store: "games", selection: selection, owners: ["gate"], until: until)
        try shield.apply([Target(kind: .hook, value: "pause")], context: context)
        #expect(try shield.inForce() == ["games": [Target(kind: .hook, value: "pause")]])
        try shield.remove([Target(kind: .hook, value: "pause")], context: context)
        #expect(try shield.inForce().isEmpty)
        let text = try String(contentsOfFile: log, encoding: .utf8)
        #expect(text.contains("STEPGATE_ACTION=apply"))
        #expect(text.contains("STEPGATE_ACTION=remove"))
        #expect(text.contains("STEPGATE_HOOK=pause"))
        #expect(text.contains("STEPGATE_STORE=games"))
        #expect(text.contains("STEPGATE_OWNERS=gate"))
        #expect(text.contains("STEPGATE_UNTIL=2027-01-15T08:00:00Z"))
        #expect(text.contains("STEPGATE_TARGETS=executable:/usr/bin/steam"))
    }

    @Test func aFailingOrSlowHookIsAFailedShield() throws {
        let shield = HookShield(hooks: [
            "fails": .init(command: ["/bin/sh", "-c", "echo no router; exit 3"]),
            "hangs": .init(command: ["/bin/sleep", "30"], timeout: 0.5),
        ])
        let context = ShieldContext(store: "s")
        let failed = #expect(throws: ShieldError.self) {
            try shield.apply([Target(kind: .hook, value: "fails")], context: context)
        }
        #expect(failed?.message.contains("status 3: no router") == true)
        let started = Date()
        let slow = #expect(throws: ShieldError.self) {
            try shield.apply([Target(kind: .hook, value: "hangs")], context: context)
        }
        #expect(slow?.message.contains("timed out") == true)
        #expect(Date().timeIntervalSince(started) < 10)
        #expect(throws: ShieldError.self) {
            try shield.apply([Target(kind: .hook, value: "unknown")], context: context)
        }
        #expect(try shield.inForce().isEmpty)
    }
}

@Suite("Shield set")
struct ShieldSetTests {
    @Test func routesEachKindAndReportsUnenforcedKinds() throws {
        let folder = try Fixtures.temporaryFolder()
        let hosts = folder.appendingPathComponent("hosts").path
        let set = ShieldSet([
            DomainShield(path: hosts), HookShield(hooks: ["h": .init(command: ["/bin/true"])]),
        ])
        #expect(set.unenforcedKinds == [.executable, .desktopCategory, .systemdUnit])
        let selection = Selection(executables: ["/usr/bin/steam"], domains: ["example.com"], hooks: ["h"])
        let errors = set.apply(selection, context: ShieldContext(store: "games", selection: selection))
        #expect(errors.count == 1)
        #expect(errors.first?.message.contains("no shield enforces executable") == true)
        let (inForce, readErrors) = set.inForce()
        #expect(readErrors.isEmpty)
        #expect(inForce["games"] == Selection(domains: ["example.com"], hooks: ["h"]))
        #expect(set.remove(selection, context: ShieldContext(store: "games")).isEmpty)
    }
}

/// Commands the shields start get default signal dispositions back, whatever the daemon ignores.
@Suite("command runner signals", .serialized)
struct CommandRunnerSignalTests {
    @Test func aTimedOutCommandDiesOfSIGTERMEvenWhenTheDaemonIgnoresIt() throws {
        let previous = signal(SIGTERM, SIG_IGN)
        defer { signal(SIGTERM, previous) }
        let result = try CommandRunner().run(["/bin/sh", "-c", "sleep 10"], timeout: 0.3, shield: "hooks")
        #expect(result.timedOut)
        #expect(result.status == 128 + SIGTERM, "status \(result.status): SIGTERM was ignored by the child")
    }
}
