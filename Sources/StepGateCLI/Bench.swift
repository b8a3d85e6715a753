import CoreCommands
import Counting
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
            'stepgate replay' process next to 'wc -l' on the same file, and the time from process \
            start to opening that file next to spawning /bin/true; with --tune-set, configurations \
            per second of 'stepgate tune' evaluation. Build with 'swift build -c release \
            --static-swift-stdlib' for meaningful figures. Each figure is the median of several runs.
            """,
        arguments: [ArgumentHelp("<file>...", help: "Recordings to parse and replay.", isOptional: true)],
        options: [
            .option("samples", "count", help: "Synthetic samples per detector run (default 2000000)."),
            .option(
                "repeat", "count",
                help:
                    "Runs per figure; the median is reported (default 5; whole processes: 4 × as many, at least 21)."
            ),
            .option(
                "executable", "path",
                help:
                    "Time this stepgate build's whole-process replay instead of this one's (to compare builds)."
            ),
            .option(
                "tune-set", "set",
                help: "Also measure 'stepgate tune' throughput on this labelled set (manifest or folder)."),
            .flag("json", help: "Print the figures as one JSON line."),
            .flag("markdown", help: "Print the figures as a Markdown table (for documentation)."),
        ]
    )

    var files: [String]
    var sampleCount: Int
    var repeats: Int
    var tuneSet: String?
    var executablePath: String?
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
        tuneSet = arguments.value("tune-set")
        executablePath = arguments.value("executable")
        if let executablePath, access(executablePath, X_OK) != 0 {
            throw UsageError(
                "invalid value '\(executablePath)' for '--executable': expected an executable file")
        }
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
        func report(_ key: String, _ value: Double, decimals: Int, row: (String, String)?, line: String) {
            figures.add(key, value, decimals: decimals)
            if let row { rows.append(row) }
            if !json { out.line(line) }
        }
        for rate in [100.0, 12.5] {
            let samples = Bench.syntheticWalk(count: sampleCount, rate: rate, jitter: rate < 50 ? 0.2 : 0.02)
            var steps = 0
            let ns =
                median(repeats) {
                    steps = StepDetector.countSteps(in: samples)
                } / Double(samples.count)
            let shown = formatFixed(rate, decimals: 1)
            report(
                rate == 100 ? "detector_ns_per_sample_100hz" : "detector_ns_per_sample_12_5hz", ns,
                decimals: 2,
                row: ("detector, \(shown) Hz input", "\(formatFixed(ns, decimals: 1)) ns/sample"),
                line: "detector, \(shown) Hz synthetic walk, \(samples.count) samples: "
                    + "\(formatFixed(ns, decimals: 2)) ns/sample (\(steps) steps)")
        }
        let workload = PolicyBenchmark.workload(count: 1_000_000)
        var effects = 0
        let policyNs = median(repeats) { effects = PolicyBenchmark.drive(workload) }
        let inputsPerSecond = Double(workload.count) / (policyNs / 1e9)
        report(
            "policy_inputs_per_s", inputsPerSecond, decimals: 0,
            row: ("unlock policy engine", "\(formatFixed(inputsPerSecond / 1e6, decimals: 1)) M inputs/s"),
            line: "policy engine, \(workload.count) inputs (steps, ticks, locks, emergencies): "
                + "\(formatFixed(inputsPerSecond / 1e6, decimals: 2)) M inputs/s (\(effects) effects)")
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
                try medianThrowing(repeats) { counted = try RecordingReader.countSamples(path: file) } / 1e9
            let megabytes = Double(counted.bytes) / 1e6
            parseFigures.add(file, megabytes / seconds, decimals: 1)
            let shown = temporary == nil ? "`\(file)`" : "a generated StepGate CSV"
            rows.append(
                (
                    "CSV parsing, one core, \(shown) (\(formatFixed(megabytes, decimals: 1)) MB)",
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
            let inProcess =
                try medianThrowing(repeats) { _ = try countSteps(inFile: largest, readAhead: true) } / 1e6
            report(
                "replay_in_process_ms", inProcess, decimals: 2,
                row: (
                    "`stepgate replay` of `\(largest)`, in process",
                    "\(formatFixed(inProcess, decimals: 1)) ms"
                ),
                line: "replay \(largest) in process: \(formatFixed(inProcess, decimals: 2)) ms")
            let executable = executablePath ?? Bench.executable
            if let executable,
                let whole = try Bench.wholeProcess(executable, file: largest, runs: processRuns)
            {
                figures.add("replay_whole_process_ms", whole.replay, decimals: 2)
                figures.add("wc_l_ms", whole.wc, decimals: 2)
                figures.add("replay_over_wc_l", whole.replay / whole.wc, decimals: 1)
                rows.append(
                    (
                        "`stepgate replay` of `\(largest)`, whole process (× `wc -l` on it, same run)",
                        "\(formatFixed(whole.replay, decimals: 1)) ms (\(formatFixed(whole.replay / whole.wc, decimals: 1)) ×)"
                    ))
                if !json {
                    out.line(
                        "replay \(largest) as a whole 'stepgate replay' process, median of \(processRuns): "
                            + "\(formatFixed(whole.replay, decimals: 2)) ms; 'wc -l' on it: "
                            + "\(formatFixed(whole.wc, decimals: 2)) ms; ratio \(formatFixed(whole.replay / whole.wc, decimals: 1)) ×"
                    )
                }
            }
            if let executable, let start = try Bench.startToOpen(executable, file: largest, runs: processRuns)
            {
                figures.add("start_to_open_ms", start.open, decimals: 2)
                figures.add("true_ms", start.baseline, decimals: 2)
                figures.add("start_over_true_ms", start.open - start.baseline, decimals: 2)
                rows.append(
                    (
                        "`stepgate replay`: process start to opening the file, over `/bin/true` (same run)",
                        "\(formatFixed(start.open - start.baseline, decimals: 2)) ms"
                    ))
                if !json {
                    out.line(
                        "process start to opening the file, median of \(processRuns): "
                            + "\(formatFixed(start.open, decimals: 2)) ms; spawning /bin/true: "
                            + "\(formatFixed(start.baseline, decimals: 2)) ms; "
                            + "over /bin/true: \(formatFixed(start.open - start.baseline, decimals: 2)) ms")
                }
            }
        }
        if let tuneSet {
            let (perSecond, count, recordings) = try await Bench.tuneThroughput(
                set: tuneSet, repeats: repeats)
            let jobs = Bench.jobs
            report(
                "tune_configurations_per_s", perSecond, decimals: 1,
                row: (
                    "`stepgate tune` evaluation, \(jobs) cores, `\(tuneSet)` (\(recordings) recordings)",
                    "\(formatFixed(perSecond, decimals: 0)) configurations/s"
                ),
                line: "tune: \(count) configurations on \(tuneSet) (\(recordings) recordings), \(jobs) jobs: "
                    + "\(formatFixed(perSecond, decimals: 1)) configurations/s")
        }
        if getuid() == 0 {
            if let (baseline, shielded, besideBaseline, beside) = try Bench.execOverhead(runs: 400) {
                figures.add("exec_median_us", baseline, decimals: 1)
                figures.add("exec_median_us_with_exec_shield", shielded, decimals: 1)
                figures.add("exec_beside_median_us", besideBaseline, decimals: 1)
                figures.add("exec_beside_median_us_with_exec_shield", beside, decimals: 1)
                rows.append(
                    (
                        "exec of an unrelated program, exec shield active (median of 400)",
                        "\(formatFixed(shielded - baseline, decimals: 1)) µs more than without"
                    ))
                rows.append(
                    (
                        "exec of an unrelated program in a shielded program's folder, from a shell (median of 8 × 50)",
                        "\(formatFixed(beside - besideBaseline, decimals: 1)) µs more than without"
                    ))
                if !json {
                    out.line(
                        "exec of an unrelated program (/bin/true), median of 400: \(formatFixed(baseline, decimals: 1)) µs; "
                            + "with the exec shield active: \(formatFixed(shielded, decimals: 1)) µs "
                            + "(overhead \(formatFixed(shielded - baseline, decimals: 1)) µs)")
                    out.line(
                        "exec of an unrelated program in the shielded program's folder, from a shell, median of 8 batches of 50: "
                            + "\(formatFixed(besideBaseline, decimals: 1)) µs; shielded: \(formatFixed(beside, decimals: 1)) µs "
                            + "(overhead \(formatFixed(beside - besideBaseline, decimals: 1)) µs)")
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

    /// Runs for whole-process figures: more than `repeats`, since a process is quick and noisy.
    var processRuns: Int { repeats * 4 }

    /// Concurrent jobs for the tune figure: one per core, as `stepgate tune` uses.
    static var jobs: Int { max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))) }

    /// Evaluates a fixed design of configurations on a labelled set, as `stepgate tune` does
    /// (recordings parsed once, held in memory, counted on every core); configurations per second
    /// (median of `repeats`), how many were evaluated, and the recordings.
    static func tuneThroughput(set: String, repeats: Int) async throws -> (Double, Int, Int) {
        let labelled = try LabelledSets.load([set], warn: { _ in })
        var loaded: [TuningRecording] = []
        for recording in labelled { loaded.append(try TuningRecording.load(recording)) }
        let evaluator = Evaluator(recordings: loaded, jobs: jobs)
        var random = SplitMix64(seed: 1)
        let space = ParameterSpace.default
        let base = DetectorConfiguration()
        let configurations = latinHypercube(count: 64, dimensions: space.count, random: &random)
            .map { space.configuration(at: $0, base: base) }
            .filter { (try? $0.validate()) != nil }
        let subset = Array(loaded.indices)
        var times: [Double] = []
        for _ in 0..<max(1, min(repeats, 5)) {
            let start = ContinuousClock.now
            _ = await evaluator.counts(configurations, on: subset)
            times.append(nanoseconds(ContinuousClock.now - start))
        }
        return (Double(configurations.count) / (median(times) / 1e9), configurations.count, loaded.count)
    }

    /// Median wall time of spawning and reaping /bin/true, without and with an exec shield
    /// denying another program, in microseconds; `nil` when the shield cannot start.
    static func execOverhead(runs: Int) throws -> (Double, Double, besideBaseline: Double, beside: Double)? {
        func spawnTimes(_ count: Int) -> [Double] {
            let program = "/bin/true"
            var times: [Double] = []
            for _ in 0..<count {
                var pid: pid_t = 0
                let start = ContinuousClock.now
                let argv: [UnsafeMutablePointer<CChar>?] = [strdup(program), nil]
                defer { free(argv[0]) }
                guard posix_spawn(&pid, program, nil, nil, argv, environ) == 0 else { continue }
                var status: Int32 = 0
                waitpid(pid, &status, 0)
                times.append(nanoseconds(ContinuousClock.now - start) / 1000)
            }
            return times
        }
        // From a shell of its own, 50 execs a batch (µs each): a program spawned from this
        // process would wait on the shield's threads in this same process, which is not how
        // anyone's program is started.
        func loopTimes(_ batches: Int, _ program: String) -> [Double] {
            var times: [Double] = []
            let script = "i=0; while [ $i -lt 50 ]; do \"$0\"; i=$((i+1)); done"
            for _ in 0..<batches {
                var pid: pid_t = 0
                let argv: [UnsafeMutablePointer<CChar>?] = [
                    strdup("/bin/sh"), strdup("-c"), strdup(script), strdup(program), nil,
                ]
                defer { for pointer in argv { free(pointer) } }
                let start = ContinuousClock.now
                guard posix_spawn(&pid, "/bin/sh", nil, nil, argv, environ) == 0 else { continue }
                var status: Int32 = 0
                waitpid(pid, &status, 0)
                times.append(nanoseconds(ContinuousClock.now - start) / 1000 / 50)
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
        // An unrelated program beside the shielded one: its folder is guarded (every open and
        // exec there is a permission event the shield answers).
        let beside = folder + "/editor"
        try FileManager.default.copyItem(atPath: "/bin/true", toPath: beside)
        usleep(1_100_000)  // settled: as a program long installed is
        _ = spawnTimes(50)  // warm up caches
        _ = loopTimes(1, beside)
        // Baseline before and after the shielded phase, so drift in machine load cancels out.
        var baseline = spawnTimes(runs / 2)
        var besideBaseline = loopTimes(runs / 100, beside)
        var shielded: [Double] = []
        var besideShielded: [Double] = []
        do {
            guard let shield = try? ExecDenyShield() else { return nil }
            try shield.apply(
                [Target(kind: .executable, value: denied)], context: ShieldContext(store: "bench"))
            shielded = spawnTimes(runs)
            besideShielded = loopTimes(runs / 50, beside)
        }
        baseline += spawnTimes(runs / 2)
        besideBaseline += loopTimes(runs / 100, beside)
        return (median(baseline), median(shielded), median(besideBaseline), median(besideShielded))
    }

    /// The median of `runs` timings of `body`, in nanoseconds.
    private func median(_ runs: Int, _ body: () -> Void) -> Double {
        var times: [Double] = []
        for _ in 0..<runs {
            let start = ContinuousClock.now
            body()
            times.append(nanoseconds(ContinuousClock.now - start))
        }
        return Bench.median(times)
    }

    private func medianThrowing(_ runs: Int, _ body: () throws -> Void) throws -> Double {
        var times: [Double] = []
        for _ in 0..<runs {
            let start = ContinuousClock.now
            try body()
            times.append(nanoseconds(ContinuousClock.now - start))
        }
        return Bench.median(times)
    }

    static func median(_ times: [Double]) -> Double {
        let sorted = times.sorted()
        guard !sorted.isEmpty else { return .nan }
        let middle = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
    }

    static func size(_ path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? 0
    }

    /// The `stepgate` a user runs (the front door beside this full program), for whole-process
    /// figures; `nil` when it cannot be found.
    static var executable: String? {
        guard let path = FrontDoor.frontDoorPath() else { return nil }
        return access(path, X_OK) == 0 ? path : nil
    }

    /// Spawns `argv` with standard output and error on /dev/null and waits for it; the wall
    /// time in milliseconds, or `nil` when it could not start or failed.
    static func spawnMilliseconds(_ argv: [String]) -> Double? {
        guard let child = spawn(argv) else { return nil }
        var status: Int32 = 0
        while waitpid(child.pid, &status, 0) < 0 && errno == EINTR {}
        let elapsed = nanoseconds(ContinuousClock.now - child.start) / 1e6
        return status == 0 ? elapsed : nil
    }

    /// Starts `argv` with standard output and error on /dev/null.
    static func spawn(_ argv: [String]) -> (pid: pid_t, start: ContinuousClock.Instant)? {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        let arguments: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
        defer { for argument in arguments { free(argument) } }
        var pid: pid_t = 0
        let start = ContinuousClock.now
        guard posix_spawn(&pid, argv[0], &actions, nil, arguments, environ) == 0 else { return nil }
        return (pid, start)
    }

    /// `stepgate replay FILE` and `wc -l FILE` as whole processes, alternating so drift in the
    /// machine's load touches both alike; the medians of `runs` each, in milliseconds.
    static func wholeProcess(_ executable: String, file: String, runs: Int) throws -> (
        replay: Double, wc: Double
    )? {
        let candidates: [String] = ["/usr/bin/wc", "/bin/wc"]
        let wc = candidates.first { access($0, X_OK) == 0 }
        var replay: [Double] = []
        var counting: [Double] = []
        for _ in 0..<runs {
            guard let time = spawnMilliseconds([executable, "replay", file]) else { return nil }
            replay.append(time)
            if let wc, let time = spawnMilliseconds([wc, "-l", file]) { counting.append(time) }
        }
        return (median(replay), median(counting))
    }

    /// Process start to the moment `stepgate replay` opens its file (the first read follows at
    /// once), and spawning and reaping /bin/true, alternating; medians in milliseconds. The file
    /// is handed over through a FIFO: opening it for writing completes when the child opens it
    /// for reading, which this process notices within a few microseconds by polling.
    static func startToOpen(_ executable: String, file: String, runs: Int) throws -> (
        open: Double, baseline: Double
    )? {
        guard let bytes = FileManager.default.contents(atPath: file) else { return nil }
        let fifo = NSTemporaryDirectory() + "stepgate-bench-fifo-\(getpid()).csv"
        unlink(fifo)
        guard mkfifo(fifo, 0o600) == 0 else { return nil }
        defer { unlink(fifo) }
        var opened: [Double] = []
        var baseline: [Double] = []
        for _ in 0..<runs {
            if let time = spawnMilliseconds(["/bin/true"]) { baseline.append(time) }
            guard let child = spawn([executable, "replay", fifo]) else { return nil }
            var descriptor: Int32 = -1
            var status: Int32 = 0
            var exited = false
            while true {
                descriptor = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
                if descriptor >= 0 { break }
                // ENXIO: no reader yet. The child may also have failed before opening.
                if waitpid(child.pid, &status, WNOHANG) == child.pid {
                    exited = true
                    break
                }
                var pause = timespec(tv_sec: 0, tv_nsec: 5_000)
                nanosleep(&pause, nil)
            }
            guard !exited else { return nil }
            opened.append(nanoseconds(ContinuousClock.now - child.start) / 1e6)
            // Hand over the file (blocking writes), then reap the child.
            _ = fcntl(descriptor, F_SETFL, 0)
            bytes.withUnsafeBytes { buffer in
                var offset = 0
                while offset < buffer.count {
                    let n = write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                    if n < 0 && errno == EINTR { continue }
                    if n <= 0 { break }
                    offset += n
                }
            }
            close(descriptor)
            while waitpid(child.pid, &status, 0) < 0 && errno == EINTR {}
        }
        return (median(opened), median(baseline))
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
