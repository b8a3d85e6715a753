internal import CLinux
import Foundation
import StepHistoryStore
import SystemFiles
public import UnlockPolicy

/// Blocks web domains with a managed block in a hosts-format file (default `/etc/hosts`) or a
/// dnsmasq configuration file, written atomically between markers; the rest of the file is
/// never touched.
///
/// - `hosts` format: each domain and its `www.` name, also written with the trailing dot of a
///   fully qualified name, resolve to `0.0.0.0` and `::`. A hosts file cannot match other
///   subdomains (`api.NAME`); use the dnsmasq format (dnsmasq, Pi-hole) for that.
/// - `dnsmasq` format: `address=/domain/0.0.0.0` and `address=/domain/::`, which cover every
///   subdomain.
///
/// After a change the optional reload command runs (for example `systemctl reload dnsmasq` or
/// `pihole restartdns reload`); if it fails the shield has failed.
public final class DomainShield: Shield {
    /// How the managed lines are written.
    public enum Format: String, Sendable, CaseIterable {
        case hosts
        case dnsmasq
    }

    public let name = "domains"
    public let kinds: Set<Target.Kind> = [.domain]
    public let path: String
    public let format: Format
    private let reloadCommand: [String]?
    private let runner: CommandRunner

    static let begin = "# BEGIN stepgate managed block: do not edit; StepGate rewrites it"
    static let end = "# END stepgate managed block"
    /// Firefox's DNS-over-HTTPS canary: a negative answer (dnsmasq's `address=/NAME/` without an
    /// address) tells Firefox to leave DoH off on this network. A hosts file cannot give a
    /// negative answer; the browsers' managed policies (``BrowserPolicies``) cover that case.
    static let canary =
        "address=/use-application-dns.net/ # stepgate: tells Firefox to keep DNS over HTTPS off"

    public init(
        path: String = "/etc/hosts", format: Format = .hosts, reloadCommand: [String]? = nil,
        runner: CommandRunner = CommandRunner()
    ) {
        self.path = path
        self.format = format
        self.reloadCommand = reloadCommand
        self.runner = runner
    }

    public func apply(_ targets: [Target], context: ShieldContext) throws(ShieldError) {
        // Every valid domain is blocked even when another one is not.
        var names: [String] = []
        var refused: [String] = []
        for target in targets {
            switch DomainName.normalized(target.value) {
            case .success(let name): names.append(name)
            case .failure(let refusal): refused.append("\(target.value): \(refusal.reason)")
            }
        }
        try update { entries in
            for name in names { entries.insert(Entry(store: context.store, domain: name)) }
        }
        if !refused.isEmpty {
            throw ShieldError(shield: name, message: "not blocked: " + refused.joined(separator: "; "))
        }
    }

    public func remove(_ targets: [Target], context: ShieldContext) throws(ShieldError) {
        try update { entries in
            for target in targets {
                let name = (try? DomainName.normalized(target.value).get()) ?? target.value.lowercased()
                entries.remove(Entry(store: context.store, domain: name))
            }
        }
    }

    public func inForce() throws(ShieldError) -> [String: Set<Target>] {
        let (_, entries) = try read()
        var result: [String: Set<Target>] = [:]
        for entry in entries {
            result[entry.store, default: []].insert(Target(kind: .domain, value: entry.domain))
        }
        return result
    }

    struct Entry: Hashable, Comparable {
        var store: String
        var domain: String

        static func < (a: Entry, b: Entry) -> Bool { (a.domain, a.store) < (b.domain, b.store) }
    }

