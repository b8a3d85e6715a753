import CoreCommands
import StepGateCLI

/// `stepgate-full`, every command: the front door (`stepgate`) starts it for all but `run`,
/// `replay` and `--version`, with the same arguments.
@main
struct Entrypoint {
    static func main() async {
        FrontDoor.adoptFrontDoorName()
        // The body of an async main starts on the main thread: a synchronous command such as
        // `replay` runs right here, and no thread of the concurrency runtime is ever started.
        if let status = StepGate.runSynchronously(Array(CommandLine.arguments.dropFirst())) {
            StepGate.exit(status)
        }
        await StepGate.main()
    }
}
