import Counting
import Formatting
@preconcurrency import Glibc
import SensorInput
package import StepDetection
import Synchronization

/// `stepgate run`: counts steps live from an IIO accelerometer.
public struct Run: Command {
    public static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Count steps live from an IIO accelerometer.",
        discussion: """
            Feeds the device's samples through the step detector. On a terminal, one line shows \
            steps / goal, cadence and sample rate; with --json, one JSON line per step. Steps per \
            hour for 400 days are kept in a small file (default $STATE_DIRECTORY, \
            $XDG_STATE_HOME/stepgate or ~/.local/state/stepgate: steps.json) so a restart or a \
            lost device does not lose today's count; 'stepgate history --ledger FILE' shows it. \
            Ctrl-C prints a summary.
            """,
        options: [
            .option("goal", "steps", help: "Daily goal shown with the count."),
            .flag("json", help: "Print one JSON line per step and a summary line."),
            .option("config", "file", help: "Detector configuration (JSON); defaults otherwise."),
            .option("ledger", "file", help: "Where the step history is kept (default: see above)."),
        ] + LiveOptions.specs
    )

    var live: LiveOptions
    var goal: Int?
    var json: Bool
    var configPath: String?
    var ledgerPath: String

    public init(arguments: ParsedArguments) throws(UsageError) {
        if let extra = arguments.positionals.first { throw UsageError("unexpected argument '\(extra)'") }
        live = try LiveOptions(arguments)
        goal = try arguments.value("goal", expected: "a positive whole number") {
            Int($0).flatMap { $0 > 0 ? $0 : nil }
        }
        json = arguments.flag("json")
        configPath = arguments.value("config")
        ledgerPath = arguments.value("ledger") ?? StepLedger.defaultPath
    }

    /// What the counting task reports to the summary.
    package struct Progress: Sendable {
        var sessionSteps = 0
        var todaySteps = 0
        var samples = 0
        var firstTimestamp: Int64?
        var lastTimestamp: Int64 = 0
        var latencies: [Double] = []
    }

    public func run() async throws {
        let detectorConfiguration =
            try configPath.map(loadDetectorConfiguration(path:)) ?? DetectorConfiguration()
        let source = try live.source()
        // Written at most a second after a step, even in a device gap, and in full at the end.
        let initialLedger = StepLedger(
            path: ledgerPath, saveInterval: .seconds(1), warn: { printError("stepgate: \($0)") })
        let saver = Task { await initialLedger.keepSaved(log: Logger(level: .warning)) }
        defer { saver.cancel() }
        let progress = Mutex(Progress())
        progress.withLock { $0.todaySteps = initialLedger.steps }
        let json = json
        let goal = goal
        let limit = live.sampleLimit
        let terminal = !json && isTerminal(1)
        let started = monotonicNanoseconds()
        let reason = try await runUntilStopped(duration: live.duration) {
            var counter = StepCounter(configuration: detectorConfiguration, ledger: initialLedger)
            var lastDraw: Int64 = 0
            let out = StandardOutput()
            defer { out.flush() }
            try await countSteps(from: source, into: &counter, log: Logger(level: .warning)) {
                sample, events, counter in
                let now = monotonicNanoseconds()
                let monotonic = source.statistics.monotonicTimestamps
                for (index, event) in events.enumerated() {
                    let latency = monotonic ? Double(now - event.timestamp) / 1e6 : Double.nan
                    if json {
                        var line = JSONLine()
                        line.add("event", "step")
                        line.add("count", event.count)
                        line.add("today", counter.today - events.count + index + 1)
                        line.add("time_s", Double(event.timestamp) / 1e9, decimals: 3)
                        if monotonic { line.add("latency_ms", latency, decimals: 1) }
                        out.line(line.string)
                        out.flush()
                    }
                    if monotonic {
                        progress.withLock { if $0.latencies.count < 100_000 { $0.latencies.append(latency) } }
                    }
                }
                let snapshot = progress.withLock { p -> Progress in
                    p.samples = counter.samples
                    p.sessionSteps = counter.steps
                    p.todaySteps = counter.today
                    if p.firstTimestamp == nil { p.firstTimestamp = sample.timestamp }
                    p.lastTimestamp = sample.timestamp
                    return p
                }
                if terminal && now - lastDraw >= 250_000_000 {
                    lastDraw = now
                    out.write(
                        "\r"
                            + Run.statusLine(
                                snapshot, goal: goal, detector: counter.detector, now: now, started: started))
                    out.flush()
                }
                return limit.map { counter.samples < $0 } ?? true
            }
            if terminal { out.write("\n") }
        }
        saver.cancel()
        await saver.value
        await source.waitUntilStopped()
        let p = progress.withLock { $0 }
        let stats = source.statistics
        let seconds = Double(monotonicNanoseconds() - started) / 1e9
        let span = Double(p.lastTimestamp - (p.firstTimestamp ?? p.lastTimestamp)) / 1e9
        let rate = span > 0 ? Double(max(0, p.samples - 1)) / span : 0
        if json {
            var line = JSONLine()
            line.add("event", "summary")
            line.add("steps", p.sessionSteps)
            line.add("today", p.todaySteps)
            if let goal { line.add("goal", goal) }
            line.add("samples", p.samples)
            line.add("duration_s", seconds, decimals: 1)
            line.add("rate_hz", rate, decimals: 1)
            line.add("mode", stats.mode)
            line.add("reconnects", stats.reconnects)
            line.add("duplicates_dropped", stats.duplicatesDropped)
            if !p.latencies.isEmpty {
                let sorted = p.latencies.sorted()
                line.add("latency_ms_median", sorted[sorted.count / 2], decimals: 1)
                line.add("latency_ms_max", sorted[sorted.count - 1], decimals: 1)
            }
            line.add("stopped", Run.describe(reason))
            print(line.string)
        } else {
            var text = "\(p.sessionSteps) steps this run, \(p.todaySteps) today"
            if let goal { text += " (goal \(goal))" }
            text +=
                "; \(p.samples) samples in \(formatFixed(seconds, decimals: 1)) s at \(formatFixed(rate, decimals: 1)) Hz"
                + " (\(stats.mode)) from \(source.name)"
            if stats.reconnects > 0 { text += "; \(stats.reconnects) reconnects" }
            print(text)
        }
    }

    package static func describe(_ reason: StopReason) -> String {
        switch reason {
        case .finished: "finished"
        case .duration: "duration"
        case .signal(let n): n == SIGINT ? "SIGINT" : "SIGTERM"
        }
    }

    package static func statusLine(
        _ p: Progress, goal: Int?, detector: StepDetector, now: Int64, started: Int64
    )
        -> String
    {
        let goalText = goal.map { " / \($0)" } ?? ""
        let cadence = detector.stepPeriod > 0 ? 60 / detector.stepPeriod : 0
        let span = Double(p.lastTimestamp - (p.firstTimestamp ?? p.lastTimestamp)) / 1e9
        let rate = span > 0 ? Double(p.samples - 1) / span : 0
        return
            "steps \(p.todaySteps)\(goalText)  cadence \(leftPad(String(Int(cadence.rounded())), 3)) /min  "
            + "rate \(formatFixed(rate, decimals: 1)) Hz   "
    }
}
