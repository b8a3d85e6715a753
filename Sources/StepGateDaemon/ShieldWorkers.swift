import Dispatch
import Formatting
import Glibc
package import Shields
import Synchronization
package import UnlockPolicy

/// What one shield's operation came to, posted back to the loop.
package struct ShieldOutcome: Sendable {
    package enum Action: String, Sendable {
        case apply, remove, recheck
    }
    package var store: String
    package var shield: String
    package var action: Action
    /// The failure; `nil` when it worked.
    package var error: String?
}

/// Carries out the shields' work off the daemon's loop: each shield has a serial queue of its
/// own, so a slow one (a hook with a long timeout, a stalled reload command) delays neither the
/// loop — status, steps, timers — nor another shield, and never another store's relock through
/// another shield. Operations of one shield stay in order (apply then remove). Results come back
/// to the loop as ``ShieldOutcome`` events.
///
/// A shield object is only ever touched on its own queue once the workers start.
package final class ShieldWorkers: Sendable {
    private final class Worker: @unchecked Sendable {
        // Touched only on `queue` (the invariant that makes this box sendable).
        package let shield: any Shield
        package let name: String
        package let kinds: Set<Target.Kind>
        package let queue: DispatchQueue
        /// A recheck is queued and not yet run (another one is not queued behind it).
        package let recheckPending = Atomic<Bool>(false)
        /// Operations queued and not finished.
        package let queued = Atomic<Int>(0)

        package init(_ shield: any Shield) {
            self.shield = shield
            name = shield.name
            kinds = shield.kinds
            queue = DispatchQueue(label: "stepgate-shield-\(shield.name)")
        }
    }

    private let workers: [Worker]
    private let post: @Sendable (ShieldOutcome) -> Void
    /// Target kinds no shield enforces.
    package let unenforcedKinds: Set<Target.Kind>

    package init(_ set: ShieldSet, post: @escaping @Sendable (ShieldOutcome) -> Void) {
        workers = set.shields.map(Worker.init)
        unenforcedKinds = set.unenforcedKinds
        self.post = post
    }

    /// Queues `apply` (or `remove`) of the selection's targets on each shield that enforces
    /// them. Returns at once: the failure of a target kind no shield enforces (known now), or
    /// `nil`; what the shields do comes back as outcomes.
    package func run(_ action: ShieldOutcome.Action, _ selection: Selection, context: ShieldContext)
        -> String?
    {
        let targets = selection.targets
        for worker in workers {
            let part = targets.filter { worker.kinds.contains($0.kind) }.sorted()
            guard !part.isEmpty else { continue }
            worker.queued.add(1, ordering: .relaxed)
            let post = post
            worker.queue.async {
                defer { worker.queued.subtract(1, ordering: .relaxed) }
                var failure: String?
                do throws(ShieldError) {
                    if action == .apply {
                        try worker.shield.apply(part, context: context)
                    } else {
                        try worker.shield.remove(part, context: context)
                    }
                } catch {
                    failure = error.description
                }
                post(ShieldOutcome(store: context.store, shield: worker.name, action: action, error: failure))
            }
        }
        guard action == .apply else { return nil }
        let missing = targets.filter { unenforcedKinds.contains($0.kind) }.sorted()
        guard !missing.isEmpty else { return nil }
        return missing.map { "no shield enforces \($0.kind.rawValue) targets on this machine (\($0.value))" }
            .joined(separator: "; ")
    }

    /// Queues a recheck on every shield that has none waiting; each store's problem (or its
    /// recovery) comes back as an outcome.
    package func recheck(stores: [String]) {
        for worker in workers where !worker.recheckPending.exchange(true, ordering: .relaxed) {
            let post = post
            worker.queued.add(1, ordering: .relaxed)
            worker.queue.async {
                defer { worker.queued.subtract(1, ordering: .relaxed) }
                worker.recheckPending.store(false, ordering: .relaxed)
                let problems = worker.shield.recheck()
                for store in stores {
                    post(
                        ShieldOutcome(
                            store: store, shield: worker.name, action: .recheck,
                            error: problems[store]?.description))
                }
            }
        }
    }

    /// Runs `body` on the exec shield's queue, after what is queued there.
    package func afterQueuedOnExecShield(_ body: @escaping @Sendable (ExecDenyShield) -> Void) {
        for worker in workers {
            worker.queue.async {
                if let shield = worker.shield as? ExecDenyShield { body(shield) }
            }
        }
    }

    /// Calls `body` (on another thread) once every shield has done what is queued now, or
    /// after `timeout`, whichever comes first (`body` runs once).
    package func whenDone(timeout: Duration? = nil, _ body: @escaping @Sendable () -> Void) {
        let group = DispatchGroup()
        for worker in workers {
            group.enter()
            worker.queue.async { group.leave() }
        }
        let once = Atomic<Bool>(false)
        let run: @Sendable () -> Void = { if !once.exchange(true, ordering: .relaxed) { body() } }
        group.notify(queue: .global(), execute: run)
        if let timeout {
            let (seconds, attoseconds) = timeout.components
            DispatchQueue.global().asyncAfter(
                deadline: .now() + Double(seconds) + Double(attoseconds) / 1e18, execute: run)
        }
    }

    /// Waits up to `timeout` for the queued operations to finish (at shutdown); whether they did.
    package func drain(timeout: Duration) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while workers.contains(where: { $0.queued.load(ordering: .relaxed) > 0 }) {
            if ContinuousClock.now >= deadline { return false }
            usleepFor(.milliseconds(10))
        }
        return true
    }

    private func usleepFor(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        var request = timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
        nanosleep(&request, nil)
    }
}
