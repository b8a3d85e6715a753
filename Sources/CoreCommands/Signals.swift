@preconcurrency import Dispatch
@preconcurrency import Glibc

/// Why a live command stopped.
package enum StopReason: Sendable, Equatable {
    /// The work ended by itself (the source ended, or a sample limit was reached).
    case finished
    /// SIGINT or SIGTERM arrived.
    case signal(Int32)
    /// The requested duration passed.
    case duration
}

/// One `AsyncStream` element per delivery of any of the given signals (DispatchSource).
package func signalStream(_ signals: Int32...) -> AsyncStream<Int32> {
    AsyncStream { continuation in
        let queue = DispatchQueue(label: "stepgate.signals")
        let sources = signals.map { number in
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler { continuation.yield(number) }
            source.resume()
            return source
        }
        continuation.onTermination = { _ in for source in sources { source.cancel() } }
    }
}

/// Runs `body` until it returns, SIGINT/SIGTERM arrives or `duration` seconds pass; then
/// cancels it and waits for it to finish (so it can flush and close what it opened).
package func runUntilStopped(duration: Double?, _ body: @escaping @Sendable () async throws -> Void)
    async throws
    -> StopReason
{
    let signals = signalStream(SIGINT, SIGTERM)
    return try await withThrowingTaskGroup(of: StopReason?.self) { group in
        group.addTask {
            try await body()
            return .finished
        }
        group.addTask {
            for await number in signals { return .signal(number) }
            return nil
        }
        if let duration {
            group.addTask {
                try? await Task.sleep(for: .milliseconds(Int64(duration * 1000)))
                return Task.isCancelled ? nil : .duration
            }
        }
        var reason: StopReason?
        while reason == nil, let next = try await group.next() { reason = next }
        group.cancelAll()
        try await group.waitForAll()
        return reason ?? .finished
    }
}
