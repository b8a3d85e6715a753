import Foundation
import Testing

@testable import UnlockPolicy

@Suite("1. Gate: goal → unlock → scheduled relock")
struct GateTests {
    @Test func walkingTheGoalUnlocksAndRelocksAtTheDeadline() {
        var clock = ManualClock("2025-03-01T10:00:00Z")
        var engine = PolicyEngine(configuration: gateConfig())
        let first = engine.handle(.tick, at: clock.now)
        #expect(first.applies == ["games"])
        clock.advance(minutes: 1)
        #expect(engine.handle(.steps(99), at: clock.now).removes.isEmpty)
        clock.advance(minutes: 1)
        let unlock = engine.handle(.steps(1), at: clock.now)
        #expect(unlock.removes.map(\.0) == ["games"])
        #expect(
            unlock.notices.first { $0.kind == .ownerRemoved }.map { iso($0.until) } == "2025-03-01T10:32:00Z")
        // A wake-up is armed before the shield is removed: the first minute's checkpoint save;
        // each checkpoint arms the next, and the last one the relock.
        guard case .persist = unlock.first, case .wakeUp(let at, _) = unlock.dropFirst().first else {
            Issue.record("expected persist, then wake-up first: \(unlock)")
            return
        }
        #expect(iso(at) == "2025-03-01T10:03:00Z")
        var lastWake: String?
        for _ in 0..<29 {
            clock.advance(minutes: 1)
            let checkpoint = engine.handle(.tick, at: clock.now)
            #expect(checkpoint.persisted != nil)
            for case .wakeUp(let at, _) in checkpoint { lastWake = iso(at) }
        }
        #expect(lastWake == "2025-03-01T10:32:00Z")
        clock.advance(minutes: 0.99)
        #expect(!engine.shielded("games", at: clock.now))
        clock.advance(minutes: 0.01)
        let relock = engine.handle(.tick, at: clock.now)
        #expect(relock.applies == ["games"])
        #expect(engine.shielded("games", at: clock.now))
    }

    @Test func stepsCountFromWhenTheGateLocked() {
        var clock = ManualClock("2025-03-01T10:00:00Z")
        var engine = PolicyEngine(configuration: gateConfig())
        _ = engine.handle(.steps(100), at: clock.now)
        clock.advance(minutes: 10)
        _ = engine.handle(.steps(90), at: clock.now)  // walked while unlocked: not carried over
        clock.advance(minutes: 21)
        _ = engine.handle(.tick, at: clock.now)
        #expect(engine.shielded("games", at: clock.now))
        _ = engine.handle(.steps(60), at: clock.now)
        #expect(engine.shielded("games", at: clock.now))
        _ = engine.handle(.steps(40), at: clock.now)
        #expect(!engine.shielded("games", at: clock.now))
    }

    @Test func graduatedGoalsExtendTheWindowFromItsStart() {
        var clock = ManualClock("2025-03-01T10:00:00Z")
        var engine = PolicyEngine(configuration: gateConfig(graduated: true))
        _ = engine.handle(.steps(120), at: clock.now)
        clock.advance(minutes: 10)
        let more = engine.handle(.steps(130), at: clock.now)
        #expect(more.kinds.contains("unlock-extended"))
        #expect(iso(engine.status(at: clock.now).stores[0].unlockedUntil) == "2025-03-01T11:00:00Z")
        // One input past both tiers gives the longer window at once.
        var other = PolicyEngine(configuration: gateConfig(graduated: true))
        _ = other.handle(.steps(300), at: clock.now)
        #expect(iso(other.status(at: clock.now).stores[0].unlockedUntil) == "2025-03-01T11:10:00Z")
    }

    @Test func dailyCapRefusesFurtherUnlocksUntilTomorrow() {
        var clock = ManualClock("2025-03-01T10:00:00Z")
        var engine = PolicyEngine(configuration: gateConfig(cap: 1))
        _ = engine.handle(.steps(100), at: clock.now)
        clock.advance(minutes: 31)
        _ = engine.handle(.tick, at: clock.now)
        let refused = engine.handle(.steps(150), at: clock.now)
        #expect(refused.kinds == ["refused"])
        #expect(engine.shielded("games", at: clock.now))
        #expect(engine.handle(.steps(10), at: clock.now).kinds.isEmpty)  // said once
        clock.advance(minutes: 14 * 60)  // 01:31 Berlin the next day
        _ = engine.handle(.steps(1), at: clock.now)
        #expect(!engine.shielded("games", at: clock.now))
    }

    @Test func failedWakeUpOrPersistLocksAgainWithReason() {
        for failure in [EffectFailure.wakeUp("timerfd: EMFILE"), .persist("ENOSPC")] {
            var clock = ManualClock("2025-03-01T10:00:00Z")
            var engine = PolicyEngine(configuration: gateConfig())
            _ = engine.handle(.steps(100), at: clock.now)
            #expect(!engine.shielded("games", at: clock.now))
            clock.advance(minutes: 0.001)
            let answer = engine.handle(.effectFailed(failure), at: clock.now)
            #expect(answer.applies == ["games"])
            #expect(answer.kinds.contains("fail-closed"))
            #expect(engine.shielded("games", at: clock.now))
            #expect(engine.problems.last?.contains("locked") == true)
        }
    }

    /// A failure that keeps recurring is listed once (with its latest time, whatever the length
    /// of the timestamp: with or without milliseconds), and announced once while nothing is
    /// unlocked.
    @Test func aRepeatedFailureIsListedOnce() {
        var clock = ManualClock("2025-03-01T10:00:00Z")
        var engine = PolicyEngine(configuration: gateConfig())
        _ = engine.handle(.tick, at: clock.now)
        var announced = 0
        for i in 0..<50 {
            // Each input's batch tries to save again (the failed save left the state unsaved),
            // and the shell reports that save failed.
            clock.advance(minutes: i % 2 == 0 ? 0.0123 : 1)
            let batch = engine.handle(.tick, at: clock.now)
            if i > 0 { #expect(batch.persisted != nil) }
            announced +=
                engine.handle(.effectFailed(.persist("ENOSPC")), at: clock.now).kinds.filter {
                    $0 == "fail-closed"
                }.count
        }
        let saves = engine.problems.filter { $0.contains("could not save the state: ENOSPC") }
        #expect(saves.count == 1)
        #expect(saves.first?.hasPrefix(formatISO8601(clock.wall) + ": ") == true)
        #expect(announced == 1)
        // Another failure is listed besides it; the same text is compared after the timestamp only.
        _ = engine.handle(.effectFailed(.wakeUp("timerfd: EMFILE")), at: clock.now)
        #expect(engine.problems.count == 2)
        #expect(PolicyEngine.problemText("2025-03-01T10:00:00.123Z: a: b") == "a: b")
        #expect(PolicyEngine.problemText("2025-03-01T10:00:00Z: a: b") == "a: b")
        #expect(
            PolicyEngine.problemText("state file is corrupt: x; started locked")
                == "state file is corrupt: x; started locked")
    }

    /// A shield failure is listed until the shield reports the store applied.
    @Test func aShieldProblemClearsWhenTheShieldReportsApplied() {
        var clock = ManualClock("2025-03-01T10:00:00Z")
        var engine = PolicyEngine(configuration: gateConfig())
        _ = engine.handle(.tick, at: clock.now)
        for _ in 0..<3 {
            clock.advance(minutes: 0.0017)
            _ = engine.handle(.shieldReport(store: "games", .failed("EPERM")), at: clock.now)
        }
        #expect(engine.problems.filter { $0.contains("shield for games failed") }.count == 1)
        _ = engine.handle(.shieldReport(store: "games", .applied(games)), at: clock.now)
        #expect(!engine.problems.contains { $0.contains("shield for games failed") })
    }
}

