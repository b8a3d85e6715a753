import Formatting
import Foundation
import StepGateDaemon
import UnlockPolicy

/// `stepgate status`: what the daemon enforces now.
struct Status: Command {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show steps, goals, what is shielded and until when (any local user may ask).",
        options: [ControlDefaults.socketOption, .flag("json", help: "Print the daemon's answer as JSON.")]
    )

    var socket: String
    var json: Bool

    init(arguments: ParsedArguments) throws(UsageError) {
        guard arguments.positionals.isEmpty else {
            throw UsageError("unexpected argument '\(arguments.positionals[0])'")
        }
        socket = arguments.value("socket") ?? ControlDefaults.socket
        json = arguments.flag("json")
    }

    func run() async throws {
        let answer = try ControlClient.send(.status, socket: socket)
        if json {
            let data = try JSONSerialization.data(withJSONObject: answer, options: [.sortedKeys])
            print(visibleJSON(String(decoding: data, as: UTF8.self)))
        }
        guard answer["ok"] as? Bool == true else {
            throw ControlSocketError(
                message: "the daemon refused: \(answer["error"] as? String ?? "no reason given")")
        }
        if json { return }
        let today = answer["stepsToday"] as? Int ?? 0
        let sinceStart = answer["stepsSinceStart"] as? Int ?? 0
        print(
            "input: \(visible(answer["input"] as? String ?? "?")), \(today) steps today (\(sinceStart) since start)"
        )
        for store in (answer["stores"] as? [[String: Any]]) ?? [] {
            // Every text from the daemon may carry a name a user chose (a file name, a store):
            // control characters are shown, never sent to the terminal.
            let name = visible(store["name"] as? String ?? "?")
            var line = "\(name): " + ((store["shielded"] as? Bool) == true ? "shielded" : "open")
            if let owners = store["owners"] as? [String], !owners.isEmpty {
                line += " (held by \(visible(owners.joined(separator: ", "))))"
            }
            if let until = store["unlockedUntil"] as? String { line += ", unlocked until \(visible(until))" }
            if let until = store["emergencyUntil"] as? String {
                line += ", emergency unlock until \(visible(until))"
            }
            if let goal = store["nextGoal"] as? Int, let steps = store["steps"] as? Int {
                line += ", \(steps)/\(goal) steps"
            }
            if let cap = store["dailyUnlockCap"] as? Int {
                line += ", \(store["unlocksToday"] as? Int ?? 0)/\(cap) unlocks today"
            }
            if let health = store["shieldHealth"] as? String, health != "ok" {
                line += "\n  shield failing: \(visible(health))"
            }
            if let note = store["note"] as? String { line += "\n  \(visible(note))" }
            print(line)
        }
        if let days = answer["lastDays"] as? [[String: Any]], !days.isEmpty {
            let parts = days.map { entry -> String in
                let label = entry["day"] as? String ?? "?"
                let name = StepHistory.day(from: label).map(StepHistory.weekdayName) ?? visible(label)
                return "\(name) \(entry["steps"] as? Int ?? 0)"
            }
            print("last 7 days: \(parts.joined(separator: ", ")) (today last; 'stepgate history' for more)")
        }
        print("emergency unlocks left this week: \(answer["emergencyRemaining"] as? Int ?? 0)")
        if let next = answer["nextChange"] as? String { print("next change: \(visible(next))") }
        for problem in (answer["problems"] as? [String]) ?? [] { print("problem: \(visible(problem))") }
        if let kinds = answer["unenforcedKinds"] as? [String], !kinds.isEmpty {
            print("not enforced on this machine: \(kinds.joined(separator: ", "))")
        }
    }
}
