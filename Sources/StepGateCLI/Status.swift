import CoreCommands
import Formatting
import Foundation
import StepGateDaemon
import StepHistoryStore
import UnlockPolicy

/// An instant from the daemon (ISO 8601, UTC) as this machine's local time (`2026-12-06 07:02:56
/// CET`); text that is not an instant is shown as it is.
func localTime(_ text: String, zone: TimeZone = .current) -> String {
    let parser = ISO8601DateFormatter()
    parser.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    let plain = ISO8601DateFormatter()
    guard let date = parser.date(from: text) ?? plain.date(from: text) else { return visible(text) }
    let formatter = DateFormatter()
    formatter.locale = Locale(identifier: "en_US_POSIX")
    formatter.timeZone = zone
    formatter.dateFormat = "yyyy-MM-dd HH:mm:ss zzz"
    return formatter.string(from: date)
}

/// `stepgate status`: what the daemon enforces now.
struct Status: SynchronousCommand {
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

    func runSynchronously() throws {
        let answer = try ControlClient.send(.status, socket: socket)
        if json { print(visibleJSON(answer.json)) }
        let reply = answer.reply
        guard reply.ok else {
            throw ControlSocketError(message: "the daemon refused: \(reply.error ?? "no reason given")")
        }
        if json { return }
        let status: StatusReply
        do {
            status = try answer.decode(StatusReply.self)
        } catch {
            throw ControlSocketError(message: "the daemon's status answer: \(error)")
        }
        if answer.serverUID != 0 && answer.serverUID != getuid() {
            print(
                "note: answered by uid \(answer.serverUID), not by root's daemon: a trial run (or something "
                    + "posing as StepGate); nothing it says is enforced by root")
        }
        print(
            "input: \(visible(status.input)), \(status.stepsToday) steps today (\(status.stepsSinceStart) since start)"
        )
        if let problem = status.inputProblem { print("input problem: \(visible(problem.line))") }
        for store in status.stores {
            // Every text from the daemon may carry a name a user chose (a file name, a store):
            // control characters are shown, never sent to the terminal.
            var line = "\(visible(store.name)): " + (store.shielded ? "shielded" : "open")
            if !store.owners.isEmpty { line += " (held by \(visible(store.owners.joined(separator: ", "))))" }
            if let until = store.unlockedUntil { line += ", unlocked until \(localTime(until))" }
            if let until = store.emergencyUntil { line += ", emergency unlock until \(localTime(until))" }
            if let goal = store.nextGoal {
                line += ", \(store.steps)/\(goal) steps\(store.goalIsDaily == true ? " today" : "")"
            }
            if let cap = store.dailyUnlockCap { line += ", \(store.unlocksToday)/\(cap) unlocks today" }
            if store.shieldHealth != "ok" { line += "\n  shield failing: \(visible(store.shieldHealth))" }
            if let note = store.note { line += "\n  \(visible(note))" }
            if let selects = store.selects, !selects.isEmpty {
                line += "\n  selects: \(visible(selects.joined(separator: "; ")))"
            }
            print(line)
        }
        if !status.lastDays.isEmpty {
            let parts = status.lastDays.map { entry -> String in
                let name = StepHistory.day(from: entry.day).map(StepHistory.weekdayName) ?? visible(entry.day)
                return "\(name) \(entry.steps)"
            }
            print("last 7 days: \(parts.joined(separator: ", ")) (today last; 'stepgate history' for more)")
        }
        print("emergency unlocks left this week: \(status.emergencyRemaining)")
        if let next = status.nextChange { print("next change: \(localTime(next))") }
        if let mqtt = status.mqtt { print("mqtt: \(visible(mqtt))") }
        for problem in status.problems { print("problem: \(visible(problem))") }
        if let kinds = status.unenforcedKinds, !kinds.isEmpty {
            print("not enforced on this machine: \(visible(kinds.joined(separator: ", ")))")
        }
    }
}
