import Foundation
import StepGateTestSupport
import Testing

/// `devices`, `record` and `run` without a device: usage errors and the no-IIO message.
@Suite("live commands: usage and missing IIO")
struct LiveCommandLineTests {
    @Test(arguments: [
        (["record"], "missing '-o <file>'"),
        (["record", "-o", "x.csv", "--rate", "0"], "invalid value '0' for '--rate'"),
        (["record", "-o", "x.csv", "--mode", "dma"], "invalid value 'dma' for '--mode'"),
        (["record", "-o", "x.csv", "--duration", "-1"], "invalid value '-1' for '--duration'"),
        (["run", "--goal", "many"], "invalid value 'many' for '--goal'"),
        (["run", "extra"], "unexpected argument 'extra'"),
        (["devices", "--uri", ""], "invalid value '' for '--uri'"),
        (["record", "-x"], "unknown option '-x'"),
    ])
    func usageErrorsExit64(arguments: [String], message: String) throws {
        let result = try runProcess(Fixtures.stepgateExecutable, arguments)
        #expect(result.status == 64)
        #expect(result.standardError.contains("Error: \(message)"), "\(result.standardError)")
        #expect(result.standardError.contains("Usage: stepgate"))
    }

    @Test func helpListsTheLiveCommands() throws {
        let help = try runProcess(Fixtures.stepgateExecutable, ["--help"])
        for name in ["devices", "record", "run"] { #expect(help.standardOutput.contains("  \(name) ")) }
        let record = try runProcess(Fixtures.stepgateExecutable, ["record", "--help"])
        #expect(record.standardOutput.contains("-o, --output <file>"))
    }

    @Test(.enabled(if: !FileManager.default.fileExists(atPath: "/sys/bus/iio"), "this machine has IIO"))
    func noIIOAtAllSaysSo() throws {
        for arguments in [["devices"], ["record", "-o", "/tmp/never.csv"], ["run"]] {
            let result = try runProcess(Fixtures.stepgateExecutable, arguments)
            #expect(result.status == 1)
            #expect(
                result.standardError.contains("no IIO devices on this machine"), "\(result.standardError)")
            #expect(!result.standardError.contains("Usage:"))
        }
    }

    @Test func unreachableIIODIsAClearError() throws {
        let result = try runProcess(Fixtures.stepgateExecutable, ["devices", "--uri", "ip:127.0.0.1:1"])
        #expect(result.status == 1)
        #expect(
            result.standardError.contains("ip:127.0.0.1:1: iio_create_context_from_uri"),
            "\(result.standardError)")
    }
}
