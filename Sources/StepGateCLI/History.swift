import CoreCommands
import Counting
import Formatting
import Foundation
import StepGateDaemon
import StepHistoryStore
import SystemFiles
import Tuning
import UnlockPolicy

/// `stepgate history`: steps per hour, day or week, from the daemon (any local user may ask) or
/// from a step history file.
struct History: SynchronousCommand {
    static let configuration = CommandConfiguration(
        commandName: "history",
        abstract: "Show steps per hour, day or week for up to 400 days (any local user may ask).",
        discussion: """
            Asks the daemon for its step history (or reads a history file with --ledger, such as \
            the one 'stepgate run' keeps) and draws a bar chart: one bar per hour, day or week, \
            the goal as a '|' column (the first goal tier of the largest gate, or --goal) and the \
            current day marked. Days are local days in the policy's time zone. --json and --csv \
            print the numbers instead; --svg also writes the chart as SVG. --days is the number \
            of days covered (default: 1 by hour, 14 by day, 84 by week).
            """,
        options: [
            ControlDefaults.socketOption,
            .option("days", "n", help: "How many days, up to today (1 to 400)."),
            .option("by", "unit", help: "hour, day (default) or week."),
            .option("goal", "steps", help: "The goal line (default: the daemon's first gate goal)."),
            .option("ledger", "file", help: "Read this step history file instead of asking the daemon."),
            .option("until", "date", help: "With --ledger: the last day shown, YYYY-MM-DD (default today)."),
            .flag("json", help: "Print the buckets as JSON."),
            .flag("csv", help: "Print the buckets as CSV (period,steps)."),
            .option("svg", "file", help: "Also write the chart as SVG."),
        ]
    )

    var socket: String
    var days: Int
    var grouping: StepHistory.Grouping
    var goal: Int?
    var ledger: String?
    var until: Int64?
    var json: Bool
    var csv: Bool
    var svg: String?

    init(arguments: ParsedArguments) throws(UsageError) {
        guard arguments.positionals.isEmpty else {
            throw UsageError("unexpected argument '\(arguments.positionals[0])'")
        }
        socket = arguments.value("socket") ?? ControlDefaults.socket
        grouping =
            try arguments.value(
                "by", expected: "hour, day or week", StepHistory.Grouping.init(rawValue:)) ?? .day
        let standard = [StepHistory.Grouping.hour: 1, .day: 14, .week: 84][grouping] ?? 14
        days =
            try arguments.value("days", expected: "a whole number from 1 to \(StepHistory.retainedDays)") {
                Int($0).flatMap { (1...StepHistory.retainedDays).contains($0) ? $0 : nil }
            } ?? standard
        goal = try arguments.value("goal", expected: "a whole number of steps > 0") {
            Int($0).flatMap { $0 > 0 ? $0 : nil }
        }
        ledger = arguments.value("ledger")
        until = try arguments.value("until", expected: "a date YYYY-MM-DD", StepHistory.day(from:))
        guard until == nil || ledger != nil else { throw UsageError("'--until' needs '--ledger'") }
        json = arguments.flag("json")
        csv = arguments.flag("csv")
        guard !(json && csv) else { throw UsageError("'--json' and '--csv' exclude each other") }
        svg = arguments.value("svg")
    }

