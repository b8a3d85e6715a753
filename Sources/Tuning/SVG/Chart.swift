import Formatting
public import StepDetection

/// A chart: a title, a legend row under it, a plot area with axes, ticks, grid and labels.
/// Data coordinates map linearly into the plot area.
public struct Chart: Sendable {
    public var svg: SVGDocument
    public let plotLeft: Double
    public let plotTop: Double
    public let plotRight: Double
    public let plotBottom: Double
    public let xRange: ClosedRange<Double>
    public let yRange: ClosedRange<Double>

    /// How a legend entry is drawn.
    public enum Swatch: Sendable {
        case line(String)
        case dashed(String)
        case box(String)
        case dot(String)
        case tick(String)
        case triangle(String)
        case ring(String)
        case none
    }

    public init(
        width: Double = 1000, height: Double = 520, title: String, xRange: ClosedRange<Double>,
        yRange: ClosedRange<Double>,
        margins: (left: Double, top: Double, right: Double, bottom: Double) = (
            78, 84, 24, 62
        )
    ) {
        svg = SVGDocument(width: width, height: height)
        svg.title(title)
        svg.text(title, x: margins.left, y: 30, size: 18, weight: "bold")
        plotLeft = margins.left
        plotTop = margins.top
        plotRight = width - margins.right
        plotBottom = height - margins.bottom
        let xSpan = xRange.upperBound - xRange.lowerBound
        let ySpan = yRange.upperBound - yRange.lowerBound
        self.xRange = xSpan > 0 ? xRange : (xRange.lowerBound - 1)...(xRange.upperBound + 1)
        self.yRange = ySpan > 0 ? yRange : (yRange.lowerBound - 1)...(yRange.upperBound + 1)
    }

    /// Screen x of a data x.
    public func x(_ value: Double) -> Double {
        plotLeft + (value - xRange.lowerBound) / (xRange.upperBound - xRange.lowerBound)
            * (plotRight - plotLeft)
    }

    /// Screen y of a data y.
    public func y(_ value: Double) -> Double {
        plotBottom - (value - yRange.lowerBound) / (yRange.upperBound - yRange.lowerBound)
            * (plotBottom - plotTop)
    }

    /// Clamps a data y into the visible range.
    public func clampY(_ value: Double) -> Double { min(yRange.upperBound, max(yRange.lowerBound, value)) }

    /// Grid, axes, tick labels and axis titles. `xTicks: false` leaves the x axis unlabelled
    /// (bar charts label categories themselves).
    public mutating func axes(xTitle: String, yTitle: String, xTicks: Bool = true) {
        let yStep = niceTickStep(low: yRange.lowerBound, high: yRange.upperBound, count: 6)
        for value in niceTicks(low: yRange.lowerBound, high: yRange.upperBound, count: 6) {
            let py = y(value)
            svg.line(x1: plotLeft, y1: py, x2: plotRight, y2: py, stroke: "#e3e3e3")
            svg.text(
                tickLabel(value, step: yStep), x: plotLeft - 8, y: py + 4.5, size: 13, anchor: .end,
                fill: "#444")
        }
        if xTicks {
            let xStep = niceTickStep(low: xRange.lowerBound, high: xRange.upperBound, count: 8)
            for value in niceTicks(low: xRange.lowerBound, high: xRange.upperBound, count: 8) {
                let px = x(value)
                svg.line(x1: px, y1: plotTop, x2: px, y2: plotBottom, stroke: "#f0f0f0")
                svg.line(x1: px, y1: plotBottom, x2: px, y2: plotBottom + 5, stroke: "#444")
                svg.text(
                    tickLabel(value, step: xStep), x: px, y: plotBottom + 21, size: 13, anchor: .middle,
                    fill: "#444")
            }
        }
        svg.line(x1: plotLeft, y1: plotBottom, x2: plotRight, y2: plotBottom, stroke: "#444")
        svg.line(x1: plotLeft, y1: plotTop, x2: plotLeft, y2: plotBottom, stroke: "#444")
        svg.text(xTitle, x: (plotLeft + plotRight) / 2, y: svg.height - 14, size: 14, anchor: .middle)
        let cy = (plotTop + plotBottom) / 2
        svg.text(yTitle, x: 20, y: cy, size: 14, anchor: .middle, rotate: -90)
    }

