import Foundation
import StepDetection
import Testing
import Tuning

@testable import SensorInput

/// A random cell: mostly plain decimals of every length, some with what the fast path must
/// leave to the reference parser (exponents, spaces, `+`, quotes, words, 20+ digits).
private func randomCell(_ random: inout SplitMix64) -> String {
    func digits(_ count: Int) -> String {
        String((0..<count).map { _ in Character(String(Int.random(in: 0...9, using: &random))) })
    }
    var cell = ""
    switch Int.random(in: 0..<20, using: &random) {
    case 0: return ""
    case 1:
        return ["NaN", "-", ".", "-.", "inf", "\"1\"", "1e5", " 7", "7 ", "+3", "0x1", "1.2.3"][
            Int.random(in: 0..<12, using: &random)]
    case 2: cell = digits(Int.random(in: 15...24, using: &random))
    default: break
    }
    if cell.isEmpty {
        if Bool.random(using: &random) { cell = "-" }
        cell += digits(Int.random(in: 0...9, using: &random))
        if Int.random(in: 0..<3, using: &random) > 0 {
            cell += "." + digits(Int.random(in: 0...12, using: &random))
        }
        if Int.random(in: 0..<30, using: &random) == 0 { cell += "E-3" }
    }
    return cell
}

/// `text` in a buffer with the 64 readable bytes after it that the fast path may read.
private func withPadded<R>(_ text: String, _ body: (UnsafePointer<UInt8>, Int) -> R) -> R {
    var bytes = Array(text.utf8)
    let count = bytes.count
    bytes += Array(repeating: UInt8(ascii: "7"), count: ChunkBuffer.padding)  // digits: must not be taken
    return bytes.withUnsafeBufferPointer { body($0.baseAddress!, count) }
}

private func bits(_ sample: AccelerationSample) -> [UInt64] {
    [
        UInt64(bitPattern: sample.timestamp), UInt64(sample.x.bitPattern), UInt64(sample.y.bitPattern),
        UInt64(sample.z.bitPattern),
    ]
}

