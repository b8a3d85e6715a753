import Foundation
import StepGateTestSupport
import StepHistoryStore
import Testing
import Tuning

/// The real daemon process stopped by a signal at seeded random points of a replayed walk, as
/// `systemctl stop` (SIGTERM), Ctrl-C (SIGINT) and the OOM killer or a crash (SIGKILL) stop it:
/// the history it leaves against the steps it had counted, and what the next start reads.
@Suite("daemon stopped by signals", .timeLimit(.minutes(4)))
struct StopSignalTests {
    private func config(_ folder: URL, replay: String, speed: Double) -> String {
        """
        {
          "input": {"replay": "\(replay)", "speed": \(speed)},
          "policy": {"stores": {"games": {"selection": {"domains": ["example.com"]},
             "gate": {"goals": [{"steps": 100000, "minutes": 1}]}}}},
          "stateDirectory": "\(folder.appendingPathComponent("state").path)",
          "controlSocket": "\(folder.appendingPathComponent("control.sock").path)",
          "shields": {"domains": {"browserPolicies": false, "path": "\(folder.appendingPathComponent("hosts").path)"}}
        }
        """
    }

    private let walk = Fixtures.samples.appendingPathComponent("walk-front-pocket-303.csv").path

    private func stepsOnDisk(_ folder: URL) throws -> Int {
        guard let bytes = try DurableFile.read(folder.appendingPathComponent("state/steps.json").path) else {
            return 0
        }
        return try StepHistory.decode(bytes).total
    }

    private func leftovers(_ folder: URL) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: folder.appendingPathComponent("state").path)
            .filter { $0.contains(".tmp-") }
    }

    /// Starts the daemon again on the folder with an input that gives no steps (a replay whose
    /// file is missing): returns today's steps in its history and in its gate, and its `status`.
    private func restart(_ folder: URL) throws -> (
        history: Int?, gate: Int?, text: String, json: [String: Any]
    ) {
        let daemon = try TestDaemon(
            folder: folder,
            config: config(folder, replay: folder.appendingPathComponent("gone.csv").path, speed: 1))
        defer { daemon.kill(SIGTERM) }
        let json = try daemon.status()
        let history = (json["lastDays"] as? [[String: Any]])?.last?["steps"] as? Int
        let gate = try daemon.store("games")["steps"] as? Int
        return (history, gate, try daemon.client(["status"]).standardOutput, json)
    }

    @Test("SIGTERM and SIGINT at random points leave the history the gate counted, and no temporary file")
    func aStopLosesNothing() throws {
        var random = SplitMix64(seed: 2603)
        for signal in [SIGTERM, SIGINT] {
            let target = Int.random(in: 10...280, using: &random)
            let folder = try Fixtures.temporaryFolder()
            defer { try? FileManager.default.removeItem(at: folder) }
            let daemon = try TestDaemon(folder: folder, config: config(folder, replay: walk, speed: 10))
            var seen = 0
            let deadline = Date().addingTimeInterval(120)
            while seen < target && Date() < deadline {
                seen = (try? daemon.status())?["stepsSinceStart"] as? Int ?? seen
            }
            #expect(seen >= target, "the walk never got to \(target) steps: \(daemon.log)")
            daemon.kill(signal)
            #expect(daemon.process.terminationStatus == 0, "\(daemon.log)")
            let onDisk = try stepsOnDisk(folder)
            #expect(onDisk >= seen, "signal \(signal) at \(seen) steps: \(onDisk) on disk")
            #expect(try leftovers(folder).isEmpty)
            let again = try restart(folder)
            #expect(again.history == onDisk)
            #expect(again.gate == onDisk, "the gate's count and the history agree")
        }
    }

    @Test(
        "SIGKILL at a random point loses at most the steps of the last 10 s, and the next start clears its leftovers"
    )
    func aKillLosesAtMostTheSaveInterval() throws {
        var random = SplitMix64(seed: 2604)
        let target = Int.random(in: 200...290, using: &random)
        let folder = try Fixtures.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let daemon = try TestDaemon(folder: folder, config: config(folder, replay: walk, speed: 5))
        // (when, steps counted by then), from status answers.
        var counts: [(at: Date, steps: Int)] = []
        let deadline = Date().addingTimeInterval(180)
        while (counts.last?.steps ?? 0) < target && Date() < deadline {
            if let steps = (try? daemon.status())?["stepsSinceStart"] as? Int {
                counts.append((Date(), steps))
            }
        }
        daemon.kill(SIGKILL)
        let killed = Date()
        let onDisk = try stepsOnDisk(folder)
        // The documented bound is the 10-s save interval; 3 s more for the loop's timer (a
        // quarter of a second) and a loaded machine.
        let bound = counts.last { killed.timeIntervalSince($0.at) > 10 + 3 }?.steps ?? 0
        #expect(bound > 0, "the walk ran long enough before the kill to test the bound")
        #expect(
            onDisk >= bound,
            "killed at \(counts.last?.steps ?? 0) steps: \(onDisk) on disk, \(bound) counted over 13 s before"
        )
        let again = try restart(folder)
        #expect(again.history == onDisk)
        #expect(try leftovers(folder).isEmpty)
        // The restart's input is a missing replay: said in the status, text and JSON.
        #expect(again.text.contains("input problem: missing file since "), "\(again.text)")
        #expect(again.text.contains("(not retried): "), "\(again.text)")
        #expect((again.json["inputProblem"] as? [String: Any])?["kind"] as? String == "missing-file")
    }
}
