/// A web domain as a shield blocks it: lower case, without a trailing dot, checked to be a DNS
/// name a resolver would look up (so nothing else can be written into a hosts or dnsmasq file).
public enum DomainName {
    /// The normal form of `text`, or why it is not a domain a shield can block.
    ///
    /// `Example.COM.` becomes `example.com`. Refused: IP addresses (a resolver never looks them
    /// up, so blocking them by name does nothing), single labels such as `localhost`,
    /// wildcards (a domain already stands for its subdomains where the format allows it),
    /// names with spaces or other characters, and international names not written in their
    /// ASCII form (`xn--…`).
    public static func normalized(_ text: String) -> Result<String, Refusal> {
        var name = text.lowercased()
        if name.hasSuffix(".") { name.removeLast() }
        if name.isEmpty { return .failure(Refusal("an empty name")) }
        if name.hasPrefix("*.") {
            return .failure(
                Refusal(
                    "a wildcard; write the domain itself (\(name.dropFirst(2))): the dnsmasq format blocks every subdomain of it"
                ))
        }
        if name.contains(":") || isIPv4(name) {
            return .failure(Refusal("an IP address; a name shield cannot block an address"))
        }
        if name.unicodeScalars.contains(where: { !$0.isASCII }) {
            return .failure(Refusal("not ASCII; write an international name in its xn-- (punycode) form"))
        }
        guard name.utf8.count <= 253 else { return .failure(Refusal("longer than 253 characters")) }
        let labels = name.split(separator: ".", omittingEmptySubsequences: false)
        for label in labels {
            guard !label.isEmpty else { return .failure(Refusal("an empty label (two dots in a row)")) }
            guard label.utf8.count <= 63 else {
                return .failure(Refusal("a label longer than 63 characters"))
            }
            guard label.first != "-", label.last != "-" else {
                return .failure(Refusal("a label that starts or ends with '-'"))
            }
            guard label.utf8.allSatisfy({ isLetterOrDigit($0) || $0 == UInt8(ascii: "-") }) else {
                return .failure(Refusal("a character other than letters, digits, '-' and '.'"))
            }
        }
        guard labels.count >= 2 else {
            return .failure(Refusal("a single label; a domain has at least two (example.com)"))
        }
        if labels.last!.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) {
            return .failure(Refusal("an all-numeric top-level label"))
        }
        return .success(name)
    }

    /// Why a text is not a domain name.
    public struct Refusal: Error, Equatable, Sendable {
        public var reason: String
        init(_ reason: String) { self.reason = reason }
    }

    private static func isLetterOrDigit(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
            || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
    }

    private static func isIPv4(_ name: String) -> Bool {
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4
            && parts.allSatisfy {
                !$0.isEmpty && $0.utf8.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
            }
    }
}
