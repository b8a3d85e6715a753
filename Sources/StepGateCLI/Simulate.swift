import CoreCommands
import Formatting
import Foundation
import StepGateDaemon
import StepHistoryStore
import SystemFiles
import TypedJSON
import UnlockPolicy

/// `stepgate simulate`: runs a scripted scenario through the unlock policy.
struct Simulate: Command {
    static let configuration = CommandConfiguration(
        commandName: "simulate",
        abstract: "Run a scripted scenario through the unlock policy, deterministically.",
        discussion: """
            Each script line is one JSON object: a time ("at": ISO 8601, or "after": seconds) and \
            one action (steps, tick, lock, skip, emergency, setClock, zone, restart, reboot, shield, \
            failPersist, failWakeUps, reload, status, expect). Prints one JSON line per effect and \
            state change. A failed "expect" stops the run with status 1. State lives in memory; a \
            "restart" reloads it from its JSON form. The format, with an example for every \
            behaviour, is in docs/policy.md.
            """,
        arguments: [
            ArgumentHelp("<script>", help: "Scenario script (JSON lines), or '-' for standard input.")
        ],
        options: [
            .option(
                "config", "file",
                help: "Policy configuration (JSON): the policy object or a StepGate config.",
                required: true)
        ]
    )

    var script: String
    var configPath: String

    init(arguments: ParsedArguments) throws(UsageError) {
        guard let configPath = arguments.value("config") else {
            throw UsageError("missing '--config <file>'")
        }
        guard arguments.positionals.count == 1 else {
            throw UsageError(
                arguments.positionals.isEmpty
                    ? "missing expected argument '<script>'"
                    : "unexpected argument '\(arguments.positionals[1])'")
        }
        self.configPath = configPath
        script = arguments.positionals[0]
    }

    func run() async throws {
        let configuration = try loadPolicyConfiguration(path: configPath)
        let text: String
        if script == "-" {
            text = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
        } else {
            text = String(decoding: try readConfigurationFile(path: script), as: UTF8.self)
        }
        var runner = ScenarioRunner(configuration: configuration)
        let out = StandardOutput()
        defer { out.flush() }
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            do {
                for output in try runner.run(line: String(line), lineNumber: index + 1) { out.line(output) }
            } catch {
                out.flush()
                let name = script == "-" ? "<stdin>" : script
                throw ConfigurationFileError(path: "\(name):\(error.line)", message: error.message)
            }
        }
    }
}

/// Loads a policy configuration, with errors that name the file and the JSON path.
func loadPolicyConfiguration(path: String) throws -> PolicyConfiguration {
    let bytes = try readConfigurationFile(path: path)
    guard let text = String(validating: bytes, as: UTF8.self) else {
        throw ConfigurationFileError(path: path, message: "not valid JSON: the file is not UTF-8 text")
    }
    do {
        return try PolicyConfiguration.parse(text)
    } catch {
        // Located in the file: FILE:LINE:COLUMN (a syntax error where reading stopped).
        throw ConfigurationFileError(
            path: path, bytes: bytes, document: try? JSONDocument.parse(bytes: bytes), error: error)
    }
}
