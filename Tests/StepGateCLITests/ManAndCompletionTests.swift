import Foundation
import StepGateTestSupport
import Testing

/// The shipped manual page and completions are the generated ones, and they work.
@Suite("Manual page and shell completions")
struct ManAndCompletionTests {
    static let shipped: [(path: String, arguments: [String])] = [
        ("docs/man/stepgate.1", ["help", "--man"]),
        ("docs/commands.md", ["help", "--markdown"]),
        ("completions/stepgate.bash", ["completions", "bash"]),
        ("completions/_stepgate", ["completions", "zsh"]),
        ("completions/stepgate.fish", ["completions", "fish"]),
    ]

    static func tool(_ name: String) -> String? {
        ["/usr/bin/", "/bin/", "/usr/local/bin/"].map { $0 + name }.first {
            FileManager.default.isExecutableFile(atPath: $0)
        }
    }

    @Test(arguments: shipped.map(\.path))
    func theShippedCopyIsTheGeneratedOne(path: String) throws {
        let arguments = try #require(Self.shipped.first { $0.path == path }?.arguments)
        let generated = try runProcess(Fixtures.stepgateExecutable, arguments)
        #expect(generated.status == 0)
        let shipped = try String(
            contentsOf: Fixtures.packageRoot.appendingPathComponent(path), encoding: .utf8)
        #expect(
            shipped == generated.standardOutput,
            "\(path) is out of date: run 'bash scripts/man-and-completions.sh' and commit the result")
    }

    @Test func everySubcommandAndOptionIsInTheManualAndTheCompletions() throws {
        let help = try runProcess(Fixtures.stepgateExecutable, ["--help"]).standardOutput
        let names = help.split(separator: "\n").drop { $0 != "SUBCOMMANDS:" }.dropFirst()
            .compactMap { $0.hasPrefix("  ") && !$0.hasPrefix("   ") ? $0.split(separator: " ").first : nil }
            .map(String.init).filter { $0 != "See" }
        #expect(names.count >= 18 && names.contains("completions"))
        let man = try runProcess(Fixtures.stepgateExecutable, ["help", "--man"]).standardOutput
        let bash = try runProcess(Fixtures.stepgateExecutable, ["completions", "bash"]).standardOutput
        for name in names {
            #expect(man.contains(".SS \(name.replacingOccurrences(of: "-", with: "\\-"))\n"), "\(name)")
            #expect(bash.contains("        \(name))\n"), "\(name)")
            let options = try runProcess(Fixtures.stepgateExecutable, [name, "--help"]).standardOutput
                .split(separator: "\n").filter { $0.hasPrefix("  --") || $0.hasPrefix("  -") }
                .compactMap { $0.split(separator: " ").first { $0.hasPrefix("--") } }
                .map { String($0.prefix { $0 != "," }) }
            for option in options where option != "--help" && option.count > 2 {
                #expect(
                    man.contains("\\fB\(option.replacingOccurrences(of: "-", with: "\\-"))\\fR"),
                    "\(name) \(option)")
            }
        }
    }

    /// Sources the bash completion in bash and asks it to complete, as bash does on TAB.
    @Test(.enabled(if: tool("bash") != nil, "bash is not installed"))
    func theBashCompletionLoadsAndCompletes() throws {
        let folder = try TemporaryFolders.make("completion")
        defer { TemporaryFolders.remove(folder) }
        try Data("{}".utf8).write(to: folder.appendingPathComponent("walk.json"))
        let script = Fixtures.packageRoot.appendingPathComponent("completions/stepgate.bash").path
        func complete(_ words: [String]) throws -> [String] {
            let quoted = words.map { "'\($0)'" }.joined(separator: " ")
            let program = """
                source '\(script)' || exit 3
                complete -p stepgate > /dev/null || exit 4
                COMP_WORDS=(\(quoted)); COMP_CWORD=\(words.count - 1)
                _stepgate
                printf '%s\\n' "${COMPREPLY[@]}"
                """
            let result = try runProcess(
                URL(fileURLWithPath: try #require(Self.tool("bash"))),
                ["--norc", "--noprofile", "-c", program],
                directory: folder)
            #expect(result.status == 0, "\(result.standardError)")
            #expect(result.standardError.isEmpty, "\(result.standardError)")
            return result.standardOutput.split(separator: "\n").map(String.init).sorted()
        }
        #expect(try complete(["stepgate", "re"]) == ["record", "reload", "replay"])
        #expect(try complete(["stepgate", "compl"]) == ["completions"])
        #expect(try complete(["stepgate", "replay", "--con"]) == ["--config"])
        #expect(try complete(["stepgate", "replay", "--co"]) == ["--columns", "--config"])
        #expect(
            try complete(["stepgate", "tune", "--no-"]) == [
                "--no-placement-cv", "--no-robust", "--no-set-cv",
            ])
        #expect(try complete(["stepgate", "plot", "-"]).contains("-o"))
        #expect(try complete(["stepgate", "completions", ""]) == ["bash", "fish", "zsh"])
        #expect(try complete(["stepgate", "help", "--m"]) == ["--man"])
        // After an option that takes a value, files are offered, not options.
        #expect(try complete(["stepgate", "replay", "--config", "wa"]) == ["walk.json"])
        #expect(try complete(["stepgate", "replay", "--config", "--j"]) == [])
    }

    /// `man -l` renders the page with groff's warnings on, and there are none.
    @Test(.enabled(if: tool("man") != nil && tool("groff") != nil, "man or groff is not installed"))
    func theManualPageRendersWithoutWarnings() throws {
        let page = Fixtures.packageRoot.appendingPathComponent("docs/man/stepgate.1").path
        let result = try runProcess(
            URL(fileURLWithPath: "/usr/bin/env"),
            [
                "MANWIDTH=100", "MAN_KEEP_FORMATTING=0", try #require(Self.tool("man")), "--warnings", "-l",
                page,
            ])
        #expect(result.status == 0)
        #expect(result.standardError.isEmpty, "\(result.standardError)")
        #expect(result.standardOutput.contains("STEPGATE(1)"))
        #expect(result.standardOutput.contains("completions"))
    }

    /// The zsh and fish scripts at least parse, where those shells are installed.
    @Test(.enabled(if: tool("zsh") != nil, "zsh is not installed"))
    func theZshScriptParses() throws {
        try parse("completions/_stepgate", with: "zsh")
    }

    @Test(.enabled(if: tool("fish") != nil, "fish is not installed"))
    func theFishScriptParses() throws {
        try parse("completions/stepgate.fish", with: "fish")
    }

    private func parse(_ path: String, with shell: String) throws {
        let executable = try #require(Self.tool(shell))
        let script = Fixtures.packageRoot.appendingPathComponent(path).path
        let result = try runProcess(URL(fileURLWithPath: executable), ["-n", script])
        #expect(result.status == 0, "\(result.standardError)")
    }

    @Test func anUnknownShellIsAUsageError() throws {
        let result = try runProcess(Fixtures.stepgateExecutable, ["completions", "tcsh"])
        #expect(result.status == 64)
        #expect(result.standardError.contains("expected bash, zsh or fish"))
    }
}
