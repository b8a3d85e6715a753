internal import CLinux
import Foundation

/// Looks names up in DNS itself, not through the name service switch: the hosts file (and a
/// local resolver that reads it) answers StepGate's own blocked names with `0.0.0.0`, while the
/// network shield needs the addresses a program would really reach.
public struct DNSLookup: Sendable {
    /// The servers asked, in order (IPv4 or IPv6 addresses).
    public var servers: [String]
    /// How long one server has to answer.
    public var timeout: Duration

    public init(servers: [String]? = nil, timeout: Duration = .seconds(2)) {
        self.servers = servers ?? Self.systemServers()
        self.timeout = timeout
    }

    /// The system's upstream servers: systemd-resolved's own list when it runs (its stub at
    /// 127.0.0.53 answers from the hosts file too), else `/etc/resolv.conf`.
    public static func systemServers() -> [String] {
        for path in ["/run/systemd/resolve/resolv.conf", "/etc/resolv.conf"] {
            guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { continue }
            let servers = text.split(separator: "\n").compactMap { line -> String? in
                let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
                guard words.count >= 2, words[0] == "nameserver" else { return nil }
                return String(words[1])
            }
            if !servers.isEmpty { return servers }
        }
        return []
    }

    /// The IPv4 and IPv6 addresses of `name` (unspecified and loopback answers left out: they are
    /// a local block, not the name's address). Empty when no server answered.
    public func addresses(of name: String) -> [String] {
        var result: [String] = []
        for type in [UInt16(1), UInt16(28)] {  // A, AAAA
            for server in servers {
                if let answer = query(name, type: type, server: server) {
                    result += answer
                    break
                }
            }
        }
        return result.filter { !["0.0.0.0", "::", "127.0.0.1", "::1"].contains($0) }
    }

    /// One question to one server; `nil` when it did not answer usefully.
    func query(_ name: String, type: UInt16, server: String) -> [String]? {
        let id = UInt16.random(in: 0...UInt16.max)
        var packet: [UInt8] = [UInt8(id >> 8), UInt8(id & 0xFF), 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]
        for label in name.split(separator: ".") {
            let bytes = Array(label.utf8)
            guard !bytes.isEmpty, bytes.count < 64 else { return nil }
            packet.append(UInt8(bytes.count))
            packet += bytes
        }
        packet += [0, UInt8(type >> 8), UInt8(type & 0xFF), 0, 1]

        var v4 = sockaddr_in()
        var v6 = sockaddr_in6()
        let family: Int32
        if inet_pton(AF_INET, server, &v4.sin_addr) == 1 {
            family = AF_INET
            v4.sin_family = sa_family_t(AF_INET)
            v4.sin_port = UInt16(53).bigEndian
        } else if inet_pton(AF_INET6, server, &v6.sin6_addr) == 1 {
            family = AF_INET6
            v6.sin6_family = sa_family_t(AF_INET6)
            v6.sin6_port = UInt16(53).bigEndian
        } else {
            return nil
        }
        let fd = socket(family, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        let connected =
            family == AF_INET
            ? withUnsafePointer(to: &v4) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            : withUnsafePointer(to: &v6) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size))
                }
            }
        guard connected == 0, send(fd, packet, packet.count, Int32(MSG_NOSIGNAL)) == packet.count else {
            return nil
        }
        let milliseconds = Int32(
            timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        var buffer = [UInt8](repeating: 0, count: 4096)
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            guard poll(&poller, 1, milliseconds) > 0 else { return nil }
            let n = recv(fd, &buffer, buffer.count, 0)
            guard n >= 12 else { return nil }
            // Another packet (a late answer to an earlier question): keep waiting.
            guard buffer[0] == UInt8(id >> 8), buffer[1] == UInt8(id & 0xFF) else { continue }
            return Self.parse(Array(buffer[0..<n]), type: type)
        }
        return nil
    }

    /// The addresses of `type` in a DNS answer; `nil` for an error answer or a malformed one.
    static func parse(_ packet: [UInt8], type: UInt16) -> [String]? {
        guard packet.count >= 12 else { return nil }
        let rcode = packet[3] & 0x0F
        if rcode == 3 { return [] }  // NXDOMAIN: no addresses
        guard rcode == 0 else { return nil }
        let questions = Int(packet[4]) << 8 | Int(packet[5])
        let answers = Int(packet[6]) << 8 | Int(packet[7])
        var offset = 12
        func skipName() -> Bool {
            while offset < packet.count {
                let length = packet[offset]
                if length & 0xC0 == 0xC0 {
                    offset += 2
                    return offset <= packet.count
                }
                offset += 1
                if length == 0 { return true }
                offset += Int(length)
            }
            return false
        }
        for _ in 0..<questions {
            guard skipName(), offset + 4 <= packet.count else { return nil }
            offset += 4
        }
        var result: [String] = []
        for _ in 0..<answers {
            guard skipName(), offset + 10 <= packet.count else { return nil }
            let recordType = UInt16(packet[offset]) << 8 | UInt16(packet[offset + 1])
            let length = Int(packet[offset + 8]) << 8 | Int(packet[offset + 9])
            offset += 10
            guard offset + length <= packet.count else { return nil }
            if recordType == type && ((type == 1 && length == 4) || (type == 28 && length == 16)) {
                var text = [CChar](repeating: 0, count: 64)
                let family = type == 1 ? AF_INET : AF_INET6
                let converted = packet[offset..<offset + length].withUnsafeBytes {
                    inet_ntop(family, $0.baseAddress, &text, socklen_t(text.count))
                }
                if converted != nil {
                    result.append(
                        String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                    )
                }
            }
            offset += length
        }
        return result
    }
}
