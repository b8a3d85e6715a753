import Foundation
import StepGateTestSupport
import Testing
import UnlockPolicy

@testable import StepGateDaemon

/// What `status` lists under a store: its selection, a folder of programs with what it holds now.
@Suite("What a store selects, for status")
struct SelectionDescriptionTests {
    @Test func aFolderSaysHowManyProgramsItHoldsNow() throws {
        let folder = try Fixtures.temporaryFolder().path
        for name in ["tux", "kart"] {
            try FileManager.default.copyItem(atPath: "/bin/true", toPath: folder + "/" + name)
        }
        let selection = Selection(
            executables: [folder + "/", "/usr/bin/steam"], desktopCategories: ["Game"],
            domains: ["example.com", "example.org"], hooks: ["journal"])
        #expect(
            Daemon.describe(selection) == [
                "programs \(folder)/ (2 programs now), /usr/bin/steam", "desktop categories Game",
                "domains example.com, example.org", "hooks journal",
            ])
        #expect(Daemon.describe(.empty).isEmpty)
    }
}
