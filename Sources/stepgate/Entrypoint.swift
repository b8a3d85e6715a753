import StepGateCLI

@main
struct Entrypoint {
    static func main() async { await StepGate.main() }
}
