import Foundation

// libFuzzer target for the control socket: every line a local user can send is decoded and
// bounded by ControlCommand.decode, and what decodes is handed to the policy engine as the
// daemon would (on behalf of an admin, the most powerful caller). Built by Fuzz/run-control.sh
// together with Sources/UnlockPolicy and the decoder.
//
// Checks beyond "does not crash or trap":
// * a decoded lock is within its bounds (0 < minutes ≤ 366 days);
// * texts are bounded;
// * the engine's state still round-trips through its file after the command.

let controlFuzzConfiguration: PolicyConfiguration = {
    let text = """
        {"emergency": {"perWeek": 2, "minutes": 15}, "stores": {
          "games": {"selection": {"executables": ["/usr/games/x"], "domains": ["example.com"]},
                    "gate": {"goals": [{"steps": 100, "minutes": 30}]},
                    "schedules": [{"name": "night", "start": "22:00", "end": "07:00"}]}}}
        """
    return (try? PolicyConfiguration.parse(text)) ?? PolicyConfiguration(stores: [])
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func controlFuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let line = Array(UnsafeBufferPointer(start: data, count: size))
    guard case .success(let command) = ControlCommand.decode(line) else { return 0 }
    switch command {
    case .lock(let store, let minutes):
        precondition(minutes > 0 && minutes <= ControlCommand.maximumLockMinutes && !store.isEmpty)
    case .check(let executable, let resolved):
        precondition(executable.utf8.count <= ControlCommand.maximumText)
        precondition((resolved?.utf8.count ?? 0) <= ControlCommand.maximumText)
    case .history(let days):
        precondition((1...400).contains(days))
    default: break
    }
    guard let policy = command.policyCommand(by: "uid 0") else { return 0 }
    var engine = PolicyEngine(configuration: controlFuzzConfiguration)
    let start = Instant(wall: Date(timeIntervalSince1970: 1_740_000_000), monotonic: .seconds(100), bootID: "b")
    _ = engine.handle(.tick, at: start)
    _ = engine.handle(.command(policy), at: start)
    var later = start
    later.monotonic += .seconds(3600)
    later.wall += 3600
    _ = engine.handle(.tick, at: later)
    let text = engine.state.encoded()
    guard let decoded = try? PolicyState.decode(text) else {
        preconditionFailure("the state after \(command) does not decode")
    }
    precondition(decoded.encoded() == text, "the state after \(command) does not round-trip")
    return 0
}
