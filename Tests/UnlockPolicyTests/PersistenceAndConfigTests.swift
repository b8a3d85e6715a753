import Foundation
import StepGateTestSupport
import StepHistoryStore
import Testing
import TypedJSON

@testable import SystemFiles
@testable import UnlockPolicy

@Suite("8. Persisted state")
struct PersistenceTests {
    func busyState() throws -> PolicyState {
        var clock = ManualClock("2025-03-01T21:30:00Z")
        var config = scheduleConfig(start: "22:00", end: "07:00", goal: ScheduleGoal(steps: 50, minutes: 20))
        config.stores[0].gate = GateConfiguration(goals: [GoalTier(steps: 100, minutes: 30)])
        var engine = PolicyEngine(configuration: config)
        _ = engine.handle(.steps(100), at: clock.now)
        _ = engine.handle(
            .command(.lock(store: "games", duration: .seconds(5400), by: "dana")), at: clock.now)
        _ = engine.handle(.command(.emergencyUnlock(store: "games", by: "dana")), at: clock.now)
        clock.advance(minutes: 45)
        _ = engine.handle(.steps(30), at: clock.now)
        _ = engine.handle(.command(.skip(schedule: "night", occurrence: "2025-03-02")), at: clock.now)
        return engine.state
    }

    @Test func roundTripsExactly() throws {
        let state = try busyState()
        let text = state.encoded()
        #expect(text.contains("\"version\": 3"))
        #expect(text.contains("\"lengthSeconds\": 5400"))
        #expect(text.contains("\"start\": \"2025-03-01T21:30:00Z\""))
        let back = try PolicyState.decode(text)
        #expect(back == state)
        #expect(back.encoded() == text)
    }

