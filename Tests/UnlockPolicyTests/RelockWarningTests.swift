import Foundation
import Testing

@testable import UnlockPolicy

/// The relock warnings of a run: when each was given (real time), the relock it announces, and
/// its reason.
private func warnings(_ records: [PolicyRecord]) -> [String] {
    records.compactMap { record in
        guard case .notify(let notice) = record.effect, notice.kind == .relockWarning else { return nil }
        let at = formatISO8601(millisFromDate(record.at))
        return "\(at) \(notice.store ?? "-") until \(iso(notice.until) ?? "-"): \(notice.reason)"
    }
}

private func date(_ text: String) -> Date { dateFromMillis(parseISO8601(text) ?? 0) }

private func gate(minutes: [Int], emergencyMinutes: Int = 15) -> PolicyConfiguration {
    PolicyConfiguration(
        timeZone: "Europe/Berlin", emergency: EmergencyPolicy(perWeek: 2, minutes: emergencyMinutes),
        stores: [
            StoreConfiguration(
                name: "games", selection: games,
                gate: GateConfiguration(
                    goals: minutes.enumerated().map {
                        GoalTier(steps: 100 * ($0.offset + 1), minutes: $0.element)
                    }
                ))
        ])
}

/// A simulator started at 10:00 with the gate unlocked then for the first tier.
private func unlocked(
    _ configuration: PolicyConfiguration, store: any PolicyStateStore = InMemoryPolicyStateStore()
)
    -> (PolicySimulator, [PolicyRecord])
{
    var sim = PolicySimulator(
        configuration: configuration, stateStore: store, start: date("2025-03-01T10:00:00Z"))
    var records = sim.send(.tick)
    records += sim.send(.steps(100))
    return (sim, records)
}