@Suite("2. Selections, stores and owners")
struct OwnerTests {
    @Test func aTargetStaysShieldedWhileAnotherStoreHoldsIt() {
        let shared = "/usr/bin/steam"
        let config = PolicyConfiguration(
            stores: [
                StoreConfiguration(
                    name: "games", selection: Selection(executables: [shared, "/usr/games/x"]),
                    gate: GateConfiguration(goals: [GoalTier(steps: 10, minutes: 5)])),
                StoreConfiguration(
                    name: "evening", selection: Selection(executables: [shared]),
                    gate: GateConfiguration(goals: [GoalTier(steps: 1000, minutes: 5)])),
            ])
        var clock = ManualClock("2025-03-01T10:00:00Z")
        var engine = PolicyEngine(configuration: config)
        _ = engine.handle(.tick, at: clock.now)
        clock.advance(minutes: 1)
        let effects = engine.handle(.steps(10), at: clock.now)
        #expect(effects.removes.count == 1)
        #expect(effects.removes.first?.1 == Selection(executables: ["/usr/games/x"]))
    }

    @Test func endingOneOwnerKeepsAnothersHold() {
        var clock = ManualClock("2025-03-01T10:00:00Z")
        var engine = PolicyEngine(configuration: gateConfig())
        _ = engine.handle(
            .command(.lock(store: "games", duration: .seconds(7200), by: "alice")), at: clock.now)
        #expect(engine.owners("games", at: clock.now) == ["gate", "lock:alice"])
        let walked = engine.handle(.steps(100), at: clock.now)
        #expect(walked.removes.isEmpty)
        #expect(engine.owners("games", at: clock.now) == ["lock:alice"])
        #expect(engine.shielded("games", at: clock.now))
        clock.advance(minutes: 120)
        #expect(engine.handle(.tick, at: clock.now).applies.isEmpty)
        #expect(engine.shielded("games", at: clock.now))
    }

