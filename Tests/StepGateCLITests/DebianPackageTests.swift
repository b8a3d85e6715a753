import Foundation
import StepGateTestSupport
import Testing

@testable import StepGateCLI

/// The Debian package (scripts/package.sh) and what its removal relies on,
/// `stepgate lift-shields`.
@Suite("Debian package")
struct DebianPackageTests {
    /// Why the package cannot be installed into a throwaway root here, or nil when it can.
    static let unavailableReason: String? = {
        if geteuid() != 0 { return "needs root (a mount namespace, an overlay and a chroot)" }
        let tools = ["dpkg", "dpkg-deb", "unshare", "chroot", "strip", "objdump", "gzip"]
        if let missing = tools.first(where: { name in
            !["/usr/bin/", "/bin/", "/usr/sbin/", "/sbin/"].contains {
                FileManager.default.isExecutableFile(atPath: $0 + name)
            }
        }) {
            return "\(missing) is not installed"
        }
        let filesystems = (try? String(contentsOfFile: "/proc/filesystems", encoding: .utf8)) ?? ""
        if !filesystems.contains("\toverlay\n") { return "the kernel has no overlay file system" }
        return nil
    }()

    /// Builds the package twice from the debug binary, then installs, upgrades, removes and
    /// purges it in a throwaway root (Tests/Harness/deb-install.sh says what it checks).
    @Test(
        .enabled(if: unavailableReason == nil, "\(unavailableReason ?? "")"),
        .timeLimit(.minutes(3)))
    func installUpgradeRemoveAndPurgeInAThrowawayRoot() throws {
        let harness = Fixtures.packageRoot.appendingPathComponent("Tests/Harness/deb-install.sh").path
        let result = try runProcess(
            URL(fileURLWithPath: "/bin/bash"), [harness, Fixtures.stepgateExecutable.path])
        #expect(result.status == 0, "\(result.standardOutput)\n\(result.standardError)")
        #expect(result.standardOutput.hasSuffix("PASS\n"), "\(result.standardOutput)")
    }