    func runSynchronously() throws {
        let report: HistoryReport
        if let ledger {
            // Only read: a viewer never moves a file aside (the daemon and `run` do).
            let history: StepHistory
            do {
                guard let bytes = try DurableFile.read(ledger, limit: StepHistoryFile.limit) else {
                    throw ConfigurationFileError(path: ledger, message: "no such file")
                }
                history = try StepHistory.decode(bytes)
            } catch let error as ConfigurationFileError {
                throw error
            } catch {
                throw ConfigurationFileError(path: ledger, message: "not a StepGate step history: \(error)")
            }
            let now = LocalClock.system.dayAndHour(Date())
            let isToday = until == nil || until == now.day
            report = HistoryReport(
                history: history, zone: "system zone", today: until ?? now.day, hour: isToday ? now.hour : -1,
                days: days, grouping: grouping, goal: goal, markToday: isToday)
        } else {
            let answer = try ControlClient.send(.history(days: days), socket: socket)
            let reply = answer.reply
            guard reply.ok else {
                throw ControlSocketError(message: "the daemon refused: \(reply.error ?? "no reason given")")
            }
            report = try HistoryReport(answer: answer, days: days, grouping: grouping, goal: goal)
        }
        if let svg {
            do {
                try report.svg().write(toFile: svg, atomically: true, encoding: .utf8)
            } catch {
                throw ConfigurationFileError(path: svg, message: "cannot write: \(systemReason(error))")
            }
        }
        if json {
            print(report.json())
        } else if csv {
            print(report.csv(), terminator: "")
        } else {
            print(report.chart(), terminator: "")
            if let svg { print("wrote \(svg)") }
        }
    }
}

/// One history as buckets, ready to print as a terminal chart, CSV, JSON or SVG.
struct HistoryReport {
    var zone: String
    var grouping: StepHistory.Grouping
    var goal: Int?
    var buckets: [StepHistory.Bucket]
    var first: Int64
    var today: Int64

    init(
        history: StepHistory, zone: String, today: Int64, hour: Int, days: Int,
        grouping: StepHistory.Grouping, goal: Int?, markToday: Bool = true
    ) {
        self.zone = zone
        self.grouping = grouping
        self.today = today
        first = today - Int64(days) + 1
        buckets = history.buckets(dayCount: days, today: today, currentHour: hour, by: grouping)
        if !markToday { for index in buckets.indices { buckets[index].isCurrent = false } }
        // A daily goal means nothing for an hour or a week.
        self.goal = grouping == .day ? goal : nil
    }

    /// From the daemon's answer to `{"command":"history"}`.
    init(answer: ControlAnswer, days: Int, grouping: StepHistory.Grouping, goal: Int?) throws {
        let reply: HistoryReply
        do {
            reply = try answer.decode(HistoryReply.self)
        } catch {
            throw ControlSocketError(message: "the daemon's history answer: \(error)")
        }
        guard let today = StepHistory.day(from: reply.today), let object = answer.memberJSON("history") else {
            throw ControlSocketError(message: "the daemon's history answer lacks a day or the history")
        }
        let history: StepHistory
        do {
            history = try StepHistory.decode(Array(object.utf8))
        } catch {
            throw ControlSocketError(message: "the daemon's history answer: \(error)")
        }
        self.init(
            history: history, zone: reply.zone, today: today, hour: reply.hour, days: days,
            grouping: grouping, goal: goal ?? reply.goal)
    }

    private func label(_ bucket: StepHistory.Bucket) -> String {
        switch grouping {
        case .day:
            let day = StepHistory.day(from: bucket.label) ?? 0
            return StepHistory.weekdayName(day) + " " + bucket.label
        case .hour: return bucket.label.replacingOccurrences(of: "T", with: " ") + ":00"
        case .week: return "week of " + bucket.label
        }
    }

    private var title: String {
        "steps per \(grouping.rawValue), \(StepHistory.dayLabel(first)) to \(StepHistory.dayLabel(today)) "
            + "(\(visible(zone)))"
    }

