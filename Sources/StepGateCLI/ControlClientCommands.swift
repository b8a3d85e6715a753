import CoreCommands
import Formatting
import Foundation
import StepGateDaemon

/// The control socket's default path, and the option every client command takes.
enum ControlDefaults {
    static let socket = "/run/stepgate/control.sock"
    static let socketOption = OptionSpec.option(
        "socket", "path", help: "The daemon's control socket (default \(socket)).")
}

/// Sends a request; prints the daemon's answer (JSON with --json) and fails when it refused.
func sendControl(_ command: ControlCommand, socket: String, json: Bool) throws {
    let answer = try ControlClient.send(command, socket: socket)
    if json { print(visibleJSON(answer.json)) }
    let reply = answer.reply
    if !reply.ok {
        throw ControlSocketError(message: reply.error ?? reply.events?.last ?? "refused")
    }
    if !json {
        for event in reply.events ?? [] { print(visible(event)) }
    }
}
