import Foundation
import StepHistoryStore
import Testing

@testable import UnlockPolicy

@Suite("3. Schedules")
struct ScheduleTests {
    @Test func windowCrossingMidnightHoldsUntilMorning() {
        var clock = ManualClock("2025-03-01T20:59:00Z")  // 21:59 Berlin
        var engine = PolicyEngine(configuration: scheduleConfig(start: "22:00", end: "07:00"))
        _ = engine.handle(.tick, at: clock.now)
        #expect(!engine.shielded("games", at: clock.now))
        clock.advance(minutes: 1)
        let start = engine.handle(.tick, at: clock.now)
        #expect(start.applies == ["games"])
        #expect(engine.owners("games", at: clock.now) == ["schedule:night@2025-03-01"])
        clock.advance(minutes: 9 * 60 - 1)
        _ = engine.handle(.tick, at: clock.now)
        #expect(engine.shielded("games", at: clock.now))
        clock.advance(minutes: 1)
        #expect(engine.handle(.tick, at: clock.now).removes.map(\.0) == ["games"])
    }

    @Test func weekdaysOnly() {
        // 2025-03-01 is a Saturday.
        var clock = ManualClock("2025-03-01T19:00:00Z")
        var engine = PolicyEngine(
            configuration: scheduleConfig(start: "18:00", end: "21:00", days: [.monday, .tuesday]))
        _ = engine.handle(.tick, at: clock.now)
        #expect(!engine.shielded("games", at: clock.now))
        clock.advance(minutes: 2 * 24 * 60)  // Monday 20:00 Berlin
        _ = engine.handle(.tick, at: clock.now)
        #expect(engine.owners("games", at: clock.now) == ["schedule:night@2025-03-03"])
    }

    @Test func startInTheSkippedHourStartsAtTheFirstValidInstant() {
        // Berlin springs forward on 2025-03-30 at 02:00 → 03:00 (01:00Z).
        let config = scheduleConfig(start: "02:30", end: "04:00")
        let r = ZoneResolver(identifier: "Europe/Berlin")
        let o = config.stores[0].schedules[0].occurrence(onDay: parseDay("2025-03-30") ?? 0, resolver: r)
        #expect(o.map { formatISO8601($0.start) } == "2025-03-30T01:00:00Z")
        #expect(o.map { formatISO8601($0.end) } == "2025-03-30T02:00:00Z")
        var clock = ManualClock("2025-03-30T00:59:59Z")
        var engine = PolicyEngine(configuration: config)
        _ = engine.handle(.tick, at: clock.now)
        #expect(!engine.shielded("games", at: clock.now))
        clock.advance(minutes: 1.0 / 60)
        _ = engine.handle(.tick, at: clock.now)
        #expect(engine.shielded("games", at: clock.now))
    }

    @Test func repeatedHourFiresOnce() {
        // Berlin falls back on 2025-10-26 at 03:00 → 02:00; 02:30 happens at 00:30Z and 01:30Z.
        let config = scheduleConfig(start: "02:30", end: "02:45")
        var clock = ManualClock("2025-10-26T00:00:00Z")
        var engine = PolicyEngine(configuration: config)
        var applies = 0
        for _ in 0..<(3 * 60) {
            applies += engine.handle(.tick, at: clock.now).applies.count
            clock.advance(minutes: 1)
        }
        #expect(applies == 1)
    }

    /// A local time the fall-back repeats resolves to its first occurrence: the window runs
    /// from 00:30Z, not from 01:30Z (when 02:30 comes round again).
    @Test func aRepeatedLocalTimeIsItsFirstOccurrence() {
        let config = scheduleConfig(start: "02:30", end: "02:45")
        let r = ZoneResolver(identifier: "Europe/Berlin")
        let o = config.stores[0].schedules[0].occurrence(onDay: parseDay("2025-10-26") ?? 0, resolver: r)
        #expect(o.map { formatISO8601($0.start) } == "2025-10-26T00:30:00Z")
        #expect(o.map { formatISO8601($0.end) } == "2025-10-26T00:45:00Z")
        var clock = ManualClock("2025-10-26T00:35:00Z")
        var engine = PolicyEngine(configuration: config)
        #expect(engine.handle(.tick, at: clock.now).applies == ["games"])
        clock.advance(minutes: 60)  // 01:35Z: 02:35 local again, the window is not repeated
        _ = engine.handle(.tick, at: clock.now)
        #expect(!engine.shielded("games", at: clock.now))
    }

