import Foundation
import StepGateTestSupport
import Testing

@testable import StepGateDaemon

/// `shields.exec.cgroup`: where programs started during an unlock are kept.
@Suite("Confinement cgroup setting")
struct ConfinementSettingTests {
    private func load(exec: String, stateDirectory: String? = nil) throws -> DaemonConfiguration {
        let folder = try Fixtures.temporaryFolder()
        let path = folder.appendingPathComponent("config.json").path
        let state = stateDirectory.map { #""stateDirectory": "\#($0)","# } ?? ""
        try """
        {"input": {"replay": "walk.csv"}, \(state)
         "policy": {"stores": {"games": {"selection": {"executables": ["/usr/games/game"]},
                    "gate": {"goals": [{"steps": 50, "minutes": 1}]}}}},
         "shields": {"exec": \(exec)}}
        """.write(toFile: path, atomically: true, encoding: .utf8)
        return try DaemonConfiguration.load(path: path)
    }

    @Test func theDefaultIsPerStateDirectoryAndCanBeSetOrTurnedOff() throws {
        #expect(try load(exec: "{}", stateDirectory: "/var/lib/stepgate").confinementCgroup == "/stepgate")
        let other = try load(exec: "{}", stateDirectory: "/srv/gate").confinementCgroup
        let third = try load(exec: "{}", stateDirectory: "/srv/gate2").confinementCgroup
        #expect(other?.hasPrefix("/stepgate-") == true && other?.count == 18)
        #expect(other != third)
        #expect(try load(exec: #"{"cgroup": "/gates/kids"}"#).confinementCgroup == "/gates/kids")
        #expect(try load(exec: #"{"cgroup": false}"#).confinementCgroup == nil)
    }

    /// `%u` in the state folder, the socket and the domains file is the daemon's uid: the trial
    /// configuration run by root and by a user keeps their files apart.
    @Test func pathsMayNameTheDaemonsUID() throws {
        let configuration = try DaemonConfiguration.load(
            path: Fixtures.samples.appendingPathComponent("try-daemon.json").path)
        let uid = getuid()
        #expect(configuration.stateDirectory == "/tmp/stepgate-try-\(uid)/state")
        #expect(configuration.controlSocket == "/tmp/stepgate-try-\(uid)/control.sock")
        #expect(configuration.domains?.path == "/tmp/stepgate-try-\(uid)/hosts")
    }

    @Test(arguments: [
        #"{"cgroup": "stepgate"}"#, #"{"cgroup": "/"}"#, #"{"cgroup": "/a/../b"}"#, #"{"cgroup": true}"#,
    ])
    func aBadCgroupIsRefusedWithThePath(exec: String) {
        #expect {
            _ = try load(exec: exec)
        } throws: { error in
            "\(error)".contains("shields.exec.cgroup: expected a cgroup path like \"/stepgate\"")
        }
    }
}
