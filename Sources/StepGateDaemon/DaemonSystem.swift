package import Counting
import Formatting
package import SensorInput
package import Shields
import Synchronization
package import UnlockPolicy

/// The clocks the daemon reads. The machine's (``MachineClock``) in the daemon; a clock the
/// test moves in the loop's tests, so a relock an hour away is checked in milliseconds.
package protocol DaemonClock: Sendable {
    /// Now, as the policy wants it: wall time, boot time, this boot's identity.
    func now() -> Instant
    /// Time since boot, suspend included: what wake-ups are armed on.
    func bootTime() -> Duration
    /// The time zone in force now (checked on every tick, so a change is noticed).
    func zoneIdentifier() -> String
    /// Waits about `duration` of this clock's time; a test clock may return sooner.
    func sleep(for duration: Duration) async throws
}

/// The machine's clocks (``SystemClock``).
package struct MachineClock: DaemonClock {
    package init() {}
    package func now() -> Instant { SystemClock.now() }
    package func bootTime() -> Duration { SystemClock.bootTime() }
    package func zoneIdentifier() -> String { SystemClock.zoneIdentifier() }
    package func sleep(for duration: Duration) async throws { try await Task.sleep(for: duration) }
}

/// Where control requests come from: the Unix socket (``ControlServer``), or the same process.
package protocol ControlEndpoint: Sendable {
    /// Starts delivering requests to `handle`, which answers each one (from any thread).
    func start(_ handle: @escaping @Sendable (ControlRequest) -> Void)
    /// Stops delivering requests.
    func stop()
}

extension ControlServer: ControlEndpoint {}

/// Control requests made in the same process, decoded and checked like the socket's: for the
/// loop's tests, and anything that drives a daemon without a socket. The caller says who is
/// asking (the socket learns it from the kernel).
package final class LocalControlEndpoint: ControlEndpoint {
    private let handler = Mutex<(@Sendable (ControlRequest) -> Void)?>(nil)

    package init() {}

    package func start(_ handle: @escaping @Sendable (ControlRequest) -> Void) {
        handler.withLock { $0 = handle }
    }

    package func stop() { handler.withLock { $0 = nil } }

    /// Sends one request line and waits for the answer line.
    package func send(_ line: String, peer: PeerCredentials, isAdmin: Bool) async -> String {
        guard let handle = handler.withLock({ $0 }) else { return #"{"ok":false,"error":"not serving"}"# }
        switch ControlCommand.decode(Array(line.utf8)) {
        case .failure(let error):
            return "{\"ok\":false,\"error\":\(JSONLine.quoted(error.message))}"
        case .success(let command):
            return await withCheckedContinuation { continuation in
                handle(
                    ControlRequest(
                        command: command, peer: peer, isAdmin: isAdmin,
                        deliver: { continuation.resume(returning: $0) }))
            }
        }
    }
}

/// What the daemon's loop takes from the machine, in one place: its clock, its control
/// endpoint, its shields and its input. ``machine`` is the real one; tests put in a clock they
/// move, in-process requests, recording shields and a recorded walk.
package struct DaemonSystem: Sendable {
    package var clock: any DaemonClock
    /// The control endpoint, made when the daemon starts serving.
    package var control: @Sendable (DaemonConfiguration) throws -> any ControlEndpoint
    /// The shields the configuration asks for; `onChange` tells the loop that something they
    /// enforce changed on disk.
    package var shields:
        @Sendable (DaemonConfiguration, Logger, _ onChange: @escaping @Sendable () -> Void) -> ShieldSet
    /// Opens the input; called again (every 5 s) while an accelerometer cannot be opened.
    package var source: @Sendable (DaemonConfiguration.Input, Logger) throws -> any SampleSource
    /// Whether this is a whole machine to run on: signals, systemd's notifications and
    /// descriptor store, the descriptor limit, the browsers' policies, desktop notices.
    package var isMachine: Bool
    /// The desktop notices for the configuration's `notifications` section: the machine's users
    /// and transports, or in tests a bus of the test's own.
    package var notices: @Sendable (NoticeSettings, Logger) -> DesktopNotices

    package init(
        clock: any DaemonClock,
        control: @escaping @Sendable (DaemonConfiguration) throws -> any ControlEndpoint,
        shields:
            @escaping @Sendable (DaemonConfiguration, Logger, _ onChange: @escaping @Sendable () -> Void) ->
            ShieldSet,
        source: @escaping @Sendable (DaemonConfiguration.Input, Logger) throws -> any SampleSource,
        isMachine: Bool,
        notices: @escaping @Sendable (NoticeSettings, Logger) -> DesktopNotices = {
            DesktopNotices(settings: $0, log: $1)
        }
    ) {
        self.clock = clock
        self.control = control
        self.shields = shields
        self.source = source
        self.isMachine = isMachine
        self.notices = notices
    }

    /// This machine: the Unix control socket, the shields the configuration names, the
    /// recording or accelerometer it names.
    package static let machine = DaemonSystem(
        clock: MachineClock(),
        control: { try ControlServer(path: $0.controlSocket, adminGroup: $0.adminGroup) },
        shields: { Daemon.machineShields($0, log: $1, onChange: $2) },
        source: { input, log in
            switch input {
            case .replay(let path, let speed):
                return try RecordingSource(path: path, speed: speed)
            case .device(let name, let uri, let rate):
                return try IIOAccelerometer(
                    configuration: .init(uri: uri, device: name, rate: rate, log: { log.warning($0) }))
            case .mqtt(let prefix):
                // Steps over MQTT come through the daemon's MQTT link, not a sample source.
                throw DaemonInputError("steps from \(prefix) come over MQTT, not from samples")
            }
        },
        isMachine: true)
}

/// An input the daemon cannot read samples from.
struct DaemonInputError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
