import Foundation

/// A fixed workload for `stepgate bench`: the policy's throughput on one core.
///
/// The module reads no clock, so the caller times `drive(_:)`:
/// ```swift
/// let workload = PolicyBenchmark.workload(count: 1_000_000)
/// let elapsed = ContinuousClock().measure { _ = PolicyBenchmark.drive(workload) }
/// ```
public enum PolicyBenchmark {
    /// The configuration the workload runs against: a gate with graduated goals and a cap,
    /// a nightly schedule and a schedule with a step goal, in Europe/Berlin.
    public static var configuration: PolicyConfiguration {
        let t = { (h: Int, m: Int) in
            TimeOfDay(hour: h, minute: m) ?? TimeOfDay(hour: 0, minute: 0).unsafelyUnwrapped
        }
        return PolicyConfiguration(
            timeZone: "Europe/Berlin",
            stores: [
                StoreConfiguration(
                    name: "games",
                    selection: Selection(executables: ["/usr/bin/steam"], desktopCategories: ["Game"]),
                    gate: GateConfiguration(
                        goals: [GoalTier(steps: 1000, minutes: 30), GoalTier(steps: 2500, minutes: 60)],
                        dailyUnlockCap: 3),
                    schedules: [ScheduleConfiguration(name: "night", start: t(22, 0), end: t(7, 0))]),
                StoreConfiguration(
                    name: "chat", selection: Selection(domains: ["chat.example"]),
                    schedules: [
                        ScheduleConfiguration(
                            name: "evening", start: t(18, 0), end: t(21, 0), goal: ScheduleGoal(steps: 2000))
                    ]),
            ])
    }

    /// `count` inputs, half a second apart, from 2025-03-01T06:00Z: walking bouts of one or two
    /// steps per input, a tick every minute, and a lock and an emergency unlock now and then.
    public static func workload(count: Int) -> [(PolicyInput, Instant)] {
        var result: [(PolicyInput, Instant)] = []
        result.reserveCapacity(count)
        let start: Int64 = 1_740_808_800_000
        for i in 0..<count {
            let t = Int64(i) * 500
            let input: PolicyInput
            if i % 120 == 0 {
                input = .tick
            } else if i % 50_000 == 1 {
                input = .command(.lock(store: "games", duration: .seconds(600), by: "bench"))
            } else if i % 200_000 == 2 {
                input = .command(.emergencyUnlock(store: "chat", by: "bench"))
            } else {
                input = .steps(1 + i % 2)
            }
            result.append((input, Instant(wallMillis: start + t, monoMillis: t, bootID: "bench")))
        }
        return result
    }

    /// Feeds the workload to a fresh engine; returns the number of effects (so the work is used).
    public static func drive(_ workload: [(PolicyInput, Instant)]) -> Int {
        var engine = PolicyEngine(configuration: configuration)
        var effects = 0
        for (input, instant) in workload {
            effects &+= engine.handle(input, at: instant).count
        }
        return effects
    }
}
