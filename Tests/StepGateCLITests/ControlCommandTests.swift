import Foundation
import Testing
import TypedJSON

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

/// The answers: written by the server from the reply types, read back by the client into the
/// same types with the strict decoder.
@Suite("control replies")
struct ControlReplyTests {
    let status = StatusReply(
        ok: true, input: "replay walk.csv", samples: 1200, stepsSinceStart: 40, stepsToday: 340,
        lastDays: [.init(day: "2026-12-01", steps: 340)],
        stores: [
            .init(
                name: "games/\u{1b}[2J", shielded: true, owners: ["gate"], unlockedUntil: nil,
                emergencyUntil: nil, steps: 40, nextGoal: 100, stepsToGo: 60, unlocksToday: 0,
                dailyUnlockCap: 3, note: nil, shieldHealth: "ok")
        ],
        emergencyRemaining: 2, problems: [], nextChange: "2026-12-01T18:40:00Z", unenforcedKinds: ["hook"])

    /// `status` shows the daemon's instants in this machine's zone, to the second.
    @Test func statusShowsInstantsInLocalTime() throws {
        let berlin = try #require(TimeZone(identifier: "Europe/Berlin"))
        #expect(localTime("2026-12-01T18:40:00Z", zone: berlin) == "2026-12-01 19:40:00 GMT+1")
        #expect(localTime("2026-07-01T18:40:00.600Z", zone: berlin) == "2026-07-01 20:40:00 GMT+2")
        #expect(localTime("not a time") == "not a time")
    }

    @Test func aStatusAnswerReadsBackAsItWasWritten() throws {
        let line = ControlCoding.line(status)
        #expect(!line.contains("\n"))
        #expect(line.contains("\\u001b"), "a control character must be escaped: \(line)")
        let answer = try ControlAnswer(line: line)
        #expect(answer.reply == ControlReply(ok: true))
        #expect(try answer.decode(StatusReply.self) == status)
    }

    @Test func aNewerDaemonsExtraKeysArePassedOverButWrongTypesAreNot() throws {
        let line = ControlCoding.line(status)
        let newer = try ControlAnswer(line: String(line.dropLast()) + #","battery":0.8}"#)
        #expect(try newer.decode(StatusReply.self) == status)
        let wrong = try ControlAnswer(
            line: line.replacingOccurrences(of: #""stepsToday":340"#, with: #""stepsToday":"340""#))
        let error = #expect(throws: JSONPathError.self) { try wrong.decode(StatusReply.self) }
        #expect(error?.path == "stepsToday", "\(String(describing: error))")
        let fraction = try ControlAnswer(
            line: line.replacingOccurrences(of: #""samples":1200"#, with: #""samples":1200.5"#))
        #expect(throws: JSONPathError.self) { try fraction.decode(StatusReply.self) }
    }

    @Test func refusalsAndEventsAreReadFromAnyAnswer() throws {
        #expect(
            try ControlAnswer(line: ControlReply.refusal("no \"such\" store")).reply
                == ControlReply(ok: false, error: "no \"such\" store"))
        let events = ControlReply(ok: true, events: ["games: locked by uid 0 until 2026-12-01T20:00:00Z"])
        #expect(try ControlAnswer(line: ControlCoding.line(events)).reply == events)
        // Something that is not an answer at all is a refusal, never taken for one.
        #expect(try ControlAnswer(line: "[1,2]").reply.ok == false)
        #expect(try ControlAnswer(line: #"{"ok":1}"#).reply.ok == false)
        #expect(throws: JSONPathError.self) { try ControlAnswer(line: "{not json") }
    }

    @Test func aCheckAnswerReadsBack() throws {
        let shielded = CheckReply(
            shielded: true, store: "games", title: "Games are shielded", subtitle: "Walk.", stepsToGo: 60)
        #expect(try ControlAnswer(line: ControlCoding.line(shielded)).decode(CheckReply.self) == shielded)
        #expect(ControlCoding.line(CheckReply(shielded: false)) == #"{"ok":true,"shielded":false}"#)
    }
}