    @Test func watchingFromInsideTheWindowActsAsItsStart() {
        let clock = ManualClock("2025-03-01T22:30:00Z")  // 23:30 Berlin
        var engine = PolicyEngine(configuration: scheduleConfig(start: "22:00", end: "07:00"))
        let effects = engine.handle(.tick, at: clock.now)
        #expect(effects.applies == ["games"])
        #expect(effects.kinds.contains("owner-added"))
    }

    @Test func stepGoalInsideTheWindowLiftsItForTheRest() {
        var clock = ManualClock("2025-03-01T17:00:00Z")  // 18:00 Berlin
        var engine = PolicyEngine(
            configuration: scheduleConfig(start: "18:00", end: "21:00", goal: ScheduleGoal(steps: 2000)))
        _ = engine.handle(.tick, at: clock.now)
        #expect(engine.shielded("games", at: clock.now))
        clock.advance(minutes: 30)
        _ = engine.handle(.steps(1999), at: clock.now)
        #expect(engine.shielded("games", at: clock.now))
        let lifted = engine.handle(.steps(1), at: clock.now)
        #expect(lifted.removes.map(\.0) == ["games"])
        #expect(
            lifted.notices.first { $0.kind == .ownerRemoved }.map { iso($0.until) } == "2025-03-01T20:00:00Z")
        clock.advance(minutes: 24 * 60)  // the next evening holds again, steps from zero
        _ = engine.handle(.tick, at: clock.now)
        #expect(engine.shielded("games", at: clock.now))
    }

    @Test func zoneChangeReevaluatesSchedulesByIdentifier() {
        var config = scheduleConfig(start: "22:00", end: "07:00")
        config.timeZone = nil
        let clock = ManualClock("2025-03-01T21:30:00Z")  // 22:30 Berlin, 16:30 New York
        var engine = PolicyEngine(configuration: config, systemZone: "Europe/Berlin")
        _ = engine.handle(.tick, at: clock.now)
        #expect(engine.shielded("games", at: clock.now))
        let moved = engine.handle(.zoneChanged("America/New_York"), at: clock.now)
        #expect(moved.removes.map(\.0) == ["games"])
        #expect(engine.handle(.zoneChanged("+02:00"), at: clock.now).kinds == ["refused"])
    }
}

@Suite("4. Skip")
struct SkipTests {
    @Test func skipTonightIsHonouredAfterARestartAndExpires() throws {
        var clock = ManualClock("2025-03-01T12:00:00Z")
        let config = scheduleConfig(start: "22:00", end: "07:00")
        var engine = PolicyEngine(configuration: config)
        _ = engine.handle(.tick, at: clock.now)
        let skip = engine.handle(.command(.skip(schedule: "night", occurrence: nil)), at: clock.now)
        #expect(skip.notices.first?.owner == "schedule:night@2025-03-01")
        let saved = try #require(skip.persisted)
        clock.advance(minutes: 10 * 60 + 30)  // 23:30 Berlin, inside the skipped window
        // Re-armed mid-window from the saved state: the mark holds.
        var restarted = PolicyEngine(
            configuration: config, state: try PolicyState.decode(saved.encoded()))
        #expect(restarted.handle(.tick, at: clock.now).applies.isEmpty)
        #expect(!restarted.shielded("games", at: clock.now))
        clock.advance(minutes: 24 * 60)  // the next night is not skipped
        _ = restarted.handle(.tick, at: clock.now)
        #expect(restarted.shielded("games", at: clock.now))
        #expect(restarted.state.skips.isEmpty)
    }

    /// "Skip tonight" given after midnight, inside a 22:00–07:00 window and with no date,
    /// marks the night that is running (it started yesterday), not the one starting tonight.
    @Test func aSkipAfterMidnightMarksTheRunningNight() {
        var clock = ManualClock("2025-03-02T01:00:00Z")  // 02:00 Berlin, inside night@2025-03-01
        var engine = PolicyEngine(configuration: scheduleConfig(start: "22:00", end: "07:00"))
        #expect(engine.handle(.tick, at: clock.now).applies == ["games"])
        let skip = engine.handle(.command(.skip(schedule: "night", occurrence: nil)), at: clock.now)
        #expect(skip.notices.first?.owner == "schedule:night@2025-03-01")
        #expect(skip.removes.map(\.0) == ["games"])
        #expect(!engine.shielded("games", at: clock.now))
        clock.advance(minutes: 20 * 60)  // 22:00 Berlin on 2025-03-02: tonight is not skipped
        _ = engine.handle(.tick, at: clock.now)
        #expect(engine.shielded("games", at: clock.now))
    }