    /// The day's steps and the daily tiers already paid survive a restart exactly; a version 2
    /// file (before daily goals) reads as a state without them.
    @Test func dailyGoalStateRoundTrips() throws {
        let clock = ManualClock("2025-03-01T09:00:00Z")
        let config = try PolicyConfiguration.parse(
            ConfigurationTests.base + #""gate": {"goals": [{"stepsToday": 1000, "minutes": 30}]}}}}"#)
        var engine = PolicyEngine(configuration: config)
        _ = engine.handle(.steps(1200), at: clock.now)
        let text = engine.state.encoded()
        #expect(text.contains(#""today": {"#) && text.contains(#""day": "2025-03-01""#))
        #expect(text.contains(#""dailyPaid": 1"#))
        let back = try PolicyState.decode(text)
        #expect(back == engine.state)
        let older = text.replacingOccurrences(of: #""version": 3"#, with: #""version": 2"#)
        #expect(try PolicyState.decode(older) == back)
        var withoutToday = back
        withoutToday.today = nil
        #expect(try PolicyState.decode(withoutToday.encoded()).today == nil)
    }

    /// A reboot's unproven credit and its pending proof survive a restart exactly; a file
    /// claiming more unproven time than the ledger holds is corrupt.
    @Test func unprovenRebootCreditRoundTrips() throws {
        var clock = ManualClock("2025-03-01T09:00:00Z")
        var engine = PolicyEngine(configuration: try PolicyConfiguration.parse(Self.lockConfig))
        _ = engine.handle(
            .command(.lock(store: "games", duration: .seconds(7200), by: "admin")), at: clock.now)
        clock.reboot(downMinutes: 24 * 60)
        clock.synchronized = false
        _ = engine.handle(.tick, at: clock.now)
        let text = engine.state.encoded()
        #expect(text.contains("\"unprovenSeconds\": 86395"))
        #expect(text.contains("\"unprovenReboot\""))
        let back = try PolicyState.decode(text)
        #expect(back == engine.state)
        #expect(engine.status(at: clock.now).stores[0].owners == ["lock:admin"])
        // Network time: the day off is proven, the lock is over.
        clock.advance(minutes: 1)
        clock.synchronized = true
        var restored = PolicyEngine(configuration: engine.configuration, state: back)
        _ = restored.handle(.tick, at: clock.now)
        #expect(restored.state.unproven == 0 && restored.state.pendingProof == nil)
        #expect(restored.status(at: clock.now).stores[0].owners.isEmpty)
        let forged = text.replacingOccurrences(
            of: "\"unprovenSeconds\": 86395", with: "\"unprovenSeconds\": 9e9")
        #expect(throws: PolicyStateError.self) { try PolicyState.decode(forged) }
    }

    static let lockConfig = #"{"stores": {"games": {"selection": {"executables": ["/usr/games/x"]}}}}"#

    @Test(arguments: [
        ("{", "invalid JSON"),
        ("[]", "expected an object"),
        ("{\"version\": 1}", "elapsedSeconds: missing required key"),
        ("{\"version\": \"1\"}", "version: expected an integer"),
        (
            "{\"version\": 1, \"elapsedSeconds\": 0, \"stores\": {}, \"extra\": true}",
            "extra: unknown key"
        ),
    ])
    func corruptFilesSayWhy(text: String, fragment: String) {
        #expect(throws: PolicyStateError.self) { try PolicyState.decode(text) }
        do {
            _ = try PolicyState.decode(text)
        } catch {
            #expect(error.description.contains(fragment), "\(error)")
        }
    }

    @Test func corruptStateStartsLockedAndSaysWhy() {
        var store = InMemoryPolicyStateStore(text: "{\"version\": 1, \"elapsed")
        var engine = PolicyEngine(configuration: gateConfig(), restoring: store.load())
        let clock = ManualClock("2025-03-01T10:00:00Z")
        #expect(engine.handle(.tick, at: clock.now).applies == ["games"])
        #expect(engine.problems.first?.contains("corrupt") == true)
        #expect(engine.problems.first?.contains("started locked") == true)
    }

    @Test func newerVersionIsNeverOverwritten() throws {
        let directory = try TemporaryFolders.make("policy")
        defer { TemporaryFolders.remove(directory) }
        let path = directory.appendingPathComponent("state.json").path
        let future = "{\"version\": 99, \"whatever\": true}\n"
        try future.write(toFile: path, atomically: false, encoding: .utf8)
        var store = FilePolicyStateStore(path: path)
        let loaded = store.load()
        #expect(loaded.error == .newerVersion(99))
        var engine = PolicyEngine(configuration: gateConfig(), restoring: loaded)
        let clock = ManualClock("2025-03-01T10:00:00Z")
        _ = engine.handle(.tick, at: clock.now)
        #expect(engine.shielded("games", at: clock.now))
        #expect(throws: PolicyStateError.newerVersion(99)) { try store.save(engine.state) }
        #expect(try String(contentsOfFile: path, encoding: .utf8) == future)
    }

    /// At start, a state file from a newer StepGate refuses the first save; the shell drops the
    /// rest of that batch (the first `apply`), and the engine's answer must apply it again.
    @Test func newerVersionAtStartStillAppliesTheShields() {
        var sim = PolicySimulator(
            configuration: gateConfig(), stateStore: InMemoryPolicyStateStore(text: "{\"version\": 99}"),
            start: Date(timeIntervalSince1970: 1_740_819_600))
        let records = sim.send(.tick)
        #expect(records.contains { $0.failure != nil })
        #expect(games.targets.isSubset(of: sim.enforced))
        for minute in 1...3 {
            _ = sim.advance(to: Date(timeIntervalSince1970: 1_740_819_600 + Double(60 * minute)))
            _ = sim.send(.steps(150))
            #expect(games.targets.isSubset(of: sim.enforced), "minute \(minute)")
            #expect(sim.engine.shielded("games", at: sim.instant))
        }
        #expect(sim.engine.problems.contains { $0.contains("newer than this StepGate") })
    }

    @Test func fileStoreWritesAtomicallyAndMovesCorruptFilesAside() throws {
        let directory = try TemporaryFolders.make("policy")
        defer { TemporaryFolders.remove(directory) }
        let path = directory.appendingPathComponent("state.json").path
        var store = FilePolicyStateStore(path: path)
        #expect(try store.load().get() == nil)
        let state = try busyState()
        try store.save(state)
        #expect(try store.load().get() == state)
        try "garbage".write(toFile: path, atomically: false, encoding: .utf8)
        var again = FilePolicyStateStore(path: path)
        #expect(again.load().error != nil)
        try again.save(state)
        #expect(try String(contentsOfFile: path + ".corrupt", encoding: .utf8) == "garbage")
        #expect(try again.load().get() == state)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter {
            $0.contains(".tmp-")
        }
        #expect(leftovers.isEmpty)
    }
}

@Suite("8. Persisted state: the file store never loses a file it could not use")
struct StateFileSafetyTests {
    func temporaryDirectory() throws -> URL {
        try TemporaryFolders.make("policy")
    }

