internal import CLinux
import Foundation
import Glibc
public import UnlockPolicy

/// Blocks the gated users' connections to shielded domains with nftables, by address: what a
/// program reaches without reading the hosts file (its own DNS over HTTPS, an address it was
/// given, `curl --resolve`) is refused too. Also refuses the gated users' HTTPS and DNS-over-TLS
/// connections (ports 443 and 853, TCP and UDP) to well-known public DNS-over-HTTPS resolvers,
/// while any domain is shielded.
///
/// One table, `inet stepgate`, rewritten whole in one `nft -f` transaction on every change;
/// addresses are looked up in DNS itself (``DNSLookup``), again every `refreshInterval` (names
/// move between addresses). Only sockets of the gated users match (`meta skuid`), so root, the
/// admin group and system services are never cut off. Users named by id (``Users/only(_:)``)
/// are matched with their subordinate uids too (`/etc/subuid`, see ``SubordinateIDs``): a process
/// in a user namespace of theirs that switched to one of those uids is refused like them. The
/// file is read again whenever the table is written and at every check (a changed range
/// rewrites it). What still gets through: a VPN or proxy
/// that tunnels to an address not on the list, a resolver not on the list, another device.
public final class NftablesShield: Shield {
    public let name = "nftables"
    public let kinds: Set<Target.Kind> = [.domain]

    /// Whose connections are refused.
    public enum Users: Sendable, Equatable {
        /// These user ids, and the ranges the subordinate-id file gives them.
        case only([UInt32])
        /// Every user id from 1000 up (ordinary accounts, `nobody` too), except these.
        case ordinaryExcept([UInt32])
    }

    /// Well-known public DNS-over-HTTPS resolvers (Cloudflare, Google, Quad9, OpenDNS, AdGuard,
    /// CleanBrowsing, and the addresses Firefox's default DoH name resolves to).
    public static let wellKnownResolvers = [
        "1.1.1.1", "1.0.0.1", "2606:4700:4700::1111", "2606:4700:4700::1001",
        "104.16.248.249", "104.16.249.249", "2606:4700::6810:f8f9", "2606:4700::6810:f9f9",
        "8.8.8.8", "8.8.4.4", "2001:4860:4860::8888", "2001:4860:4860::8844",
        "9.9.9.9", "149.112.112.112", "2620:fe::fe", "2620:fe::9",
        "208.67.222.222", "208.67.220.220", "2620:119:35::35", "2620:119:53::53",
        "94.140.14.14", "94.140.15.15", "2a10:50c0::ad1:ff", "2a10:50c0::ad2:ff",
        "185.228.168.9", "185.228.169.9",
    ]

    private let nft: String
    private let users: Users
    private let resolvers: [String]
    private let lookup: @Sendable (String) -> [String]
    private let refreshInterval: Duration
    private let checkInterval: Duration
    private let runner: CommandRunner
    private let subordinateIDs: String?
    private let warn: @Sendable (String) -> Void
    /// The `meta skuid` match of the last table written, and the warnings last given.
    private var writtenWho: String?
    private var warned: [String] = []
    /// Shielded domains per store.
    private var entries: [String: Set<String>] = [:]
    /// The addresses each domain had at the last lookup.
    private var addresses: [String: [String]] = [:]
    private var lastLookup: ContinuousClock.Instant?
    private var lastCheck: ContinuousClock.Instant?

