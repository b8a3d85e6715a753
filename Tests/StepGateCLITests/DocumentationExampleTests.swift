import Foundation
import StepGateTestSupport
import Testing

/// One `$ stepgate …` example in a Markdown file: the command and the output shown under it.
struct DocumentationExample: Sendable, CustomTestStringConvertible {
    var file: String
    var line: Int
    var command: String
    var expected: [String]

    var testDescription: String { "\(file):\(line): $ \(command)" }
}

/// Finds the examples of the documentation and checks them against the built `stepgate`.
///
/// Inside a fenced block, a line `$ stepgate ARGS` is an example and the lines up to the next
/// `$ ` line or the end of the block are its output; a line holding only `…` stands for any
/// number of lines. A block right after `<!-- example: not checked (reason) -->` is skipped:
/// that is how an example whose output depends on the machine or the moment is marked.
enum DocumentationExamples {
    static let skipMarker = "<!-- example: not checked"

    /// README.md and every docs/*.md.
    static var files: [String] {
        let docs = Fixtures.packageRoot.appendingPathComponent("docs").path
        let names = (try? FileManager.default.contentsOfDirectory(atPath: docs)) ?? []
        return ["README.md"] + names.filter { $0.hasSuffix(".md") }.sorted().map { "docs/\($0)" }
    }

    static func examples(in text: String, file: String) -> [DocumentationExample] {
        var examples: [DocumentationExample] = []
        var inBlock = false
        var skipped = false
        var previous = ""
        var current: DocumentationExample?
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = String(line)
            if line.hasPrefix("```") {
                if inBlock, let example = current { examples.append(example) }
                current = nil
                if !inBlock { skipped = previous.hasPrefix(skipMarker) }
                inBlock.toggle()
                previous = line
                continue
            }
            if !line.trimmingCharacters(in: .whitespaces).isEmpty { previous = line }
            guard inBlock, !skipped else { continue }
            if line.hasPrefix("$ ") {
                if let example = current { examples.append(example) }
                current = nil
                if line.hasPrefix("$ stepgate ") || line == "$ stepgate" {
                    current = DocumentationExample(
                        file: file, line: index + 1, command: String(line.dropFirst(2)), expected: [])
                }
            } else {
                current?.expected.append(line)
            }
        }
        return examples
    }

    static var all: [DocumentationExample] {
        files.flatMap { file in
            let url = Fixtures.packageRoot.appendingPathComponent(file)
            let text = (try? String(contentsOf: url, encoding: .utf8)) ?? ""
            return examples(in: text, file: file)
        }
    }

    /// Splits a command line into words: spaces separate, single and double quotes group.
    /// `nil` for shell syntax an example cannot use (pipes, redirections, `&`, `;`, `$`).
    static func words(_ command: String) -> [String]? {
        var words: [String] = []
        var word = ""
        var inWord = false
        var quote: Character?
        for character in command {
            if let open = quote {
                if character == open { quote = nil } else { word.append(character) }
                continue
            }
            switch character {
            case "'", "\"":
                quote = character
                inWord = true
            case " ":
                if inWord { words.append(word) }
                word = ""
                inWord = false
            case "|", "&", ";", ">", "<", "$", "`", "*":
                return nil
            default:
                word.append(character)
                inWord = true
            }
        }
        guard quote == nil else { return nil }
        if inWord { words.append(word) }
        return words
    }

    /// Whether `actual` matches `expected`, where a line `…` in `expected` matches any lines.
    static func matches(_ actual: [String], _ expected: [String]) -> Bool {
        // memo[i][j]: actual[i...] against expected[j...].
        var memo = [[Bool?]](
            repeating: [Bool?](repeating: nil, count: expected.count + 1), count: actual.count + 1)
        func match(_ i: Int, _ j: Int) -> Bool {
            if let known = memo[i][j] { return known }
            let result: Bool
            if j == expected.count {
                result = i == actual.count
            } else if expected[j] == "…" {
                result = match(i, j + 1) || (i < actual.count && match(i + 1, j))
            } else {
                result = i < actual.count && actual[i] == expected[j] && match(i + 1, j + 1)
            }
            memo[i][j] = result
            return result
        }
        return match(0, 0)
    }

    /// Output as lines, without the final newline's empty line.
    static func lines(_ text: String) -> [String] {
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        while lines.last == "" { lines.removeLast() }
        return lines
    }
}

@Suite("Documentation examples")
struct DocumentationExampleTests {
    @Test func theDocumentationHasExamplesToCheck() {
        let examples = DocumentationExamples.all
        // The README's demo and trial replay, the command reference's --help, replay, eval,
        // simulate in docs; a parser that finds none must fail.
        #expect(examples.count >= 5, "found \(examples.map(\.testDescription))")
        #expect(examples.contains { $0.command.hasPrefix("stepgate --help") })
    }

