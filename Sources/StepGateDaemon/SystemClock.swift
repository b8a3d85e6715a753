internal import CLinux
import Formatting
import Foundation
@preconcurrency import Glibc
package import UnlockPolicy

/// The machine's clocks, as the policy wants them: wall time, the boot clock (which counts
/// suspended time, unlike CLOCK_MONOTONIC) and this boot's identity.
package enum SystemClock {
    /// Now, as the policy's ``Instant``.
    package static func now() -> Instant {
        Instant(wall: Date(), monotonic: bootTime(), bootID: bootID, clockSynchronized: clockSynchronized())
    }

    /// Whether the kernel says the wall clock is synchronized (an NTP client such as
    /// systemd-timesyncd or chrony cleared `STA_UNSYNC`). Only then does a reboot's wall-clock
    /// gap count as proven time powered off.
    package static func clockSynchronized() -> Bool { stepgate_clock_synchronized() != 0 }

    /// `CLOCK_BOOTTIME`: time since boot, suspend included.
    package static func bootTime() -> Duration {
        var spec = timespec()
        clock_gettime(CLOCK_BOOTTIME, &spec)
        return .seconds(spec.tv_sec) + .nanoseconds(spec.tv_nsec)
    }

    /// The system time zone's identifier, read afresh (so a change is noticed): `TZ`, else the
    /// target of `/etc/localtime`, else `/etc/timezone`, else `UTC`.
    package static func zoneIdentifier() -> String {
        if var tz = ProcessInfo.processInfo.environment["TZ"], !tz.isEmpty {
            if tz.hasPrefix(":") { tz.removeFirst() }
            if let range = tz.range(of: "zoneinfo/") { tz = String(tz[range.upperBound...]) }
            if TimeZone(identifier: tz) != nil { return tz }
        }
        if let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/etc/localtime"),
            let range = target.range(of: "zoneinfo/")
        {
            let id = String(target[range.upperBound...])
            if TimeZone(identifier: id) != nil { return id }
        }
        if let text = try? String(contentsOfFile: "/etc/timezone", encoding: .utf8) {
            let id = text.trimmingCharacters(in: .whitespacesAndNewlines)
            if TimeZone(identifier: id) != nil { return id }
        }
        return "UTC"
    }

    /// `/proc/sys/kernel/random/boot_id`, different on every boot.
    package static let bootID: String = {
        let text = (try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8)) ?? ""
        let id = text.trimmingCharacters(in: .whitespacesAndNewlines)
        return id.isEmpty ? "unknown-boot" : id
    }()
}

/// Sends a state to systemd (`sd_notify`) when `$NOTIFY_SOCKET` is set: readiness
/// (`Type=notify`), and with `FDSTORE=1` descriptors for its file descriptor store, handed back to
/// the next instance (see ``SystemdDescriptors``). Returns whether the message was sent.
@discardableResult
package func notifySystemd(_ state: String, descriptors: [Int32] = []) -> Bool {
    guard var path = ProcessInfo.processInfo.environment["NOTIFY_SOCKET"], !path.isEmpty else { return false }
    if path.hasPrefix("@") { path = "\0" + path.dropFirst() }  // abstract namespace
    let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    guard var address = try? unixAddress(path) else { return false }
    let length = socklen_t(MemoryLayout<sa_family_t>.size + path.utf8.count)
    let sent = state.withCString { text in
        descriptors.withUnsafeBufferPointer { fds in
            stepgate_send_with_fds(
                fd, &address, length, text, strlen(text), fds.baseAddress, Int32(fds.count))
        }
    }
    return sent >= 0
}

/// Descriptors systemd passed to this process (`LISTEN_FDS`, `LISTEN_FDNAMES`), by name: the
/// file descriptor store's contents handed back after a restart.
package enum SystemdDescriptors {
    /// The name the exec shield's fanotify group is stored under.
    package static let execShield = "stepgate-exec"

    /// Takes the passed descriptors (once: the variables are removed so children do not
    /// inherit them). Only descriptors meant for this process (`LISTEN_PID`) count.
    package static func take() -> [String: Int32] {
        let environment = ProcessInfo.processInfo.environment
        defer {
            unsetenv("LISTEN_PID")
            unsetenv("LISTEN_FDS")
            unsetenv("LISTEN_FDNAMES")
        }
        guard let pid = environment["LISTEN_PID"].flatMap({ Int32($0) }), pid == getpid(),
            let count = environment["LISTEN_FDS"].flatMap({ Int($0) }), count > 0, count < 64
        else { return [:] }
        let names = (environment["LISTEN_FDNAMES"] ?? "").split(
            separator: ":", omittingEmptySubsequences: false)
        var result: [String: Int32] = [:]
        for index in 0..<count {
            let fd = Int32(3 + index)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            let name = index < names.count ? String(names[index]) : "unknown"
            if result[name] == nil { result[name] = fd } else { close(fd) }
        }
        return result
    }
}