    /// - Parameters:
    ///   - nft: The `nft` program.
    ///   - users: Whose connections are refused.
    ///   - resolvers: DNS-over-HTTPS resolver addresses refused on ports 443 and 853.
    ///   - lookup: A domain's addresses (DNS by default, never the hosts file).
    ///   - refreshInterval: How often the addresses are looked up again.
    ///   - checkInterval: How often a recheck makes sure the table is still there.
    ///   - subordinateIDs: The subordinate uid file whose ranges of ``Users/only(_:)`` users are
    ///     matched too (nil: none).
    ///   - warn: Told about lines of that file that are left out, once until they change
    ///     (standard error by default).
    public init(
        nft: String = "nft", users: Users = .ordinaryExcept([]), resolvers: [String] = wellKnownResolvers,
        lookup: @escaping @Sendable (String) -> [String] = { DNSLookup().addresses(of: $0) },
        refreshInterval: Duration = .seconds(300), checkInterval: Duration = .seconds(10),
        runner: CommandRunner = CommandRunner(), subordinateIDs: String? = "/etc/subuid",
        warn: (@Sendable (String) -> Void)? = nil
    ) {
        self.subordinateIDs = subordinateIDs
        self.warn = warn ?? { FileHandle.standardError.write(Data("stepgate: warning: \($0)\n".utf8)) }
        self.checkInterval = checkInterval
        self.nft = nft
        self.users = users
        self.resolvers = resolvers
        self.lookup = lookup
        self.refreshInterval = refreshInterval
        self.runner = runner
    }

    public func apply(_ targets: [Target], context: ShieldContext) throws(ShieldError) {
        var names: [String] = []
        for target in targets {
            if case .success(let name) = DomainName.normalized(target.value) { names.append(name) }
        }
        entries[context.store, default: []].formUnion(names)
        for name in names where addresses[name] == nil { addresses[name] = resolve(name) }
        try write()
    }

    public func remove(_ targets: [Target], context: ShieldContext) throws(ShieldError) {
        for target in targets {
            let name = (try? DomainName.normalized(target.value).get()) ?? target.value
            entries[context.store]?.remove(name)
        }
        if entries[context.store]?.isEmpty == true { entries[context.store] = nil }
        try write()
    }

    public func inForce() throws(ShieldError) -> [String: Set<Target>] {
        guard tableExists() else { return [:] }
        return entries.mapValues { Set($0.map { Target(kind: .domain, value: $0) }) }
    }

    /// Looks the names up again every `refreshInterval`, and puts the table back if someone
    /// removed it (checked every `checkInterval`).
    public func recheck() -> [String: ShieldError] {
        guard !entries.isEmpty else { return [:] }
        let now = ContinuousClock.now
        var rewrite = false
        if let last = lastLookup, now - last >= refreshInterval {
            for name in Set(entries.values.flatMap { $0 }) { addresses[name] = resolve(name) }
            rewrite = true
        }
        if lastCheck.map({ now - $0 >= checkInterval }) ?? true {
            lastCheck = now
            if !tableExists() || who() != writtenWho { rewrite = true }
        }
        guard rewrite else { return [:] }
        do {
            try write()
            return [:]
        } catch {
            return entries.mapValues { _ in error }
        }
    }

    private func resolve(_ name: String) -> [String] {
        lastLookup = ContinuousClock.now
        var found = Set(lookup(name))
        if !name.hasPrefix("www.") { found.formUnion(lookup("www." + name)) }
        return found.sorted()
    }

    private func tableExists() -> Bool {
        guard
            let result = try? runner.run(
                [nft, "list", "table", "inet", "stepgate"], timeout: 10, shield: name)
        else { return false }
        return result.status == 0 && !result.timedOut
    }

