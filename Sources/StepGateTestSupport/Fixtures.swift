public import Foundation
import Synchronization

/// Where the package and the shared development data live, for tests.
public enum Fixtures {
    /// The package root, derived from this file's path.
    public static let packageRoot: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// `../shared/data` beside the package (the labelled development recordings).
    public static let sharedData: URL = packageRoot.deletingLastPathComponent()
        .appendingPathComponent("shared/data")

    /// Whether `../shared/data` is present; tests that need it are skipped otherwise.
    public static let sharedDataAvailable: Bool = FileManager.default.fileExists(
        atPath: sharedData.appendingPathComponent("manifest.csv").path)

    /// The bundled sample recordings.
    public static let samples: URL = packageRoot.appendingPathComponent("samples")

    /// The debug-built `stepgate` executable (the front door, which starts `stepgate-full` for
    /// most commands).
    public static var stepgateExecutable: URL {
        packageRoot.appendingPathComponent(".build/debug/stepgate")
    }

    /// The debug-built full program, `stepgate-full`, beside the front door.
    public static var fullProgramExecutable: URL {
        packageRoot.appendingPathComponent(".build/debug/stepgate-full")
    }

    /// Copies of the front door and, beside it, the full program in `folder`, each 0755, for a
    /// test that runs them as another user: the build folder may be one that user cannot enter
    /// (a clean clone in a 0700 `mktemp -d`), and the front door looks for the full program
    /// beside itself as the user it runs as. The front door's copy.
    public static func copyExecutables(into folder: URL) throws -> URL {
        let door = folder.appendingPathComponent("stepgate")
        let full = folder.appendingPathComponent("stepgate-full")
        try FileManager.default.copyItem(at: stepgateExecutable, to: door)
        try FileManager.default.copyItem(at: fullProgramExecutable, to: full)
        for file in [door, full] {
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: file.path)
        }
        return door
    }

    /// A fresh temporary folder (0755), inside this test process's folder, which is removed
    /// when the process exits; ``withTemporaryFolder(_:)`` removes its folder at once.
    public static func temporaryFolder() throws -> URL { try TemporaryFolders.make() }
}

/// The outcome of running a command.
public struct ProcessResult: Sendable {
    public var status: Int32
    public var standardOutput: String
    public var standardError: String
}

/// Runs an executable with arguments and collects its output.
public func runProcess(
    _ executable: URL, _ arguments: [String], input: String? = nil, directory: URL? = nil
) throws -> ProcessResult {
    let process = Process()
    process.executableURL = executable
    process.arguments = arguments
    if let directory { process.currentDirectoryURL = directory }
    let out = Pipe()
    let err = Pipe()
    process.standardOutput = out
    process.standardError = err
    let inPipe = Pipe()
    process.standardInput = inPipe
    // Close-on-exec, so a process another test starts meanwhile does not inherit them (its
    // copy of the write end kept this read waiting until it ended); the child gets its own
    // copies as 0, 1 and 2, which dup2 makes inheritable.
    for pipe in [out, err, inPipe] {
        for handle in [pipe.fileHandleForReading, pipe.fileHandleForWriting] {
            _ = fcntl(handle.fileDescriptor, F_SETFD, FD_CLOEXEC)
        }
    }
    try process.run()
    if let input { inPipe.fileHandleForWriting.write(Data(input.utf8)) }
    try inPipe.fileHandleForWriting.close()
    // Read both pipes to the end before waiting, so a large output cannot block the child.
    let group = DispatchGroup()
    let errData = Mutex(Data())
    let errHandle = err.fileHandleForReading
    group.enter()
    DispatchQueue.global().async {
        let data = errHandle.readDataToEndOfFile()
        errData.withLock { $0 = data }
        group.leave()
    }
    let outData = out.fileHandleForReading.readDataToEndOfFile()
    group.wait()
    process.waitUntilExit()
    return ProcessResult(
        status: process.terminationStatus, standardOutput: String(decoding: outData, as: UTF8.self),
        standardError: errData.withLock { String(decoding: $0, as: UTF8.self) })
}
