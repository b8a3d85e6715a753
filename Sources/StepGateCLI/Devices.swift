import CoreCommands
import Formatting
import SensorInput
import StepGateDaemon

/// `stepgate devices`: lists the IIO accelerometers libiio can see, with what StepGate needs
/// to know about each.
struct Devices: SynchronousCommand {
    static let configuration = CommandConfiguration(
        commandName: "devices",
        abstract: "List the IIO accelerometers and their channels, rates, trigger and mount matrix.",
        discussion: """
            Shows every accelerometer of this machine (or of --uri: ip:HOST for iiod, usb:…) with \
            its driver name, channels and scan types, scale and offset, sampling frequency and the \
            available ones, trigger, mount matrix, timestamp clock, and whether buffered capture is \
            possible. With no IIO at all, or without permission, the message says what to do.
            """,
        options: [
            .option("uri", "uri", help: "libiio context: local: (default), ip:HOST[:PORT], usb:…"),
            .flag("json", help: "Print one JSON line per device."),
        ]
    )

    var uri: String?
    var json: Bool

    init(arguments: ParsedArguments) throws(UsageError) {
        if let extra = arguments.positionals.first { throw UsageError("unexpected argument '\(extra)'") }
        uri = arguments.value("uri")
        if let uri, uri.isEmpty { throw UsageError("invalid value '' for '--uri': expected a libiio URI") }
        json = arguments.flag("json")
    }

    func runSynchronously() throws {
        let devices = try IIODeviceInfo.list(uri: uri)
        let out = StandardOutput()
        defer { out.flush() }
        if devices.isEmpty {
            printError(
                "No IIO accelerometer in \(uri ?? "local:") (IIO is present, but no device has accel "
                    + "channels; see 'Debugging your sensor' in docs/sensors.md).")
            throw ExitCode.failure
        }
        for device in devices {
            if json {
                out.line(Devices.jsonLine(device))
            } else {
                out.write(Devices.text(device))
            }
        }
    }

    static func text(_ d: IIODeviceInfo) -> String {
        var text = "\(d.displayName)\(d.label.map { " label \($0)" } ?? "")\n"
        text += "  capture:           \(d.captureNote)\n"
        if let problem = d.accessProblem { text += "  access:            \(problem)\n" }
        text +=
            "  sampling frequency: \(d.samplingFrequency.map { "\($0) Hz" } ?? "-")"
            + (d.availableFrequencies.isEmpty
                ? "" : " (available: \(d.availableFrequencies.joined(separator: " ")))")
            + "\n"
        text += "  trigger:           \(d.trigger ?? "none")\n"
        text += "  mount matrix:      \(d.mountMatrix) (\(d.mountMatrixSource))\n"
        text += "  timestamp clock:   \(d.timestampClock ?? "-")\n"
        text += "  channels:\n"
        for c in d.channels {
            var row = "    " + rightPad(c.id, 11)
            row += rightPad(c.scanType.map { "\($0) index \(c.index ?? -1)" } ?? "not buffered", 28)
            if let scale = c.scale { row += " scale \(scale)" }
            if let offset = c.offset { row += " offset \(offset)" }
            text += row + "\n"
        }
        return text
    }

    static func jsonLine(_ d: IIODeviceInfo) -> String {
        var line = JSONLine()
        line.add("id", d.id)
        line.add("name", d.name ?? "")
        if let label = d.label { line.add("label", label) }
        line.add("buffered", d.bufferedCapture)
        line.add("capture", d.captureNote)
        if let problem = d.accessProblem { line.add("access_problem", problem) }
        if let frequency = d.samplingFrequency { line.add("sampling_frequency", frequency) }
        line.addRaw(
            "sampling_frequency_available",
            "[" + d.availableFrequencies.map(JSONLine.quoted).joined(separator: ",") + "]")
        if let trigger = d.trigger { line.add("trigger", trigger) } else { line.addRaw("trigger", "null") }
        line.add("mount_matrix", d.mountMatrix.description)
        line.add("mount_matrix_source", d.mountMatrixSource)
        if let clock = d.timestampClock { line.add("timestamp_clock", clock) }
        let channels = d.channels.map { c in
            var o = JSONLine()
            o.add("id", c.id)
            if let t = c.scanType {
                o.add("type", t.description)
                o.add("index", c.index ?? -1)
            }
            if let s = c.scale { o.add("scale", s) }
            if let s = c.offset { o.add("offset", s) }
            return o.string
        }
        line.addRaw("channels", "[" + channels.joined(separator: ",") + "]")
        return line.string
    }
}