    /// The whole table as an `nft -f` script (deleting the old one in the same transaction), or
    /// a script that only deletes it when nothing is shielded.
    func script(who given: String? = nil) -> String {
        var lines = ["table inet stepgate", "delete table inet stepgate"]
        let shielded = Set(entries.values.flatMap { $0 })
        guard !shielded.isEmpty else { return lines.joined(separator: "\n") + "\n" }
        let all = Set(shielded.flatMap { addresses[$0] ?? [] })
        let blocked4 = all.filter { !$0.contains(":") }.sorted()
        let blocked6 = all.filter { $0.contains(":") }.sorted()
        let doh4 = resolvers.filter { !$0.contains(":") }
        let doh6 = resolvers.filter { $0.contains(":") }
        func set(_ name: String, _ type: String, _ elements: [String]) -> [String] {
            var text = ["  set \(name) {", "    type \(type)"]
            if !elements.isEmpty { text.append("    elements = { \(elements.joined(separator: ", ")) }") }
            return text + ["  }"]
        }
        let who = given ?? who()
        let refuse = "reject with icmpx type admin-prohibited"
        let ports = "meta l4proto { tcp, udp } th dport { 443, 853 }"
        lines.append("table inet stepgate {")
        lines += set("blocked4", "ipv4_addr", blocked4) + set("blocked6", "ipv6_addr", blocked6)
        lines += set("doh4", "ipv4_addr", doh4) + set("doh6", "ipv6_addr", doh6)
        lines += [
            "  chain output {",
            "    type filter hook output priority 0; policy accept;",
            "    \(who) ip daddr @blocked4 \(refuse)",
            "    \(who) ip6 daddr @blocked6 \(refuse)",
            "    \(who) ip daddr @doh4 \(ports) \(refuse)",
            "    \(who) ip6 daddr @doh6 \(ports) \(refuse)",
            "  }",
            "}",
        ]
        return lines.joined(separator: "\n") + "\n"
    }

    /// Whose sockets the rules match: the gated users' ids (with their subordinate ranges,
    /// merged, as `START-END` intervals), or every id from 1000 up but the admins'.
    func who() -> String {
        switch users {
        case .only(let ids):
            var ranges = ids.map { $0...$0 }
            if let path = subordinateIDs {
                let file = SubordinateIDs.read(path)
                if file.warnings != warned {
                    warned = file.warnings
                    for warning in file.warnings { warn("nftables shield: \(warning)") }
                }
                ranges += file.ranges(of: ids)
            }
            let elements = mergedRanges(ranges).map {
                $0.lowerBound == $0.upperBound ? "\($0.lowerBound)" : "\($0.lowerBound)-\($0.upperBound)"
            }
            return "meta skuid { \(elements.joined(separator: ", ")) }"
        case .ordinaryExcept(let ids):
            // Subordinate ranges start far above 1000 (useradd: 100000), so they match already.
            return "meta skuid >= 1000"
                + (ids.isEmpty ? "" : " meta skuid != { \(ids.map(String.init).joined(separator: ", ")) }")
        }
    }

    private func write() throws(ShieldError) {
        let who = entries.isEmpty ? nil : who()
        let text = script(who: who)
        // The script goes through a private file (mkstemp: 0600, a fresh name).
        var template = Array("/tmp/stepgate-nft-XXXXXX".utf8CString)
        let fd = mkstemp(&template)
        guard fd >= 0 else {
            throw ShieldError(
                shield: name, message: "cannot create a temporary file: \(String(cString: strerror(errno)))")
        }
        let scriptPath = String(
            decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        defer { unlink(scriptPath) }
        let bytes = Array(text.utf8)
        let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        close(fd)
        guard written == bytes.count else {
            throw ShieldError(shield: name, message: "cannot write \(scriptPath)")
        }
        let result = try runner.run([nft, "-f", scriptPath], timeout: 30, shield: name)
        guard result.status == 0, !result.timedOut else {
            let reason = result.output.trimmingCharacters(in: .whitespacesAndNewlines)
            throw ShieldError(shield: name, message: "nft -f failed (status \(result.status)): \(reason)")
        }
        lastCheck = ContinuousClock.now
        writtenWho = who
        let unresolved = entries.values.flatMap { $0 }.filter { addresses[$0]?.isEmpty ?? true }
        if !unresolved.isEmpty {
            throw ShieldError(
                shield: name,
                message: "no addresses found for \(Set(unresolved).sorted().joined(separator: ", ")); "
                    + "their connections are not refused (check shields.nftables.nameservers)")
        }
    }
}

@available(*, unavailable) extension NftablesShield: Sendable {}