    @Test func emptySelectionIsNeverAnActiveShield() {
        let config = PolicyConfiguration(
            stores: [
                StoreConfiguration(
                    name: "nothing", selection: .empty,
                    gate: GateConfiguration(goals: [GoalTier(steps: 10, minutes: 5)]))
            ])
        var engine = PolicyEngine(configuration: config)
        let clock = ManualClock("2025-03-01T10:00:00Z")
        let effects = engine.handle(.tick, at: clock.now)
        #expect(effects.applies.isEmpty)
        let status = engine.status(at: clock.now)
        #expect(status.stores[0].shielded == false)
        #expect(status.stores[0].note?.contains("empty selection") == true)
    }
}

@Suite("5. Manual lock and emergency unlock")
struct LockAndEmergencyTests {
    @Test func manualLockHoldsForItsElapsedLength() {
        let config = PolicyConfiguration(stores: [StoreConfiguration(name: "games", selection: games)])
        var clock = ManualClock("2025-03-01T10:00:00Z")
        var engine = PolicyEngine(configuration: config)
        #expect(engine.handle(.tick, at: clock.now).applies.isEmpty)
        let lock = engine.handle(
            .command(.lock(store: "games", duration: .seconds(7200), by: "bob")), at: clock.now)
        #expect(lock.applies == ["games"])
        clock.jumpWall(minutes: 300)  // a forward jump does not end it early
        clock.advance(minutes: 119)
        _ = engine.handle(.tick, at: clock.now)
        #expect(engine.shielded("games", at: clock.now))
        clock.advance(minutes: 1)
        #expect(engine.handle(.tick, at: clock.now).removes.map(\.0) == ["games"])
        let tooShort = engine.handle(
            .command(.lock(store: "games", duration: .seconds(30), by: "bob")), at: clock.now)
        #expect(tooShort.kinds == ["refused"])
    }

    @Test func emergencyAllowanceIsLimitedAuditedAndNotRefilledByTheClock() {
        var clock = ManualClock("2025-03-01T10:00:00Z")
        var engine = PolicyEngine(configuration: gateConfig())
        _ = engine.handle(.tick, at: clock.now)
        for i in 0..<2 {
            let e = engine.handle(.command(.emergencyUnlock(store: "games", by: "carol")), at: clock.now)
            #expect(e.kinds.contains("emergency-started"), "use \(i)")
            #expect(!engine.shielded("games", at: clock.now))
            clock.advance(minutes: 15)
            _ = engine.handle(.tick, at: clock.now)
            #expect(engine.shielded("games", at: clock.now))
        }
        #expect(
            engine.handle(.command(.emergencyUnlock(store: "games", by: "carol")), at: clock.now).kinds == [
                "refused"
            ])
        clock.jumpWall(minutes: 8 * 24 * 60)  // moving the clock a week on refills nothing
        #expect(
            engine.handle(.command(.emergencyUnlock(store: "games", by: "carol")), at: clock.now).kinds
                .contains(
                    "refused"))
        clock.jumpWall(minutes: -16 * 24 * 60)
        #expect(
            engine.handle(.command(.emergencyUnlock(store: "games", by: "carol")), at: clock.now).kinds
                .contains(
                    "refused"))
        #expect(engine.state.emergencyLog.map(\.by) == ["carol", "carol"])
        clock.advance(minutes: 7 * 24 * 60)  // a real week later
        #expect(
            engine.handle(.command(.emergencyUnlock(store: "games", by: "carol")), at: clock.now).kinds
                .contains(
                    "emergency-started"))
    }
}
