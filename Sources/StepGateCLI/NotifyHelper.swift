import Formatting
@preconcurrency import Glibc
import Notifications
import StepGateDaemon

/// `stepgate notify-helper` (internal, not listed): sends one desktop notification on a user's
/// session bus *as that user*. The daemon starts it for every notice (``HelperTransport``): run
/// as root, it first gives up root for the user's uid and gid, with no supplementary groups,
/// and checks that root cannot be taken back, so the bus (which the user controls) only ever
/// meets the user's own credentials. Prints the id the notification server gave.
enum NotifyHelper {
    static func main(_ arguments: [String]) -> Int32 {
        func fail(_ message: String) -> Int32 {
            printError("stepgate notify-helper: \(message)")
            return 1
        }
        let notice: DesktopNotice
        let options: [String: String]
        do {
            (notice, options) = try DesktopNotice.parse(arguments)
        } catch {
            return fail(error.message)
        }
        guard let uid = options["uid"].flatMap(UInt32.init), let gid = options["gid"].flatMap(UInt32.init),
            let address = options["address"], !address.isEmpty
        else { return fail("needs --uid, --gid and --address") }
        let replaces = options["replaces"].flatMap(UInt32.init) ?? 0
        let milliseconds = options["timeout-ms"].flatMap(Int64.init).map { max(100, min(60_000, $0)) } ?? 2000
        guard uid != 0 else { return fail("never speaks to a bus as root") }
        if geteuid() == 0 || getuid() == 0 {
            guard setgroups(0, nil) == 0, setgid(gid) == 0, setuid(uid) == 0 else {
                return fail("cannot become uid \(uid): \(String(cString: strerror(errno)))")
            }
            // Root must be gone for good before the user's bus is touched.
            guard setuid(0) != 0, getuid() == uid, geteuid() == uid, getegid() == gid else {
                return fail("root could be regained after switching to uid \(uid); not connecting")
            }
        } else if getuid() != uid {
            return fail("running as uid \(getuid()), cannot speak as uid \(uid)")
        }
        do {
            let id = try SessionBus.notify(
                notice, replacing: replaces, address: address, timeout: .milliseconds(milliseconds))
            print(id)
            return 0
        } catch {
            return fail(error.message)
        }
    }
}