    private func update(_ change: (inout Set<Entry>) -> Void) throws(ShieldError) {
        let (outside, before) = try read()
        var entries = before
        change(&entries)
        guard entries != before else { return }
        var lines = outside
        while lines.last == "" { lines.removeLast() }
        if !entries.isEmpty {
            lines.append(Self.begin)
            for entry in entries.sorted() { lines += render(entry) }
            if format == .dnsmasq { lines.append(Self.canary) }
            lines.append(Self.end)
        }
        let text = lines.joined(separator: "\n") + "\n"
        do {
            try DurableFile.writeAtomically(Array(text.utf8), to: path, mode: 0o644)
        } catch let error where error.isOutOfSpace && removeReserve() {
            // Someone filled the file system: the reserve's blocks and inode make room for the
            // new version (a relock must not fail for want of a few kilobytes).
            do {
                try DurableFile.writeAtomically(Array(text.utf8), to: path, mode: 0o644)
            } catch {
                throw ShieldError(shield: name, message: error.description)
            }
        } catch {
            throw ShieldError(shield: name, message: error.description)
        }
        keepReserve(for: text.utf8.count)
        if let reloadCommand {
            let result = try runner.run(reloadCommand, timeout: 30, shield: name)
            guard result.status == 0, !result.timedOut else {
                throw ShieldError(
                    shield: name,
                    message:
                        "reload command '\(reloadCommand.joined(separator: " "))' failed (status \(result.status))"
                )
            }
        }
    }

    /// A hidden file beside the managed file, holding space (and an inode) that is given up when
    /// the file system is full, so a relock can still be written. Hidden: dnsmasq skips
    /// dot files in its configuration folder.
    var reservePath: String {
        guard let slash = path.lastIndex(of: "/") else { return ".\(path).stepgate-reserve" }
        return "\(path[...slash]).\(path[path.index(after: slash)...]).stepgate-reserve"
    }

    /// Removes the reserve; whether there was one.
    private func removeReserve() -> Bool { unlink(reservePath) == 0 }

    /// Makes sure the reserve exists and holds room for twice the file (at least 64 KiB). Best
    /// effort: without it a full file system can still fail a write, which fails closed.
    private func keepReserve(for size: Int) {
        let wanted = max(64 * 1024, 2 * size + 16 * 1024)
        var info = stat()
        if lstat(reservePath, &info) == 0 {
            if info.st_mode & S_IFMT == S_IFREG && Int(info.st_blocks) * 512 >= wanted { return }
            if info.st_mode & S_IFMT != S_IFREG { return }  // not ours to touch
            unlink(reservePath)
        }
        let fd = open(reservePath, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }
        defer { close(fd) }
        if posix_fallocate(fd, 0, off_t(wanted)) != 0 {
            // No room now: try again after the next successful write.
            unlink(reservePath)
        }
    }

    private func render(_ entry: Entry) -> [String] {
        let tag = " # store=\(entry.store)"
        switch format {
        case .hosts:
            // The fully qualified form (`NAME.`) is looked up as a different name.
            var names = "\(entry.domain) \(entry.domain)."
            if !entry.domain.hasPrefix("www.") { names += " www.\(entry.domain) www.\(entry.domain)." }
            return ["0.0.0.0 \(names)\(tag)", ":: \(names)\(tag)"]
        case .dnsmasq:
            return ["address=/\(entry.domain)/0.0.0.0\(tag)", "address=/\(entry.domain)/::\(tag)"]
        }
    }

    /// The file's lines outside the managed block, and the entries inside it.
    private func read() throws(ShieldError) -> (outside: [String], entries: Set<Entry>) {
        let bytes: [UInt8]?
        do {
            bytes = try DurableFile.read(path)
        } catch {
            throw ShieldError(shield: name, message: error.description)
        }
        guard let bytes else { return ([], []) }
        var outside: [String] = []
        var entries = Set<Entry>()
        var inside = false
        for raw in String(decoding: bytes, as: UTF8.self).split(
            separator: "\n", omittingEmptySubsequences: false)
        {
            let line = String(raw)
            if line == Self.begin {
                inside = true
            } else if line == Self.end {
                inside = false
            } else if inside {
                guard let tag = line.range(of: " # store=") else { continue }
                let store = String(line[tag.upperBound...])
                let body = line[..<tag.lowerBound]
                let domain: Substring?
                switch format {
                case .hosts: domain = body.split(separator: " ").dropFirst().first
                case .dnsmasq: domain = body.split(separator: "/").dropFirst().first
                }
                if let domain { entries.insert(Entry(store: store, domain: String(domain))) }
            } else {
                outside.append(line)
            }
        }
        if inside {
            throw ShieldError(
                shield: name, message: "\(path): the managed block has no end marker; fix the file by hand")
        }
        if outside.last == "" { outside.removeLast() }
        return (outside, entries)
    }
}

@available(*, unavailable) extension DomainShield: Sendable {}
