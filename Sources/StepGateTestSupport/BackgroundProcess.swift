public import Foundation
import Glibc

/// A program a test runs in the background, killed (SIGKILL) and waited for when the value
/// goes: a child of the test runner starts with most signals blocked, so SIGTERM would not do.
public final class BackgroundProcess {
    public let process = Process()

    /// Starts `arguments` (the program's path first), as `nobody` through setpriv when
    /// `asNobody`; its standard output goes to the file `output` (made anew) or nowhere, its
    /// errors nowhere.
    public init(_ arguments: [String], asNobody: Bool = false, output: String? = nil) throws {
        if asNobody {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            process.arguments = ["--reuid=nobody", "--regid=nogroup", "--clear-groups"] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: arguments[0])
            process.arguments = Array(arguments.dropFirst())
        }
        if let output {
            _ = FileManager.default.createFile(atPath: output, contents: nil)
            process.standardOutput = FileHandle(forWritingAtPath: output)
        } else {
            process.standardOutput = FileHandle.nullDevice
        }
        process.standardError = FileHandle.nullDevice
        try process.run()
    }

    deinit {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}
