// libFuzzer target for RecordingReader. Built and run by Fuzz/run.sh, not by SwiftPM.
//
// Every input is read several ways: detected format, each forced format (chosen from the
// input), tiny buffers that force refills and over-long lines, with and without
// skipBadRows. Besides "no crash", it checks the reader's promises:
// timestamps never decrease, skipBadRows never throws a row-level error, and skipping
// never yields fewer samples than strict reading.

@testable import SensorInput
import StepDetection

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRecordingReader(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    let formats = RecordingFormat.allCases
    let forced = formats[Int(bytes.first ?? 0) % formats.count]
    let units: [AccelerationUnit?] = [nil, .g, .counts(perG: 8192)]
    let unit = units[size % units.count]

    var variants: [RecordingReader.Options] = []
    for format in [nil, forced] {
        for skip in [false, true] {
            var options = RecordingReader.Options(format: format, unit: unit, skipBadRows: skip)
            options.bufferSize = 8192  // larger than any input (-max_len=4096): no line too long
            variants.append(options)
            options.bufferSize = 16 + size % 48
            options.maximumRead = 1 + size % 7
            variants.append(options)
        }
    }
    for options in variants {
        var strictOptions = options
        strictOptions.skipBadRows = false
        let strict = count(bytes, options: strictOptions)
        let samples = count(bytes, options: options)
        if options.skipBadRows,
            samples.opened, samples.count < strict.count
        {
            fatalError("skipBadRows yielded \(samples.count) samples, strict reading \(strict.count)")
        }
    }
    return 0
}

private func count(_ bytes: [UInt8], options: RecordingReader.Options) -> (opened: Bool, count: Int) {
    var reader: RecordingReader
    do {
        reader = try RecordingReader(bytes: bytes, name: "fuzz.csv", options: options)
    } catch {
        _ = error.description
        return (false, 0)
    }
    var samples = 0
    var previous = Int64.min
    do {
        while let sample = try reader.next() {
            precondition(sample.timestamp >= previous, "time went backwards without an error")
            precondition(sample.x.isFinite && sample.y.isFinite && sample.z.isFinite, "non-finite sample")
            previous = sample.timestamp
            samples += 1
        }
    } catch {
        _ = error.description
        if options.skipBadRows && SkippedRows.Reason(error.kind) != nil {
            fatalError("skipBadRows threw a row error: \(error)")
        }
    }
    _ = reader.skipped.description
    precondition(reader.bytesRead <= bytes.count)
    return (true, samples)
}