    @Test func skipInsideTheWindowLiftsOnlyThatOccurrence() {
        var clock = ManualClock("2025-03-01T21:30:00Z")
        var engine = PolicyEngine(configuration: scheduleConfig(start: "22:00", end: "07:00"))
        _ = engine.handle(.tick, at: clock.now)
        let skip = engine.handle(.command(.skip(schedule: "night", occurrence: "2025-03-01")), at: clock.now)
        #expect(skip.removes.map(\.0) == ["games"])
        #expect(
            engine.handle(.command(.skip(schedule: "night", occurrence: "2025-02-27")), at: clock.now).kinds
                == ["refused"])
        clock.advance(minutes: 24 * 60)
        _ = engine.handle(.tick, at: clock.now)
        #expect(engine.shielded("games", at: clock.now))
    }
}

@Suite("6. Time: jumps, restarts, reboots")
struct TimeTests {
    @Test func backwardJumpDoesNotLengthenAnUnlock() {
        var clock = ManualClock("2025-03-01T10:00:00Z")
        var engine = PolicyEngine(configuration: gateConfig())
        _ = engine.handle(.steps(100), at: clock.now)
        clock.advance(minutes: 10)
        clock.jumpWall(minutes: -60)
        let jumped = engine.handle(.tick, at: clock.now)
        #expect(jumped.kinds.contains("clock-jumped"))
        clock.advance(minutes: 20)
        #expect(engine.handle(.tick, at: clock.now).applies == ["games"])
    }

    @Test func forwardJumpGrantsNothingAndEndsTheWindowNoLater() {
        var clock = ManualClock("2025-03-01T10:00:00Z")
        var engine = PolicyEngine(configuration: gateConfig(cap: 1))
        _ = engine.handle(.steps(100), at: clock.now)
        clock.advance(minutes: 1)
        clock.jumpWall(minutes: 24 * 60)  // "tomorrow" on the wall clock
        _ = engine.handle(.tick, at: clock.now)
        #expect(engine.shielded("games", at: clock.now))
        // The cap still counts the unlock a minute ago.
        #expect(engine.handle(.steps(100), at: clock.now).kinds == ["refused"])
    }

    @Test func restartInsideTheWindowEndsItOnTime() throws {
        var clock = ManualClock("2025-03-01T10:00:00Z")
        var engine = PolicyEngine(configuration: gateConfig())
        let saved = try #require(engine.handle(.steps(100), at: clock.now).persisted)
        clock.advance(minutes: 20)
        var restarted = PolicyEngine(
            configuration: gateConfig(), state: try PolicyState.decode(saved.encoded()))
        let first = restarted.handle(.tick, at: clock.now)
        #expect(!restarted.shielded("games", at: clock.now))
        #expect(first.removes.map(\.0) == ["games"])  // startup reconcile: make sure it is off
        clock.advance(minutes: 10)
        #expect(restarted.handle(.tick, at: clock.now).applies == ["games"])
    }

    /// The firmware clock set back while the machine is off: the time it was off cannot be
    /// measured, so the unlock ends (fail closed) and status says why.
    @Test func rebootWithTheClockSetBackEndsTheUnlock() throws {
        var clock = ManualClock("2025-03-01T10:00:00Z")
        var engine = PolicyEngine(configuration: gateConfig())
        _ = engine.handle(.steps(100), at: clock.now)
        clock.advance(minutes: 10)
        let saved = try #require(engine.handle(.steps(1), at: clock.now).persisted)
        clock.reboot(downMinutes: 5)
        clock.jumpWall(minutes: -120)
        var restarted = PolicyEngine(
            configuration: gateConfig(), state: try PolicyState.decode(saved.encoded()))
        let first = restarted.handle(.tick, at: clock.now)
        #expect(first.kinds.contains("clock-jumped"))
        #expect(first.kinds.contains("fail-closed"))
        #expect(first.applies == ["games"])
        #expect(first.persisted != nil)
        let status = restarted.status(at: clock.now)
        #expect(status.stores[0].shielded)
        #expect(status.stores[0].unlockedUntil == nil)
        #expect(status.problems.last?.contains("behind the last saved reading") == true)
    }

