#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Where the policy state lives between runs: a file for the daemon, memory for `simulate`
/// and tests. Both go through the same JSON encoding, so a simulated restart is a real one.
public protocol PolicyStateStore {
    /// The saved state; `.success(nil)` when nothing was saved yet. A corrupt file or one from
    /// a newer StepGate is a `.failure`: the engine then starts locked and says why.
    mutating func load() -> Result<PolicyState?, PolicyStateError>
    /// Saves the state, replacing the previous one atomically.
    mutating func save(_ state: PolicyState) throws(PolicyStateError)
}

/// Keeps the encoded state in memory; can be told to fail, to test fail-closed behaviour.
public struct InMemoryPolicyStateStore: PolicyStateStore, Sendable {
    /// The last saved text, exactly as a file would hold it.
    public var text: String?
    /// When set, `save` throws this reason (a simulated full disk).
    public var failure: String?
    private var refusal: PolicyStateError?

    /// Creates a store, optionally holding some text already (which may be corrupt).
    public init(text: String? = nil) { self.text = text }

    public mutating func load() -> Result<PolicyState?, PolicyStateError> {
        guard let text else { return .success(nil) }
        do throws(PolicyStateError) {
            return .success(try PolicyState.decode(text))
        } catch {
            if case .newerVersion = error { refusal = error }
            return .failure(error)
        }
    }

    public mutating func save(_ state: PolicyState) throws(PolicyStateError) {
        if let failure { throw .io(failure) }
        if let refusal { throw refusal }
        text = state.encoded()
    }
}
