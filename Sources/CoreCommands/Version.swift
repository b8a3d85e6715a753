/// StepGate's version, printed by `stepgate --version` (by the front door and by the full
/// program alike); `scripts/package.sh` reads it from this line.
public enum StepGateVersion {
    public static let version = "0.1.0"
}