@Suite("10. Warnings before relock")
struct RelockWarningTests {
    @Test("5 and 1 minutes before a gate unlock ends, once each, with the relock time")
    func warningsAtFiveAndOneMinute() {
        var (sim, records) = unlocked(gate(minutes: [30]))
        records += sim.advance(to: date("2025-03-01T10:40:00Z"))
        #expect(
            warnings(records) == [
                "2025-03-01T10:25:00Z games until 2025-03-01T10:30:00Z: the unlock ends in 5 min; shielded again then",
                "2025-03-01T10:29:00Z games until 2025-03-01T10:30:00Z: the unlock ends in 1 min; shielded again then",
            ])
        // The warning is saved before it is sent, with the wake-up for the next one.
        let at25 = records.filter { formatISO8601(millisFromDate($0.at)) == "2025-03-01T10:25:00Z" }
        let effects = at25.map(\.effect)
        #expect(effects.persisted.map { $0.encoded().contains("\"warnedSeconds\": 300") } == true)
        #expect(sim.engine.shielded("games", at: sim.instant))
    }

    @Test(
        "a window no longer than a lead gets no warning for it",
        arguments: [
            (5, ["10:04:00Z"]), (3, ["10:02:00Z"]), (2, ["10:01:00Z"]), (1, []),
            (6, ["10:01:00Z", "10:05:00Z"]),
        ])
    func shortWindows(minutes: Int, expected: [String]) {
        var (sim, records) = unlocked(gate(minutes: [minutes]))
        records += sim.advance(to: date("2025-03-01T10:30:00Z"))
        #expect(warnings(records).map { String($0.dropFirst(11).prefix(9)) } == expected)
    }

    @Test("a restart between the two warnings neither repeats the first nor loses the second")
    func restartBetweenTheWarnings() {
        var (sim, records) = unlocked(gate(minutes: [30]))
        records += sim.advance(to: date("2025-03-01T10:27:00Z"))
        records += sim.restart(reboot: false)
        records += sim.advance(to: date("2025-03-01T10:40:00Z"))
        #expect(
            warnings(records).map { String($0.prefix(20)) } == [
                "2025-03-01T10:25:00Z", "2025-03-01T10:29:00Z",
            ])
    }

    @Test("a restart before the first warning still gives both on time")
    func restartBeforeTheWarnings() {
        var (sim, records) = unlocked(gate(minutes: [30]))
        records += sim.advance(to: date("2025-03-01T10:24:30Z"))
        records += sim.restart(reboot: false)
        records += sim.advance(to: date("2025-03-01T10:40:00Z"))
        #expect(
            warnings(records).map { String($0.prefix(20)) } == [
                "2025-03-01T10:25:00Z", "2025-03-01T10:29:00Z",
            ])
    }

    @Test("a power cut across the 5-minute mark: the warning comes late, once, after the reboot")
    func powerCutAcrossTheMark() {
        var (sim, records) = unlocked(gate(minutes: [30]))
        records += sim.advance(to: date("2025-03-01T10:24:30Z"))
        sim.powerOff()
        _ = sim.advance(to: date("2025-03-01T10:26:00Z"))
        records += sim.restart(reboot: true)
        records += sim.advance(to: date("2025-03-01T10:40:00Z"))
        #expect(
            warnings(records) == [
                "2025-03-01T10:26:00Z games until 2025-03-01T10:30:00Z: the unlock ends in 4 min; shielded again then",
                "2025-03-01T10:29:00Z games until 2025-03-01T10:30:00Z: the unlock ends in 1 min; shielded again then",
            ])
    }

    @Test("the wall clock set back keeps the warnings on elapsed time; set forward brings them forward")
    func clockJumps() {
        var (sim, records) = unlocked(gate(minutes: [30]))
        records += sim.advance(to: date("2025-03-01T10:10:00Z"))
        records += sim.setWallClock(to: date("2025-03-01T09:10:00Z"))
        records += sim.advance(to: date("2025-03-01T10:40:00Z"))
        #expect(
            warnings(records).map { String($0.prefix(20)) } == [
                "2025-03-01T10:25:00Z", "2025-03-01T10:29:00Z",
            ])

        // Forward 10 minutes: the unlock ends at its wall deadline, 10 minutes early in real time.
        var (forward, later) = unlocked(gate(minutes: [30]))
        later += forward.advance(to: date("2025-03-01T10:10:00Z"))
        later += forward.setWallClock(to: date("2025-03-01T10:20:00Z"))
        later += forward.advance(to: date("2025-03-01T10:40:00Z"))
        #expect(
            warnings(later).map { String($0.prefix(20)) } == ["2025-03-01T10:15:00Z", "2025-03-01T10:19:00Z"])
        #expect(warnings(later).allSatisfy { $0.contains("until 2025-03-01T10:30:00Z") })
    }

    @Test("an unlock extended by more steps is warned before its new end, not its old one")
    func extendedWindow() {
        var (sim, records) = unlocked(gate(minutes: [30, 60]))
        records += sim.advance(to: date("2025-03-01T10:20:00Z"))
        records += sim.send(.steps(100))  // 200 steps: the 60-minute tier, relock at 11:00
        records += sim.advance(to: date("2025-03-01T11:10:00Z"))
        #expect(
            warnings(records).map { String($0.prefix(20)) } == [
                "2025-03-01T10:55:00Z", "2025-03-01T10:59:00Z",
            ])

        // Extended after the 5-minute warning: both come again before the new end.
        var (again, more) = unlocked(gate(minutes: [30, 60]))
        more += again.advance(to: date("2025-03-01T10:26:00Z"))
        more += again.send(.steps(100))
        more += again.advance(to: date("2025-03-01T11:10:00Z"))
        #expect(
            warnings(more).map { String($0.prefix(20)) } == [
                "2025-03-01T10:25:00Z", "2025-03-01T10:55:00Z", "2025-03-01T10:59:00Z",
            ])
    }

    @Test("a manual lock before the warning: none while it holds the store")
    func manualLockBeforeTheWarning() {
        var (sim, records) = unlocked(gate(minutes: [30]))
        records += sim.advance(to: date("2025-03-01T10:20:00Z"))
        records += sim.send(.command(.lock(store: "games", duration: .seconds(3600), by: "dana")))
        records += sim.advance(to: date("2025-03-01T11:30:00Z"))
        #expect(warnings(records).isEmpty)

        // A lock that ends before the unlock does: the store is open again for 3 minutes, and
        // the warning comes when it opens (late), then the 1-minute one on time.
        var (short, records2) = unlocked(gate(minutes: [30]))
        records2 += short.advance(to: date("2025-03-01T10:10:00Z"))
        records2 += short.send(.command(.lock(store: "games", duration: .seconds(17 * 60), by: "dana")))
        records2 += short.advance(to: date("2025-03-01T10:40:00Z"))
        #expect(
            warnings(records2) == [
                "2025-03-01T10:27:00Z games until 2025-03-01T10:30:00Z: the unlock ends in 3 min; shielded again then",
                "2025-03-01T10:29:00Z games until 2025-03-01T10:30:00Z: the unlock ends in 1 min; shielded again then",
            ])
    }

    @Test("an unlock taken back (fail closed) is not warned")
    func failClosedEndsTheWarnings() {
        var (sim, records) = unlocked(gate(minutes: [30]))
        records += sim.advance(to: date("2025-03-01T10:20:00Z"))
        records += sim.send(.effectFailed(.wakeUp("timerfd: no memory")))
        records += sim.advance(to: date("2025-03-01T10:40:00Z"))
        #expect(warnings(records).isEmpty)
    }

    @Test("an emergency unlock outlasting the gate's: the warnings announce the emergency's end")
    func emergencyOutlastsTheGate() {
        var (sim, records) = unlocked(gate(minutes: [30]))
        records += sim.advance(to: date("2025-03-01T10:20:00Z"))
        records += sim.send(.command(.emergencyUnlock(store: "games", by: "dana")))
        records += sim.advance(to: date("2025-03-01T10:50:00Z"))
        #expect(
            warnings(records) == [
                "2025-03-01T10:30:00Z games until 2025-03-01T10:35:00Z: the emergency unlock ends in 5 min; shielded again then",
                "2025-03-01T10:34:00Z games until 2025-03-01T10:35:00Z: the emergency unlock ends in 1 min; shielded again then",
            ])
    }

    @Test("a schedule goal lifting the hold for a while is warned; one for the rest of the window is not")
    func scheduleGoals() {
        var sim = PolicySimulator(
            configuration: scheduleConfig(
                start: "11:00", end: "13:00", goal: ScheduleGoal(steps: 50, minutes: 20)),
            stateStore: InMemoryPolicyStateStore(), start: date("2025-03-01T10:00:00Z"))
        var records = sim.send(.tick)
        records += sim.send(.steps(50))  // 11:00 Berlin: the window starts; steps walked now count
        records += sim.advance(to: date("2025-03-01T10:30:00Z"))
        #expect(
            warnings(records) == [
                "2025-03-01T10:15:00Z games until 2025-03-01T10:20:00Z: the unlock within night@2025-03-01 ends in 5 min; shielded again then",
                "2025-03-01T10:19:00Z games until 2025-03-01T10:20:00Z: the unlock within night@2025-03-01 ends in 1 min; shielded again then",
            ])

        var rest = PolicySimulator(
            configuration: scheduleConfig(start: "11:00", end: "13:00", goal: ScheduleGoal(steps: 50)),
            stateStore: InMemoryPolicyStateStore(), start: date("2025-03-01T10:00:00Z"))
        var more = rest.send(.tick)
        more += rest.send(.steps(50))
        more += rest.advance(to: date("2025-03-01T12:30:00Z"))
        #expect(warnings(more).isEmpty)
    }

    @Test("the warnings given are saved with the window, and version 1 state files still load")
    func warningsArePersisted() throws {
        var (sim, _) = unlocked(gate(minutes: [30]))
        _ = sim.advance(to: date("2025-03-01T10:26:00Z"))
        let text = sim.engine.state.encoded()
        #expect(text.contains("\"version\": 3"))
        #expect(text.contains("\"warnedSeconds\": 300"))
        let back = try PolicyState.decode(text)
        #expect(back == sim.engine.state)
        let unwarned = text.replacingOccurrences(
            of: #",\s*"warnedSeconds": 300"#, with: "", options: .regularExpression)
        #expect(!unwarned.contains("warnedSeconds"))
        let v1 = try PolicyState.decode(
            unwarned.replacingOccurrences(of: "\"version\": 3", with: "\"version\": 1"))
        #expect(v1.encoded() == unwarned)
        #expect(throws: PolicyStateError.self) {
            try PolicyState.decode(
                text.replacingOccurrences(of: "\"warnedSeconds\": 300", with: "\"warnedSeconds\": -1"))
        }
    }
}
