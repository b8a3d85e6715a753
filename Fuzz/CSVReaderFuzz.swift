// libFuzzer target for RecordingReader. Built and run by Fuzz/run.sh, not by SwiftPM.
//
// Every input is read several ways: detected format and one forced format (chosen from the
// first byte; for the columns format, with a column layout), with and without skipBadRows, with whole reads and with 1–7-byte reads, and
// with tiny buffers that force over-long lines. Besides "no crash", it checks the reader's
// promises: timestamps never decrease; samples are finite; reading in small pieces changes
// nothing; skipBadRows never throws a row-level error and never yields fewer samples than
// strict reading; the row fast path changes nothing (against reading without it); reading in
// batches (`read(into:capacity:count:)`, as replays do) changes nothing.

import StepDetection

@testable import SensorInput

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRecordingReader(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    let formats = RecordingFormat.allCases
    let forced = formats[Int(bytes.first ?? 0) % formats.count]
    let units: [AccelerationUnit?] = [nil, .g, .counts(perG: 8192)]
    let unit = units[size % units.count]

    for format in [nil, forced] {
        var strictSamples = 0
        for skip in [false, true] {
            var options = RecordingReader.Options(format: format, unit: unit, skipBadRows: skip)
            if format == .columns {
                // Numbered columns (the first line may be data) or named ones (a header).
                options.columns =
                    size % 2 == 0
                    ? ColumnLayout(
                        time: .index(1), timeUnit: .ms, x: .index(2), y: .index(3), z: .index(5), unit: .g)
                    : ColumnLayout(
                        time: .name("time"), timeUnit: .s, x: .name("x"), y: .index(3), z: .name("z"),
                        unit: .metersPerSecondSquared, delimiter: UInt8(ascii: ";"))
            }
            options.bufferSize = 8192  // larger than any input (-max_len=4096): no line too long
            let whole = read(bytes, options)

            options.maximumRead = 1 + size % 7
            let pieces = read(bytes, options)
            if whole != pieces {
                fatalError("reading in \(options.maximumRead)-byte pieces changed the result")
            }
            let batched = read(bytes, options, batch: 1 + size % 5)
            if batched != pieces || batched.sampleBits != pieces.sampleBits
                || batched.error?.description != pieces.error?.description
            {
                fatalError("reading in batches changed the result")
            }
            // The row fast path changes nothing: same samples bit for bit, same errors.
            var reference = options
            reference.rowFastPath = false
            let slow = read(bytes, reference)
            if pieces != slow || pieces.sampleBits != slow.sampleBits
                || pieces.error?.description != slow.error?.description
            {
                fatalError("the row fast path changed the result")
            }
            if !skip {
                strictSamples = whole.samples.count
            } else if whole.opened && whole.samples.count < strictSamples {
                fatalError(
                    "skipBadRows yielded \(whole.samples.count) samples, strict reading \(strictSamples)")
            }

            options.bufferSize = 16 + size % 48
            _ = read(bytes, options)
        }
    }
    return 0
}

private struct Outcome: Equatable {
    var opened = false
    var format: RecordingFormat?
    var unit: AccelerationUnit?
    var gravityIncluded = false
    var samples: [AccelerationSample] = []
    var error: RecordingError?
    var skipped = SkippedRows()

    /// The samples' exact bits (== on Float takes -0 for 0).
    var sampleBits: [UInt64] {
        samples.flatMap {
            [
                UInt64(bitPattern: $0.timestamp), UInt64($0.x.bitPattern), UInt64($0.y.bitPattern),
                UInt64($0.z.bitPattern),
            ]
        }
    }
}

/// Reads with `next()`, or with `read(into:capacity:count:)` in batches of `batch` samples.
private func read(_ bytes: [UInt8], _ options: RecordingReader.Options, batch: Int? = nil) -> Outcome {
    var outcome = Outcome()
    var reader: RecordingReader
    do {
        reader = try RecordingReader(bytes: bytes, name: "fuzz.csv", options: options)
    } catch {
        _ = error.description
        outcome.error = error
        return outcome
    }
    outcome.opened = true
    outcome.format = reader.format
    outcome.unit = reader.unit
    outcome.gravityIncluded = reader.gravityIncluded
    var previous = Int64.min
    func take(_ sample: AccelerationSample) {
        precondition(sample.timestamp >= previous, "time went backwards without an error")
        precondition(sample.x.isFinite && sample.y.isFinite && sample.z.isFinite, "non-finite sample")
        previous = sample.timestamp
        outcome.samples.append(sample)
    }
    do {
        if let batch {
            let samples = UnsafeMutablePointer<AccelerationSample>.allocate(capacity: batch)
            defer { samples.deallocate() }
            var more = true
            while more {
                var count = 0
                defer { for index in 0..<count { take(samples[index]) } }
                more = try reader.read(into: samples, capacity: batch, count: &count)
            }
        } else {
            while let sample = try reader.next() { take(sample) }
        }
    } catch {
        _ = error.description
        outcome.error = error
        if options.skipBadRows && SkippedRows.Reason(error.kind) != nil {
            fatalError("skipBadRows threw a row error: \(error)")
        }
    }
    _ = reader.skipped.description
    outcome.skipped = reader.skipped
    precondition(reader.bytesRead <= bytes.count)
    return outcome
}
