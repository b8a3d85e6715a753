import CoreCommands
@preconcurrency import Glibc

/// `stepgate`, the front door: `--version`, `run` and `replay` here, with no Foundation loaded;
/// every other command line goes to the full program (``FrontDoor``).
@main
struct Entrypoint {
    static func main() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        switch FrontDoor.route(arguments) {
        case .version:
            print(StepGateVersion.version)
            exit(0)
        case .replay:
            // On the main thread: no thread of the concurrency runtime is started.
            exit(CommandExecution.runSynchronously(CountingReplay.self, Array(arguments.dropFirst())))
        case .run:
            exit(await CommandExecution.run(Run.self, Array(arguments.dropFirst())))
        case .fullProgram:
            FrontDoor.execFullProgram()
        }
    }
}
