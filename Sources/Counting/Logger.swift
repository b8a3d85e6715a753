import Formatting

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Log lines for journald (a `<N>` priority prefix when standard error goes to the journal, which
/// systemd says with `JOURNAL_STREAM`, see sd-daemon(3)) or for a person (`stepgate: …`, on a
/// terminal or in a file), shaped like swift-log's levels.
package struct Logger: Sendable {
    package enum Level: Int, Sendable, Comparable {
        case error = 3
        case warning = 4
        case notice = 5
        case info = 6
        case debug = 7

        package static func < (a: Level, b: Level) -> Bool { a.rawValue < b.rawValue }
    }

    /// The most verbose level written.
    package var level: Level = .info
    private let journald = getenv("JOURNAL_STREAM") != nil

    package init(level: Level = .info) { self.level = level }

    package func log(_ level: Level, _ message: @autoclosure () -> String) {
        guard level <= self.level else { return }
        // One message, one line: a newline or a terminal escape in a name a user chose cannot
        // forge another log line.
        let text = message()
        for line in [visible(text)] {
            if journald {
                printError("<\(level.rawValue)>\(line)")
            } else {
                let tag = level <= .warning ? (level == .error ? "error: " : "warning: ") : ""
                printError("stepgate: \(tag)\(line)")
            }
        }
    }

    package func error(_ message: @autoclosure () -> String) { log(.error, message()) }
    package func warning(_ message: @autoclosure () -> String) { log(.warning, message()) }
    package func notice(_ message: @autoclosure () -> String) { log(.notice, message()) }
    package func info(_ message: @autoclosure () -> String) { log(.info, message()) }
    package func debug(_ message: @autoclosure () -> String) { log(.debug, message()) }
}
