import Foundation

// libFuzzer target for the policy: the configuration parser, the versioned state file, and the
// engine fed with decoded states and short input sequences. Built by Fuzz/run-policy.sh together
// with Sources/UnlockPolicy.
//
// Checks beyond "does not crash":
// * a state file that decodes must encode to text that decodes to the same state and encodes to
//   the same text (the restart round trip is exact);
// * after any input sequence, the engine's state still round-trips through its file;
// * after any input, whatever the policy says is shielded has been applied by the effects the
//   shell carried out (the rest of a batch is dropped after a failed persist or wake-up).

/// The engine's configuration when the input is a state file or a plain input sequence: a gate
/// with graduated goals and a cap, a nightly schedule with a goal, a second store sharing a target.
let fuzzConfiguration: PolicyConfiguration = {
    let text = """
        {"emergency": {"perWeek": 2, "minutes": 15}, "stores": {
          "games": {"selection": {"executables": ["/usr/bin/steam", "/usr/games/x"]},
                    "gate": {"goals": [{"steps": 100, "minutes": 30}, {"steps": 250, "minutes": 60}],
                             "dailyUnlockCap": 2},
                    "schedules": [{"name": "night", "start": "22:00", "end": "07:00",
                                   "goal": {"steps": 300, "minutes": 20}}]},
          "evening": {"selection": {"executables": ["/usr/bin/steam"], "domains": ["example.com"]},
                      "schedules": [{"name": "evening", "start": "18:00", "end": "01:30"}]}}}
        """
    return (try? PolicyConfiguration.parse(text)) ?? PolicyConfiguration(stores: [])
}()

/// Reads bytes as a stream of small numbers.
struct ByteReader {
    var bytes: [UInt8]
    var index = 0
    mutating func next() -> Int {
        guard !bytes.isEmpty else { return 0 }
        defer { index += 1 }
        return Int(bytes[index % bytes.count])
    }
    mutating func wide() -> Int64 {
        var n: Int64 = 0
        for _ in 0..<4 { n = n << 8 | Int64(next()) }
        return n
    }
}

/// A shell that drops the rest of a batch after a failed effect, tracking the enforced targets.
struct FuzzShell {
    var engine: PolicyEngine
    var enforced = Set<Target>()
    var failPersist = false
    var failWake = false

    mutating func send(_ input: PolicyInput, at now: Instant, depth: Int = 0) {
        for effect in engine.handle(input, at: now) {
            var failure: EffectFailure?
            switch effect {
            case .persist: if failPersist { failure = .persist("fuzz: ENOSPC") }
            case .wakeUp: if failWake { failure = .wakeUp("fuzz: EMFILE") }
            case .apply(_, let selection, _): enforced.formUnion(selection.targets)
            case .remove(_, let selection): enforced.subtract(selection.targets)
            case .notify: break
            }
            if let failure {
                guard depth < 3 else { fatalError("the engine's answers to a failure keep failing") }
                send(.effectFailed(failure), at: now, depth: depth + 1)
                return
            }
        }
    }
}

