import Foundation
import StepHistoryStore
import SystemFiles
import TypedJSON
import UnlockPolicy

/// The browsers' managed policies that keep DNS over HTTPS off, so a blocked domain cannot be
/// reached through the browser's own resolver (which never reads the hosts file or dnsmasq):
/// Firefox's `policies.json` (`DNSOverHTTPS` disabled and locked) and Chromium-family managed
/// policy files (`DnsOverHttpsMode` off). Installed while any store has domains; removed when
/// none has. Only browsers that are installed get a policy (checked again at every start and
/// reload).
///
/// Chromium-family browsers read every file in their managed-policy folder, so StepGate owns
/// one file there. Firefox reads one `policies.json`: StepGate adds its key to what is there and
/// later removes only that key, and only if it still holds what StepGate wrote; a file that sets
/// `DNSOverHTTPS` itself is left as it is.
public struct BrowserPolicies: Sendable {
    /// Prefix for every path (`/` on a real system; a folder in tests).
    public var root: String

    public init(root: String = "/") {
        self.root = root.hasSuffix("/") ? root : root + "/"
    }

    /// The file StepGate owns in each Chromium-family managed-policy folder, and where the
    /// browser is installed (a policy is written only for a browser that is there).
    static let chromium: [(file: String, installed: [String])] = [
        (
            "etc/chromium/policies/managed/stepgate-dns.json",
            ["usr/bin/chromium", "usr/bin/chromium-browser", "usr/lib/chromium"]
        ),
        (
            "etc/opt/chrome/policies/managed/stepgate-dns.json",
            ["opt/google/chrome", "usr/bin/google-chrome"]
        ),
        ("etc/brave/policies/managed/stepgate-dns.json", ["opt/brave.com", "usr/bin/brave-browser"]),
        (
            "etc/opt/edge/policies/managed/stepgate-dns.json",
            ["opt/microsoft/msedge", "usr/bin/microsoft-edge"]
        ),
    ]
    static var chromiumFiles: [String] { chromium.map(\.file) }
    /// Where Firefox is installed (Debian's firefox-esr, Mozilla's package, a tarball in /opt).
    static let firefoxInstalled = [
        "usr/bin/firefox", "usr/bin/firefox-esr", "usr/lib/firefox", "usr/lib/firefox-esr", "opt/firefox",
    ]

    /// The browsers found installed that get a policy, by name (for the log).
    public func installedBrowsers() -> [String] {
        let names = ["Chromium", "Google Chrome", "Brave", "Microsoft Edge"]
        var found = zip(names, Self.chromium).filter { installed($0.1.installed) }.map(\.0)
        if installed(Self.firefoxInstalled) { found.insert("Firefox", at: 0) }
        return found
    }

    private func installed(_ paths: [String]) -> Bool {
        paths.contains { FileManager.default.fileExists(atPath: root + $0) }
    }
    static let chromiumText = "{\n  \"DnsOverHttpsMode\": \"off\"\n}\n"
    static let firefoxFile = "etc/firefox/policies/policies.json"
    static let firefoxKey = "DNSOverHTTPS"
    static let firefoxValue = JSONValue.object([("Enabled", .bool(false)), ("Locked", .bool(true))])

    /// Writes the policies of the browsers that are installed; returns the problems (empty when
    /// all are in place).
    public func install() -> [String] {
        var problems: [String] = []
        for (relative, where_) in Self.chromium where installed(where_) {
            let path = root + relative
            do {
                if try DurableFile.read(path) == Array(Self.chromiumText.utf8) { continue }
                try makeFolders(for: path)
                try DurableFile.writeAtomically(Array(Self.chromiumText.utf8), to: path, mode: 0o644)
            } catch {
                problems.append("\(path): \(error)")
            }
        }
        if installed(Self.firefoxInstalled), let problem = installFirefox() { problems.append(problem) }
        return problems
    }

    /// Removes what ``install()`` wrote; returns the problems.
    public func remove() -> [String] { removeReporting().problems }

    /// Removes what ``install()`` wrote; returns the files it was removed from, and the problems.
    public func removeReporting() -> (removed: [String], problems: [String]) {
        var problems: [String] = []
        var removed: [String] = []
        for relative in Self.chromiumFiles {
            let path = root + relative
            if unlink(path) == 0 {
                removed.append(path)
            } else if errno != ENOENT {
                problems.append("\(path): cannot remove: \(String(cString: strerror(errno)))")
            }
        }
        let path = root + Self.firefoxFile
        do {
            guard let bytes = try DurableFile.read(path, limit: 1 << 20),
                case .object(var top) = try JSONValue.parse(bytes: bytes),
                let index = top.firstIndex(where: { $0.0 == "policies" }),
                case .object(var policies) = top[index].1,
                let ours = policies.firstIndex(where: { $0.0 == Self.firefoxKey }),
                policies[ours].1 == Self.firefoxValue
            else { return (removed, problems) }
            policies.remove(at: ours)
            if policies.isEmpty && top.count == 1 {
                if unlink(path) != 0 {
                    problems.append("\(path): cannot remove: \(String(cString: strerror(errno)))")
                } else {
                    removed.append(path)
                }
            } else {
                top[index].1 = .object(policies)
                try DurableFile.writeAtomically(
                    Array((JSONValue.object(top).prettySerialized() + "\n").utf8), to: path, mode: 0o644)
                removed.append(path)
            }
        } catch {
            problems.append("\(path): \(error)")
        }
        return (removed, problems)
    }

    private func installFirefox() -> String? {
        let path = root + Self.firefoxFile
        do {
            var top: [(String, JSONValue)] = []
            if let bytes = try DurableFile.read(path, limit: 1 << 20) {
                guard case .object(let existing) = try JSONValue.parse(bytes: bytes) else {
                    return "\(path): not a JSON object; Firefox's DNS over HTTPS policy not set"
                }
                top = existing
            }
            var policies: [(String, JSONValue)] = []
            let index = top.firstIndex { $0.0 == "policies" }
            if let index {
                guard case .object(let existing) = top[index].1 else {
                    return "\(path): \"policies\" is not an object; Firefox's DNS over HTTPS policy not set"
                }
                policies = existing
            }
            if let current = policies.first(where: { $0.0 == Self.firefoxKey }) {
                // Someone else manages it: theirs stands (said once, if it leaves DoH on).
                return current.1 == Self.firefoxValue
                    ? nil
                    : "\(path): already sets \(Self.firefoxKey); left as it is (make sure it disables DNS over HTTPS)"
            }
            policies.append((Self.firefoxKey, Self.firefoxValue))
            if let index {
                top[index].1 = .object(policies)
            } else {
                top.append(("policies", .object(policies)))
            }
            try makeFolders(for: path)
            try DurableFile.writeAtomically(
                Array((JSONValue.object(top).prettySerialized() + "\n").utf8), to: path, mode: 0o644)
            return nil
        } catch let error as JSONPathError {
            return "\(path): not valid JSON (\(error)); Firefox's DNS over HTTPS policy not set"
        } catch {
            return "\(path): \(error)"
        }
    }

    /// Creates the missing folders above `path` (mode 0755).
    private func makeFolders(for path: String) throws {
        let folder = String(path[..<path.lastIndex(of: "/")!])
        try FileManager.default.createDirectory(
            atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
    }
}
