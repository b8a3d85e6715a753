public import Foundation
public import UnlockPolicy

/// A shield that could not do what it was asked: which shield, which target, and why.
public struct ShieldError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The shield's name (`exec`, `systemd`, `hosts`, `hooks`).
    public var shield: String
    /// The target concerned, when one is.
    public var target: String?
    public var message: String

    public init(shield: String, target: String? = nil, message: String) {
        self.shield = shield
        self.target = target
        self.message = message
    }

    public var description: String { "\(shield) shield" + (target.map { " (\($0))" } ?? "") + ": \(message)" }
}

/// What an apply or remove is for: the store, its whole selection, and, when known, the owners
/// and the deadline.
public struct ShieldContext: Sendable, Hashable {
    public var store: String
    /// Everything the store selects (each shield acts on its own kinds only).
    public var selection: Selection
    public var owners: [String]
    /// When the shield is due to lift, if scheduled.
    public var until: Date?

    public init(store: String, selection: Selection = .empty, owners: [String] = [], until: Date? = nil) {
        self.store = store
        self.selection = selection
        self.owners = owners
        self.until = until
    }
}

/// Enforces one kind (or a few kinds) of target on this machine.
///
/// Shields own system resources (a fanotify group, a managed file), so they are classes. They
/// are driven from one task at a time; those that run threads of their own say so.
public protocol Shield: AnyObject {
    /// Short name used in errors and status: `exec`, `systemd`, `hosts`, `hooks`.
    var name: String { get }
    /// The kinds of target this shield enforces.
    var kinds: Set<Target.Kind> { get }
    /// Blocks `targets` (all of this shield's kinds) on behalf of `context.store`.
    func apply(_ targets: [Target], context: ShieldContext) throws(ShieldError)
    /// Stops blocking `targets` on behalf of `context.store`.
    func remove(_ targets: [Target], context: ShieldContext) throws(ShieldError)
    /// What is in force now, per store, as read back from the system where possible.
    func inForce() throws(ShieldError) -> [String: Set<Target>]
    /// Checks again that what is applied is still in force and mends what drifted (a replaced
    /// program, a rewritten file); returns what could not be mended, per store. Called on every
    /// tick.
    func recheck() -> [String: ShieldError]
}

extension Shield {
    /// Shields with nothing that can drift have nothing to recheck.
    public func recheck() -> [String: ShieldError] { [:] }
}

/// The shields of one machine, each given the part of a selection it enforces.
public final class ShieldSet {
    public private(set) var shields: [any Shield]

    public init(_ shields: [any Shield]) { self.shields = shields }

    /// The target kinds no shield here enforces.
    public var unenforcedKinds: Set<Target.Kind> {
        Set(Target.Kind.allCases).subtracting(shields.reduce(into: Set()) { $0.formUnion($1.kinds) })
    }

    /// Applies a selection; every shield is tried, and the failures are returned (empty on
    /// success). A target kind that no shield enforces is a failure too: fail closed means the
    /// policy must know that it is not in force.
    public func apply(_ selection: Selection, context: ShieldContext) -> [ShieldError] {
        run(selection, context: context, apply: true)
    }

    /// Removes a selection; every shield is tried, and the failures are returned.
    public func remove(_ selection: Selection, context: ShieldContext) -> [ShieldError] {
        run(selection, context: context, apply: false)
    }

    private func run(_ selection: Selection, context: ShieldContext, apply: Bool) -> [ShieldError] {
        var errors: [ShieldError] = []
        let targets = selection.targets
        for kind in unenforcedKinds where apply {
            for target in targets where target.kind == kind {
                errors.append(
                    ShieldError(
                        shield: "none", target: target.description,
                        message: "no shield enforces \(kind.rawValue) targets on this machine"))
            }
        }
        for shield in shields {
            let part = targets.filter { shield.kinds.contains($0.kind) }.sorted()
            guard !part.isEmpty else { continue }
            do {
                if apply {
                    try shield.apply(part, context: context)
                } else {
                    try shield.remove(part, context: context)
                }
            } catch {
                errors.append(error)
            }
        }
        return errors
    }

    /// Rechecks every shield (see ``Shield/recheck()``); the problems per store.
    public func recheck() -> [String: [ShieldError]] {
        var problems: [String: [ShieldError]] = [:]
        for shield in shields {
            for (store, error) in shield.recheck() { problems[store, default: []].append(error) }
        }
        return problems
    }

    /// What the shields report in force, per store. A target whose kind several shields
    /// enforce (domains: the hosts file and nftables) is in force only when every one of them
    /// reports it.
    public func inForce() -> (targets: [String: Selection], errors: [ShieldError]) {
        var reports: [(kinds: Set<Target.Kind>, targets: [String: Set<Target>])] = []
        var errors: [ShieldError] = []
        for shield in shields {
            do {
                reports.append((shield.kinds, try shield.inForce()))
            } catch {
                reports.append((shield.kinds, [:]))
                errors.append(error)
            }
        }
        var merged: [String: Set<Target>] = [:]
        for report in reports {
            for (store, targets) in report.targets {
                for target in targets
                where reports.allSatisfy({
                    !$0.kinds.contains(target.kind) || $0.targets[store]?.contains(target) == true
                }) {
                    merged[store, default: []].insert(target)
                }
            }
        }
        return (merged.mapValues { Selection(targets: $0) }, errors)
    }
}

@available(*, unavailable) extension ShieldSet: Sendable {}
