/// Whether a gate's shared steps reach it (input `{"mqtt": SOURCE}`), as far as the link can
/// tell: a subscription the broker refused (SUBACK 0x80 and up), or a connection that has gone
/// on without a single session total. The second is the one Mosquitto 2 gives: it grants a
/// subscription its ACL denies and then drops the messages, silently. A source that has ever
/// counted has its totals retained at the broker, so a gate allowed to read them gets them
/// within moments of subscribing, whether the sensor host is on or off.
struct SourceWatch {
    /// The filters the broker refused on this connection.
    private(set) var refused: Set<String> = []
    /// The source's last availability (`online`, `offline`); nil before any.
    private(set) var sourceAvailability: String?
    /// Since when (boot clock) this connection has gone without a session total; nil once one
    /// came, and while not connected.
    private(set) var silentSince: Duration?

    mutating func connected(at now: Duration) {
        silentSince = now
        refused = []
    }

    mutating func disconnected() { silentSince = nil }

    mutating func subscribed(_ filter: String, granted: Bool) {
        if granted { refused.remove(filter) } else { refused.insert(filter) }
    }

    mutating func heardTotal() { silentSince = nil }

    mutating func heardAvailability(_ text: String) { sourceAvailability = text.isEmpty ? nil : text }
}

/// The sensor host's reading back of its own sessions at each connection. Its sessions before
/// this one are published again at start only once the broker's retained copies of them are
/// read (a total the broker has higher is kept: the host was killed before it wrote its last
/// steps). MQTT has no "end of the retained messages", so the host sends itself a marker after
/// subscribing: the broker handles one client's packets in order, so the copies come first.
struct SessionReadBack {
    private var connections = 0
    /// The marker sent on this connection, until it comes back.
    private var marker: String?
    private var sentAt: Duration?
    /// Whether the broker refused the subscriptions on this connection.
    private(set) var wasRefused = false
    /// Whether the past sessions were published (once: the client republishes them after
    /// every reconnection by itself).
    private(set) var pastPublished = false

    /// A connection at `now`: the marker to send.
    mutating func connected(at now: Duration) -> String {
        connections += 1
        wasRefused = false
        marker = "read-back \(connections)"
        sentAt = now
        return marker ?? ""
    }

    mutating func disconnected() {
        marker = nil
        sentAt = nil
    }

    mutating func refused() { wasRefused = true }

    /// Whether `text` is this connection's marker: the broker's copies are through.
    mutating func markerCame(_ text: String) -> Bool {
        guard let marker, text == marker else { return false }
        self.marker = nil
        sentAt = nil
        return true
    }

    /// Whether the marker has been awaited `limit` or longer at `now` (the broker drops what
    /// this host may not read).
    func isOverdue(at now: Duration, limit: Duration) -> Bool { sentAt.map { now - $0 >= limit } ?? false }

    /// Whether to publish the past sessions now (true once).
    mutating func publishPast() -> Bool {
        defer { pastPublished = true }
        return !pastPublished
    }
}
