public import SensorInput
public import StepDetection

/// What counting one recording found.
public struct RecordingSummary: Sendable, Hashable {
    /// The file that was read.
    public var path: String
    /// Its detected (or forced) format.
    public var format: RecordingFormat
    /// The unit its axis columns were read in.
    public var unit: AccelerationUnit
    /// Whether the file includes gravity (else the detector counts it as linear acceleration).
    public var gravityIncluded: Bool
    /// Whether ``gravityIncluded`` was guessed from the data (the header and file name did not
    /// say, and no `--gravity` was given).
    public var gravityGuessed = false
    /// Samples read.
    public var samples = 0
    /// Steps counted.
    public var steps = 0
    /// Timestamps of the first and last sample, in nanoseconds on the file's clock.
    public var firstTimestamp: Int64 = 0
    public var lastTimestamp: Int64 = 0
    /// Rows skipped with `skipBadRows`, per reason.
    public var skipped = SkippedRows()
    /// Bytes of the file read.
    public var bytes = 0

    /// A summary with nothing counted yet.
    public init(path: String, format: RecordingFormat, unit: AccelerationUnit, gravityIncluded: Bool) {
        self.path = path
        self.format = format
        self.unit = unit
        self.gravityIncluded = gravityIncluded
    }

    /// Time between the first and the last sample, in seconds.
    public var duration: Double { (Double(lastTimestamp) - Double(firstTimestamp)) / 1e9 }

    /// Mean sampling rate, in hertz (0 with fewer than two samples).
    public var meanRate: Double { samples > 1 && duration > 0 ? Double(samples - 1) / duration : 0 }
}

/// Counts the steps in one recording, streaming: constant memory however long the file.
///
/// - Parameters:
///   - path: The recording.
///   - options: Format, unit and bad-row handling for the reader.
///   - configuration: The detector's configuration.
///   - progress: Called now and then with the bytes read and the file size.
///   - onFirstSample: Called with the first sample's timestamp, before any step.
///   - onStep: Called for every step, in time order.
///   - readAhead: Whether a long file (512 KiB or more, on a machine with more than one core) is
///     read on a thread of its own while this one counts (``ReadAhead``). The counts are the
///     same either way; `replay` reads ahead, `eval` and `tune` (which count files in parallel)
///     do not.
public func countSteps(
    inFile path: String, options: RecordingReader.Options = .init(),
    configuration: DetectorConfiguration = DetectorConfiguration(),
    progress: ((_ bytesRead: Int, _ fileSize: Int) -> Void)? = nil,
    onFirstSample: (Int64) -> Void = { _ in },
    onStep: (StepEvent) -> Void = { _ in },
    readAhead: Bool = false
) throws(RecordingError) -> RecordingSummary {
    var reader = try RecordingReader(path: path, options: options)
    var detector = StepDetector(
        configuration: configuration, input: reader.gravityIncluded ? .totalAcceleration : .linearAcceleration
    )
    var summary = RecordingSummary(
        path: path, format: reader.format, unit: reader.unit, gravityIncluded: reader.gravityIncluded)
    summary.gravityGuessed = reader.gravityGuessed
    let fileSize = reader.fileSize
    var samples = 0
    var nextReport = 1 << 20
    // One batch loop, whether the batches are read on another thread or between batches here.
    func count(_ batch: UnsafeBufferPointer<AccelerationSample>, _ bytesRead: Int) {
        guard let first = batch.first else { return }
        if samples == 0 {
            summary.firstTimestamp = first.timestamp
            onFirstSample(first.timestamp)
        }
        detector.process(batch, onStep)
        samples &+= batch.count
        summary.lastTimestamp = batch[batch.count - 1].timestamp
        if let progress, samples >= nextReport {
            nextReport = samples + (1 << 16)
            progress(bytesRead, fileSize)
        }
    }
    let end: (skipped: SkippedRows, bytesRead: Int)
    if readAhead, ReadAhead.worthwhile(fileSize: fileSize) {
        switch ReadAhead.start(consume reader) {
        case .reading(var ahead): end = try ahead.forEachBatch(count)
        case .notStarted(var reader): end = try ReadAhead.forEachBatch(reading: &reader, count)
        }
    } else {
        end = try ReadAhead.forEachBatch(reading: &reader, count)
    }
    summary.samples = samples
    summary.steps = detector.count
    summary.skipped = end.skipped
    summary.bytes = end.bytesRead
    return summary
}
