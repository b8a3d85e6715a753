import Formatting
package import Foundation
@preconcurrency import Glibc
import SystemFiles
import UnlockPolicy

/// Today's step count on disk, so a restart or a device gap never loses the day's steps:
/// `{"version":1,"day":"2026-11-29","steps":1234}` (the local calendar day), written
/// atomically (temporary file, `fsync`, `rename`).
package struct StepLedger {
    package static let currentVersion = 1
    package let path: String
    package private(set) var day: String
    package private(set) var steps: Int

    /// The default location: `$STATE_DIRECTORY` (systemd), else `$XDG_STATE_HOME/stepgate`,
    /// else `~/.local/state/stepgate`, file `steps.json`.
    package static var defaultPath: String {
        let environment = ProcessInfo.processInfo.environment
        if let state = environment["STATE_DIRECTORY"], !state.isEmpty {
            return state.split(separator: ":").first.map { "\($0)/steps.json" } ?? "\(state)/steps.json"
        }
        let base =
            environment["XDG_STATE_HOME"].flatMap { $0.isEmpty ? nil : $0 }
            ?? NSHomeDirectory() + "/.local/state"
        return base + "/stepgate/steps.json"
    }

    /// The local calendar day of `date`, `YYYY-MM-DD`. Uses the C library's `localtime_r` (the
    /// system zone) rather than Foundation's Calendar, which would load ICU — several megabytes
    /// of resident memory for the live reader.
    package static func today(_ date: Date = Date()) -> String {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        guard localtime_r(&seconds, &parts) != nil else { return "0000-00-00" }
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))"
    }

    /// Loads the ledger; a missing file, another day, or an unreadable file (reported
    /// through `warn`) starts at 0.
    package init(path: String, now: Date = Date(), warn: (String) -> Void) {
        self.path = path
        day = StepLedger.today(now)
        steps = 0
        // Never through a symbolic link, like the policy state: the daemon reads it as root.
        let bytes: [UInt8]
        do {
            guard let contents = try DurableFile.read(path, limit: 1 << 20) else { return }
            bytes = contents
        } catch {
            warn("\(error); starting today's count at 0")
            return
        }
        let data = Data(bytes)
        guard
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let version = object["version"] as? Int, let fileDay = object["day"] as? String,
            let fileSteps = object["steps"] as? Int, fileSteps >= 0
        else {
            warn("\(path): not a StepGate step ledger; starting today's count at 0")
            return
        }
        guard version <= StepLedger.currentVersion else {
            warn("\(path): ledger version \(version) is newer than this StepGate; starting at 0")
            return
        }
        if fileDay == day { steps = fileSteps }
    }

    /// Adds steps, starting a new day's count when the date changed.
    package mutating func add(_ count: Int, now: Date = Date()) {
        let current = StepLedger.today(now)
        if current != day {
            day = current
            steps = 0
        }
        steps += count
    }

    /// Writes the ledger atomically.
    package func save() throws {
        let directory = (path as NSString).deletingLastPathComponent
        if !directory.isEmpty {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        }
        let text = "{\"version\":\(StepLedger.currentVersion),\"day\":\"\(day)\",\"steps\":\(steps)}\n"
        do {
            try DurableFile.writeAtomically(Array(text.utf8), to: path, mode: 0o644)
        } catch {
            throw LedgerError(path: path, reason: error.description)
        }
    }
}

/// The ledger could not be written.
package struct LedgerError: Error, CustomStringConvertible {
    package var path: String
    package var reason: String
    package var description: String { "\(path): cannot save the step ledger: \(reason)" }
}
