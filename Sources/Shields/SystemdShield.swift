import Foundation
import StepHistoryStore
import SystemFiles
import TypedJSON
public import UnlockPolicy

/// Shields systemd units: on apply, stop the unit and mask it for this boot
/// (`systemctl mask --runtime`); on remove, unmask it and start it again only if it was running
/// before StepGate stopped it.
///
/// Whether each unit was running is kept in a small JSON file (written atomically), so a
/// restart of StepGate does not forget to start a unit again.
public final class SystemdShield: Shield {
    public let name = "systemd"
    public let kinds: Set<Target.Kind> = [.systemdUnit]
    private let systemctl: String
    private let runner: CommandRunner
    private let memoryPath: String
    /// Per unit: the stores holding it, and whether it was active before the first apply.
    private var memory: [String: UnitMemory]

    struct UnitMemory: Codable, Hashable {
        var stores: Set<String>
        var wasActive: Bool
    }

    /// - Parameters:
    ///   - memoryPath: Where to remember which units were running (in the state directory).
    ///   - systemctl: The `systemctl` command (a name is looked up on PATH).
    public init(memoryPath: String, systemctl: String = "systemctl", runner: CommandRunner = CommandRunner())
        throws(ShieldError)
    {
        self.systemctl = systemctl
        self.runner = runner
        self.memoryPath = memoryPath
        do {
            if let bytes = try DurableFile.read(memoryPath) {
                memory = try JSONDecoding.decode(
                    [String: UnitMemory].self, from: JSONValue.parse(bytes: bytes))
            } else {
                memory = [:]
            }
        } catch let error as FileError {
            throw ShieldError(shield: "systemd", message: error.description)
        } catch {
            throw ShieldError(
                shield: "systemd", message: "\(memoryPath): not a valid unit memory file (\(error))")
        }
    }

    /// Stops and masks each unit first, then remembers whether it was running. A unit is
    /// enforced even when the memory cannot be saved (a full or read-only state folder): the
    /// failure is still thrown, so the shield is reported as failing and retried, but it never
    /// leaves a unit running. One target's failure does not stop the others.
    public func apply(_ targets: [Target], context: ShieldContext) throws(ShieldError) {
        var failure: ShieldError?
        for target in targets {
            do throws(ShieldError) {
                let unit = try validated(target.value)
                if var known = memory[unit], try isMaskedForThisBoot(unit) {
                    known.stores.insert(context.store)
                    memory[unit] = known
                } else {
                    // Unknown, or remembered but no longer masked (a reboot, or a removal whose
                    // save failed): what runs now is what to start again on removal.
                    let active =
                        try systemctl(["is-active", "--quiet", unit], unit: unit, allowFailure: true) == 0
                    memory[unit] = UnitMemory(stores: [context.store], wasActive: active)
                }
                try systemctl(["stop", unit], unit: unit)
                try systemctl(["mask", "--runtime", unit], unit: unit)
            } catch {
                failure = failure ?? error
            }
        }
        do throws(ShieldError) {
            try save()
        } catch {
            failure = failure ?? error.enforcedAnyway()
        }
        if let failure { throw failure }
    }

    /// Unmasks each unit (and starts it if it was running) first, then forgets it. When the
    /// memory cannot be saved the file may still name the unit; a later apply sees that the
    /// unit is not masked and asks systemd afresh, so a stale entry never starts a unit that was
    /// not running.
    public func remove(_ targets: [Target], context: ShieldContext) throws(ShieldError) {
        var failure: ShieldError?
        for target in targets {
            do throws(ShieldError) {
                let unit = try validated(target.value)
                guard var known = memory[unit] else {
                    // Not ours (or forgotten): make sure it is not left masked by us.
                    try systemctl(["unmask", "--runtime", unit], unit: unit)
                    continue
                }
                known.stores.remove(context.store)
                if !known.stores.isEmpty {
                    memory[unit] = known
                    continue
                }
                try systemctl(["unmask", "--runtime", unit], unit: unit)
                if known.wasActive { try systemctl(["start", unit], unit: unit) }
                memory[unit] = nil
            } catch {
                failure = failure ?? error
            }
        }
        do throws(ShieldError) {
            try save()
        } catch {
            failure = failure ?? error
        }
        if let failure { throw failure }
    }

    /// Units masked for this boot, per store that holds them, read back from systemd.
    public func inForce() throws(ShieldError) -> [String: Set<Target>] {
        var result: [String: Set<Target>] = [:]
        for (unit, known) in memory {
            guard try isMaskedForThisBoot(unit) else { continue }
            for store in known.stores {
                result[store, default: []].insert(Target(kind: .systemdUnit, value: unit))
            }
        }
        return result
    }

    private func isMaskedForThisBoot(_ unit: String) throws(ShieldError) -> Bool {
        try capture(["is-enabled", unit], unit: unit).trimmingCharacters(in: .whitespacesAndNewlines)
            == "masked-runtime"
    }

    private func validated(_ unit: String) throws(ShieldError) -> String {
        let allowed = unit.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "-_.@:\\".contains($0)) }
        guard !unit.isEmpty, !unit.hasPrefix("-"), allowed else {
            throw ShieldError(shield: name, target: unit, message: "not a valid systemd unit name")
        }
        return unit
    }

    @discardableResult
    private func systemctl(_ arguments: [String], unit: String, allowFailure: Bool = false)
        throws(ShieldError) -> Int32
    {
        let result = try runner.run([systemctl] + arguments, timeout: 90, shield: name)
        if result.timedOut {
            throw ShieldError(shield: name, target: unit, message: "systemctl \(arguments[0]) timed out")
        }
        if result.status != 0 && !allowFailure {
            let detail = result.output.split(separator: "\n").first.map { ": \($0)" } ?? ""
            throw ShieldError(
                shield: name, target: unit,
                message:
                    "systemctl \(arguments.joined(separator: " ")) failed (status \(result.status))\(detail)")
        }
        return result.status
    }

    private func capture(_ arguments: [String], unit: String) throws(ShieldError) -> String {
        let result = try runner.run([systemctl] + arguments, timeout: 30, shield: name)
        if result.timedOut {
            throw ShieldError(shield: name, target: unit, message: "systemctl \(arguments[0]) timed out")
        }
        return result.output
    }

    private func save() throws(ShieldError) {
        do {
            let text = try JSONEncoding.encode(memory, sortedKeys: true).prettySerialized() + "\n"
            try DurableFile.writeAtomically(Array(text.utf8), to: memoryPath)
        } catch let error as FileError {
            throw ShieldError(shield: name, message: "cannot save the unit memory: \(error)")
        } catch {
            throw ShieldError(shield: name, message: "cannot encode the unit memory: \(error)")
        }
    }
}

@available(*, unavailable) extension SystemdShield: Sendable {}

extension ShieldError {
    /// The same failure, saying that the units were stopped and masked all the same.
    fileprivate func enforcedAnyway() -> ShieldError {
        var error = self
        error.message +=
            "; the units are stopped and masked anyway, but if StepGate restarts before a save succeeds"
            + " it will not know which of them to start again"
        return error
    }
}