func drive(_ engine: PolicyEngine, _ reader: inout ByteReader, start: Int64) {
    var shell = FuzzShell(engine: engine)
    var wall = start
    var mono: Int64 = 5_000
    var boot = 0
    let stores = shell.engine.configuration.stores.map(\.name) + ["nope"]
    var shieldFailed = false
    // The shell's first input (the daemon starts with a tick).
    shell.send(
        .tick,
        at: Instant(
            wall: Date(timeIntervalSince1970: Double(wall) / 1000), monotonic: .milliseconds(mono),
            bootID: "boot-0"))
    for _ in 0..<min(24, reader.bytes.count / 3) {
        var now: Instant {
            Instant(
                wall: Date(timeIntervalSince1970: Double(wall) / 1000), monotonic: .milliseconds(mono),
                bootID: "boot-\(boot)")
        }
        let store = stores[reader.next() % stores.count]
        switch reader.next() % 16 {
        case 0: shell.send(.steps(reader.next() * 7), at: now)
        case 1: shell.send(.steps(Int.max - reader.next()), at: now)
        case 2: shell.send(.steps(Int(reader.wide()) * 1_000_003), at: now)
        case 3, 4:
            let step = Int64(reader.next()) * 60_000
            wall += step
            mono += step
            shell.send(.tick, at: now)
        case 5:
            wall += (reader.wide() - 0x7fff_ffff) * 1000  // a wall jump, either way
            shell.send(.tick, at: now)
        case 6:
            boot += 1
            mono = Int64(reader.next()) * 1000
            wall += reader.wide() * 100
            let saved = shell.engine.state
            shell = FuzzShell(engine: PolicyEngine(configuration: shell.engine.configuration, state: saved))
            shell.send(.tick, at: now)
        case 7:
            let minutes = [0, 1, 59, 120, 527_040, Int(Int32.max)][reader.next() % 6]
            shell.send(
                .command(.lock(store: store, duration: .seconds(Int64(minutes) * 60), by: "f")), at: now)
        case 8: shell.send(.command(.emergencyUnlock(store: store, by: "f")), at: now)
        case 9:
            let day = ["2025-03-01", "night@2025-03-02", "evening@1999-12-31", "x@y", nil][reader.next() % 5]
            shell.send(
                .command(.skip(schedule: reader.next() % 2 == 0 ? "night" : "evening", occurrence: day)),
                at: now)
        case 10:
            let zone = ["Europe/Berlin", "Pacific/Kiritimati", "America/New_York", "UTC+2", "Mars/Olympus"]
            shell.send(.zoneChanged(zone[reader.next() % zone.count]), at: now)
        case 11: shell.failPersist.toggle()
        case 12: shell.failWake.toggle()
        case 13:
            let report: ShieldReport = reader.next() % 2 == 0 ? .failed("fuzz") : .applied(Selection())
            if case .failed = report { shieldFailed = true }
            var own = shell.engine.configuration.store(named: store)?.selection.targets ?? []
            for other in shell.engine.configuration.stores where other.name != store {
                own.subtract(other.selection.targets)
            }
            shell.enforced.subtract(own)
            shell.send(.shieldReport(store: store, report), at: now)
        case 14: shell.send(.command(.reload(fuzzConfiguration)), at: now)
        default:
            shell.send(.effectFailed(reader.next() % 2 == 0 ? .persist("fuzz") : .wakeUp("fuzz")), at: now)
        }
        // Whatever the policy holds now is enforced by the effects carried out (unless a shield
        // reported a failure: that is retried on a later tick).
        if !shieldFailed {
            let status = shell.engine.status(at: now)
            for s in status.stores where s.shielded {
                let targets = shell.engine.configuration.store(named: s.name)?.selection.targets ?? []
                guard targets.isSubset(of: shell.enforced) else {
                    fatalError("\(s.name) is shielded by the policy but not enforced")
                }
            }
        }
    }
    let state = shell.engine.state
    let encoded = state.encoded()
    guard let again = try? PolicyState.decode(encoded), again == state else {
        fatalError("the engine's state does not round-trip:\n\(encoded)")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func policyFuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let text = String(decoding: bytes, as: UTF8.self)
    let start: Int64 = 1_740_819_600_000

    if let configuration = try? PolicyConfiguration.parse(text) {
        // A configuration that parses drives an engine through a short input sequence.
        var reader = ByteReader(bytes: Array(bytes.reversed()))
        drive(PolicyEngine(configuration: configuration), &reader, start: start)
    }

    if let state = try? PolicyState.decode(bytes: bytes) {
        let encoded = state.encoded()
        guard let again = try? PolicyState.decode(encoded) else {
            fatalError("re-encoded state does not decode:\n\(encoded)")
        }
        guard again == state, again.encoded() == encoded else {
            fatalError("state round trip is not exact:\n\(encoded)")
        }
        // A decoded state drives the engine (same boot, a new boot, or a far wall clock).
        var reader = ByteReader(bytes: bytes)
        let seen = state.lastSeen?.wall ?? start
        drive(PolicyEngine(configuration: fuzzConfiguration, state: state), &reader, start: seen)
    } else if size >= 3 {
        // Anything else is an input sequence for a fresh engine.
        var reader = ByteReader(bytes: bytes)
        drive(PolicyEngine(configuration: fuzzConfiguration), &reader, start: start)
    }
    return 0
}
