/// When a file written in batches must be written: at most `interval` after the first change
/// that is not on disk yet (a deadline that change sets and later ones keep), and by its owner
/// in full when it stops. So a SIGKILL or a power cut loses at most the changes of the last
/// `interval`, a stop loses nothing, and the file is written at most about once per `interval`
/// however often it changes. The owner keeps the clock (any monotonic one) and wakes at ``due``.
public struct SaveDeadline: Sendable, Hashable {
    /// The longest a change waits for the file.
    public let interval: Duration
    /// When the changes not on disk must be written; nil when none wait.
    public private(set) var due: Duration?

    public init(interval: Duration) { self.interval = interval }

    /// A change at `now`: due an interval later, unless an earlier change set a deadline.
    public mutating func changed(at now: Duration) {
        if due == nil { due = now + interval }
    }

    /// Whether the changes must be written at `now`.
    public func isDue(at now: Duration) -> Bool { due.map { now >= $0 } ?? false }

    /// Everything changed is on disk.
    public mutating func written() { due = nil }

    /// A write failed at `now`: tried again an interval later (not at every turn of the owner).
    public mutating func failed(at now: Duration) { due = now + interval }
}