    /// A horizontal legend between the title and the plot.
    public mutating func legend(_ entries: [(label: String, swatch: Swatch)]) {
        var px = plotLeft
        let py = 58.0
        for entry in entries {
            switch entry.swatch {
            case .line(let color):
                svg.line(x1: px, y1: py - 4, x2: px + 26, y2: py - 4, stroke: color, width: 2.5)
            case .dashed(let color):
                svg.line(x1: px, y1: py - 4, x2: px + 26, y2: py - 4, stroke: color, width: 2.5, dash: "6 4")
            case .box(let color):
                svg.rect(x: px + 4, y: py - 12, width: 18, height: 14, fill: color)
            case .dot(let color):
                svg.circle(x: px + 13, y: py - 4, radius: 4.5, fill: color)
            case .tick(let color):
                svg.line(x1: px + 13, y1: py - 12, x2: px + 13, y2: py + 3, stroke: color, width: 2)
            case .triangle(let color):
                svg.polygon([(px + 7, py - 10), (px + 19, py - 10), (px + 13, py + 1)], fill: color)
            case .ring(let color):
                svg.ring(x: px + 13, y: py - 4, radius: 6, stroke: color)
            case .none:
                px -= 32
            }
            svg.text(
                entry.label, x: px + 32, y: py, size: 13, fill: entry.label.hasPrefix("(") ? "#666" : "#222")
            px += 32 + Double(entry.label.count) * 7.4 + 26
        }
    }

    /// The finished SVG.
    public func render() -> String { svg.render() }
}

/// The figures `stepgate tune` and `stepgate plot` draw.
public enum Charts {
    static let blue = "#1f5fbf"
    static let orange = "#e07b00"
    static let green = "#1a8c3a"
    static let grey = "#9a9a9a"
    static let red = "#c62828"

    /// Objective versus evaluations: every evaluation as a dot, the best so far as a line.
    /// Evaluations far above the best are drawn at the top edge.
    /// `chosen` marks the evaluation finally kept (0-based), when it is not the lowest value
    /// (the robust choice).
    public static func objective(_ objectives: [Double], designEnd: Int? = nil, chosen: Int? = nil) -> String
    {
        let count = max(1, objectives.count)
        let sorted = objectives.sorted()
        let low = sorted.first ?? 0
        let start = objectives.first ?? 1
        // Show the interesting band: the best to a little above the starting configuration.
        let quantile = sorted.isEmpty ? 1 : sorted[min(sorted.count - 1, sorted.count * 3 / 4)]
        let high = max(start, min(quantile, max(start, low) * 2)) * 1.05
        let yTicks = niceTicks(low: low * 0.95, high: high, count: 6)
        let yLow = min(low, yTicks.first ?? low)
        var chart = Chart(
            width: 1100, title: "Objective versus evaluations (lower is better)",
            xRange: 0...Double(max(count, 2)),
            yRange: (yLow - (high - yLow) * 0.02)...high)
        chart.axes(xTitle: "evaluation", yTitle: "objective")
        chart.legend(
            [
                ("each configuration", .dot("#8fb3e8")), ("best so far", .line(blue)),
                ("starting configuration", .dashed(grey)),
            ] + (chosen == nil ? [] : [("chosen (robust)", .ring(orange))]) + [
                ("(worse values: at the top edge)", .none)
            ])
        chart.svg.line(
            x1: chart.plotLeft, y1: chart.y(start), x2: chart.plotRight, y2: chart.y(start), stroke: grey,
            width: 1.5,
            dash: "6 4")
        if let designEnd, designEnd > 1, designEnd < count {
            let px = chart.x(Double(designEnd))
            chart.svg.line(
                x1: px, y1: chart.plotTop, x2: px, y2: chart.plotBottom, stroke: "#bbb", dash: "2 3")
            chart.svg.text(
                "Latin hypercube", x: px - 6, y: chart.plotTop - 9, size: 12, anchor: .end, fill: "#666")
            chart.svg.text("refinement", x: px + 6, y: chart.plotTop - 9, size: 12, fill: "#666")
        }
        var best = Double.infinity
        var line: [(x: Double, y: Double)] = []
        for (i, value) in objectives.enumerated() {
            chart.svg.circle(
                x: chart.x(Double(i + 1)), y: chart.y(chart.clampY(value)), radius: 2.6, fill: "#8fb3e8")
            if value < best {
                if !line.isEmpty { line.append((chart.x(Double(i + 1)), chart.y(best))) }
                best = value
            }
            line.append((chart.x(Double(i + 1)), chart.y(best)))
        }
        chart.svg.polyline(line, stroke: blue, width: 2.5)
        if best.isFinite {
            chart.svg.text(
                "best \(fixed(best, 3))", x: chart.plotRight - 4, y: chart.y(best) - 8, size: 13,
                anchor: .end,
                weight: "bold", fill: blue, halo: true)
        }
        if let chosen, chosen < objectives.count {
            let value = objectives[chosen]
            let px = chart.x(Double(chosen + 1))
            let py = chart.y(chart.clampY(value))
            chart.svg.ring(x: px, y: py, radius: 7, stroke: orange)
            chart.svg.text(
                "chosen \(fixed(value, 3))", x: px, y: py + 22, size: 13, anchor: .middle, weight: "bold",
                fill: orange, halo: true)
        }
        return chart.render()
    }

