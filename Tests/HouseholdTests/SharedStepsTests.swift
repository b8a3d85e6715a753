import Foundation
import Household
import Testing
import TypedJSON

@Suite struct SharedStepsTests {
    private func message(_ session: String, _ seq: Int, _ total: Int) -> StepSession {
        StepSession(session: session, seq: seq, total: total)
    }

    @Test func repeatsAndLateMessagesAddNothingAndALostOneIsMadeUp() {
        var gate = SharedStepReceiver(restoring: [])
        #expect(gate.receive(message("a", 2, 10), retained: false) == 10)
        #expect(gate.receive(message("a", 2, 10), retained: false) == 0)  // delivered twice
        #expect(gate.receive(message("a", 4, 25), retained: false) == 15)  // seq 3 was lost
        #expect(gate.receive(message("a", 3, 18), retained: false) == 0)  // and came late
        #expect(gate.receive(message("a", 4, 25), retained: true) == 0)  // retained, after a reconnection
        #expect(gate.receive(message("b", 2, 7), retained: true) == 7)  // the host restarted meanwhile
        #expect(gate.taken == [message("a", 4, 25), message("b", 2, 7)])
    }

    /// Attack round 12: a hostile source sent 2,100 sessions of 2^52 steps each; their sum
    /// overflowed the daemon's count and trapped it. One message adds at most a day's walk.
    @Test func aMessageAddsAtMostADaysWalk() {
        var gate = SharedStepReceiver(restoring: [])
        var sum = 0
        for index in 0..<3000 {
            let added = gate.receive(message("s\(index)", 1, 1 << 52), retained: false)
            #expect(added <= SharedStepReceiver.maximumPerMessage)
            sum += added
        }
        #expect(sum == 3000 * SharedStepReceiver.maximumPerMessage)
        #expect(gate.receive(message("s2999", 2, Int(1 << 52) + 5), retained: false) == 5)
    }

    @Test func aGateNewToTheSourceAdoptsItsPastThenCountsNewSessions() {
        var gate = SharedStepReceiver(restoring: nil)
        #expect(gate.adopting)
        #expect(gate.receive(message("old", 40, 5000), retained: true) == 0)
        #expect(gate.receive(message("old", 41, 5003), retained: false) == 3)
        #expect(gate.receive(message("new", 2, 12), retained: false) == 12)  // live: counted
        gate.adopted()
        #expect(gate.receive(message("newer", 3, 30), retained: true) == 30)
        // Restored from its file, a gate is not adopting.
        #expect(!SharedStepReceiver(restoring: gate.taken).adopting)
    }

    @Test func theGateKeepsMoreSessionsThanTheSenderOffers() {
        #expect(SharedStepReceiver.keptSessions > SharedStepSender.keptSessions)
        var gate = SharedStepReceiver(restoring: [])
        for index in 0..<40 { _ = gate.receive(message("s\(index)", 1, 1), retained: false) }
        #expect(gate.taken.count == SharedStepReceiver.keptSessions)
        #expect(gate.taken.first?.session == "s8")
    }

    @Test func theSenderStartsANewSessionAndKeepsTheLastOnes() {
        let saved = (0..<10).map { message("s\($0)", 2, $0) }
        var sender = SharedStepSender(restoring: saved, newSession: "now")
        #expect(sender.sessions.count == SharedStepSender.keptSessions)
        #expect(sender.current == message("now", 1, 0))
        #expect(sender.dropped(since: saved) == ["s0", "s1", "s2"])
        sender.add(0)
        #expect(sender.current.seq == 1)
        sender.add(5)
        sender.add(2)
        #expect(sender.current == message("now", 3, 7))
    }

    @Test func messagesAndFilesReadBackAndBadOnesNameTheField() throws {
        let session = message("3f9c0a1b2c3d4e5f", 42, 318)
        let payload = Array(session.payload(at: .init(timeIntervalSince1970: 0)).utf8)
        #expect(try StepSession.parse(payload) == session)
        #expect(
            try StepSessionFile.decode(StepSessionFile.encode([session, message("x", 1, 0)])) == [
                session, message("x", 1, 0),
            ])
        func path(_ text: String) -> String? {
            do {
                _ = try StepSession.parse(Array(text.utf8))
                return nil
            } catch {
                return error.path
            }
        }
        #expect(path(#"{"session": "a/b", "seq": 1, "total": 0}"#) == "session")
        #expect(path(#"{"session": "a", "seq": 0, "total": 0}"#) == "seq")
        #expect(path(#"{"session": "a", "seq": 1, "total": -1}"#) == "total")
        #expect(path(#"{"session": "a", "seq": 1, "total": 2.5}"#) == "total")
        #expect(path("[1]") == "")
    }
}