    /// Setting the firmware clock a week forward while the machine is off (physical access, no
    /// root) does not give back the emergency unlocks: a reboot credits at most a day beyond the
    /// new boot's uptime. A genuine night off is credited in full.
    @Test func rebootCreditsAtMostADayOfWallClockGap() throws {
        var clock = ManualClock("2025-03-01T10:00:00Z")
        var engine = PolicyEngine(configuration: gateConfig())
        _ = engine.handle(.command(.emergencyUnlock(store: "games", by: "a")), at: clock.now)
        _ = engine.handle(.command(.emergencyUnlock(store: "games", by: "a")), at: clock.now)
        clock.advance(minutes: 1)
        _ = engine.handle(.tick, at: clock.now)
        #expect(engine.status(at: clock.now).emergencyRemaining == 0)
        let ledgerBefore = engine.state.ledger
        clock.reboot(downMinutes: 7 * 24 * 60 + 60)
        var restarted = PolicyEngine(
            configuration: gateConfig(), state: try PolicyState.decode(engine.state.encoded()))
        _ = restarted.handle(.tick, at: clock.now)
        #expect(restarted.status(at: clock.now).emergencyRemaining == 0)
        #expect(restarted.state.ledger - ledgerBefore == PolicyEngine.maximumRebootCredit + 5_000)
        // Eight hours off: all of it counts.
        let before = restarted.state.ledger
        clock.reboot(downMinutes: 8 * 60)
        var again = PolicyEngine(
            configuration: gateConfig(), state: try PolicyState.decode(restarted.state.encoded()))
        _ = again.handle(.tick, at: clock.now)
        #expect(again.state.ledger - before == 8 * 3_600_000)
    }

    @Test func rebootAfterTheDeadlineStartsLocked() throws {
        var clock = ManualClock("2025-03-01T10:00:00Z")
        var engine = PolicyEngine(configuration: gateConfig())
        let saved = try #require(engine.handle(.steps(100), at: clock.now).persisted)
        clock.reboot(downMinutes: 45)
        var restarted = PolicyEngine(
            configuration: gateConfig(), state: try PolicyState.decode(saved.encoded()))
        let first = restarted.handle(.tick, at: clock.now)
        #expect(first.applies == ["games"])
        #expect(restarted.shielded("games", at: clock.now))
    }
}

@Suite("7. Reconcile")
struct ReconcileTests {
    @Test func emitsOnlyTheDifferenceAndConvergesAfterFailure() {
        var clock = ManualClock("2025-03-01T10:00:00Z")
        var engine = PolicyEngine(configuration: gateConfig())
        _ = engine.handle(.tick, at: clock.now)
        // The shield reports one target missing: only that one is applied again.
        let partial = engine.handle(
            .shieldReport(store: "games", .applied(Selection(executables: ["/usr/games/supertuxkart"]))),
            at: clock.now)
        guard
            case .apply(_, let selection, _)? = partial.first(where: {
                if case .apply = $0 { true } else { false }
            })
        else {
            Issue.record("no apply: \(partial)")
            return
        }
        #expect(selection == Selection(desktopCategories: ["Game"]))
        #expect(engine.handle(.tick, at: clock.now).applies.isEmpty)
        let failed = engine.handle(
            .shieldReport(store: "games", .failed("fanotify_mark: EPERM")), at: clock.now)
        #expect(failed.applies.isEmpty)
        #expect(failed.kinds == ["shield-failed"])
        clock.advance(minutes: 1.0 / 6)
        #expect(engine.status(at: clock.now).problems.last?.contains("fanotify_mark") == true)
        // The retry asks for the whole store again and no longer lists the old failure; a
        // failing retry lists it again.
        #expect(engine.handle(.tick, at: clock.now).applies == ["games"])
        #expect(!engine.status(at: clock.now).problems.contains { $0.contains("fanotify_mark") })
        _ = engine.handle(.shieldReport(store: "games", .failed("fanotify_mark: EPERM")), at: clock.now)
        #expect(engine.status(at: clock.now).problems.last?.contains("fanotify_mark") == true)
    }
}
