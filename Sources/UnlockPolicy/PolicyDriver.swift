public import Foundation

/// What carries out the engine's effects: the system (the daemon: state file, timer, shields,
/// journal) or a simulated machine (`stepgate simulate`, tests). Each method returns why it
/// failed, or `nil`.
public protocol PolicyEnvironment {
    mutating func persist(_ state: PolicyState) -> String?
    mutating func armWakeUp(at date: Date, monotonic: Duration) -> String?
    mutating func notify(_ notice: PolicyNotice)
    /// Shields `selection` for `store`; `until` is when its current unlock would have ended
    /// (for the shields that say so).
    mutating func apply(store: String, selection: Selection, owners: [String], until: Date?) -> String?
    mutating func remove(store: String, selection: Selection) -> String?
    /// Each effect once it has been carried out, with its failure.
    mutating func carriedOut(_ effect: PolicyEffect, failure: String?)
    /// The engine kept failing and the driver stopped following its answers for this batch.
    mutating func gaveUp()
}

extension PolicyEnvironment {
    public mutating func carriedOut(_ effect: PolicyEffect, failure: String?) {}
    public mutating func gaveUp() {}
}

/// Runs each batch of effects against an environment by one set of rules, the same for the
/// daemon and the simulator:
///
/// - A failed `persist` or `wakeUp` is reported at once (`.effectFailed`); the engine's answer
///   supersedes the rest of the batch (its relock cannot be trusted to happen). Shield failures
///   met before it are still reported.
/// - A failed `apply` or `remove` does not stop the batch: another store's relock never waits
///   on it. Every failure is reported after the batch (`.shieldReport(.failed)`), in order.
/// - Answers are followed to a depth of 8; deeper, the driver gives up on the batch until the
///   next input.
public enum PolicyDriver {
    /// The deepest chain of answers followed.
    public static let maximumDepth = 8

    /// Carries out `effects`; `handle` feeds an input to the engine and returns its effects.
    public static func perform<Environment: PolicyEnvironment>(
        _ effects: [PolicyEffect], in environment: inout Environment,
        handle: (PolicyInput) -> [PolicyEffect], until: (String) -> Date? = { _ in nil }, depth: Int = 0
    ) {
        guard depth < maximumDepth else {
            environment.gaveUp()
            return
        }
        var shieldFailures: [(store: String, message: String)] = []
        for effect in effects {
            var failure: EffectFailure?
            var message: String?
            switch effect {
            case .persist(let state):
                message = environment.persist(state)
                failure = message.map { .persist($0) }
            case .wakeUp(let date, let monotonic):
                message = environment.armWakeUp(at: date, monotonic: monotonic)
                failure = message.map { .wakeUp($0) }
            case .notify(let notice):
                environment.notify(notice)
            case .apply(let store, let selection, let owners):
                message = environment.apply(
                    store: store, selection: selection, owners: owners, until: until(store))
                if let message { shieldFailures.append((store, message)) }
            case .remove(let store, let selection):
                message = environment.remove(store: store, selection: selection)
                if let message { shieldFailures.append((store, message)) }
            }
            environment.carriedOut(effect, failure: message)
            if let failure {
                perform(
                    handle(.effectFailed(failure)), in: &environment, handle: handle, until: until,
                    depth: depth + 1)
                break
            }
        }
        for (store, message) in shieldFailures {
            perform(
                handle(.shieldReport(store: store, .failed(message))), in: &environment, handle: handle,
                until: until,
                depth: depth + 1)
        }
    }
}
