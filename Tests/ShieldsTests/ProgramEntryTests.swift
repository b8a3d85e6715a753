import Foundation
import StepGateTestSupport
import Testing

@testable import Shields

/// Selection entries as written (a program, a folder `DIR/`, a pattern), resolved against real
/// files in a folder of the test's own: no root needed.
@Suite("Program entries: folders and patterns")
struct ProgramEntryTests {
    let folder: String

    init() throws {
        folder = try Fixtures.temporaryFolder().path
        for name in ["games/tux", "games/kart", "opt/a/bin/game1", "opt/b/bin/game2", "opt/b/bin/tool"] {
            let path = folder + "/" + name
            try FileManager.default.createDirectory(
                atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try FileManager.default.copyItem(atPath: "/bin/true", toPath: path)
        }
        try "not a program".write(toFile: folder + "/games/README", atomically: true, encoding: .utf8)
        try FileManager.default.createDirectory(
            atPath: folder + "/games/data", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(
            atPath: folder + "/games/linked", withDestinationPath: "/bin/true")
        try FileManager.default.createDirectory(atPath: folder + "/empty", withIntermediateDirectories: true)
    }

    @Test func entriesAreReadAsWritten() {
        #expect(ProgramEntry("/usr/games/") == .folder("/usr/games"))
        #expect(ProgramEntry("/usr/games//") == .folder("/usr/games"))
        #expect(ProgramEntry("/usr/games") == .program("/usr/games"))
        #expect(ProgramEntry("supertuxkart") == .program("supertuxkart"))
        #expect(ProgramEntry("/opt/*/bin/game*") == .pattern("/opt/*/bin/game*"))
        #expect(ProgramEntry("/opt/game[12]") == .pattern("/opt/game[12]"))
        // A name on the search path is never a pattern: only absolute entries are.
        #expect(ProgramEntry("game*") == .program("game*"))
    }

    @Test func aFolderIsEveryProgramDirectlyInIt() {
        let (programs, folders, problem) = ProgramEntry(folder + "/games/").expand()
        #expect(programs == ["kart", "linked", "tux"].map { folder + "/games/" + $0 })
        #expect(folders == [folder + "/games"])
        #expect(problem == nil)
        // An empty folder is no problem: it is guarded for what is installed later.
        let empty = ProgramEntry(folder + "/empty/").expand()
        #expect(empty.programs.isEmpty && empty.folders == [folder + "/empty"] && empty.problem == nil)
        #expect(ProgramEntry(folder + "/missing/").expand().problem == folder + "/missing/: not found")
        #expect(ProgramEntry(folder + "/games/tux/").expand().problem == folder + "/games/tux/: not a folder")
    }

    @Test func aPatternIsWhatItMatchesAndItsFoldersAreGuarded() {
        let (programs, folders, problem) = ProgramEntry(folder + "/opt/*/bin/game*").expand()
        #expect(programs == [folder + "/opt/a/bin/game1", folder + "/opt/b/bin/game2"])
        #expect(folders == [folder + "/opt/a/bin", folder + "/opt/b/bin"])
        #expect(problem == nil)
        let none = ProgramEntry(folder + "/opt/*/bin/nothing*").expand()
        #expect(none.programs.isEmpty)
        #expect(none.problem == folder + "/opt/*/bin/nothing*: matches no program")
    }

    /// What `daemon --check` reports for each kind of mistake the shield would fail on.
    @Test func checkNamesWhatWouldFailAtRunTime() {
        #expect(ProgramEntry.check(folder + "/games/tux").problem == nil)
        #expect(
            ProgramEntry.check(folder + "/games").problem
                == "\(folder)/games: a folder; write \"\(folder)/games/\" to shield every program in it")
        #expect(
            ProgramEntry.check(folder + "/games/README").problem
                == "\(folder)/games/README: not a program (a regular file with an execute permission)")
        #expect(ProgramEntry.check(folder + "/games/nope").problem == "\(folder)/games/nope: not found")
        #expect(ProgramEntry.check("tux", searchPath: folder + "/games").problem == nil)
        #expect(
            ProgramEntry.check("nope", searchPath: folder + "/games").problem
                == "nope: no program of that name on \(folder)/games")
        #expect(ProgramEntry.check(folder + "/games/").matches.count == 3)
        #expect(
            ProgramEntry.check(folder + "/*/nothing").problem == "\(folder)/*/nothing: matches no program")
    }
}