    /// EACCES or EIO on read: the file is never overwritten (tests run as root, where chmod does
    /// not stop reads, so the read failure comes through the store's read seam).
    @Test func unreadableFileIsNeverOverwritten() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("state.json").path
        let original = PolicyState().encoded()
        try original.write(toFile: path, atomically: false, encoding: .utf8)
        var store = FilePolicyStateStore(path: path)
        store.readFile = { path throws(FileError) in
            throw FileError(operation: "cannot read", path: path, reason: "Input/output error")
        }
        let loaded = store.load()
        guard case .failure(.io(let reason)) = loaded else {
            Issue.record("expected an I/O failure, got \(loaded)")
            return
        }
        #expect(reason.contains("Input/output error"))
        #expect(throws: PolicyStateError.self) { try store.save(PolicyState()) }
        #expect(try String(contentsOfFile: path, encoding: .utf8) == original)
        // The engine starts locked, stays locked (every save fails) and says why.
        var sim = PolicySimulator(
            configuration: gateConfig(), stateStore: store, start: Date(timeIntervalSince1970: 1_740_819_600))
        _ = sim.send(.tick)
        _ = sim.send(.steps(150))
        #expect(sim.engine.shielded("games", at: sim.instant))
        #expect(games.targets.isSubset(of: sim.enforced))
        #expect(sim.engine.problems.contains { $0.contains("not overwriting it") })
        #expect(try String(contentsOfFile: path, encoding: .utf8) == original)
    }

    /// A corrupt file that cannot be moved aside is not overwritten either.
    @Test func corruptFileThatCannotBeMovedAsideIsKept() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("state.json").path
        try "garbage".write(toFile: path, atomically: false, encoding: .utf8)
        // PATH.corrupt is a non-empty directory: rename(2) onto it fails, even for root.
        try FileManager.default.createDirectory(
            atPath: path + ".corrupt/x", withIntermediateDirectories: true)
        var store = FilePolicyStateStore(path: path)
        #expect(store.load().error != nil)
        do {
            try store.save(PolicyState())
            Issue.record("saved over a corrupt file it could not move aside")
        } catch {
            #expect(error.description.contains("cannot move the corrupt state file aside"))
        }
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "garbage")
    }

    /// A file over the 16 MiB limit is corrupt, and moved aside like any other.
    @Test func oversizedFileIsMovedAside() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("state.json").path
        let size = (16 << 20) + 1
        try Data(repeating: UInt8(ascii: " "), count: size).write(to: URL(fileURLWithPath: path))
        var store = FilePolicyStateStore(path: path)
        guard case .failure(.corrupt) = store.load() else {
            Issue.record("an oversized file should be corrupt")
            return
        }
        try store.save(PolicyState())
        let aside = try FileManager.default.attributesOfItem(atPath: path + ".corrupt")
        #expect((aside[.size] as? Int) == size)
        #expect(try store.load().get() == PolicyState())
    }
}

extension Result {
    var error: Failure? {
        if case .failure(let e) = self { return e }
        return nil
    }
}

@Suite("9. Configuration")
struct ConfigurationTests {
    @Test func theCommentedSampleParses() throws {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("samples/policy.example.json")
        let config = try PolicyConfiguration.load(contentsOf: url)
        #expect(!config.stores.isEmpty)
    }

