import Foundation
import StepGateTestSupport
import Testing
import UnlockPolicy

@testable import Shields

/// A stand-in `systemctl` on PATH: records each call, and keeps unit state in files.
private func fakeSystemctl(in folder: URL, active: [String]) throws -> (runner: CommandRunner, log: String) {
    let bin = folder.appendingPathComponent("bin")
    try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
    let state = folder.appendingPathComponent("units").path
    try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
    for unit in active {
        _ = FileManager.default.createFile(atPath: "\(state)/\(unit).active", contents: nil)
    }
    let log = folder.appendingPathComponent("calls").path
    let script = """
        #!/bin/sh
        echo "$*" >> \(log)
        S=\(state)
        case "$1" in
          is-active) shift; [ "$1" = --quiet ] && shift; [ -e "$S/$1.active" ] ;;
          stop) rm -f "$S/$2.active" ;;
          start) [ -e "$S/$2.masked" ] && { echo "Unit $2 is masked." >&2; exit 1; }; touch "$S/$2.active" ;;
          mask) touch "$S/$3.masked" ;;
          unmask) rm -f "$S/$3.masked" ;;
          is-enabled) if [ -e "$S/$2.masked" ]; then echo masked-runtime; exit 1; else echo enabled; fi ;;
          *) echo "unknown $1" >&2; exit 2 ;;
        esac
        """
    let path = bin.appendingPathComponent("systemctl").path
    try script.write(toFile: path, atomically: true, encoding: .utf8)
    chmod(path, 0o755)
    return (CommandRunner(searchPath: bin.path + ":/usr/bin:/bin"), log)
}

private func units(_ names: String...) -> [Target] { names.map { Target(kind: .systemdUnit, value: $0) } }

@Suite("systemd shield")
struct SystemdShieldTests {
    @Test func stopsAndMasksThenRestoresOnlyWhatWasRunning() throws {
        let folder = try Fixtures.temporaryFolder()
        let (runner, log) = try fakeSystemctl(in: folder, active: ["minecraft.service"])
        let memory = folder.appendingPathComponent("systemd.json").path
        let shield = try SystemdShield(memoryPath: memory, runner: runner)
        try shield.apply(units("minecraft.service", "idle.service"), context: ShieldContext(store: "games"))
        #expect(try shield.inForce() == ["games": Set(units("minecraft.service", "idle.service"))])
        let units = folder.appendingPathComponent("units").path
        #expect(!FileManager.default.fileExists(atPath: "\(units)/minecraft.service.active"))

        // A restarted StepGate remembers that minecraft was running.
        let again = try SystemdShield(memoryPath: memory, runner: runner)
        try again.remove(Array(Self.targets), context: ShieldContext(store: "games"))
        #expect(FileManager.default.fileExists(atPath: "\(units)/minecraft.service.active"))
        #expect(!FileManager.default.fileExists(atPath: "\(units)/idle.service.active"))
        #expect(try again.inForce().isEmpty)
        let calls = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n")
        #expect(calls.contains("stop minecraft.service"))
        #expect(calls.contains("mask --runtime minecraft.service"))
        #expect(calls.contains("unmask --runtime idle.service"))
        #expect(calls.contains("start minecraft.service"))
        #expect(!calls.contains("start idle.service"))
    }

    static let targets = units("minecraft.service", "idle.service")

    @Test func aUnitHeldByTwoStoresStaysMaskedUntilBothRemoveIt() throws {
        let folder = try Fixtures.temporaryFolder()
        let (runner, _) = try fakeSystemctl(in: folder, active: ["x.service"])
        let shield = try SystemdShield(
            memoryPath: folder.appendingPathComponent("m.json").path, runner: runner)
        try shield.apply(units("x.service"), context: ShieldContext(store: "a"))
        try shield.apply(units("x.service"), context: ShieldContext(store: "b"))
        try shield.remove(units("x.service"), context: ShieldContext(store: "a"))
        #expect(try shield.inForce() == ["b": Set(units("x.service"))])
        try shield.remove(units("x.service"), context: ShieldContext(store: "b"))
        #expect(try shield.inForce().isEmpty)
    }

