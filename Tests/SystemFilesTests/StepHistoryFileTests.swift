import Foundation
import StepGateTestSupport
import StepHistoryStore
import Testing
import UnlockPolicy

@testable import SystemFiles

@Suite("Step history file")
struct StepHistoryFileTests {
    @Test func aCorruptFileIsMovedAsideNeverSilentlyReset() throws {
        let folder = try TemporaryFolders.make("history").path
        defer { TemporaryFolders.remove(URL(fileURLWithPath: folder)) }
        let path = folder + "/steps.json"
        try "{\"version\":2,\"days\":{\"2026-11-29\":[1,2,3".write(
            toFile: path, atomically: false, encoding: .utf8)
        var warnings: [String] = []
        let (file, history) = StepHistoryFile.load(path: path, clock: .utc) { warnings.append($0) }
        #expect(history.days.isEmpty)
        #expect(warnings.count == 1)
        #expect(warnings.first?.contains("moved aside to \(path).corrupt-") == true, "\(warnings)")
        let aside = try FileManager.default.contentsOfDirectory(atPath: folder).filter {
            $0.hasPrefix("steps.json.corrupt-")
        }
        #expect(aside.count == 1)
        #expect(
            try String(contentsOfFile: folder + "/" + aside[0], encoding: .utf8).hasPrefix("{\"version\":2"))
        // The new history is written where the old one was.
        var fresh = history
        fresh.add(5, at: Date(), clock: .utc)
        try file.save(fresh)
        let (_, again) = StepHistoryFile.load(path: path, clock: .utc) { Issue.record("unexpected: \($0)") }
        #expect(again == fresh)
    }

    @Test func aVersion1LedgerIsMigratedIntoTheHourItWasWritten() throws {
        let folder = try TemporaryFolders.make("history").path
        defer { TemporaryFolders.remove(URL(fileURLWithPath: folder)) }
        let path = folder + "/steps.json"
        try #"{"version":1,"day":"2026-11-29","steps":4321}"#.write(
            toFile: path, atomically: false, encoding: .utf8)
        // Last written at 15:42 UTC that day.
        var times = [
            timespec(tv_sec: 1_764_430_920, tv_nsec: 0), timespec(tv_sec: 1_764_430_920, tv_nsec: 0),
        ]
        #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
        let (file, history) = StepHistoryFile.load(path: path, clock: .utc) {
            Issue.record("unexpected: \($0)")
        }
        let day = try #require(StepHistory.day(from: "2026-11-29"))
        #expect(history.hours(onDay: day)[15] == 4321)
        try file.save(history)
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(
            text.hasPrefix("{\"version\":2,\"days\":{\n\"2026-11-29\":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,4321,"))
    }

    @Test func aSymbolicLinkIsMovedAsideNotFollowed() throws {
        let folder = try TemporaryFolders.make("history").path
        defer { TemporaryFolders.remove(URL(fileURLWithPath: folder)) }
        let target = folder + "/elsewhere"
        try "keep me".write(toFile: target, atomically: false, encoding: .utf8)
        symlink(target, folder + "/steps.json")
        var warnings: [String] = []
        let (file, history) = StepHistoryFile.load(path: folder + "/steps.json", clock: .utc) {
            warnings.append($0)
        }
        #expect(history.days.isEmpty && warnings.count == 1)
        try file.save(history)
        #expect(try String(contentsOfFile: target, encoding: .utf8) == "keep me")
    }
}