    @Test func policySectionOfAWholeConfigFile() throws {
        let config = try PolicyConfiguration.parse(
            #"{"detector": {"anything": 1}, "policy": {"stores": {"a": {"selection": {"hooks": ["h"]}}}}}"#)
        #expect(config.stores.map(\.name) == ["a"])
        do {
            _ = try PolicyConfiguration.parse(#"{"policy": {"stores": {"a": {"selection": {"hook": []}}}}}"#)
            Issue.record("accepted an unknown key")
        } catch {
            #expect(error.path == "policy.stores.a.selection.hook")
        }
    }

    static let base =
        #"{"timeZone": "Europe/Berlin", "stores": {"games": {"selection": {"executables": ["x"]}, "#

    @Test(arguments: [
        (
            #""schedules": [{"name": "a", "start": "10:00", "end": "11:00"}, {"name": "b", "start": "25:00", "end": "07:00"}]}}}"#,
            #"stores.games.schedules[1].start: expected "HH:MM", found "25:00""#
        ),
        (
            #""gate": {"goals": [{"steps": 100, "minutes": 30}], "cap": 2}}}}"#,
            #"stores.games.gate.cap: unknown key; expected one of "goals", "dailyUnlockCap""#
        ),
        (
            #""gate": {"goals": [{"steps": "100", "minutes": 30}]}}}}"#,
            #"stores.games.gate.goals[0].steps: expected an integer, found "100""#
        ),
        (
            #""schedules": [{"name": "a", "start": "10:00", "end": "10:00"}]}}}"#,
            "stores.games.schedules[0].end: start and end are both 10:00: a window must last at least a minute"
        ),
        (
            #""schedules": [{"name": "a", "start": "10:00", "end": "11:00", "timeZone": "Mars/Olympus"}]}}}"#,
            #"stores.games.schedules[0].timeZone: unknown time zone "Mars/Olympus""#
        ),
        (
            #""schedules": [{"name": "a", "start": "10:00", "end": "11:00", "timeZone": "UTC+2"}]}}}"#,
            #"stores.games.schedules[0].timeZone: "UTC+2" is an offset; use a zone identifier such as "Europe/Berlin""#
        ),
        (
            #""gate": {"goals": [{"steps": 100, "minutes": 0}]}}}}"#,
            "stores.games.gate.goals[0].minutes: an unlock window must last at least a minute"
        ),
        (
            #""gate": {"goals": [{"steps": 100, "minutes": 30}, {"steps": 90, "minutes": 60}]}}}}"#,
            "stores.games.gate.goals[1]: graduated goals must increase in both steps and minutes"
        ),
        (
            #""gate": {"goals": [{"stepsToday": 1000, "minutes": 30}, {"steps": 2000, "minutes": 60}]}}}}"#,
            #"stores.games.gate.goals[1]: a gate's goals are all "steps" (since the lock) or all "stepsToday" (the day's)"#
        ),
        (
            #""gate": {"goals": [{"stepsToday": 1000, "steps": 1000, "minutes": 30}]}}}}"#,
            #"stores.games.gate.goals[0]: a goal has "steps" (since the lock) or "stepsToday" (the day's), not both"#
        ),
        (
            #""gate": {"goals": [{"stepsToday": 2000, "minutes": 30}, {"stepsToday": 1000, "minutes": 30}]}}}}"#,
            "stores.games.gate.goals[1].stepsToday: daily goals must increase in steps"
        ),
        (
            #""gate": {"goals": [{"stepsToday": 0, "minutes": 30}]}}}}"#,
            "stores.games.gate.goals[0].stepsToday: expected at least 1 step"
        ),
        (
            #""schedules": [{"name": "a", "days": ["mon", "fry"], "start": "10:00", "end": "11:00"}]}}}"#,
            #"stores.games.schedules[0].days[1]: expected "daily", "weekdays", "weekends" or a list of "mon"…"sun", found "fry""#
        ),
        (
            #""schedules": [{"name": "a", "start": "10:00", "end": "11:00", "goal": {"steps": 10, "minutes": 0}}]}}}"#,
            "stores.games.schedules[0].goal.minutes: an unlock window must last at least a minute"
        ),
        (#""schedules": 3}}}"#, "stores.games.schedules: expected an array, found an integer"),
        (
            #""gate": {"goals": [{"steps": 10, "minutes": 1000000000000000}]}}}}"#,
            "stores.games.gate.goals[0].minutes: an unlock window must last at most 366 days (527040 minutes), found 1000000000000000"
        ),
        (
            #""gate": {"goals": [{"steps": 5000000000, "minutes": 30}]}}}}"#,
            "stores.games.gate.goals[0].steps: expected at most 1000000000 steps, found 5000000000"
        ),
        (
            #""schedules": [{"name": "a", "start": "10:00", "end": "11:00", "goal": {"steps": 10, "minutes": 527041}}]}}}"#,
            "stores.games.schedules[0].goal.minutes: an unlock window must last at most 366 days (527040 minutes), found 527041"
        ),
    ])
    func errorsNameTheJSONPath(tail: String, message: String) {
        do {
            _ = try PolicyConfiguration.parse(Self.base + tail)
            Issue.record("accepted: \(tail)")
        } catch {
            #expect(error.description == message)
        }
    }

    /// Domains are checked where the configuration is read, so `daemon --check` and `reload`
    /// refuse what the shield could not block; the accepted ones are normalised.
    @Test(arguments: [
        (
            "*.evil.test",
            "a wildcard; write the domain itself (evil.test): the dnsmasq format blocks every subdomain of it"
        ),
        ("127.0.0.1", "an IP address; a name shield cannot block an address"),
        ("::1", "an IP address; a name shield cannot block an address"),
        ("localhost", "a single label; a domain has at least two (example.com)"),
        ("bad domain; rm -rf", "a character other than letters, digits, '-' and '.'"),
        ("-x.test", "a label that starts or ends with '-'"),
        ("a..b", "an empty label (two dots in a row)"),
        ("bücher.test", "not ASCII; write an international name in its xn-- (punycode) form"),
        (".", "an empty name"),
    ])
    func domainsAreCheckedWhenRead(domain: String, reason: String) {
        let text = #"{"stores": {"games": {"selection": {"domains": ["ok.example", "\#(domain)"]}}}}"#
        do {
            _ = try PolicyConfiguration.parse(text)
            Issue.record("accepted \(domain)")
        } catch {
            #expect(error.path == "stores.games.selection.domains[1]")
            #expect(error.description.hasSuffix(": " + reason))
            #expect(
                error.description.contains("expected a domain name like example.com, found \"\(domain)\""))
        }
    }

    @Test func domainsAreNormalised() throws {
        let config = try PolicyConfiguration.parse(
            #"{"stores": {"games": {"selection": {"domains": ["Example.COM.", "xn--bcher-kva.test", "store.steampowered.com"]}}}}"#
        )
        #expect(
            config.stores[0].selection.domains == [
                "example.com", "store.steampowered.com", "xn--bcher-kva.test",
            ])
    }

    @Test func emergencyMinutesAreBounded() {
        do {
            _ = try PolicyConfiguration.parse(#"{"emergency": {"minutes": 1000000000000000}, "stores": {}}"#)
            Issue.record("accepted")
        } catch {
            #expect(error.path == "emergency.minutes")
        }
    }

    /// An engine built from an unvalidated configuration (or fed extreme inputs) never traps on
    /// overflow: lengths are bounded and clock readings clamped.
    @Test func extremeValuesDoNotTrap() throws {
        let huge = Int(1_000_000_000_000_000)
        let config = PolicyConfiguration(
            emergency: EmergencyPolicy(perWeek: 2, minutes: huge),
            stores: [
                StoreConfiguration(
                    name: "games", selection: games,
                    gate: GateConfiguration(goals: [GoalTier(steps: 10, minutes: huge)]),
                    schedules: [
                        ScheduleConfiguration(
                            name: "all", start: TimeOfDay(hour: 0, minute: 0)!,
                            end: TimeOfDay(hour: 23, minute: 59)!,
                            goal: ScheduleGoal(steps: 10, minutes: huge))
                    ])
            ])
        var engine = PolicyEngine(configuration: config)
        let clock = ManualClock("2025-03-01T09:00:00Z")
        _ = engine.handle(.steps(Int.max), at: clock.now)
        _ = engine.handle(.command(.emergencyUnlock(store: "games", by: "x")), at: clock.now)
        _ = engine.handle(
            .command(.lock(store: "games", duration: .seconds(Int64.max), by: "x")), at: clock.now)
        let far = Instant(
            wall: Date(timeIntervalSince1970: 1e15), monotonic: .seconds(Int64.max), bootID: "b")
        _ = engine.handle(.steps(Int.max), at: far)
        let minus = Instant(
            wall: Date(timeIntervalSince1970: -1e15), monotonic: .seconds(Int64.min), bootID: "c")
        _ = engine.handle(.tick, at: minus)
        _ = engine.handle(.steps(Int.max), at: far)
        // Whatever happened, the state still round-trips through its file.
        #expect(try PolicyState.decode(engine.state.encoded()) == engine.state)
    }

    @Test func unknownTopLevelKeyAndZoneOffset() {
        #expect(throws: (any Error).self) {
            try PolicyConfiguration.parse(#"{"stores": {}, "timezone": "UTC"}"#)
        }
        #expect(throws: (any Error).self) {
            try PolicyConfiguration.parse(#"{"stores": {}, "timeZone": "+02:00"}"#)
        }
        #expect(throws: (any Error).self) {
            try PolicyConfiguration.parse(#"{"stores": {}, "timeZone": "Etc/GMT-2"}"#)
        }
        #expect(
            (try? PolicyConfiguration.parse(#"{"stores": {}, "timeZone": "America/Port-au-Prince"}"#)) != nil)
    }
}
