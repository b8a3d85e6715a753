import Foundation
public import UnlockPolicy

/// Runs configured commands for named hooks: anything StepGate has no shield for (pause a game
/// console, change a router rule, post a message).
///
/// Each hook is one command, run with the action in the environment:
///
/// | variable | value |
/// |---|---|
/// | `STEPGATE_ACTION` | `apply` or `remove` |
/// | `STEPGATE_HOOK` | the hook's name |
/// | `STEPGATE_STORE` | the store |
/// | `STEPGATE_OWNERS` | the owners holding it, comma-separated (on apply) |
/// | `STEPGATE_UNTIL` | when the shield is due to lift, ISO 8601 UTC, or empty |
/// | `STEPGATE_TARGETS` | every target of the store's selection, one `kind:value` per line |
///
/// A hook that exits non-zero, or runs past its timeout, is a failed shield. Hooks cannot be
/// read back, so after a restart they are applied again: write them to be idempotent.
public final class HookShield: Shield {
    /// One hook's command.
    public struct Hook: Sendable, Hashable {
        public var command: [String]
        /// Seconds before the command is killed and the hook counts as failed.
        public var timeout: Double

        public init(command: [String], timeout: Double = 30) {
            self.command = command
            self.timeout = timeout
        }
    }

    public let name = "hooks"
    public let kinds: Set<Target.Kind> = [.hook]
    private let hooks: [String: Hook]
    private let runner: CommandRunner
    private var applied: [String: Set<Target>] = [:]

    public init(hooks: [String: Hook], runner: CommandRunner = CommandRunner()) {
        self.hooks = hooks
        self.runner = runner
    }

    public func apply(_ targets: [Target], context: ShieldContext) throws(ShieldError) {
        for target in targets {
            try run(target, action: "apply", context: context)
            applied[context.store, default: []].insert(target)
        }
    }

    public func remove(_ targets: [Target], context: ShieldContext) throws(ShieldError) {
        for target in targets {
            try run(target, action: "remove", context: context)
            applied[context.store]?.remove(target)
        }
    }

    public func inForce() throws(ShieldError) -> [String: Set<Target>] {
        applied.filter { !$0.value.isEmpty }
    }

    private func run(_ target: Target, action: String, context: ShieldContext) throws(ShieldError) {
        guard let hook = hooks[target.value] else {
            throw ShieldError(
                shield: name, target: target.value, message: "no command is configured for this hook")
        }
        let environment = [
            "STEPGATE_ACTION": action,
            "STEPGATE_HOOK": target.value,
            "STEPGATE_STORE": context.store,
            "STEPGATE_OWNERS": context.owners.joined(separator: ","),
            "STEPGATE_UNTIL": context.until.map { ISO8601DateFormatter().string(from: $0) } ?? "",
            "STEPGATE_TARGETS": context.selection.targets.sorted().map(\.description).joined(separator: "\n"),
        ]
        let result = try runner.run(
            hook.command, extraEnvironment: environment, timeout: hook.timeout, shield: name)
        if result.timedOut {
            throw ShieldError(
                shield: name, target: target.value, message: "\(action) timed out after \(hook.timeout) s")
        }
        guard result.status == 0 else {
            let detail = result.output.split(separator: "\n").last.map { ": \($0)" } ?? ""
            throw ShieldError(
                shield: name, target: target.value,
                message: "\(action) exited with status \(result.status)\(detail)")
        }
    }
}

@available(*, unavailable) extension HookShield: Sendable {}
