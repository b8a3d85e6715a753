package import StepHistoryStore
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The step history while counting (`stepgate run`, the daemon): steps per local hour for the
/// last 400 days (``StepHistory``), on disk in `steps.json` (``StepHistoryFile``), so a restart
/// or a device gap never loses the day's steps. Shared between the input task, which adds, and
/// whoever answers `status` and `history` and keeps the file written; the zone can change under
/// it (the policy's zone, a reload, the system's zone changing).
///
/// The file is written in batches (``SaveDeadline``): at most `saveInterval` after a step that
/// is not on disk (``saveIfDue()``, which the owner calls when ``saveDue`` comes), and in full
/// when counting stops (``save()``). So SIGTERM loses nothing, and a SIGKILL or a power cut
/// loses at most the steps of the last `saveInterval`. Saves from any task land in the order
/// they were taken.
package final class StepLedger: Sendable {
    package let path: String
    private let file: StepHistoryFile
    private let state: Mutex<(history: StepHistory, clock: LocalClock, changes: Int, deadline: SaveDeadline)>
    /// How many changes are on disk; held while writing, so two saves never cross.
    private let written = Mutex(0)
    /// The clock the deadline runs on (monotonic; the daemon's own clock in the daemon).
    private let monotonic: @Sendable () -> Duration

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
    /// reported through `warn` (see ``StepHistoryFile``). Temporary files of writes that never
    /// finished (``DurableFile/removeLeftovers(in:of:)``) are removed first.
    ///
    /// - Parameters:
    ///   - saveInterval: The longest a counted step waits for the file.
    ///   - monotonic: The clock ``saveDue`` is on; `CLOCK_MONOTONIC` by default.
    package init(
        path: String, clock: LocalClock = .system, saveInterval: Duration = .seconds(10),
        monotonic: @escaping @Sendable () -> Duration = monotonicTime, warn: (String) -> Void
    ) {
        self.path = path
        let folder = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "."
        DurableFile.removeLeftovers(
            in: folder.isEmpty ? "/" : folder, of: path.split(separator: "/").last.map(String.init))
        let (file, history) = StepHistoryFile.load(path: path, clock: clock, warn: warn)
        self.file = file
        self.monotonic = monotonic
        state = Mutex((history, clock, 0, SaveDeadline(interval: saveInterval)))
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
    package var snapshot: (history: StepHistory, clock: LocalClock) {
        state.withLock { ($0.history, $0.clock) }
    }

    /// Adds steps counted at an instant (seconds since 1970; now by default).
    package func add(_ count: Int, atSecondsSince1970 now: Double = wallClockSeconds()) {
        guard count > 0 else { return }
        let time = monotonic()
        state.withLock {
            $0.history.add(count, atSecondsSince1970: now, clock: $0.clock)
            $0.changes += 1
            $0.deadline.changed(at: time)
        }
    }

    /// The longest a counted step waits for the file.
    package var saveInterval: Duration { state.withLock { $0.deadline.interval } }

    /// When steps not on disk yet must be written (on the `monotonic` clock); nil when none wait.
    package var saveDue: Duration? { state.withLock { $0.deadline.due } }

    /// Writes the history when ``saveDue`` has come. A failed write is tried again an interval
    /// later.
    package func saveIfDue() throws {
        guard state.withLock({ $0.deadline.isDue(at: monotonic()) }) else { return }
        try save()
    }

    /// Writes the history atomically and durably now, if it changed since the last write.
    package func save() throws {
        try written.withLock { (onDisk: inout Int) throws(LedgerError) in
            let (history, changes) = state.withLock { ($0.history, $0.changes) }
            guard changes != onDisk else { return }
            do throws(FileError) {
                try file.save(history)
            } catch {
                let time = monotonic()
                state.withLock { $0.deadline.failed(at: time) }
                throw LedgerError(path: path, reason: error.description)
            }
            onDisk = changes
            state.withLock { if $0.changes == changes { $0.deadline.written() } }
        }
    }
}

extension StepLedger {
    /// Writes the history whenever a save comes due (``saveDue``), until the task is cancelled:
    /// a task beside the counting, so steps wait at most the save interval for the file even
    /// while no sample comes (a device gap). A failed write is logged as a warning.
    package func keepSaved(log: Logger) async {
        while !Task.isCancelled {
            let wait = saveDue.map { max(.milliseconds(1), $0 - monotonic()) } ?? saveInterval
            try? await Task.sleep(for: wait)
            do { try saveIfDue() } catch { log.warning("\(error)") }
        }
    }
}

/// `CLOCK_MONOTONIC` as a duration: the clock a ledger's saves are due on by default.
package func monotonicTime() -> Duration {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return .seconds(Int64(time.tv_sec)) + .nanoseconds(Int64(time.tv_nsec))
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
