import Foundation
import Testing
import TypedJSON

@testable import UnlockPolicy

/// One scenario file under `Scenarios/`: a script whose `expect` lines check the policy, and
/// whose first line names its configuration (`# config: NAME.json`).
struct Scenario: Sendable, CustomTestStringConvertible {
    var name: String
    var url: URL
    var testDescription: String { name }

    static var all: [Scenario] {
        guard let directory = Bundle.module.url(forResource: "Scenarios", withExtension: nil),
            let files = try? FileManager.default.contentsOfDirectory(
                at: directory, includingPropertiesForKeys: nil)
        else { return [] }
        return files.filter { $0.pathExtension == "jsonl" }.sorted {
            $0.lastPathComponent < $1.lastPathComponent
        }
        .map { Scenario(name: $0.deletingPathExtension().lastPathComponent, url: $0) }
    }
}

@Suite("Scenario files")
struct ScenarioTests {
    @Test func everyPitfallHasAScenario() {
        #expect(Scenario.all.count >= 15)
    }

    @Test(arguments: Scenario.all)
    func scenarioHolds(_ scenario: Scenario) throws {
        let script = try String(contentsOf: scenario.url, encoding: .utf8)
        let header = try #require(script.split(separator: "\n").first { $0.hasPrefix("# config: ") })
        let configURL = scenario.url.deletingLastPathComponent().appendingPathComponent("configs")
            .appendingPathComponent(String(header.dropFirst("# config: ".count)))
        let configuration = try PolicyConfiguration.load(contentsOf: configURL)
        var runner = ScenarioRunner(configuration: configuration)
        let output = try runner.run(script: script)
        #expect(output.contains { $0.contains(#""expect":"ok""#) })
        // Every output line is one JSON object.
        for line in output { _ = try JSONObjectReader(try JSONValue.parse(line), path: "") }
        // Running it again gives the same output: the runner is deterministic.
        var again = ScenarioRunner(configuration: configuration)
        #expect(try again.run(script: script) == output)
    }

    @Test func scriptErrorsNameTheLine() {
        var runner = ScenarioRunner(configuration: gateConfig())
        #expect(throws: ScenarioError(line: 1, message: "at: the first line needs an \"at\" time")) {
            try runner.run(line: #"{"steps": 3}"#, lineNumber: 1)
        }
        _ = try? runner.run(line: #"{"at": "2025-03-01T09:00:00Z", "tick": true}"#, lineNumber: 1)
        /// The error a line gives, checked by line number and message, not only by its type.
        func failure(_ line: String, _ number: Int) -> ScenarioError? {
            do {
                _ = try runner.run(line: line, lineNumber: number)
                return nil
            } catch {
                return error
            }
        }
        let unknown = failure(#"{"after": 1, "stpes": 3}"#, 2)
        #expect(unknown?.line == 2)
        #expect(unknown?.message.hasPrefix(#"stpes: unknown key; expected one of "at", "after""#) == true)
        let backwards = failure(#"{"at": "2025-03-01T08:00:00Z", "tick": true}"#, 3)
        #expect(
            backwards
                == ScenarioError(
                    line: 3,
                    message:
                        #"at: time goes back from 2025-03-01T09:00:00Z; use "setClock" to move the wall clock"#
                ))
        let expectation = failure(#"{"after": 1, "expect": {"open": ["games"]}}"#, 4)
        #expect(expectation?.line == 4)
        #expect(expectation?.message.hasPrefix("expect.open: games is shielded; status: {") == true)
    }

    @Test func outOfRangeIntegersNameTheRange() {
        var runner = ScenarioRunner(configuration: gateConfig())
        #expect(
            throws: ScenarioError(
                line: 1,
                message: "steps: expected an integer from 0 to 8999999999999999, found 9000000000000000")
        ) {
            try runner.run(line: #"{"at": "2025-03-01T09:00:00Z", "steps": 9000000000000000}"#, lineNumber: 1)
        }
    }

    /// An engine that keeps asking to be woken makes the simulator stop with an error, not
    /// silently after 100 000 wake-ups.
    @Test func tooManyWakeUpsIsAnError() throws {
        let config = scheduleConfig(start: "22:00", end: "07:00")
        var sim = PolicySimulator(
            configuration: config, stateStore: InMemoryPolicyStateStore(),
            start: Date(timeIntervalSince1970: 1_740_819_600))
        sim.wakeUpLimit = 5
        _ = sim.send(.tick)
        // Ten days of a nightly schedule: twenty boundaries, each a wake-up.
        let end = Date(timeIntervalSince1970: 1_740_819_600 + 10 * 86_400)
        let error = #expect(throws: PolicySimulationError.self) { try sim.advance(until: end) }
        #expect(error?.message.contains("wake-up") == true, "\(error?.message ?? "")")
        #expect(error?.records.isEmpty == false)
        var again = PolicySimulator(
            configuration: config, stateStore: InMemoryPolicyStateStore(),
            start: Date(timeIntervalSince1970: 1_740_819_600))
        again.wakeUpLimit = 5
        _ = again.send(.tick)
        _ = again.advance(to: end)
        #expect(again.stalled != nil)
        #expect(again.now < end)
    }

    @Test func replayFeedsStepEventsOnTheRecordingsClock() throws {
        var replay = PolicyReplay(
            configuration: gateConfig(), start: Date(timeIntervalSince1970: 1_740_819_600),
            zone: "Europe/Berlin")
        var records = replay.begin()
        for i in 0..<120 {
            records += replay.steps(1, at: .milliseconds(500 * i))
        }
        records += replay.finish(at: .seconds(3600))
        let lines = records.map(\.jsonLine)
        #expect(lines.contains { $0.contains(#""effect":"remove""#) && $0.contains("09:00:49.500Z") })
        #expect(lines.contains { $0.contains(#""effect":"apply""#) && $0.contains("09:30:49.500Z") })
        #expect(replay.status.stores[0].shielded)
    }
}
