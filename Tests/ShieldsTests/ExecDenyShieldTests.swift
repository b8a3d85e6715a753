import Foundation
import StepGateTestSupport
import Testing
import UnlockPolicy

@testable import Shields

/// Runs `path` through /bin/sh and returns the exit status (126 when exec is denied).
private func run(_ path: String) throws -> Int32 {
    try runProcess(URL(fileURLWithPath: "/bin/sh"), ["-c", "'\(path)'"]).status
}

/// The exec-deny shield for real: fanotify needs root. Only the copies made here are marked
/// (inode marks), so nothing else on the machine can be affected.
@Suite(.enabled(if: getuid() == 0, "fanotify needs root"), .serialized)
struct ExecDenyShieldTests {
    let folder: URL
    let program: String
    let other: String

    init() throws {
        folder = try Fixtures.temporaryFolder()
        program = folder.appendingPathComponent("game").path
        other = folder.appendingPathComponent("editor").path
        try FileManager.default.copyItem(atPath: "/bin/true", toPath: program)
        try FileManager.default.copyItem(atPath: "/bin/true", toPath: other)
    }

    @Test func deniesTheShieldedProgramOnlyWhileShielded() throws {
        let shield = try ExecDenyShield()
        let games = ShieldContext(store: "games")
        #expect(try run(program) == 0)
        try shield.apply([Target(kind: .executable, value: program)], context: games)
        #expect(try run(program) == 126)
        #expect(try run(other) == 0)
        #expect(try run("/bin/true") == 0)
        #expect(try shield.inForce() == ["games": [Target(kind: .executable, value: program)]])
        #expect(shield.answered.denied >= 1)
        try shield.remove([Target(kind: .executable, value: program)], context: games)
        #expect(try run(program) == 0)
        #expect(try shield.inForce().isEmpty)
    }

    @Test func aSymlinkOrANameOnPathResolvesToTheSameFile() throws {
        let link = folder.appendingPathComponent("game-link").path
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: program)
        let shield = try ExecDenyShield(searchPath: folder.path)
        try shield.apply([Target(kind: .executable, value: "game")], context: ShieldContext(store: "g"))
        #expect(try run(link) == 126)
        #expect(try run(program) == 126)
    }

    @Test func anUpgradedBinaryIsShieldedAgainOnRefresh() throws {
        let shield = try ExecDenyShield()
        try shield.apply([Target(kind: .executable, value: program)], context: ShieldContext(store: "g"))
        // A package upgrade replaces the file: a new inode at the same path.
        let staged = program + ".new"
        try FileManager.default.copyItem(atPath: "/bin/true", toPath: staged)
        #expect(rename(staged, program) == 0)
        #expect(try run(program) == 0)  // the new inode is not marked yet
        try shield.refresh()
        #expect(try run(program) == 126)
    }

    @Test func closingTheShieldAllowsEverything() throws {
        var shield: ExecDenyShield? = try ExecDenyShield()
        try shield?.apply([Target(kind: .executable, value: program)], context: ShieldContext(store: "g"))
        #expect(try run(program) == 126)
        shield = nil
        #expect(try run(program) == 0)
    }

    @Test func desktopCategoriesResolveThroughDesktopFiles() throws {
        let applications = folder.appendingPathComponent("applications")
        try FileManager.default.createDirectory(at: applications, withIntermediateDirectories: true)
        try """
        [Desktop Entry]
        Type=Application
        Name=Game
        Exec=env SDL_VIDEODRIVER=x11 \(program) --fullscreen %U
        Categories=Game;ArcadeGame;
        """.write(to: applications.appendingPathComponent("game.desktop"), atomically: true, encoding: .utf8)
        let shield = try ExecDenyShield(applicationDirectories: [applications.path])
        try shield.apply([Target(kind: .desktopCategory, value: "Game")], context: ShieldContext(store: "g"))
        #expect(try run(program) == 126)
        #expect(try run(other) == 0)
    }

    @Test func aMissingProgramIsReportedNotIgnored() throws {
        let shield = try ExecDenyShield()
        let error = #expect(throws: ShieldError.self) {
            try shield.apply(
                [Target(kind: .executable, value: "/nonexistent/game")], context: ShieldContext(store: "g"))
        }
        #expect(error?.message.contains("not found") == true)
        #expect(try shield.inForce().isEmpty)
    }
}

@Suite("Desktop entries")
struct DesktopEntryTests {
    @Test func readsCategoriesAndTheProgram() throws {
        let entry = try #require(
            DesktopEntry(
                "[Desktop Entry]\nExec=\"/opt/x/bin/game\" %f\nCategories=Game;Shooter;\n[Desktop Action new]\nExec=other\n"
            ))
        #expect(entry.categories == ["Game", "Shooter"])
        #expect(entry.program == "/opt/x/bin/game")
    }
}
