import Foundation
import Testing

@testable import UnlockPolicy

/// A manual clock: wall and boot time advance together unless a test jumps the wall clock.
struct ManualClock {
    var wall: Int64
    var mono: Int64 = 1_000
    var boot = "boot-a"
    var synchronized = true

    init(_ iso: String) {
        wall = parseISO8601(iso) ?? 0
    }

    var now: Instant {
        Instant(wallMillis: wall, monoMillis: mono, bootID: boot, clockSynchronized: synchronized)
    }

    mutating func advance(minutes: Double) {
        let ms = Int64(minutes * 60_000)
        wall += ms
        mono += ms
    }

    mutating func jumpWall(minutes: Double) { wall += Int64(minutes * 60_000) }

    mutating func reboot(downMinutes: Double) {
        wall += Int64(downMinutes * 60_000)
        mono = 5_000
        boot += "+"
    }
}

func iso(_ date: Date?) -> String? { date.map { formatISO8601(millisFromDate($0)) } }

extension [PolicyEffect] {
    var notices: [PolicyNotice] {
        compactMap {
            if case .notify(let n) = $0 { return n }
            return nil
        }
    }
    var kinds: [String] { notices.map(\.kind.rawValue) }
    var applies: [String] {
        compactMap {
            if case .apply(let store, _, _) = $0 { return store }
            return nil
        }
    }
    var removes: [(String, Selection)] {
        compactMap {
            if case .remove(let store, let selection) = $0 { return (store, selection) }
            return nil
        }
    }
    var persisted: PolicyState? {
        for effect in self.reversed() {
            if case .persist(let s) = effect { return s }
        }
        return nil
    }
}

extension PolicyEngine {
    func shielded(_ store: String, at now: Instant) -> Bool {
        status(at: now).stores.first { $0.name == store }?.shielded ?? false
    }
    func owners(_ store: String, at now: Instant) -> [String] {
        status(at: now).stores.first { $0.name == store }?.owners ?? []
    }
}

let games = Selection(executables: ["/usr/games/supertuxkart"], desktopCategories: ["Game"])

func gateConfig(cap: Int? = nil, graduated: Bool = false) -> PolicyConfiguration {
    let goals =
        graduated
        ? [GoalTier(steps: 100, minutes: 30), GoalTier(steps: 250, minutes: 60)]
        : [GoalTier(steps: 100, minutes: 30)]
    return PolicyConfiguration(
        timeZone: "Europe/Berlin",
        stores: [
            StoreConfiguration(
                name: "games", selection: games, gate: GateConfiguration(goals: goals, dailyUnlockCap: cap))
        ])
}

func scheduleConfig(
    start: String, end: String, zone: String = "Europe/Berlin", days: Set<Weekday> = Set(Weekday.allCases),
    goal: ScheduleGoal? = nil
) -> PolicyConfiguration {
    PolicyConfiguration(
        timeZone: zone,
        stores: [
            StoreConfiguration(
                name: "games", selection: games,
                schedules: [
                    ScheduleConfiguration(
                        name: "night", days: days, start: TimeOfDay(start) ?? TimeOfDay(hour: 0, minute: 0)!,
                        end: TimeOfDay(end) ?? TimeOfDay(hour: 0, minute: 0)!, goal: goal)
                ])
        ])
}

/// SplitMix64: a tiny seeded generator, so property-test failures reproduce from the seed.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
