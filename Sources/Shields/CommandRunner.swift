import Foundation
import Synchronization

/// The outcome of running a command.
public struct CommandResult: Sendable, Hashable {
    /// Exit status, or 128 + signal number when it was killed.
    public var status: Int32
    public var output: String
    /// Whether it was killed for running past its timeout.
    public var timedOut: Bool
}

/// Runs commands with a timeout, for shields that call `systemctl`, hooks and reload commands.
public struct CommandRunner: Sendable {
    /// Extra environment, added to the current one.
    public var environment: [String: String] = [:]
    /// `PATH` used to find commands given by name (defaults to the process's).
    public var searchPath: String?

    public init(environment: [String: String] = [:], searchPath: String? = nil) {
        self.environment = environment
        self.searchPath = searchPath
    }

    /// Runs `arguments[0]` with the rest as arguments; kills it after `timeout` seconds.
    ///
    /// - Throws: ``ShieldError`` when the command cannot be found or started.
    public func run(
        _ arguments: [String], extraEnvironment: [String: String] = [:], timeout: Double, shield: String
    ) throws(ShieldError) -> CommandResult {
        guard let name = arguments.first, !name.isEmpty else {
            throw ShieldError(shield: shield, message: "empty command")
        }
        guard let executable = resolve(name) else {
            throw ShieldError(shield: shield, target: name, message: "command not found (PATH=\(path))")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = Array(arguments.dropFirst())
        var env = ProcessInfo.processInfo.environment
        if let searchPath { env["PATH"] = searchPath }
        for (k, v) in environment { env[k] = v }
        for (k, v) in extraEnvironment { env[k] = v }
        process.environment = env
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        process.standardInput = FileHandle.nullDevice
        let done = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in done.signal() }
        do {
            try process.run()
        } catch {
            throw ShieldError(
                shield: shield, target: name,
                message: "cannot start \(executable): \(error.localizedDescription)")
        }
        let collected = Mutex(Data())
        let reader = pipe.fileHandleForReading
        let readerDone = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            let data = reader.readDataToEndOfFile()
            collected.withLock { $0 = data.prefix(65_536) }
            readerDone.signal()
        }
        var timedOut = false
        if done.wait(timeout: .now() + timeout) == .timedOut {
            timedOut = true
            process.terminate()
            if done.wait(timeout: .now() + 2) == .timedOut {
                kill(process.processIdentifier, SIGKILL)
                done.wait()
            }
        }
        // A grandchild holding the pipe open must not hang us: give the reader a moment only.
        _ = readerDone.wait(timeout: .now() + 1)
        let output = collected.withLock { String(decoding: $0, as: UTF8.self) }
        var status = process.terminationStatus
        if process.terminationReason == .uncaughtSignal { status = 128 + status }
        return CommandResult(status: status, output: output, timedOut: timedOut)
    }

    private var path: String {
        searchPath ?? ProcessInfo.processInfo.environment["PATH"] ?? "/usr/sbin:/usr/bin:/sbin:/bin"
    }

    /// The executable for `name`: itself when it contains a slash, else the first match on PATH.
    func resolve(_ name: String) -> String? {
        if name.contains("/") { return FileManager.default.isExecutableFile(atPath: name) ? name : nil }
        for directory in path.split(separator: ":") {
            let candidate = "\(directory)/\(name)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }
}
