import Household
import Testing

@testable import StepGateDaemon

@Suite struct InboxTests {
    private func message(_ topic: String) -> MQTTClient.Event {
        .message(MQTTMessage(topic: topic, text: "{}", retain: true))
    }

    /// A connection's retained messages are handled before the next connection's event (attack
    /// round 13: with only the latest connection event kept, and kept first, a gate new to a step
    /// source would have counted the first connection's retained totals, its source's past, in
    /// full).
    @Test func householdEventsKeepTheirOrder() {
        let inbox = Inbox()
        inbox.post(.household(.connected))
        inbox.post(.household(message("a")))
        inbox.post(.household(.disconnected(reason: "lost")))
        inbox.post(.household(.connected))
        inbox.post(.household(message("b")))
        let events = inbox.take().compactMap { event -> MQTTClient.Event? in
            if case .household(let household) = event { return household }
            return nil
        }
        #expect(
            events == [.connected, message("a"), .disconnected(reason: "lost"), .connected, message("b")])
    }

    @Test func aFloodOfMessagesIsBoundedButConnectionEventsAreKept() {
        let inbox = Inbox()
        for index in 0..<100 { inbox.post(.household(message("m\(index)"))) }
        inbox.post(.household(.connected))
        let events = inbox.take()
        #expect(events.count == 65)
        if case .household(.connected)? = events.last {
        } else {
            Issue.record("the connection event was dropped")
        }
        #expect(inbox.take().isEmpty)
    }
}

@Suite struct RecentCommandIDsTests {
    /// Attack round 13: a command id was a repeat for ever, so an automation sending the same
    /// payload every evening worked once. A repeat is one within 10 minutes.
    @Test func anIdIsARepeatForTenMinutesThenANewCommand() {
        var recent = RecentCommandIDs()
        let start = ContinuousClock.now
        let answers = [0, 5, 599, 600].map { recent.isRepeat("evening-1", at: start + .seconds($0)) }
        #expect(answers == [false, true, true, false])
        #expect(recent.ids == ["evening-1"])
        // The last 256 are kept.
        for index in 0..<300 { _ = recent.isRepeat("id-\(index)", at: start + .seconds(601)) }
        #expect(recent.ids.count == 256)
        #expect(!recent.ids.contains("evening-1"))
    }
}
