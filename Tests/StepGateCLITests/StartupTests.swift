import Foundation
import StepGateTestSupport
import Testing

/// What `stepgate` loads at start: libiio (and the libraries it pulls in: libxml2, ICU,
/// libsystemd…) only when a command opens an IIO context, never for a replay.
@Suite("stepgate start-up")
struct StartupTests {
    /// The shared objects the dynamic loader maps for `stepgate ARGUMENTS`, from `LD_DEBUG=libs`.
    private func loadedLibraries(_ arguments: [String]) throws -> (status: Int32, log: String) {
        let result = try runProcess(
            URL(fileURLWithPath: "/usr/bin/env"),
            ["LD_DEBUG=libs", Fixtures.stepgateExecutable.path] + arguments)
        return (result.status, result.standardError)
    }

    @Test func replayDoesNotLoadLibIIO() throws {
        let sample = Fixtures.samples.appendingPathComponent("walk-wrist-100.csv").path
        let (status, log) = try loadedLibraries(["replay", sample])
        #expect(status == 0)
        #expect(log.contains("libc.so"), "LD_DEBUG=libs printed no libraries: \(log.prefix(200))")
        #expect(!log.contains("libiio"), "replay loaded libiio")
    }

    @Test func devicesLoadsLibIIOWhenItOpensAContext() throws {
        // With or without IIO devices here, 'devices' opens a context, so libiio is opened.
        let (_, log) = try loadedLibraries(["devices"])
        #expect(log.contains("libiio.so.0"))
    }
}
