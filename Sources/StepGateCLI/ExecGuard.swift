import CoreCommands
import Formatting
import Foundation
@preconcurrency import Glibc
import Shields
import StepGateDaemon

/// `stepgate exec -- CMD…`: a launch guard that shows the shield screen instead of starting a
/// shielded program.
struct ExecGuard: SynchronousCommand {
    static let configuration = CommandConfiguration(
        commandName: "exec",
        abstract: "Start a program unless it is shielded; show the shield screen (exit 126) if it is.",
        discussion: """
            Asks the daemon whether the program's store is shielded. If it is, prints the shield \
            screen (title, subtitle, steps still to walk) and exits 126, as a shell does for a \
            program it may not run. If the daemon cannot be reached the guard fails closed and \
            does not start the program. Use it in launchers: Exec=stepgate exec -- /usr/games/x.
            """,
        arguments: [ArgumentHelp("-- <command> [<argument>...]", help: "The program and its arguments.")],
        options: [ControlDefaults.socketOption]
    )

    var command: [String]
    var socket: String

    init(arguments: ParsedArguments) throws(UsageError) {
        guard !arguments.positionals.isEmpty else {
            throw UsageError("missing the program to start after '--'")
        }
        command = arguments.positionals
        socket = arguments.value("socket") ?? ControlDefaults.socket
    }

    func runSynchronously() throws {
        let program = command[0]
        let path = program.contains("/") ? program : CommandRunner().resolve(program) ?? program
        let answer: CheckReply
        do {
            // Resolved here, by the client: the daemon never touches a path a client sends.
            var resolved: String?
            if let real = realpath(path, nil) {
                resolved = String(cString: real)
                free(real)
            }
            let received = try ControlClient.send(
                .check(executable: path, resolved: resolved), socket: socket, timeout: 10)
            let reply = received.reply
            guard reply.ok else {
                throw ControlSocketError(message: "the daemon refused: \(reply.error ?? "no reason")")
            }
            answer = try received.decode(CheckReply.self)
        } catch {
            printError("StepGate: \(error)\nNot starting \(program): the guard fails closed.")
            throw ExitCode(126)
        }
        if answer.shielded {
            let title = visible(answer.title ?? "Shielded")
            let subtitle = visible(answer.subtitle ?? "")
            var text = "\n  \(title)\n"
            if !subtitle.isEmpty { text += "  \(subtitle)\n" }
            if let steps = answer.stepsToGo {
                text += "\n  Walk \(steps) more steps to unlock it.\n"
            }
            if let until = answer.unlockedUntil { text += "  Unlocked until \(visible(until)).\n" }
            text += "\n  [ Close ]   [ Walk now: stepgate status ]\n"
            printError(text)
            throw ExitCode(126)
        }
        let argv = command.map { strdup($0) } + [nil]
        execv(path, argv)
        printError("Error: cannot start \(program): \(String(cString: strerror(errno)))")
        throw ExitCode(127)
    }
}
