/// One stage of the per-sample signal chain: takes a value, returns a value, keeps its own state.
///
/// Stages are small value types, so copies are independent: a tuning run can evaluate many
/// detector variants concurrently without locks.
public protocol SignalStage {
    /// Feeds one sample and returns the stage's output for it.
    mutating func process(_ input: Float) -> Float
    /// Forgets all history, as after a gap in the input.
    mutating func reset()
}

/// Two stages run one after the other.
public struct Chained<First: SignalStage, Second: SignalStage>: SignalStage {
    @usableFromInline var first: First
    @usableFromInline var second: Second

    @inlinable
    public init(_ first: First, _ second: Second) {
        self.first = first
        self.second = second
    }

    @inlinable
    public mutating func process(_ input: Float) -> Float { second.process(first.process(input)) }

    @inlinable
    public mutating func reset() {
        first.reset()
        second.reset()
    }
}

extension Chained: Sendable where First: Sendable, Second: Sendable {}
extension Chained: Equatable where First: Equatable, Second: Equatable {}