    /// A bar chart for a terminal: one row per bucket, the goal as a `|` column.
    func chart(width: Int = 40) -> String {
        let largest = max(1, buckets.map(\.steps).max() ?? 0, goal ?? 0)
        let goalColumn = goal.map {
            min(width - 1, Int((Double($0) / Double(largest) * Double(width)).rounded()))
        }
        let labels = buckets.map(label)
        let labelWidth = labels.map(\.count).max() ?? 0
        let numberWidth = String(buckets.map(\.steps).max() ?? 0).count
        var text = title + (goal.map { "; goal \($0) steps (|)" } ?? "") + "\n"
        for (bucket, name) in zip(buckets, labels) {
            let length = Int((Double(bucket.steps) / Double(largest) * Double(width)).rounded())
            var bar = Array(repeating: "█", count: length) + Array(repeating: " ", count: width - length)
            if let goalColumn { bar[goalColumn] = "|" }
            let number = String(bucket.steps)
            var line = name.padding(toLength: labelWidth, withPad: " ", startingAt: 0) + "  " + bar.joined()
            line += " " + String(repeating: " ", count: max(0, numberWidth - number.count)) + number
            if let goal, bucket.steps >= goal { line += " ✓" }
            if bucket.isCurrent { line += grouping == .hour ? "  ← now" : "  ← today" }
            text += line + "\n"
        }
        let total = buckets.reduce(0) { $0 + $1.steps }
        text += "total \(total) steps"
        if grouping != .hour, !buckets.isEmpty {
            text += ", \(total / buckets.count) per \(grouping.rawValue)"
        }
        return text + "\n"
    }

    /// `period,steps` rows.
    func csv() -> String {
        "period,steps\n" + buckets.map { "\($0.label),\($0.steps)\n" }.joined()
    }

    /// `{"zone":…,"by":…,"goal":…,"buckets":[{"period":…,"steps":…,"current":…}]}`.
    func json() -> String {
        var line = JSONLine()
        line.add("zone", zone)
        line.add("by", grouping.rawValue)
        line.add("from", StepHistory.dayLabel(first))
        line.add("to", StepHistory.dayLabel(today))
        if let goal { line.add("goal", goal) }
        let rows = buckets.map { bucket -> String in
            var row = JSONLine()
            row.add("period", bucket.label)
            row.add("steps", bucket.steps)
            row.add("current", bucket.isCurrent)
            return row.string
        }
        line.addRaw("buckets", "[" + rows.joined(separator: ",") + "]")
        return line.string
    }

    /// The chart as SVG, drawn like `stepgate plot`'s figures.
    func svg() -> String {
        let largest = Double(max(1, buckets.map(\.steps).max() ?? 0, goal ?? 0))
        let top =
            niceTicks(low: 0, high: largest * 1.08, count: 6).last.map { max($0, largest * 1.08) } ?? largest
        var chart = Chart(
            title: title, xRange: 0...Double(max(1, buckets.count)), yRange: 0...top)
        chart.legend(
            [("steps", .box("#1f5fbf")), ("today", .box("#e07b00"))]
                + (goal.map { [("goal \($0)", Chart.Swatch.dashed("#c62828"))] } ?? []))
        chart.axes(xTitle: grouping.rawValue, yTitle: "steps", xTicks: false)
        let slot = (chart.plotRight - chart.plotLeft) / Double(max(1, buckets.count))
        let every = max(
            1, Int((Double(buckets.count) * 70 / (chart.plotRight - chart.plotLeft)).rounded(.up)))
        for (index, bucket) in buckets.enumerated() {
            let x = chart.x(Double(index))
            let y = chart.y(Double(bucket.steps))
            chart.svg.rect(
                x: x + slot * 0.12, y: y, width: slot * 0.76, height: chart.plotBottom - y,
                fill: bucket.isCurrent ? "#e07b00" : "#1f5fbf")
            if index % every == 0 || bucket.isCurrent {
                let text =
                    grouping == .hour ? String(bucket.label.suffix(2)) : String(bucket.label.dropFirst(5))
                chart.svg.text(
                    text, x: x + slot / 2, y: chart.plotBottom + 21, size: 12, anchor: .middle, fill: "#444")
            }
        }
        if let goal {
            let y = chart.y(Double(goal))
            chart.svg.line(
                x1: chart.plotLeft, y1: y, x2: chart.plotRight, y2: y, stroke: "#c62828", width: 2,
                dash: "6 4")
        }
        return chart.render()
    }
}