    /// Walk error by placement: grouped bars for each series, with the value over each bar and
    /// an optional target line.
    public static func placements(
        _ placements: [String], series: [(label: String, color: String, values: [Double?])],
        target: Double? = 6
    ) -> String {
        let maxValue = series.flatMap { $0.values.compactMap { $0 } }.max() ?? 1
        let top = niceTicks(low: 0, high: max(maxValue, target ?? 0) * 1.12, count: 6).last ?? maxValue
        let high = max(top, max(maxValue, target ?? 0) * 1.12)
        var chart = Chart(
            title: "Walk error by carrying position (MAPE)", xRange: 0...Double(max(1, placements.count)),
            yRange: 0...high, margins: (78, 84, 24, 70))
        chart.axes(xTitle: "carrying position", yTitle: "walks MAPE (%)", xTicks: false)
        var entries: [(label: String, swatch: Chart.Swatch)] = series.map { ($0.label, .box($0.color)) }
        if let target { entries.append(("target \(trim(target)) %", .dashed(red))) }
        chart.legend(entries)
        if let target {
            chart.svg.line(
                x1: chart.plotLeft, y1: chart.y(target), x2: chart.plotRight, y2: chart.y(target),
                stroke: red,
                width: 1.5, dash: "6 4")
        }
        let groupWidth = chart.x(1) - chart.x(0)
        let barWidth = min(44, groupWidth * 0.8 / Double(max(1, series.count)))
        for (p, name) in placements.enumerated() {
            let center = chart.x(Double(p) + 0.5)
            let first = center - barWidth * Double(series.count) / 2
            for (s, entry) in series.enumerated() {
                guard p < entry.values.count, let value = entry.values[p] else { continue }
                let left = first + Double(s) * barWidth
                chart.svg.rect(
                    x: left + 1, y: chart.y(value), width: barWidth - 2,
                    height: chart.plotBottom - chart.y(value),
                    fill: entry.color)
                chart.svg.text(
                    fixed(value, 1), x: left + barWidth / 2, y: chart.y(value) - 4,
                    size: barWidth < 26 ? 10 : 11,
                    anchor: .middle, fill: "#333", halo: true)
            }
            chart.svg.text(name, x: center, y: chart.plotBottom + 20, size: 13, anchor: .middle)
        }
        return chart.render()
    }

    /// One recording over time: the filtered signal and the adaptive threshold, walking
    /// periods shaded, detected steps and true steps as marker rows.
    public static func signal(_ trace: SignalTrace, title: String) -> String {
        let times = trace.times
        let t0 = trace.window?.lowerBound ?? times.first ?? 0
        let t1 = max(trace.window?.upperBound ?? times.last ?? 1, t0 + 0.1)
        let values = trace.filtered + trace.prominenceLevel
        let low = values.min() ?? -0.1
        let high = values.max() ?? 0.1
        let span = max(high - low, 0.02)
        var chart = Chart(
            width: 1200, height: 600, title: title, xRange: t0...t1,
            yRange: (low - span * 0.04)...(high + span * 0.04), margins: (86, 136, 24, 62))
        var entries: [(label: String, swatch: Chart.Swatch)] = [
            ("filtered signal", .line(blue)),
            (
                "prominence test: last valley + required rise, last peak − required fall",
                .dashed(orange)
            ),
            ("detected steps (\(trace.detected.count))", .triangle(green)),
        ]
        if let truth = trace.truth { entries.append(("true steps (\(truth.count))", .tick("#222"))) }
        entries.append(("walking (cadence gate)", .box("#dff3e3")))
        chart.legend(entries)
        for span in trace.walking {
            let a = chart.x(max(t0, span.lowerBound))
            let b = chart.x(min(t1, span.upperBound))
            chart.svg.rect(
                x: a, y: chart.plotTop, width: b - a, height: chart.plotBottom - chart.plotTop,
                fill: "#dff3e3")
        }
        chart.axes(xTitle: "time (s)", yTitle: "filtered |a| (g)")
        chart.svg.line(
            x1: chart.plotLeft, y1: chart.y(0), x2: chart.plotRight, y2: chart.y(0), stroke: "#999")
        chart.svg.polyline(
            zip(times, trace.filtered).map { (chart.x($0), chart.y($1)) }, stroke: blue, width: 1.4)
        // The prominence is a height relative to the last extreme, not a level: draw the level
        // the signal must cross next (valley + prominence while it climbs out of a valley,
        // peak − prominence once it has passed one), as the peak detector tests it.
        chart.svg.polyline(
            zip(times, trace.prominenceLevel).map { (chart.x($0), chart.y($1)) }, stroke: orange,
            width: 1.6, dash: "6 4")
        // Marker rows between the legend and the plot, labelled in the left margin.
        let truthRow = chart.plotTop - 36
        let detectedRow = chart.plotTop - 14
        if let truth = trace.truth {
            chart.svg.text(
                "true", x: chart.plotLeft - 8, y: truthRow + 4, size: 12, anchor: .end, fill: "#222")
            for t in truth where t >= t0 && t <= t1 {
                chart.svg.line(
                    x1: chart.x(t), y1: truthRow - 7, x2: chart.x(t), y2: truthRow + 7, stroke: "#222",
                    width: 1.5)
            }
        }
        chart.svg.text(
            "detected", x: chart.plotLeft - 8, y: detectedRow + 4, size: 12, anchor: .end, fill: green)
        // Narrower triangles when steps are dense, so each stays distinct.
        let shown = trace.detected.filter { $0 >= t0 && $0 <= t1 }
        let spacing = (chart.plotRight - chart.plotLeft) / Double(max(1, shown.count))
        let half = max(1.5, min(4.5, spacing * 0.4))
        for t in shown {
            let px = chart.x(t)
            chart.svg.polygon(
                [(px - half, detectedRow - 6), (px + half, detectedRow - 6), (px, detectedRow + 4)],
                fill: green)
        }
        return chart.render()
    }
}

