import CoreCommands
import Testing

@testable import StepGateCLI

/// What `stepgate` runs before the concurrency runtime starts (see `StepGate.runSynchronously`).
@Suite("Start-up path")
struct StartupPathTests {
    @Test func everySynchronousCommandRunsOnTheStartUpPathAndNoOther() {
        var listed: [String] = []
        for (name, type) in StepGate.commands {
            #expect(name == type.configuration.commandName)
            if type is any SynchronousCommand.Type { listed.append(name) }
        }
        // What the start-up path finds through the witness, without a cast.
        var fast: [String] = []
        for (name, type) in StepGate.commands {
            guard let synchronous = type.synchronous else { continue }
            #expect(name == synchronous.configuration.commandName)
            fast.append(name)
        }
        #expect(fast == listed)
        #expect(!fast.isEmpty)
    }

    @Test func optionsParseWithoutHashTables() throws {
        let options: [OptionSpec] = [
            .option("config", "file", help: "c"), .option("tag", "t", help: "t", repeatable: true),
            .flag("json", help: "j"),
        ]
        let parsed = try ParsedArguments(
            ["a", "--tag", "x", "--json", "--tag=y", "--config", "c.json", "--", "--json"], options: options)
        #expect(parsed.positionals == ["a", "--json"])
        #expect(parsed.values("tag") == ["x", "y"])
        #expect(parsed.value("config") == "c.json")
        #expect(parsed.flag("json"))
        #expect(!parsed.flag("other"))
        #expect(throws: UsageError.self) {
            try ParsedArguments(["--config", "a", "--config", "b"], options: options)
        }
        #expect(throws: UsageError.self) { try ParsedArguments(["--json=1"], options: options) }
        #expect(throws: UsageError.self) { try ParsedArguments(["--nope"], options: options) }
    }
}
