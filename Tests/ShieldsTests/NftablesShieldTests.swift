import CLinux
import Foundation
import StepGateTestSupport
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

    @Test func parsesTheSubordinateIDFile() {
        let text = """
            # useradd writes one range per user
            gated:100000:65536

            4243:200000:10
              spaced:300000:5
            nobody:0:0
            broken:100
            bad:12x:5
            :400000:5
            far:4294967295:2
            last:4294967295:1
            """
        let file = SubordinateIDs.parse(text, file: "/etc/subuid")
        #expect(
            file.ranges == [
                .init(owner: "gated", ids: 100_000...165_535), .init(owner: "4243", ids: 200_000...200_009),
                .init(owner: "spaced", ids: 300_000...300_004),
                .init(owner: "last", ids: 4_294_967_295...4_294_967_295),
            ])
        #expect(
            file.warnings == [
                "/etc/subuid:7: not NAME:START:COUNT; line ignored",
                "/etc/subuid:8: START and COUNT must be whole numbers up to 4294967295; line ignored",
                "/etc/subuid:9: no user name or id; line ignored",
                "/etc/subuid:10: the range 4294967295 + 2 goes past the largest uid; line ignored",
            ])
        // By uid, or by a name the user database gives that uid.
        let uidOf: (String) -> UInt32? = { ["gated": 4243, "spaced": 5000][$0] }
        #expect(file.ranges(of: [4243], uidOf: uidOf) == [100_000...165_535, 200_000...200_009])
        #expect(file.ranges(of: [5000, 1], uidOf: uidOf) == [300_000...300_004])
        #expect(file.ranges(of: [], uidOf: uidOf) == [])
        #expect(SubordinateIDs.read("/nonexistent/subuid") == SubordinateIDs())
        #expect(mergedRanges([7...7, 100...200, 150...300, 301...301, 5...6]) == [5...7, 100...301])
    }

    /// The gated users' subordinate uids (a user namespace of theirs, `newuidmap`) are matched
    /// with them; a malformed line is told once and left out.
    @Test func matchesTheGatedUsersSubordinateIDs() throws {
        let folder = try Fixtures.temporaryFolder()
        let subuid = folder.appendingPathComponent("subuid").path
        try "nobody:100000:65536\n65534:165536:10\nroot:500000:10\nbroken\n".write(
            toFile: subuid, atomically: true, encoding: .utf8)
        let warnings = Mutex<[String]>([])
        let shield = NftablesShield(
            nft: "/bin/true", users: .only([65534]), resolvers: [], lookup: { _ in ["203.0.113.7"] },
            subordinateIDs: subuid, warn: { text in warnings.withLock { $0.append(text) } })
        try shield.apply(
            [Target(kind: .domain, value: "game.example")], context: ShieldContext(store: "games"))
        #expect(shield.script().contains("    meta skuid { 65534, 100000-165545 } ip daddr @blocked4 reject"))
        #expect(
            warnings.withLock { $0 } == [
                "nftables shield: \(subuid):4: not NAME:START:COUNT; line ignored"
            ])
        // Read again for every table: a new range is matched, the same warning is not told twice.
        try "nobody:100000:65536\nnobody:300000:5\n\nbroken\n".write(
            toFile: subuid, atomically: true, encoding: .utf8)
        #expect(shield.script().contains("meta skuid { 65534, 100000-165535, 300000-300004 } ip daddr"))
        #expect(warnings.withLock { $0.count } == 1)
        let without = NftablesShield(
            nft: "/bin/true", users: .only([65534]), resolvers: [], lookup: { _ in ["203.0.113.7"] },
            subordinateIDs: nil)
        try without.apply(
            [Target(kind: .domain, value: "game.example")], context: ShieldContext(store: "games"))
        #expect(without.script().contains("meta skuid { 65534 } ip daddr @blocked4"))
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
        inNetworkNamespace { runner, fail in
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
    }

    /// For real, in a network namespace this test makes: a process of a uid in the gated user's
    /// subordinate range (what `newuidmap` maps into the user's own user namespace) is refused
    /// like the user, one outside it is not, and a range added to the file while the shield is
    /// up is refused from the next check.
    @Test(
        .enabled(if: getuid() == 0, "needs root for a network namespace and nftables"),
        .enabled(if: nftAvailable, "needs nft (Debian package nftables)"),
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"), "needs setpriv"))
    func refusesTheGatedUsersSubordinateIDs() throws {
        let folder = try Fixtures.temporaryFolder()
        let subuid = folder.appendingPathComponent("subuid").path
        try "# the gated user's range\nnobody:100000:65536\n".write(
            toFile: subuid, atomically: true, encoding: .utf8)
        inNetworkNamespace { runner, fail in
            let listener = listen("127.0.0.2", 8080)
            defer { close(listener) }
            guard listener >= 0 else { return fail("listen failed") }
            func connects(as uid: UInt32) -> Bool {
                let command = [
                    "/usr/bin/setpriv", "--reuid=\(uid)", "--regid=\(uid)", "--clear-groups",
                    "/bin/bash", "-c", "exec 3<>/dev/tcp/127.0.0.2/8080",
                ]
                return (try? runner.run(command, timeout: 10, shield: "test"))?.status == 0
            }
            let shield = NftablesShield(
                users: .only([65534]), resolvers: [],
                lookup: { $0 == "blocked.example" ? ["127.0.0.2"] : [] },
                checkInterval: .zero, subordinateIDs: subuid)
            if !connects(as: 100_001) { fail("uid 100001 could not connect before the shield") }
            do {
                try shield.apply(
                    [Target(kind: .domain, value: "blocked.example")], context: ShieldContext(store: "games"))
            } catch {
                return fail("apply: \(error)")
            }
            if connects(as: 65534) { fail("nobody reached the shielded address") }
            for uid: UInt32 in [100_000, 100_001, 165_535] where connects(as: uid) {
                fail("subordinate uid \(uid) reached the shielded address")
            }
            if !connects(as: 165_536) { fail("uid 165536, outside the range, was cut off") }
            if !connects(as: 300_001) { fail("uid 300001 was cut off before its range was added") }
            do {
                try "nobody:100000:65536\nnobody:300000:5\n".write(
                    toFile: subuid, atomically: true, encoding: .utf8)
            } catch {
                return fail("write: \(error)")
            }
            if !shield.recheck().isEmpty { fail("recheck failed") }
            if connects(as: 300_001) { fail("a range added while the shield was up was not refused") }
            do {
                try shield.remove(
                    [Target(kind: .domain, value: "blocked.example")], context: ShieldContext(store: "games"))
            } catch {
                return fail("remove: \(error)")
            }
            if !connects(as: 100_001) { fail("uid 100001 still cut off after the shield was lifted") }
        }
    }

    /// Runs `body` on a thread of its own in a network namespace of its own (loopback up), with
    /// a command runner and a way to record failures; expects it to end within 90 s without any.
    private func inNetworkNamespace(
        _ body: @escaping @Sendable (CommandRunner, @escaping @Sendable (String) -> Void) -> Void
    ) {
        let failures = Mutex<[String]>([])
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            defer { done.signal() }
            let fail: @Sendable (String) -> Void = { text in failures.withLock { $0.append(text) } }
            // This thread (and what it starts) gets a network namespace of its own.
            guard stepgate_unshare_network() == 0 else {
                return fail("unshare: \(String(cString: strerror(errno)))")
            }
            let runner = CommandRunner()
            guard
                (try? runner.run(["/usr/sbin/ip", "link", "set", "lo", "up"], timeout: 10, shield: "test"))?
                    .status == 0
            else { return fail("ip link set lo up failed") }
            body(runner, fail)
        }
        thread.start()
        #expect(done.wait(timeout: .now() + 90) == .success)
        #expect(failures.withLock { $0 } == [])
    }
}
