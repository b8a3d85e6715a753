import Foundation

// libFuzzer target for the policy's parsers: the configuration (policy section) and the
// versioned state file. Built by Fuzz/run-policy.sh together with Sources/UnlockPolicy.
//
// Checks beyond "does not crash": a state file that decodes must encode to text that decodes
// to the same state and encodes to the same text (the restart round trip is exact).

@_cdecl("LLVMFuzzerTestOneInput")
public func policyFuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let text = String(decoding: bytes, as: UTF8.self)

    if let configuration = try? PolicyConfiguration.parse(text) {
        // A configuration that parses drives an engine without trapping.
        var engine = PolicyEngine(configuration: configuration)
        let now = Instant(
            wall: Date(timeIntervalSince1970: 1_740_819_600), monotonic: .seconds(5), bootID: "fuzz")
        _ = engine.handle(.tick, at: now)
        _ = engine.handle(.steps(size), at: now)
    }

    if let state = try? PolicyState.decode(bytes: bytes) {
        let encoded = state.encoded()
        guard let again = try? PolicyState.decode(encoded) else {
            fatalError("re-encoded state does not decode:\n\(encoded)")
        }
        guard again == state, again.encoded() == encoded else {
            fatalError("state round trip is not exact:\n\(encoded)")
        }
    }
    return 0
}