/// What `stepgate plot` draws for one recording; times in seconds from the first sample.
public struct SignalTrace: Sendable {
    public var times: [Double] = []
    public var filtered: [Double] = []
    public var threshold: [Double] = []
    /// The level the signal must cross next for the peak detector's prominence test: the last
    /// valley plus the required prominence while the signal is looking for a peak, the last
    /// peak minus it while it is looking for a valley.
    public var prominenceLevel: [Double] = []
    public var detected: [Double] = []
    public var truth: [Double]?
    /// Periods in which the cadence gate was walking.
    public var walking: [ClosedRange<Double>] = []
    /// The time window shown, in seconds.
    public var window: ClosedRange<Double>?

    public init() {}
}

extension SignalTrace {
    /// Runs a detector over `samples` and records, after each sample whose filtered value
    /// changed (one point per internal period at most), the filtered signal, the threshold and
    /// the gate state; keeps the points between `from` and `to` seconds.
    ///
    /// For input slower than the internal rate (a 12.5 Hz watch), one point per input sample is
    /// kept, so the curve has the input's resolution.
    public static func record(
        _ samples: [AccelerationSample], configuration: DetectorConfiguration,
        input: StepDetector.Input = .totalAcceleration, truth: [Int64]?, from: Double = 0,
        to: Double = .infinity
    ) -> SignalTrace {
        var trace = SignalTrace()
        guard let first = samples.first?.timestamp else { return trace }
        func seconds(_ t: Int64) -> Double { Double(t &- first) / 1e9 }
        var detector = StepDetector(configuration: configuration, input: input)
        var lastValue = Float.nan
        var walkStart: Double?
        // The peak detector's hysteresis, replayed on the filtered signal.
        var rising = true
        var extreme = 0.0
        for sample in samples {
            detector.process(sample) { step in trace.detected.append(seconds(step.timestamp)) }
            let t = seconds(sample.timestamp)
            let walking = detector.gateState == .walking
            if walking && walkStart == nil { walkStart = t }
            if !walking, let start = walkStart {
                if t >= from && start <= to { trace.walking.append(start...t) }
                walkStart = nil
            }
            let value = detector.filtered
            guard value != lastValue else { continue }
            lastValue = value
            let y = Double(value)
            let prominence = Double(detector.threshold)
            if rising {
                if y > extreme {
                    extreme = y
                } else if y < extreme - prominence {
                    rising = false
                    extreme = y
                }
            } else {
                if y < extreme {
                    extreme = y
                } else if y > extreme + prominence {
                    rising = true
                    extreme = y
                }
            }
            guard t >= from, t <= to else { continue }
            trace.times.append(t)
            trace.filtered.append(y)
            trace.threshold.append(prominence)
            trace.prominenceLevel.append(rising ? extreme - prominence : extreme + prominence)
        }
        if let start = walkStart, let last = samples.last {
            trace.walking.append(start...seconds(last.timestamp))
        }
        trace.detected = trace.detected.filter { $0 >= from && $0 <= to }
        let end = samples.last.map { seconds($0.timestamp) } ?? 0
        if from < min(to, end) { trace.window = from...min(to, end) }
        trace.truth = truth.map { $0.map(seconds).filter { $0 >= from && $0 <= to } }
        return trace
    }
}