@Suite("Row fast path against the reference parser")
struct FastPathTests {
    /// Every number the fast path takes is the number scanNumber scans, converted to the same
    /// Double bit for bit and to the same nanoseconds; and it takes nearly all plain ones.
    @Test func fastNumbersMatchTheReference() {
        var random = SplitMix64(seed: 12)
        var taken = 0
        let total = 100_000
        for _ in 0..<total {
            let cell = randomCell(&random)
            let terminator = [",", "\n", "\r\n", ";", ""][Int.random(in: 0..<5, using: &random)]
            let text = cell + terminator + "9"
            withPadded(text) { p, count in
                let cellEnd = cell.utf8.count
                let reference = scanNumber(p, from: 0, to: cellEnd)
                let referenceValid = reference.hasDigits && reference.next == cellEnd
                for endsLine in [false, true] {
                    // The row parser's view: a line (count = cell) or the buffer (count = all).
                    for limit in [cellEnd, count] {
                        var i = 0
                        guard let fast = scanPlainCell(p, &i, limit, UInt8(ascii: ","), endsLine: endsLine)
                        else { continue }
                        // Without a terminator, the buffer holds more digits after the cell.
                        if limit == count && terminator.isEmpty { continue }
                        #expect(referenceValid, "fast path took '\(cell)', the reference did not")
                        #expect(i == cellEnd, "'\(cell)': ended at \(i), not \(cellEnd)")
                        let decimal = reference.number
                        #expect(fast.decimal.negative == decimal.negative, "'\(cell)'")
                        #expect(fast.decimal.mantissa == decimal.mantissa, "'\(cell)'")
                        #expect(fast.decimal.exponent == decimal.exponent, "'\(cell)'")
                        #expect(
                            fast.doubleValue.bitPattern == decimal.doubleValue.bitPattern,
                            "'\(cell)': \(fast.doubleValue) vs \(decimal.doubleValue)")
                        for shift in [0, 6, 9] {
                            #expect(
                                fast.decimal.scaledInt64(shift: shift) == decimal.scaledInt64(shift: shift))
                        }
                        if limit == cellEnd && !endsLine { taken += 1 }
                    }
                }
            }
        }
        // The property is not empty: most random cells are plain decimals the fast path takes.
        #expect(taken > total / 2, "the fast path took only \(taken) of \(total) cells")
    }

    /// Edge cases by hand: zeros, signs, 19 and 20 digits, 2^53 and beyond, 8-byte words.
    @Test(arguments: [
        "0", "-0", "-0.0", "0.000", "5.", ".5", "-.5", "12345678", "-1234567", "-12345678", "1234567.1234567",
        "0.12345678", "-0.12345678", "9999999999999999999", "1999999999999999999.", "99999999999999999999",
        "9007199254740993", "9007199254740992.5", "18446744073709551615", "00000000000000000001",
        "0.0000000000000000001", "1711795430071476200", "-9223372036854775808", "9223372036854775807",
    ])
    func edgeCasesMatchTheReference(cell: String) {
        withPadded(cell + ",") { p, _ in
            let count = cell.utf8.count
            let reference = scanNumber(p, from: 0, to: count)
            var i = 0
            guard let fast = scanPlainCell(p, &i, count, UInt8(ascii: ","), endsLine: false) else {
                // Left to the reference parser: only allowed for more than 19 digits.
                #expect(cell.filter(\.isNumber).count > 19 || !reference.hasDigits, "'\(cell)' not taken")
                return
            }
            #expect(reference.hasDigits && reference.next == count)
            #expect(fast.decimal.mantissa == reference.number.mantissa)
            #expect(fast.decimal.exponent == reference.number.exponent)
            #expect(fast.decimal.negative == reference.number.negative)
            #expect(fast.doubleValue.bitPattern == reference.number.doubleValue.bitPattern)
        }
    }

    /// Whole rows: whatever the fast path yields, parseRow yields too, bit for bit, and the
    /// buffer variant takes exactly the line and its ending.
    @Test func fastRowsMatchParseRow() {
        var random = SplitMix64(seed: 34)
        let layouts: [RowLayout] = [
            RowLayout(
                separator: 44, timeColumn: 0, xColumn: 1, yColumn: 2, zColumn: 3, lastColumn: 3, timeShift: 6,
                perG: 8192, columnNames: []),
            RowLayout(
                separator: 44, timeColumn: 0, xColumn: 2, yColumn: 3, zColumn: 4, lastColumn: 4, timeShift: 0,
                perG: standardGravity, columnNames: []),
            RowLayout(
                separator: 59, timeColumn: 1, xColumn: 4, yColumn: 3, zColumn: 2, lastColumn: 4, timeShift: 9,
                perG: 1, columnNames: []),
        ]
        var taken = 0
        for round in 0..<30_000 {
            let layout = layouts[round % layouts.count]
            guard let plan = FastRowPlan(layout) else {
                Issue.record("no plan")
                return
            }
            let separator = String(UnicodeScalar(layout.separator))
            var cells = (0..<Int.random(in: 3...7, using: &random)).map { _ in randomCell(&random) }
            if Int.random(in: 0..<10, using: &random) == 0 { cells[1] = "\"a\(separator)b\"" }
            let line = cells.joined(separator: separator)
            let ending = ["\n", "\r\n", "\r", ""][Int.random(in: 0..<4, using: &random)]
            let text = line + ending + "1" + separator + "2\n"
            withPadded(text) { p, available in
                var lineCount = line.utf8.count
                if ending == "\r" { lineCount += 1 }  // a lone CR is not a line ending
                let reference = parseRow(p, lineCount, layout)
                if let fast = parsePlainRow(p, lineCount, plan) {
                    guard case .sample(let sample) = reference else {
                        Issue.record("fast path took '\(line)', parseRow did not")
                        return
                    }
                    #expect(bits(fast) == bits(sample), "'\(line)'")
                    taken += 1
                }
                // The buffer variant finds the line itself: compare with the line the reader
                // would have found (up to the first LF, one CR before it dropped).
                let all = Array(text.utf8)
                let newline = all.firstIndex(of: 10) ?? all.count
                var realCount = newline
                if realCount > 0 && all[realCount - 1] == 13 { realCount -= 1 }
                if let (fast, used) = parsePlainLine(p, available, plan) {
                    guard case .sample(let sample) = parseRow(p, realCount, layout) else {
                        Issue.record("fast line path took '\(text.debugDescription)', parseRow did not")
                        return
                    }
                    #expect(bits(fast) == bits(sample), "'\(text.debugDescription)'")
                    #expect(used == newline + 1, "'\(text.debugDescription)'")
                }
            }
        }
        #expect(taken > 1000, "the fast path took only \(taken) rows")
    }

    /// Rows of integer cells (Bangle.js logs): whatever the integer row path yields, parseRow
    /// yields too, bit for bit, with the same bytes taken as the plain line path; and it takes
    /// nearly all rows of four integers.
    @Test func integerRowsMatchParseRow() {
        var random = SplitMix64(seed: 56)
        func integerCell() -> String {
            switch Int.random(in: 0..<40, using: &random) {
            case 0: return ""
            case 1:
                return ["-", "-0", "0", "+5", " 5", "5 ", "1.5", "\"7\"", "1e3", "-.5"][
                    Int.random(in: 0..<10, using: &random)]
            case 2: return String(repeating: "9", count: Int.random(in: 14...20, using: &random))
            default:
                let digits = Int.random(in: 1...(Bool.random(using: &random) ? 5 : 17), using: &random)
                let sign = Int.random(in: 0..<3, using: &random) == 0 ? "-" : ""
                return sign
                    + String(
                        (0..<digits).map { _ in Character(String(Int.random(in: 0...9, using: &random))) })
            }
        }
        var taken = 0
        var fourIntegers = 0
        for round in 0..<40_000 {
            let shift = [6, 0, 3, 9, 12, 18][round % 6]
            let perG = [8192.0, 1, 0.5, 1024][(round / 6) % 4]
            let separator = [44, 59, 9][(round / 24) % 3]
            let layout = RowLayout(
                separator: UInt8(separator), timeColumn: 0, xColumn: 1, yColumn: 2, zColumn: 3, lastColumn: 3,
                timeShift: shift, perG: perG, columnNames: [])
            guard let plan = FastRowPlan(layout), plan.integerRows else {
                Issue.record("no integer plan for shift \(shift), perG \(perG)")
                return
            }
            let sep = String(UnicodeScalar(UInt8(separator)))
            var cells = (0..<4).map { _ in integerCell() }
            if Int.random(in: 0..<20, using: &random) == 0 { cells.append(integerCell()) }
            if Int.random(in: 0..<20, using: &random) == 0 { cells.removeLast() }
            let line = cells.joined(separator: sep)
            let ending = ["\n", "\r\n", "\n", "\r", "", "\r\r\n"][Int.random(in: 0..<6, using: &random)]
            let text = line + ending + "1" + sep + "2\n"
            let all = Array(text.utf8)
            let newline = all.firstIndex(of: 10) ?? all.count
            var realCount = newline
            if realCount > 0 && all[realCount - 1] == 13 { realCount -= 1 }
            if cells.count == 4
                && cells.allSatisfy({ Int64($0) != nil && $0.utf8.count < 16 && !$0.hasPrefix("+") })
                && (ending == "\n" || ending == "\r\n") && cells[0].filter(\.isNumber).count <= 18 - shift
            {
                fourIntegers += 1
            }
            withPadded(text) { p, available in
                guard let (fast, used) = parseIntegerLineOutlined(p, plan) else { return }
                guard case .sample(let sample) = parseRow(p, realCount, layout) else {
                    Issue.record("integer path took '\(text.debugDescription)', parseRow did not")
                    return
                }
                #expect(
                    bits(fast) == bits(sample), "'\(text.debugDescription)', shift \(shift), perG \(perG)")
                #expect(used == newline + 1, "'\(text.debugDescription)'")
                if let (plain, plainUsed) = parsePlainLine(p, available, plan) {
                    #expect(bits(plain) == bits(fast) && plainUsed == used, "'\(text.debugDescription)'")
                } else {
                    Issue.record("integer path took '\(text.debugDescription)', the plain line path did not")
                }
                taken += 1
            }
        }
        #expect(fourIntegers > 5000)
        #expect(taken >= fourIntegers, "the integer path took \(taken) of \(fourIntegers) integer rows")
    }

    /// The literal tables of powers of ten are the computed powers, bit for bit.
    @Test func powerOfTenTablesAreExact() {
        #expect(integerPowersOfTen.count == 20 && doublePowersOfTen.count == 23)
        for k in 0...19 { #expect(integerPowerOfTenTable(k) == integerPowerOfTen(k), "10^\(k)") }
        for k in 0...22 {
            #expect(doublePowerOfTenTable(k).bitPattern == exactPowerOfTen(k).bitPattern, "10^\(k)")
        }
    }

    /// Integer rows at the edges of the integer path, one by one against parseRow: cells of 7,
    /// 8, 9, 15 and 16 characters (one or two 8-byte words, the longest taken, the first left),
    /// "-0", leading zeros, signs and line endings it must leave to the other paths.
    @Test(arguments: [
        "1,2,3,4", "0,-0,-0,0", "-0,0,0,-0", "007,-007,0000001,-0000000", "1234567,-1234567,7654321,1",
        "12345678,-12345678,87654321,-1", "123456789,1,-123456789,2", "123456789012345,1,2,3",
        "1,-12345678901234,123456789012345,-1", "1,-123456789012345,2,3", "1,2,3,1234567890123456",
        "999999999999,1,2,3", "9999999999999,1,2,3", "-,1,2,3", "1,-,2,3", "1,2,3,-", "1,,2,3", "1,2,3,",
        "1,2,3,4,5", "1,2,3", "1,+2,3,4", "1,2 ,3,4", "1,2,3,4 ", "1.,2,3,4", "1,2,3,4x", "1,--2,3,4",
    ])
    func integerRowEdgesMatchParseRow(line: String) {
        for ending in ["\n", "\r\n", "\r", "\r\r\n", ""] {
            for separator in [",", ";", "\t"] {
                let row = line.replacingOccurrences(of: ",", with: separator)
                let layout = RowLayout(
                    separator: UInt8(ascii: separator.unicodeScalars.first!), timeColumn: 0, xColumn: 1,
                    yColumn: 2, zColumn: 3, lastColumn: 3, timeShift: 6, perG: 8192, columnNames: [])
                guard let plan = FastRowPlan(layout), plan.integerRows else {
                    Issue.record("no integer plan")
                    return
                }
                // The 0 byte the reader writes after its bytes, then padding.
                var bytes = Array((row + ending).utf8) + [0]
                bytes += Array(repeating: UInt8(ascii: "7"), count: ChunkBuffer.padding)
                bytes.withUnsafeBufferPointer { buffer in
                    let p = buffer.baseAddress!
                    guard let (fast, used) = parseIntegerLineOutlined(p, plan) else { return }
                    #expect(
                        ending == "\n" || ending == "\r\n",
                        "\(row.debugDescription) \(ending.debugDescription)")
                    guard case .sample(let sample) = parseRow(p, row.utf8.count, layout) else {
                        Issue.record("integer path took \(row.debugDescription), parseRow did not")
                        return
                    }
                    #expect(bits(fast) == bits(sample), "\(row.debugDescription)")
                    #expect(used == (row + ending).utf8.count, "\(row.debugDescription)")
                }
            }
        }
    }

    /// Integer rows whose cells, line endings or 0 byte fall at every place of the buffer's end
    /// (buffers of 40 to 80 bytes, refilled in the middle of rows), read with and without the
    /// fast path, sample by sample and in batches.
    @Test func integerRowsAtTheBufferEndReadTheSame() throws {
        var random = SplitMix64(seed: 78)
        var text = "Time (ms),X,Y,Z\n"
        var time = 0
        for row in 0..<300 {
            time += Int.random(in: 0...(row % 50 == 0 ? 90_000_000 : 200), using: &random)
            let cells = (0..<3).map { _ in
                let value = Int.random(in: -99_999...99_999, using: &random)
                return value == 0 && Bool.random(using: &random) ? "-0" : String(value)
            }
            let ending = row % 7 == 0 ? "\r\n" : "\n"
            text += "\(time),\(cells.joined(separator: ","))\(ending)"
        }
        text += "\(time),1,2,3"  // no line ending at the end
        for bufferSize in 40...80 {
            var fast = RecordingReader.Options()
            fast.bufferSize = bufferSize
            var slow = fast
            slow.rowFastPath = false
            let expected = readBytes(Array(text.utf8), slow)
            #expect(expected.error == nil && expected.samples.count == 301)
            #expect(readBytes(Array(text.utf8), fast) == expected, "buffer of \(bufferSize)")
            #expect(
                readBytes(Array(text.utf8), fast, batch: 7) == batched(expected, 7), "buffer of \(bufferSize)"
            )
        }
    }

    /// Every recording in ../shared/data and every format sample reads the same with and
    /// without the fast path: samples bit for bit, skipped rows, the error.
    @Test(.enabled(if: sharedDataAvailable, "../shared/data not present"))
    func recordingsReadTheSameWithoutTheFastPath() throws {
        let files =
            FileManager.default.enumerator(atPath: sharedData.path)?
            .compactMap { $0 as? String }
            .filter { $0.hasSuffix(".csv") && !$0.contains("manifest") }
            .sorted() ?? []
        #expect(files.count > 70)
        for file in files {
            let path = sharedData.appendingPathComponent(file).path
            // skipBadRows matters for the format samples, which have bad rows.
            for skip in file.hasPrefix("formats/") ? [false, true] : [false] {
                var fast = RecordingReader.Options(skipBadRows: skip)
                fast.bufferSize = 4096  // refills in the middle of rows as well
                var slow = fast
                slow.rowFastPath = false
                let expected = read(path, slow)
                #expect(read(path, fast) == expected, "\(file), skipBadRows \(skip)")
                // In batches (as a replay reads) too, of a size that splits the buffer's rows.
                #expect(
                    read(path, fast, batch: 1000) == batched(expected, 1000),
                    "\(file) in batches, skipBadRows \(skip)")
            }
        }
    }

    /// Rows that the fast path must leave to parseRow, read both ways, with tiny reads.
    @Test func awkwardFilesReadTheSameWithoutTheFastPath() throws {
        let texts = [
            "Time (ms),X,Y,Z\n85,917,-1278,-8159\r\n165,769,-1132\n245,1,2,3,4,5\n300,1,2,3\r",
            "Time (ms),X,Y,Z\n85,917,-1278,-8159\n80,1,2,3\n",
            "Time (ms),X,Y,Z\n85,917,-1278,-8159\n\n  \n90,1e3,2,3\n95, 1,2,3\n99,1,2,\n",
            "111642863984128,3,3.8534677,8.962694,1.8866309\r\n111642867425295,\"3,4\",-0.12345678,8.9,1.9",
            "time_s,x_g,y_g,z_g\n0.000000000,0.1,-0.98765,1e-05\n0.010000000,99999999999999999999,-0.9,0.0\n",
            "Time (ms),X,Y,Z\n12345678,1,2,3\n123456789,-12345678,0.5,.5\n123456790,-0.,5.,-.0\n",
        ]
        for text in texts {
            for skip in [false, true] {
                for maximumRead in [1, 3, 7, 1000] {
                    var fast = RecordingReader.Options(skipBadRows: skip)
                    fast.maximumRead = maximumRead
                    var slow = fast
                    slow.rowFastPath = false
                    let expected = readBytes(Array(text.utf8), slow)
                    #expect(
                        readBytes(Array(text.utf8), fast) == expected,
                        "\(text.debugDescription), skipBadRows \(skip), reads of \(maximumRead)")
                    for batch in [1, 2, 5] {
                        #expect(
                            readBytes(Array(text.utf8), fast, batch: batch) == batched(expected, batch),
                            "\(text.debugDescription), skipBadRows \(skip), reads of \(maximumRead), batches of \(batch)"
                        )
                    }
                }
            }
        }
    }
}

