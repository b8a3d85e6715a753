import CLinux
import Foundation
import Synchronization
import Testing
import UnlockPolicy

@testable import Shields

private let nftAvailable = FileManager.default.isExecutableFile(atPath: "/usr/sbin/nft")

/// A TCP listener on `address:port` in the calling thread's network namespace.
private func listen(_ address: String, _ port: UInt16) -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    var name = sockaddr_in()
    name.sin_family = sa_family_t(AF_INET)
    name.sin_port = port.bigEndian
    inet_pton(AF_INET, address, &name.sin_addr)
    let bound = withUnsafePointer(to: &name) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    return bound == 0 && Glibc.listen(fd, 16) == 0 ? fd : -1
}

@Suite("nftables shield")
struct NftablesShieldTests {
    @Test func writesOneTableWithTheAddressesAndTheResolvers() throws {
        let shield = NftablesShield(
            nft: "/bin/true", users: .ordinaryExcept([1001]), resolvers: ["9.9.9.9", "2620:fe::fe"],
            lookup: { $0 == "game.example" ? ["203.0.113.7", "2001:db8::7"] : [] })
        try shield.apply(
            [Target(kind: .domain, value: "game.example")], context: ShieldContext(store: "games"))
        let script = shield.script()
        #expect(script.hasPrefix("table inet stepgate\ndelete table inet stepgate\ntable inet stepgate {"))
        #expect(script.contains("set blocked4 {\n    type ipv4_addr\n    elements = { 203.0.113.7 }"))
        #expect(script.contains("set blocked6 {\n    type ipv6_addr\n    elements = { 2001:db8::7 }"))
        #expect(script.contains("meta skuid >= 1000 meta skuid != { 1001 } ip daddr @blocked4 reject"))
        #expect(script.contains("ip6 daddr @doh6 meta l4proto { tcp, udp } th dport { 443, 853 } reject"))
        try shield.remove(
            [Target(kind: .domain, value: "game.example")], context: ShieldContext(store: "games"))
        #expect(shield.script() == "table inet stepgate\ndelete table inet stepgate\n")
    }

    @Test func aNameWithoutAddressesIsAProblem() throws {
        let shield = NftablesShield(nft: "/bin/true", lookup: { _ in [] })
        let error = #expect(throws: ShieldError.self) {
            try shield.apply(
                [Target(kind: .domain, value: "gone.example")], context: ShieldContext(store: "s"))
        }
        #expect(error?.message.contains("no addresses found for gone.example") == true)
    }

    @Test func parsesADNSAnswer() {
        // An answer for a.example: one A record 192.0.2.1, with a compressed name.
        let packet: [UInt8] =
            [0x12, 0x34, 0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0]
            + [1, 97, 7] + Array("example".utf8) + [0, 0, 1, 0, 1]
            + [0xC0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 1]
        #expect(DNSLookup.parse(packet, type: 1) == ["192.0.2.1"])
        var nxdomain = packet
        nxdomain[3] = 0x83
        #expect(DNSLookup.parse(nxdomain, type: 1) == [])
        #expect(DNSLookup.parse(Array(packet.prefix(20)), type: 1) == nil)
    }

    /// For real, in a network namespace this test makes (loopback only, never an outside
    /// address): the gated user cannot connect to a shielded name's address or to a DoH
    /// resolver's HTTPS port, root can, and removing the shield lets the user through again.
    @Test(
        .enabled(if: getuid() == 0, "needs root for a network namespace and nftables"),
        .enabled(if: nftAvailable, "needs nft (Debian package nftables)"),
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"), "needs setpriv"))
    func refusesTheGatedUserInANetworkNamespace() throws {
        let failures = Mutex<[String]>([])
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            defer { done.signal() }
            func fail(_ text: String) { failures.withLock { $0.append(text) } }
            // This thread (and what it starts) gets a network namespace of its own.
            guard stepgate_unshare_network() == 0 else {
                return fail("unshare: \(String(cString: strerror(errno)))")
            }
            let runner = CommandRunner()
            guard
                (try? runner.run(["/usr/sbin/ip", "link", "set", "lo", "up"], timeout: 10, shield: "test"))?
                    .status == 0
            else { return fail("ip link set lo up failed") }
            let listeners = [listen("127.0.0.2", 8080), listen("127.0.0.3", 443), listen("127.0.0.3", 80)]
            defer { for fd in listeners { close(fd) } }
            guard listeners.allSatisfy({ $0 >= 0 }) else { return fail("listen failed") }
            func connects(_ address: String, _ port: Int, asNobody: Bool) -> Bool {
                let probe = "exec 3<>/dev/tcp/\(address)/\(port)"
                let command =
                    asNobody
                    ? [
                        "/usr/bin/setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                        "/bin/bash", "-c", probe,
                    ]
                    : ["/bin/bash", "-c", probe]
                return (try? runner.run(command, timeout: 10, shield: "test"))?.status == 0
            }
            let shield = NftablesShield(
                users: .only([65534]), resolvers: ["127.0.0.3"],
                lookup: { $0 == "blocked.example" ? ["127.0.0.2"] : [] }, checkInterval: .zero)
            let games = ShieldContext(store: "games")
            let target = Target(kind: .domain, value: "blocked.example")
            if !connects("127.0.0.2", 8080, asNobody: true) {
                fail("nobody could not connect before the shield")
            }
            do {
                try shield.apply([target], context: games)
            } catch {
                return fail("apply: \(error)")
            }
            if connects("127.0.0.2", 8080, asNobody: true) { fail("nobody reached the shielded address") }
            if !connects("127.0.0.2", 8080, asNobody: false) { fail("root was cut off") }
            if connects("127.0.0.3", 443, asNobody: true) {
                fail("nobody reached the DoH resolver's HTTPS port")
            }
            if !connects("127.0.0.3", 80, asNobody: true) { fail("nobody was cut off from another port") }
            if (try? shield.inForce()) != ["games": [target]] {
                fail("inForce: \(String(describing: try? shield.inForce()))")
            }
            // Someone deletes the table: the next recheck puts it back.
            _ = try? runner.run(
                ["/usr/sbin/nft", "delete", "table", "inet", "stepgate"], timeout: 10, shield: "test")
            if (try? shield.inForce()) != [:] { fail("a deleted table still reported in force") }
            if !shield.recheck().isEmpty { fail("recheck failed") }
            if connects("127.0.0.2", 8080, asNobody: true) { fail("the table was not put back") }
            do {
                try shield.remove([target], context: games)
            } catch {
                return fail("remove: \(error)")
            }
            if !connects("127.0.0.2", 8080, asNobody: true) {
                fail("nobody still cut off after the shield was lifted")
            }
        }
        thread.start()
        #expect(done.wait(timeout: .now() + 90) == .success)
        #expect(failures.withLock { $0 } == [])
    }
}
