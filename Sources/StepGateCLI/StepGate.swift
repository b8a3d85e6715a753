/// The `stepgate` command: dispatches to one subcommand.
public enum StepGate {
    public static func main() async {
        print("stepgate: under construction")
    }
}
