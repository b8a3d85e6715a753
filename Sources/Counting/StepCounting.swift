package import SensorInput
package import StepDetection

/// The one sample → detector → ledger path, shared by `stepgate run` and the daemon: every
/// live input (an IIO accelerometer, a paced recording) is counted by this code.
///
/// The ledger keeps today's count across restarts and device gaps; its owner keeps it written
/// (``StepLedger/keepSaved(log:)`` beside the counting, or the daemon's loop), and
/// ``countSteps(from:into:log:_:)`` writes it once more when counting stops.
package struct StepCounter {
    package let configuration: DetectorConfiguration
    package private(set) var detector: StepDetector
    /// Today's count on disk; `nil` counts this session only (a replayed recording).
    package private(set) var ledger: StepLedger?
    /// Samples read since the counter was made, across sources.
    package private(set) var samples = 0
    /// Steps counted since the counter was made, across sources.
    package private(set) var steps = 0

    package init(
        configuration: DetectorConfiguration, input: StepDetector.Input = .totalAcceleration,
        ledger: StepLedger?
    ) {
        self.configuration = configuration
        detector = StepDetector(configuration: configuration, input: input)
        self.ledger = ledger
    }

    /// Today's steps: the ledger's, or this session's without one.
    package var today: Int { ledger?.steps ?? steps }

    /// Starts a fresh detector for a new source (a reconnected device); the counts go on.
    package mutating func restart(input: StepDetector.Input = .totalAcceleration) {
        detector = StepDetector(configuration: configuration, input: input)
    }

    /// Counts one sample; returns the steps it confirmed (usually none).
    package mutating func count(_ sample: AccelerationSample) -> [StepEvent] {
        var events: [StepEvent] = []
        detector.process(sample) { events.append($0) }
        samples += 1
        if !events.isEmpty {
            steps += events.count
            ledger?.add(events.count)
        }
        return events
    }

    /// Counts steps that came without samples (another host's, over MQTT).
    package mutating func add(steps count: Int) {
        guard count > 0 else { return }
        steps += count
        ledger?.add(count)
    }
}

/// Reads `source` until it ends (or `body` returns false), counting every sample into `counter`.
/// `body` sees each sample, the steps it confirmed and the counter after it. The ledger is
/// written at the end, however it ends (a failure is logged as a warning); while it runs, the
/// ledger's owner keeps it written.
package func countSteps(
    from source: any SampleSource, into counter: inout StepCounter, log: Logger,
    _ body: (AccelerationSample, [StepEvent], StepCounter) async throws -> Bool
) async throws {
    defer {
        do { try counter.ledger?.save() } catch { log.warning("\(error)") }
    }
    for try await sample in source.samples() {
        let events = counter.count(sample)
        guard try await body(sample, events, counter) else { break }
    }
}
