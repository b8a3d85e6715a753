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
    if json {
        let data = try JSONSerialization.data(withJSONObject: answer, options: [.sortedKeys])
        print(String(decoding: data, as: UTF8.self))
    }
    if answer["ok"] as? Bool != true {
        let events = (answer["events"] as? [String]) ?? []
        let reason = (answer["error"] as? String) ?? events.last ?? "refused"
        throw ControlSocketError(message: reason)
    }
    if !json {
        for event in (answer["events"] as? [String]) ?? [] { print(event) }
    }
}