private struct Outcome: Equatable {
    /// Each sample's bits and the line number the reader gives after it.
    var samples: [[UInt64]] = []
    var error: String?
    var skipped = ""
    var bytes = 0
    var lastLine = 0
}

private func read(_ path: String, _ options: RecordingReader.Options, batch: Int? = nil) -> Outcome {
    outcome(batch: batch) { () throws(RecordingError) in try RecordingReader(path: path, options: options) }
}

private func readBytes(_ bytes: [UInt8], _ options: RecordingReader.Options, batch: Int? = nil) -> Outcome {
    outcome(batch: batch) { () throws(RecordingError) in
        try RecordingReader(bytes: bytes, name: "walk.csv", options: options)
    }
}

/// Everything a reader made by `open` gives: each sample's bits and line, the rows skipped, the
/// bytes read, the last line read and the error it stopped at. Read with `next()`, or with
/// `read(into:)` in batches of `batch` samples after one `next()` (so that batches also start
/// with samples it parsed ahead): then only the line after each full batch is known, the others
/// are 0 (compare with ``batched(_:_:)``).
private func outcome(batch: Int? = nil, _ open: () throws(RecordingError) -> RecordingReader) -> Outcome {
    var outcome = Outcome()
    do {
        var reader = try open()
        defer {
            outcome.skipped = reader.skipped.description
            outcome.bytes = reader.bytesRead
            outcome.lastLine = reader.line
        }
        do {
            if let batch {
                if let sample = try reader.next() {
                    outcome.samples.append(bits(sample) + [UInt64(reader.line)])
                }
                let samples = UnsafeMutablePointer<AccelerationSample>.allocate(capacity: batch)
                defer { samples.deallocate() }
                var more = true
                while more {
                    var count = 0
                    var full = false
                    defer {
                        for index in 0..<count {
                            let line = full && index == count - 1 ? UInt64(reader.line) : 0
                            outcome.samples.append(bits(samples[index]) + [line])
                        }
                    }
                    more = try reader.read(into: samples, capacity: batch, count: &count)
                    full = more && count == batch
                }
            } else {
                while let sample = try reader.next() {
                    outcome.samples.append(bits(sample) + [UInt64(reader.line)])
                }
            }
        } catch {
            outcome.error = error.description
        }
    } catch {
        outcome.error = error.description
    }
    return outcome
}

/// `outcome` (read with `next()`) as ``outcome(batch:_:)`` gives it with batches of `batch`:
/// the lines of the samples that end no full batch set to 0.
private func batched(_ outcome: Outcome, _ batch: Int) -> Outcome {
    var copy = outcome
    for index in copy.samples.indices where index != 0 && !index.isMultiple(of: batch) {
        copy.samples[index][4] = 0
    }
    return copy
}