    @Test(arguments: DocumentationExamples.all)
    func exampleOutputMatchesTheDocumentation(_ example: DocumentationExample) throws {
        let words = try #require(
            DocumentationExamples.words(example.command),
            "\(example.testDescription): shell syntax; mark the block '<!-- example: not checked (reason) -->'"
        )
        let result = try runProcess(
            Fixtures.stepgateExecutable, Array(words.dropFirst()), directory: Fixtures.packageRoot)
        #expect(
            result.status == 0, "\(example.testDescription): exit \(result.status): \(result.standardError)")
        let actual = DocumentationExamples.lines(result.standardOutput)
        #expect(
            DocumentationExamples.matches(actual, example.expected),
            """
            \(example.testDescription) drifted. The documentation shows:
            \(example.expected.joined(separator: "\n"))
            stepgate prints:
            \(actual.joined(separator: "\n"))
            """)
    }

    @Test func theMatcherFailsOnDriftAndHonoursEllipses() {
        let m = DocumentationExamples.matches
        #expect(m(["a", "b"], ["a", "b"]))
        #expect(!m(["a", "b"], ["a", "c"]))
        #expect(!m(["a", "b", "c"], ["a", "b"]))
        #expect(!m(["a"], ["a", "b"]))
        #expect(m(["a", "b", "c", "d"], ["a", "…", "d"]))
        #expect(m(["a", "d"], ["a", "…", "d"]))
        #expect(m(["a", "b", "c"], ["a", "…"]))
        #expect(!m(["a", "b", "c"], ["…", "b"]))
    }

    @Test func examplesAreFoundOnlyInCodeBlocksAndSkippedWhenMarked() {
        let text = """
            $ stepgate outside a block
            ```
            $ stepgate replay a.csv
            one
            two
            $ ls
            not an example
            ```
            <!-- example: not checked (needs a sensor) -->
            ```
            $ stepgate devices
            iio:device0
            ```
            ```
            $ stepgate --version
            0.1.0
            ```
            """
        let examples = DocumentationExamples.examples(in: text, file: "t.md")
        #expect(examples.map(\.command) == ["stepgate replay a.csv", "stepgate --version"])
        #expect(examples.first?.expected == ["one", "two"])
        #expect(examples.first?.line == 3)
        #expect(DocumentationExamples.words("stepgate a 'b c' \"d\"") == ["stepgate", "a", "b c", "d"])
        #expect(DocumentationExamples.words("stepgate daemon &") == nil)
    }

    /// A JSON block under `<!-- config: PATH -->` in the README or docs is that file, as it is
    /// (so a configuration shown is one the tests load).
    @Test func configurationsShownAreTheFilesThemselves() throws {
        var shown = 0
        for name in DocumentationExamples.files {
            let text = try String(
                contentsOf: Fixtures.packageRoot.appendingPathComponent(name), encoding: .utf8)
            let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            for (index, line) in lines.enumerated() where line.hasPrefix("<!-- config: ") {
                let path = String(line.dropFirst("<!-- config: ".count).dropLast(" -->".count))
                let body = lines[(index + 2)...].prefix { $0 != "```" }.joined(separator: "\n") + "\n"
                let file = try String(
                    contentsOf: Fixtures.packageRoot.appendingPathComponent(path), encoding: .utf8)
                #expect(body == file, "\(name):\(index + 1): the block is not \(path) as it is")
                shown += 1
            }
        }
        #expect(shown >= 1)
    }

    /// docs/detector.md's table of detector parameters shows the defaults `stepgate config` prints.
    @Test func theParameterTableShowsTheDefaults() throws {
        let readme = try String(
            contentsOf: Fixtures.packageRoot.appendingPathComponent("docs/detector.md"), encoding: .utf8)
        let printed = try runProcess(Fixtures.stepgateExecutable, ["config"])
        let defaults = try #require(
            try JSONSerialization.jsonObject(with: Data(printed.standardOutput.utf8)) as? [String: Any])
        var rows = 0
        for line in readme.split(separator: "\n") where line.hasPrefix("| `") {
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 2 else { continue }
            let key = cells[0].trimmingCharacters(in: CharacterSet(charactersIn: "`"))
            guard let value = defaults[key] else { continue }
            rows += 1
            if let flag = value as? Bool, cells[1] == "true" || cells[1] == "false" {
                #expect(String(flag) == cells[1], "docs/detector.md default of '\(key)'")
            } else {
                let number = (value as? NSNumber)?.doubleValue
                #expect(
                    number != nil && number == Double(cells[1]),
                    "docs/detector.md default of '\(key)': \(cells[1]) vs \(value)")
            }
        }
        #expect(
            rows == defaults.count, "docs/detector.md's table lists \(rows) of \(defaults.count) parameters")
    }
}
