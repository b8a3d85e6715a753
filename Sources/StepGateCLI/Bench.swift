import Formatting
import Foundation
import SensorInput
import Shields
import StepDetection
import StepGateDaemon
import Tuning
import UnlockPolicy

/// `stepgate bench`: measures the detector, the CSV readers and whole replays.
struct Bench: Command {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Measure detector speed, CSV parsing throughput and replay time.",
        discussion: """
            Prints the detector's cost per sample on synthetic walks held in memory (100 Hz and \
            12.5 Hz input), CSV parsing throughput for each given file (or a generated StepGate CSV), \
            and the time to replay the largest given file, in process and as a whole \
            'stepgate replay' process. Build with 'swift build -c release' for meaningful figures. \
            Each figure is the best of several runs.
            """,
        arguments: [ArgumentHelp("<file>...", help: "Recordings to parse and replay.", isOptional: true)],
        options: [
            .option("samples", "count", help: "Synthetic samples per detector run (default 2000000)."),
            .option("repeat", "count", help: "Runs per figure; the best is reported (default 5)."),
            .flag("json", help: "Print the figures as one JSON line."),
            .flag("markdown", help: "Print the figures as a Markdown table (for documentation)."),
        ]
    )

    var files: [String]
    var sampleCount: Int
    var repeats: Int
    var json: Bool
    var markdown: Bool

    init(arguments: ParsedArguments) throws(UsageError) {
        files = arguments.positionals
        sampleCount =
            try arguments.value("samples", expected: "a whole number ≥ 1000") {
                Int($0).flatMap { $0 >= 1000 ? $0 : nil }
            } ?? 2_000_000
        repeats =
            try arguments.value("repeat", expected: "a whole number in 1...100") {
                Int($0).flatMap { (1...100).contains($0) ? $0 : nil }
            } ?? 5
        json = arguments.flag("json")
        markdown = arguments.flag("markdown")
        guard !(json && markdown) else { throw UsageError("'--json' and '--markdown' exclude each other") }
    }

    func run() async throws {
        var figures = JSONLine()
        // With --markdown: (figure, value) rows, printed as one table at the end.
        var rows: [(String, String)] = []
        let json = json || markdown
        let out = StandardOutput()
        defer { out.flush() }
        #if DEBUG
            printError("warning: this is a debug build; run 'swift build -c release' for meaningful figures")
        #endif
        for rate in [100.0, 12.5] {
            let samples = Bench.syntheticWalk(count: sampleCount, rate: rate, jitter: rate < 50 ? 0.2 : 0.02)
            var steps = 0
            let ns =
                best(repeats) {
                    steps = StepDetector.countSteps(in: samples)
                } / Double(samples.count)
            let key = rate == 100 ? "detector_ns_per_sample_100hz" : "detector_ns_per_sample_12_5hz"
            figures.add(key, ns, decimals: 2)
            rows.append(
                (
                    "detector, \(formatFixed(rate, decimals: 1)) Hz input",
                    "\(formatFixed(ns, decimals: 1)) ns/sample"
                ))
            if !json {
                out.line(
                    "detector, \(formatFixed(rate, decimals: 1)) Hz synthetic walk, \(samples.count) samples: "
                        + "\(formatFixed(ns, decimals: 2)) ns/sample (\(steps) steps)")
            }
        }
        let workload = PolicyBenchmark.workload(count: 1_000_000)
        var effects = 0
        let policyNs = best(repeats) { effects = PolicyBenchmark.drive(workload) }
        let inputsPerSecond = Double(workload.count) / (policyNs / 1e9)
        figures.add("policy_inputs_per_s", inputsPerSecond, decimals: 0)
        rows.append(("unlock policy engine", "\(formatFixed(inputsPerSecond / 1e6, decimals: 1)) M inputs/s"))
        if !json {
            out.line(
                "policy engine, \(workload.count) inputs (steps, ticks, locks, emergencies): "
                    + "\(formatFixed(inputsPerSecond / 1e6, decimals: 2)) M inputs/s (\(effects) effects)")
        }
        var parseFiles = files
        var temporary: String?
        if parseFiles.isEmpty {
            let path = NSTemporaryDirectory() + "stepgate-bench-\(getpid()).csv"
            try Bench.writeSynthetic(path: path, count: 1_000_000)
            parseFiles = [path]
            temporary = path
        }
        defer { if let temporary { unlink(temporary) } }
        var parseFigures = JSONLine()
        for file in parseFiles {
            var counted = (samples: 0, bytes: 0)
            let seconds =
                try bestThrowing(repeats) { counted = try RecordingReader.countSamples(path: file) } / 1e9
            let megabytes = Double(counted.bytes) / 1e6
            parseFigures.add(file, megabytes / seconds, decimals: 1)
            let shown = temporary == nil ? "`\(file)`" : "a generated StepGate CSV"
            rows.append(
                (
                    "CSV parsing, \(shown) (\(formatFixed(megabytes, decimals: 1)) MB)",
                    "\(formatFixed(megabytes / seconds, decimals: 0)) MB/s"
                ))
            if !json {
                out.line(
                    "CSV parse, \(file) (\(formatFixed(megabytes, decimals: 1)) MB, \(counted.samples) samples): "
                        + "\(formatFixed(megabytes / seconds, decimals: 1)) MB/s")
            }
        }
        figures.addRaw("csv_parse_mb_per_s", parseFigures.string)
        if let largest = files.max(by: { Bench.size($0) < Bench.size($1) }) {
            let inProcess = try bestThrowing(repeats) { _ = try countSteps(inFile: largest) } / 1e6
            figures.add("replay_in_process_ms", inProcess, decimals: 2)
            rows.append(
                ("`stepgate replay` of `\(largest)`, in process", "\(formatFixed(inProcess, decimals: 1)) ms")
            )
            if !json { out.line("replay \(largest) in process: \(formatFixed(inProcess, decimals: 2)) ms") }
            if let whole = try Bench.wholeProcessMilliseconds(file: largest, repeats: repeats) {
                figures.add("replay_whole_process_ms", whole, decimals: 2)
                rows.append(
                    (
                        "`stepgate replay` of `\(largest)`, whole process",
                        "\(formatFixed(whole, decimals: 1)) ms"
                    ))
                if !json {
                    out.line(
                        "replay \(largest) as a whole 'stepgate replay' process: \(formatFixed(whole, decimals: 2)) ms"
                    )
                }
            }
        }
        if getuid() == 0 {
            if let (baseline, shielded) = try Bench.execOverhead(runs: 400) {
                figures.add("exec_median_us", baseline, decimals: 1)
                figures.add("exec_median_us_with_exec_shield", shielded, decimals: 1)
                rows.append(
                    (
                        "exec of an unrelated program, exec shield active (median of 400)",
                        "\(formatFixed(shielded - baseline, decimals: 1)) µs more than without"
                    ))
                if !json {
                    out.line(
                        "exec of an unrelated program (/bin/true), median of 400: \(formatFixed(baseline, decimals: 1)) µs; "
                            + "with the exec shield active: \(formatFixed(shielded, decimals: 1)) µs "
                            + "(overhead \(formatFixed(shielded - baseline, decimals: 1)) µs)")
                }
            }
        } else if !json {
            out.line("exec-shield overhead: skipped (fanotify needs root)")
        }
        if markdown {
            out.write("| figure | value |\n|---|---:|\n")
            for (figure, value) in rows { out.write("| \(figure) | \(value) |\n") }
        } else if json {
            out.line(figures.string)
        }
    }

    /// Median wall time of spawning and reaping /bin/true, without and with an exec shield
    /// denying another program, in microseconds; `nil` when the shield cannot start.
    static func execOverhead(runs: Int) throws -> (Double, Double)? {
        func spawnTimes(_ count: Int) -> [Double] {
            var times: [Double] = []
            for _ in 0..<count {
                var pid: pid_t = 0
                let start = ContinuousClock.now
                let argv: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/true"), nil]
                defer { free(argv[0]) }
                guard posix_spawn(&pid, "/bin/true", nil, nil, argv, environ) == 0 else { continue }
                var status: Int32 = 0
                waitpid(pid, &status, 0)
                times.append(nanoseconds(ContinuousClock.now - start) / 1000)
            }
            return times
        }
        func median(_ times: [Double]) -> Double {
            let sorted = times.sorted()
            return sorted.isEmpty ? .nan : sorted[sorted.count / 2]
        }
        let folder = NSTemporaryDirectory() + "stepgate-bench-exec-\(getpid())"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let denied = folder + "/game"
        try FileManager.default.copyItem(atPath: "/bin/true", toPath: denied)
        _ = spawnTimes(50)  // warm up caches
        // Baseline before and after the shielded phase, so drift in machine load cancels out.
        var baseline = spawnTimes(runs / 2)
        var shielded: [Double] = []
        do {
            guard let shield = try? ExecDenyShield() else { return nil }
            try shield.apply(
                [Target(kind: .executable, value: denied)], context: ShieldContext(store: "bench"))
            shielded = spawnTimes(runs)
        }
        baseline += spawnTimes(runs / 2)
        return (median(baseline), median(shielded))
    }

    /// The best of `runs` timings of `body`, in nanoseconds.
    private func best(_ runs: Int, _ body: () -> Void) -> Double {
        var fastest = Double.infinity
        for _ in 0..<runs {
            let start = ContinuousClock.now
            body()
            fastest = min(fastest, nanoseconds(ContinuousClock.now - start))
        }
        return fastest
    }

    private func bestThrowing(_ runs: Int, _ body: () throws -> Void) throws -> Double {
        var fastest = Double.infinity
        for _ in 0..<runs {
            let start = ContinuousClock.now
            try body()
            fastest = min(fastest, nanoseconds(ContinuousClock.now - start))
        }
        return fastest
    }

    static func size(_ path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? 0
    }

    /// Runs `stepgate replay FILE` as a child process; the best wall time in milliseconds.
    static func wholeProcessMilliseconds(file: String, repeats: Int) throws -> Double? {
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        guard FileManager.default.isExecutableFile(atPath: executable.path) else { return nil }
        var fastest = Double.infinity
        for _ in 0..<repeats {
            let process = Process()
            process.executableURL = executable
            process.arguments = ["replay", file]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            let start = ContinuousClock.now
            try process.run()
            process.waitUntilExit()
            let elapsed = nanoseconds(ContinuousClock.now - start) / 1e6
            guard process.terminationStatus == 0 else { return nil }
            fastest = min(fastest, elapsed)
        }
        return fastest
    }

    /// A deterministic synthetic walk of `count` samples at `rate` hertz.
    static func syntheticWalk(count: Int, rate: Double, jitter: Double) -> [AccelerationSample] {
        var walk = SyntheticWalk()
        walk.rate = rate
        walk.jitter = jitter
        let duration = Double(count) / rate
        return walk.samples(duration: duration, steps: Int(duration * walk.cadence))
    }

    /// Writes a synthetic 100 Hz walk as a StepGate CSV.
    static func writeSynthetic(path: String, count: Int) throws {
        var writer = try StepGateCSVWriter(path: path)
        try writer.write(contentsOf: syntheticWalk(count: count, rate: 100, jitter: 0.02))
        try writer.close()
    }
}

private func nanoseconds(_ duration: Duration) -> Double {
    let (seconds, attoseconds) = duration.components
    return Double(seconds) * 1e9 + Double(attoseconds) / 1e9
}
