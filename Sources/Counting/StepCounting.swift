package import SensorInput
package import StepDetection

/// The one sample → detector → ledger path, shared by `stepgate run` and the daemon: every
/// live input (an IIO accelerometer, a paced recording) is counted by this code.
///
/// The ledger keeps today's count across restarts and device gaps; it is saved at most once
/// per `saveInterval` while steps come in, and when counting stops.
package struct StepCounter {
    package let configuration: DetectorConfiguration
    package private(set) var detector: StepDetector
    /// Today's count on disk; `nil` counts this session only (a replayed recording).
    package private(set) var ledger: StepLedger?
    /// Samples read since the counter was made, across sources.
    package private(set) var samples = 0
    /// Steps counted since the counter was made, across sources.
    package private(set) var steps = 0
    private let saveInterval: Duration
    private var unsaved = false
    private var lastSave = ContinuousClock.now

    package init(
        configuration: DetectorConfiguration, input: StepDetector.Input = .totalAcceleration,
        ledger: StepLedger?, saveInterval: Duration = .seconds(10)
    ) {
        self.configuration = configuration
        detector = StepDetector(configuration: configuration, input: input)
        self.ledger = ledger
        self.saveInterval = saveInterval
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
            unsaved = true
        }
        return events
    }

    /// Counts steps that came without samples (another host's, over MQTT).
    package mutating func add(steps count: Int) {
        guard count > 0 else { return }
        steps += count
        ledger?.add(count)
        unsaved = true
    }

    /// Saves the ledger when steps are waiting and the interval has passed (or `force`).
    package mutating func saveIfDue(force: Bool = false) throws {
        guard unsaved, let ledger, force || ContinuousClock.now - lastSave >= saveInterval else { return }
        unsaved = false
        lastSave = .now
        try ledger.save()
    }
}

/// Reads `source` until it ends (or `body` returns false), counting every sample into `counter`.
/// `body` sees each sample, the steps it confirmed and the counter after it. The ledger is saved
/// as it goes (a failure is logged as a warning and counting goes on) and once more at the end,
/// however it ends.
package func countSteps(
    from source: any SampleSource, into counter: inout StepCounter, log: Logger,
    _ body: (AccelerationSample, [StepEvent], StepCounter) async throws -> Bool
) async throws {
    defer {
        do { try counter.saveIfDue(force: true) } catch { log.warning("\(error)") }
    }
    for try await sample in source.samples() {
        let events = counter.count(sample)
        if !events.isEmpty {
            do { try counter.saveIfDue() } catch { log.warning("\(error)") }
        }
        guard try await body(sample, events, counter) else { break }
    }
}
