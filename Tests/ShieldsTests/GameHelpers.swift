import Foundation
import StepGateTestSupport
import Testing
import UnlockPolicy

@testable import Shields

/// Runs a shell command as the unprivileged user `nobody`.
func asNobody(_ command: String) throws -> ProcessResult {
    try runProcess(
        URL(fileURLWithPath: "/usr/bin/setpriv"),
        ["--reuid=nobody", "--regid=nogroup", "--clear-groups", "/bin/sh", "-c", command])
}

/// Starts `arguments` as `nobody` and returns at once (the caller ends it).
func startAsNobody(_ arguments: [String]) throws -> Process {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
    process.arguments = ["--reuid=nobody", "--regid=nogroup", "--clear-groups"] + arguments
    try process.run()
    return process
}

/// Whether the file at `path` grows within 200 ms (a game's heartbeat).
func isGrowing(_ path: String) -> Bool {
    let size = { (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0 }
    let before = size()
    usleep(200_000)
    return size() > before
}

/// Shields `game` (with `shield`, or a new shield with a grace period of 0.3 s) and rechecks,
/// as the daemon does every tick, until the file `beats` the game writes to has not grown for a
/// second (five looks of 200 ms), for up to 8 s; whether it fell silent.
func fallsSilentAfterRelock(_ game: String, beats: String, shield given: ExecDenyShield? = nil) throws -> Bool
{
    let shield = try given ?? ExecDenyShield(gracePeriod: .milliseconds(300))
    try shield.apply([Target(kind: .executable, value: game)], context: ShieldContext(store: "games"))
    var silent = 0
    for _ in 0..<40 where silent < 5 {
        _ = shield.recheck()
        silent = isGrowing(beats) ? 0 : silent + 1
    }
    return silent >= 5
}

/// A C compiler: the Swift toolchain's clang, or the system's `cc`.
func cCompiler() -> URL? {
    ["/usr/bin/clang", "/usr/bin/cc", "/opt/swift/usr/bin/clang"]
        .first { FileManager.default.isExecutableFile(atPath: $0) }
        .map(URL.init(fileURLWithPath:))
}

/// The dynamic loader of this machine, if it is at one of the usual places.
func dynamicLoader() -> String? {
    ["/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1", "/lib/ld-linux-armhf.so.3"]
        .first { FileManager.default.isExecutableFile(atPath: $0) }
}