    /// A folder with what a stopped daemon leaves in force, a configuration naming it, and
    /// stand-ins for `systemctl` and `nft` that record their calls (`failing`: systemctl fails).
    private func leftovers(failing: Bool = false) throws -> (folder: URL, config: String, calls: String) {
        let folder = try Fixtures.temporaryFolder()
        let path = folder.path
        let calls = "\(path)/calls"
        for tool in ["systemctl", "nft"] {
            let script =
                "#!/bin/sh\necho \"\(tool) $*\" >> \(calls)\n\(failing && tool == "systemctl" ? "exit 1\n" : "")"
            try script.write(toFile: "\(path)/fake-\(tool)", atomically: true, encoding: .utf8)
            chmod("\(path)/fake-\(tool)", 0o755)
        }
        try FileManager.default.createDirectory(atPath: "\(path)/state", withIntermediateDirectories: true)
        try #"{"shielded.service":{"stores":["games"],"wasActive":true}}"#.write(
            toFile: "\(path)/state/systemd-units.json", atomically: true, encoding: .utf8)
        try """
        127.0.0.1 localhost
        # BEGIN stepgate managed block: do not edit; StepGate rewrites it
        0.0.0.0 example.org example.org. www.example.org www.example.org. # store=games
        :: example.org example.org. www.example.org www.example.org. # store=games
        # END stepgate managed block

        """.write(toFile: "\(path)/hosts", atomically: true, encoding: .utf8)
        _ = FileManager.default.createFile(
            atPath: "\(path)/.hosts.stepgate-reserve", contents: Data(count: 4096))
        let chromium = "\(path)/root/etc/chromium/policies/managed"
        try FileManager.default.createDirectory(atPath: chromium, withIntermediateDirectories: true)
        try "{\n  \"DnsOverHttpsMode\": \"off\"\n}\n".write(
            toFile: "\(chromium)/stepgate-dns.json", atomically: true, encoding: .utf8)
        let config = "\(path)/config.json"
        try """
        {
          "input": { "rate": 100 },
          "policy": { "stores": { "games": { "selection": {}, "gate": { "goals": [{ "steps": 1000, "minutes": 30 }] } } } },
          "stateDirectory": "\(path)/state",
          "controlSocket": "\(path)/control.sock",
          "shields": {
            "systemd": { "systemctl": "\(path)/fake-systemctl" },
            "domains": { "path": "\(path)/hosts", "format": "hosts", "browserPolicyRoot": "\(path)/root" },
            "nftables": { "nft": "\(path)/fake-nft" }
          }
        }
        """.write(toFile: config, atomically: true, encoding: .utf8)
        return (folder, config, calls)
    }

    @Test func liftShieldsLiftsWhatAStoppedDaemonLeft() throws {
        let (folder, config, calls) = try leftovers()
        let path = folder.path
        let result = try runProcess(Fixtures.stepgateExecutable, ["lift-shields", "--config", config])
        #expect(result.status == 0, "\(result.standardError)")
        // One line for each thing lifted.
        #expect(
            result.standardOutput == """
                lifted: systemd unit shielded.service unmasked and started again
                lifted: domains of store games blocked in \(path)/hosts: example.org
                lifted: DNS-over-HTTPS policy in \(path)/root/etc/chromium/policies/managed/stepgate-dns.json
                lifted: nftables table inet stepgate deleted

                """)
        let called = try String(contentsOfFile: calls, encoding: .utf8)
        #expect(
            called == """
                systemctl unmask --runtime shielded.service
                systemctl start shielded.service
                nft list table inet stepgate
                nft delete table inet stepgate

                """)
        #expect(try String(contentsOfFile: "\(path)/hosts", encoding: .utf8) == "127.0.0.1 localhost\n")
        #expect(
            try String(contentsOfFile: "\(path)/state/systemd-units.json", encoding: .utf8) == "{}\n"
        )
        for gone in [".hosts.stepgate-reserve", "root/etc/chromium/policies/managed/stepgate-dns.json"] {
            #expect(!FileManager.default.fileExists(atPath: "\(path)/\(gone)"), "\(gone)")
        }
    }

    /// A second run finds nothing left (the table is gone: `nft list` fails) and says so.
    @Test func liftShieldsSaysWhenNothingWasInForce() throws {
        let (folder, config, _) = try leftovers()
        let first = try runProcess(Fixtures.stepgateExecutable, ["lift-shields", "--config", config])
        #expect(first.status == 0, "\(first.standardError)")
        #expect(first.standardOutput.contains("lifted: nftables table inet stepgate deleted\n"))
        try "#!/bin/sh\nexit 1\n".write(toFile: folder.path + "/fake-nft", atomically: true, encoding: .utf8)
        chmod(folder.path + "/fake-nft", 0o755)
        let second = try runProcess(Fixtures.stepgateExecutable, ["lift-shields", "--config", config])
        #expect(second.status == 0, "\(second.standardError)")
        #expect(second.standardOutput == "no StepGate shield is in force\n")
    }

    @Test func liftShieldsTriesEverythingThenFails() throws {
        let (folder, config, _) = try leftovers(failing: true)
        let result = try runProcess(Fixtures.stepgateExecutable, ["lift-shields", "--config", config])
        #expect(result.status == 1)
        #expect(result.standardError.contains("lift-shields: "), "\(result.standardError)")
        #expect(result.standardError.contains("shielded.service"), "\(result.standardError)")
        // The hosts block is lifted all the same.
        #expect(
            try String(contentsOfFile: folder.path + "/hosts", encoding: .utf8) == "127.0.0.1 localhost\n")
    }

    /// Only the settings are read here: the defaults name the real system, so nothing is run.
    @Test func liftShieldsFallsBackToTheDefaultPlaces() throws {
        let folder = try Fixtures.temporaryFolder()
        let missing = try LiftShields.settings(configPath: folder.path + "/missing.json")
        #expect(missing.stateDirectory == "/var/lib/stepgate")
        #expect(missing.domains?.path == "/etc/hosts")
        #expect(LiftShields.reservePath(beside: "/etc/hosts") == "/etc/.hosts.stepgate-reserve")
        let invalid = folder.appendingPathComponent("config.json").path
        try "{ not json".write(toFile: invalid, atomically: true, encoding: .utf8)
        #expect(throws: (any Error).self) { _ = try LiftShields.settings(configPath: invalid) }
    }
}