    @Test func failuresAndBadNamesAreShieldErrors() throws {
        let folder = try Fixtures.temporaryFolder()
        let shield = try SystemdShield(
            memoryPath: folder.appendingPathComponent("m.json").path, systemctl: "/bin/false")
        #expect(throws: ShieldError.self) {
            try shield.apply(units("x.service"), context: ShieldContext(store: "a"))
        }
        #expect(throws: ShieldError.self) {
            try shield.apply(units("--now"), context: ShieldContext(store: "a"))
        }
        let missing = try SystemdShield(
            memoryPath: folder.appendingPathComponent("n.json").path, systemctl: "no-such-systemctl")
        let error = #expect(throws: ShieldError.self) {
            try missing.apply(units("x.service"), context: ShieldContext(store: "a"))
        }
        #expect(error?.message.contains("not found") == true)
    }

    /// A full or read-only state folder must not open the shield: the unit is stopped and
    /// masked even though the memory cannot be saved, and the failure is still reported. The
    /// folder becomes a regular file after the shield has read it, so every write fails (even
    /// for root).
    @Test func anUnwritableMemoryFolderStillStopsAndMasks() throws {
        let folder = try Fixtures.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let (runner, log) = try fakeSystemctl(in: folder, active: ["minecraft.service"])
        let state = folder.appendingPathComponent("state")
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
        let shield = try SystemdShield(
            memoryPath: state.appendingPathComponent("m.json").path, runner: runner)
        try FileManager.default.removeItem(at: state)
        #expect(FileManager.default.createFile(atPath: state.path, contents: Data("not a folder".utf8)))

        let error = #expect(throws: ShieldError.self) {
            try shield.apply(units("minecraft.service"), context: ShieldContext(store: "games"))
        }
        #expect(
            error?.message.contains("cannot save the unit memory") == true, "\(String(describing: error))")
        #expect(error?.message.contains("stopped and masked anyway") == true)
        let unitFiles = folder.appendingPathComponent("units").path
        #expect(!FileManager.default.fileExists(atPath: "\(unitFiles)/minecraft.service.active"))
        #expect(FileManager.default.fileExists(atPath: "\(unitFiles)/minecraft.service.masked"))
        #expect(try shield.inForce() == ["games": Set(units("minecraft.service"))])
        let calls = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n")
        #expect(calls.contains("stop minecraft.service"))
        #expect(calls.contains("mask --runtime minecraft.service"))

        // Still in this process, the memory is right: removal starts the unit again.
        #expect(throws: ShieldError.self) {
            try shield.remove(units("minecraft.service"), context: ShieldContext(store: "games"))
        }
        #expect(FileManager.default.fileExists(atPath: "\(unitFiles)/minecraft.service.active"))
        #expect(!FileManager.default.fileExists(atPath: "\(unitFiles)/minecraft.service.masked"))
    }

    /// A StepGate that restarted after a failed save does not know the unit, but removing it
    /// still unmasks it: no unit stays masked for good without a trace.
    @Test func aForgottenUnitIsStillUnmaskedOnRemoval() throws {
        let folder = try Fixtures.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let (runner, _) = try fakeSystemctl(in: folder, active: ["x.service"])
        let state = folder.appendingPathComponent("state")
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
        let memory = state.appendingPathComponent("m.json").path
        let shield = try SystemdShield(memoryPath: memory, runner: runner)
        try FileManager.default.removeItem(at: state)
        _ = FileManager.default.createFile(atPath: state.path, contents: nil)
        #expect(throws: ShieldError.self) {
            try shield.apply(units("x.service"), context: ShieldContext(store: "games"))
        }
        try FileManager.default.removeItem(at: state)
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
        let restarted = try SystemdShield(memoryPath: memory, runner: runner)
        try restarted.remove(units("x.service"), context: ShieldContext(store: "games"))
        let unitFiles = folder.appendingPathComponent("units").path
        #expect(!FileManager.default.fileExists(atPath: "\(unitFiles)/x.service.masked"))
    }

    /// A removal whose save failed leaves a stale entry ("was running") in the file. After a
    /// restart the unit is not masked, so the next apply asks systemd again: a unit stopped by
    /// hand in between is not started when the shield lifts.
    @Test func aStaleMemoryNeverStartsAUnitThatWasNotRunning() throws {
        let folder = try Fixtures.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let (runner, log) = try fakeSystemctl(in: folder, active: ["x.service"])
        let state = folder.appendingPathComponent("state")
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
        let memory = state.appendingPathComponent("m.json").path
        let shield = try SystemdShield(memoryPath: memory, runner: runner)
        try shield.apply(units("x.service"), context: ShieldContext(store: "games"))
        let saved = try Data(contentsOf: URL(fileURLWithPath: memory))
        try shield.remove(units("x.service"), context: ShieldContext(store: "games"))
        // As if that save had failed: the file still says the unit is held and was running.
        try saved.write(to: URL(fileURLWithPath: memory))
        let unitFiles = folder.appendingPathComponent("units").path
        try FileManager.default.removeItem(atPath: "\(unitFiles)/x.service.active")  // stopped by hand

        let restarted = try SystemdShield(memoryPath: memory, runner: runner)
        #expect(try restarted.inForce().isEmpty)
        try restarted.apply(units("x.service"), context: ShieldContext(store: "games"))
        try restarted.remove(units("x.service"), context: ShieldContext(store: "games"))
        #expect(!FileManager.default.fileExists(atPath: "\(unitFiles)/x.service.active"))
        let calls = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n")
        #expect(calls.filter { $0 == "start x.service" }.count == 1)
    }

    @Test func aCorruptMemoryFileIsAnError() throws {
        let folder = try Fixtures.temporaryFolder()
        let memory = folder.appendingPathComponent("m.json").path
        try "{not json".write(toFile: memory, atomically: true, encoding: .utf8)
        #expect(throws: ShieldError.self) { _ = try SystemdShield(memoryPath: memory) }
    }
}
