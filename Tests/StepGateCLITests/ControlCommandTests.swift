import Testing

@testable import StepGateCLI
@testable import StepGateDaemon

/// The control socket's decoder: what a local user can send, and what reaches the daemon.
/// (`Fuzz/run-control.sh` runs the same decoder, and the engine behind it, under libFuzzer.)
@Suite("control requests")
struct ControlCommandTests {
    private func decode(_ line: String) -> Result<ControlCommand, ControlSocketError> {
        ControlCommand.decode(Array(line.utf8))
    }

    @Test(arguments: [
        (#"{"command":"status"}"#, ControlCommand.status),
        (#"{"command":"ping"}"#, .ping),
        (#"{"command":"reload"}"#, .reload),
        (#"{"command":"history"}"#, .history(days: 14)),
        (#"{"command":"history","days":400}"#, .history(days: 400)),
        (#"{"command":"history","days":1}"#, .history(days: 1)),
        (#"{"command":"lock","store":"games","minutes":120}"#, .lock(store: "games", minutes: 120)),
        // A 1 is a number: a reader that takes it for `true` refused a one-minute lock.
        (#"{"command":"lock","store":"games","minutes":1}"#, .lock(store: "games", minutes: 1)),
        (#"{"command":"lock","store":"games","minutes":"0.5"}"#, .lock(store: "games", minutes: 0.5)),
        (#"{"command":"skip","schedule":"night"}"#, .skip(schedule: "night", occurrence: nil)),
        (
            #"{"command":"skip","schedule":"night","occurrence":"2026-11-30"}"#,
            .skip(schedule: "night", occurrence: "2026-11-30")
        ),
        (#"{"command":"emergency","store":"games"}"#, .emergency(store: "games")),
        (
            #"{"command":"check","executable":"/usr/games/x"}"#,
            .check(executable: "/usr/games/x", resolved: nil)
        ),
    ])
    func decodesEveryCommand(line: String, expected: ControlCommand) throws {
        #expect(try decode(line).get() == expected)
    }

    /// The client sends what the server reads: every command survives the trip.
    @Test(arguments: [
        ControlCommand.status, .ping, .reload, .lock(store: "games", minutes: 1),
        .lock(store: "g", minutes: 0.5),
        .skip(schedule: "night", occurrence: nil), .skip(schedule: "night", occurrence: "2026-11-30"),
        .emergency(store: "games \"quoted\" \u{1B}"), .check(executable: "/usr/games/x", resolved: "/opt/x"),
        .check(executable: "x", resolved: nil),
    ])
    func theClientsRequestLineDecodesToTheSameCommand(command: ControlCommand) throws {
        #expect(try decode(command.requestLine).get() == command)
    }

    @Test(arguments: [
        (#"{"command":"lock","store":"games","minutes":1e300}"#, "at most 527040"),
        (#"{"command":"lock","store":"games","minutes":-5}"#, "greater than 0"),
        (#"{"command":"lock","store":"games","minutes":0}"#, "greater than 0"),
        (#"{"command":"lock","store":"games","minutes":"nan"}"#, #"found "nan""#),
        (#"{"command":"lock","store":"games","minutes":true}"#, "must be a number"),
        (#"{"command":"lock","store":"games"}"#, "found nothing"),
        (#"{"command":"lock","minutes":5}"#, #"lock needs "store""#),
        (#"{"command":"lock","store":["games"],"minutes":5}"#, "non-empty string"),
        (#"{"command":"skip"}"#, #"skip needs "schedule""#),
        (#"{"command":"emergency","store":""}"#, "non-empty string"),
        (#"{"command":"history","days":401}"#, "from 1 to 400"),
        (#"{"command":"history","days":0}"#, "from 1 to 400"),
        (#"{"command":"history","days":2.5}"#, "whole number"),
        (#"{"command":"history","days":true}"#, "whole number"),
        (#"{"command":"format-disk"}"#, "unknown command 'format-disk'"),
        (#"{"command":7}"#, #"a "command""#),
        ("[]", #"a "command""#),
        ("{broken", "one JSON request line"),
        ("\u{0}\u{1}", "one JSON request line"),
    ])
    func refusesWithAClearError(line: String, message: String) {
        guard case .failure(let error) = decode(line) else {
            Issue.record("accepted: \(line)")
            return
        }
        #expect(error.message.contains(message), "\(line): \(error.message)")
    }

    @Test func longTextsAreRefused() {
        let long = String(repeating: "x", count: ControlCommand.maximumText + 1)
        guard case .failure = decode(#"{"command":"emergency","store":"\#(long)"}"#) else {
            Issue.record("a store name of \(long.count) bytes was accepted")
            return
        }
    }

    @Test func onlyPolicyChangesNeedAnAdmin() {
        #expect(!ControlCommand.status.changesPolicy)
        #expect(!ControlCommand.check(executable: "x", resolved: nil).changesPolicy)
        #expect(ControlCommand.lock(store: "g", minutes: 1).changesPolicy)
        #expect(ControlCommand.reload.changesPolicy)
    }
}
