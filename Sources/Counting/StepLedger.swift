package import StepHistoryStore
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The step history while counting (`stepgate run`, the daemon): steps per local hour for the
/// last 400 days (``StepHistory``), on disk in `steps.json` (``StepHistoryFile``), so a restart
/// or a device gap never loses the day's steps. Shared between the input task, which adds and
/// saves, and whoever answers `status` and `history`; the zone can change under it (the policy's
/// zone, a reload, the system's zone changing).
package final class StepLedger: Sendable {
    package let path: String
    private let file: StepHistoryFile
    private let state: Mutex<(history: StepHistory, clock: LocalClock)>

    /// The default location: `$STATE_DIRECTORY` (systemd), else `$XDG_STATE_HOME/stepgate`,
    /// else `~/.local/state/stepgate`, file `steps.json`.
    package static var defaultPath: String {
        if let state = environmentValue("STATE_DIRECTORY"), !state.isEmpty {
            return state.split(separator: ":").first.map { "\($0)/steps.json" } ?? "\(state)/steps.json"
        }
        let base =
            environmentValue("XDG_STATE_HOME").flatMap { $0.isEmpty ? nil : $0 }
            ?? homeFolder() + "/.local/state"
        return base + "/stepgate/steps.json"
    }

    /// Loads the history; a missing file starts empty, an unreadable one is moved aside and
    /// reported through `warn` (see ``StepHistoryFile``).
    package init(path: String, clock: LocalClock = .system, warn: (String) -> Void) {
        self.path = path
        let (file, history) = StepHistoryFile.load(path: path, clock: clock, warn: warn)
        self.file = file
        state = Mutex((history, clock))
    }

    /// The zone days are counted in.
    package var clock: LocalClock {
        get { state.withLock { $0.clock } }
        set { state.withLock { $0.clock = newValue } }
    }

    /// Steps on the local day of an instant (seconds since 1970).
    package func steps(atSecondsSince1970 now: Double) -> Int {
        state.withLock { $0.history.today(atSecondsSince1970: now, clock: $0.clock) }
    }

    /// Today's steps now.
    package var steps: Int { steps(atSecondsSince1970: wallClockSeconds()) }

    /// A copy of the history and the zone.
    package var snapshot: (history: StepHistory, clock: LocalClock) { state.withLock { $0 } }

    /// Adds steps counted at an instant (seconds since 1970; now by default).
    package func add(_ count: Int, atSecondsSince1970 now: Double = wallClockSeconds()) {
        state.withLock { $0.history.add(count, atSecondsSince1970: now, clock: $0.clock) }
    }

    /// Writes the history atomically.
    package func save() throws {
        let history = state.withLock { $0.history }
        do {
            try file.save(history)
        } catch {
            throw LedgerError(path: path, reason: error.description)
        }
    }
}

extension LocalClock {
    /// The system's zone as the C library sees it (`TZ`, `/etc/localtime`), through
    /// `localtime_r`: no ICU data loaded, which keeps `stepgate run` small.
    package static let system = LocalClock(name: "system") { seconds in
        var time = time_t(seconds)
        var parts = tm()
        guard localtime_r(&time, &parts) != nil else { return 0 }
        return Int64(parts.tm_gmtoff)
    }
}

/// The ledger could not be written.
package struct LedgerError: Error, CustomStringConvertible {
    package var path: String
    package var reason: String
    package var description: String { "\(path): cannot save the step history: \(reason)" }
}

/// An environment variable's value, or nil when it is not set.
package func environmentValue(_ name: String) -> String? {
    getenv(name).map { String(cString: $0) }
}

/// The user's home folder as Foundation's `NSHomeDirectory()` finds it on Linux (which
/// ``StepLedger/defaultPath`` always used): `$CFFIXED_USER_HOME` when set, else the password
/// database's entry for the effective user (the real user when only the effective one is root),
/// else `$HOME`, else `/var/empty`.
package func homeFolder() -> String {
    func trimmed(_ path: String) -> String {
        var text = Substring(path)
        while text.count > 1 && text.hasSuffix("/") { text = text.dropLast() }
        return String(text)
    }
    if let fixed = environmentValue("CFFIXED_USER_HOME"), fixed.hasPrefix("/") { return trimmed(fixed) }
    var uid = geteuid()
    if uid == 0 { uid = getuid() }
    if let directory = passwdHome(uid) { return trimmed(directory) }
    if let home = environmentValue("HOME"), home.hasPrefix("/") { return trimmed(home) }
    return "/var/empty"
}

/// The home folder of a user in the password database.
private func passwdHome(_ uid: uid_t) -> String? {
    var entry = passwd()
    var result: UnsafeMutablePointer<passwd>?
    var buffer = [CChar](repeating: 0, count: 16_384)
    return buffer.withUnsafeMutableBufferPointer { storage -> String? in
        guard let base = storage.baseAddress, getpwuid_r(uid, &entry, base, storage.count, &result) == 0,
            result != nil,
            let directory = entry.pw_dir
        else { return nil }
        return String(cString: directory)
    }
}
