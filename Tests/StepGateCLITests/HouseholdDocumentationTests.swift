import Foundation
import Glibc
import Household
import StepGateTestSupport
import Testing

/// docs/household.md's marked examples: a fenced block right after `<!-- household: NAME -->`.
/// The test runs them as they are written, with only the machine's places moved to its own
/// (paths, the broker's host name and port), so a copied example cannot be wrong.
enum HouseholdDocumentation {
    static let marker = "<!-- household: "

    static func blocks(in text: String) -> [String: String] {
        var blocks: [String: String] = [:]
        var pending: String?
        var current: String?
        var inBlock = false
        var lines: [String] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if line.hasPrefix("```") {
                if inBlock, let name = current { blocks[name] = lines.joined(separator: "\n") + "\n" }
                current = inBlock ? nil : pending
                pending = nil
                lines = []
                inBlock.toggle()
            } else if inBlock {
                lines.append(line)
            } else if line.hasPrefix(marker), line.hasSuffix(" -->") {
                pending = String(line.dropFirst(marker.count).dropLast(4))
            } else if !line.trimmingCharacters(in: .whitespaces).isEmpty {
                pending = nil
            }
        }
        return blocks
    }

    static func blocks() throws -> [String: String] {
        blocks(
            in: try String(
                contentsOf: Fixtures.packageRoot.appendingPathComponent("docs/household.md"), encoding: .utf8)
        )
    }
}

@Suite(
    "docs/household.md's household, as written (real broker)",
    .enabled(if: TestBroker.unavailableReason == nil, "\(TestBroker.unavailableReason ?? "")"),
    .enabled(
        if: geteuid() == 0 && getpwnam("mosquitto") != nil,
        "needs root and the user mosquitto (Debian package mosquitto): the broker runs as packaged"),
    .serialized, .timeLimit(.minutes(5)))
struct HouseholdDocumentationTests {
    @Test func markedBlocksAreFound() {
        let text = """
            <!-- household: a.conf -->
            ```text
            one
            two
            ```
            <!-- household: lost -->
            prose between: the mark is for the next block only
            ```json
            not marked
            ```
            """
        #expect(HouseholdDocumentation.blocks(in: text) == ["a.conf": "one\ntwo\n"])
    }

    /// The broker's configuration and ACL, the sensor host's and both gates' sections, run as the
    /// document gives them with Debian's mosquitto as packaged (started as root, it drops to its
    /// user `mosquitto` before opening its listeners and files): the gates count exactly the
    /// sensor host's steps, one over TLS and one over the broker's socket in its own folder; a
    /// parent commands them; Home Assistant sees every entity and cannot command; nobody lists a
    /// problem; and a second login with a gate's account takes the gate's connection.
    @Test func theDocumentedHouseholdWorksTheFirstTime() throws {
        let blocks = try HouseholdDocumentation.blocks()
        for name in ["broker.conf", "acl", "sensor.json", "desk.json", "tv.json"] {
            try #require(blocks[name] != nil, "docs/household.md has no block marked '\(name)'")
        }
        let root = try Fixtures.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: root) }
        let mosquitto = try #require(getpwnam("mosquitto")).pointee
        let (uid, gid) = (mosquitto.pw_uid, mosquitto.pw_gid)

        // The broker's machine: /etc/mosquitto and /run/mosquitto, moved into the test's folder.
        let machine = root.appendingPathComponent("broker")
        let etc = machine.appendingPathComponent("etc/mosquitto")
        let run = machine.appendingPathComponent("run/mosquitto")
        for folder in [etc.appendingPathComponent("certs"), etc.appendingPathComponent("conf.d")] {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        }
        // As the package's service makes it at every start.
        try FileManager.default.createDirectory(at: run, withIntermediateDirectories: true)
        chmod(run.path, 0o740)
        chown(run.path, uid, 0)
        let port = try TestBroker.freePort()
        func moved(_ text: String) -> String {
            text.replacingOccurrences(of: "/etc/mosquitto/", with: etc.path + "/")
                .replacingOccurrences(of: "/run/mosquitto/", with: run.path + "/")
        }
        let brokerConf = try #require(blocks["broker.conf"])
        #expect(brokerConf.contains("listener 8883\n"))
        try moved(brokerConf).replacingOccurrences(
            of: "listener 8883\n", with: "listener \(port) 127.0.0.1\n"
        )
        .write(to: etc.appendingPathComponent("conf.d/stepgate.conf"), atomically: true, encoding: .utf8)
        let acl = try #require(blocks["acl"])
        try acl.write(to: etc.appendingPathComponent("acl"), atomically: true, encoding: .utf8)
        // Every account the ACL names, with the password NAME-secret.
        let accounts = acl.split(separator: "\n").filter { $0.hasPrefix("user ") }.map {
            String($0.dropFirst(5))
        }
        #expect(Set(accounts) == ["pocket-pi", "desk", "tv", "parent", "homeassistant"])
        let passwd = etc.appendingPathComponent("passwd").path
        for (index, name) in accounts.enumerated() {
            let status = try TestBroker.run(
                ["/usr/bin/mosquitto_passwd"] + (index == 0 ? ["-c"] : []) + [
                    "-b", passwd, name, "\(name)-secret",
                ])
            try #require(status == 0)
        }
        // A CA and the broker's certificate (for localhost, where the test's broker.home is).
        let certs = etc.appendingPathComponent("certs").path
        for command in [
            "req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=household-CA -keyout \(certs)/ca.key -out \(certs)/ca.crt",
            "req -newkey rsa:2048 -nodes -subj /CN=localhost -addext subjectAltName=DNS:localhost -keyout \(certs)/broker.key -out \(certs)/broker.csr",
            "x509 -req -in \(certs)/broker.csr -CA \(certs)/ca.crt -CAkey \(certs)/ca.key -CAcreateserial -days 1 -copy_extensions copy -out \(certs)/broker.crt",
        ] {
            try #require(
                try TestBroker.run(["/usr/bin/openssl"] + command.split(separator: " ").map(String.init)) == 0
            )
        }
        // What the document says the broker's user must read.
        for file in [passwd, etc.appendingPathComponent("acl").path, "\(certs)/broker.key"] {
            chown(file, 0, gid)
            chmod(file, 0o640)
        }
        let log = machine.appendingPathComponent("broker.log").path
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        chown(log, uid, gid)
        // Debian's /etc/mosquitto/mosquitto.conf, with the test's log and no persistence.
        let broker = try TestBroker(
            folder: machine, port: port,
            configuration: """
                persistence false
                log_dest file \(log)
                log_type all
                include_dir \(etc.path)/conf.d

                """)
        #expect(broker.log.contains("Opening unix listen socket"), "\(broker.log)")

        // The hosts: /etc/stepgate moved into each one's folder, broker.home to the test's broker.
        func host(_ name: String, block: String, input: String? = nil) throws -> TestDaemon {
            let home = root.appendingPathComponent(name)
            let etcStepGate = home.appendingPathComponent("etc/stepgate")
            try FileManager.default.createDirectory(at: etcStepGate, withIntermediateDirectories: true)
            try FileManager.default.copyItem(
                atPath: "\(certs)/ca.crt", toPath: etcStepGate.appendingPathComponent("ca.crt").path)
            let password = etcStepGate.appendingPathComponent("mqtt-password").path
            try "\(name)-secret\n".write(toFile: password, atomically: true, encoding: .utf8)
            chmod(password, 0o600)
            try "127.0.0.1 localhost\n".write(
                toFile: home.appendingPathComponent("hosts").path, atomically: true, encoding: .utf8)
            let section = moved(block).replacingOccurrences(
                of: "/etc/stepgate/", with: etcStepGate.path + "/"
            )
            .replacingOccurrences(
                of: #""host": "broker.home""#, with: #""host": "localhost", "port": \#(port)"#)
            return try TestDaemon(
                folder: home,
                config: """
                    {
                    \(section),
                    \(input.map { #""input": \#($0),"# } ?? "")
                      "policy": {"stores": {"games": {"selection": {"domains": ["example.com"]},
                         "gate": {"goals": [{"steps": 5000, "minutes": 1}]}}}},
                      "stateDirectory": "\(home.appendingPathComponent("state").path)",
                      "controlSocket": "\(home.appendingPathComponent("control.sock").path)",
                      "shields": {"domains": {"browserPolicies": false, "path": "\(home.appendingPathComponent("hosts").path)"}}
                    }
                    """)
        }
        // The gates first, so the walk's session is new to them (not a past they adopt).
        let desk = try host("desk", block: try #require(blocks["desk.json"]))
        defer { desk.kill(SIGKILL) }
        let tv = try host("tv", block: try #require(blocks["tv.json"]))
        defer { tv.kill(SIGKILL) }
        let walk = Fixtures.samples.appendingPathComponent("walk-front-pocket-303.csv").path
        let sensor = try host(
            "pocket-pi", block: try #require(blocks["sensor.json"]),
            input: #"{"replay": "\#(walk)", "speed": 10}"#)
        defer { sensor.kill(SIGKILL) }

        func status(_ daemon: TestDaemon) -> [String: Any] { (try? daemon.status()) ?? [:] }
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline, status(sensor)["input"] as? String != "ended" { usleep(200_000) }
        let counted = try #require(status(sensor)["stepsSinceStart"] as? Int)
        #expect(counted > 250, "\(sensor.log)")
        for gate in [desk, tv] {
            let until = Date().addingTimeInterval(20)
            while Date() < until, status(gate)["stepsSinceStart"] as? Int != counted { usleep(200_000) }
            #expect(status(gate)["stepsSinceStart"] as? Int == counted, "\(gate.log)\n\(broker.log)")
        }
        #expect(status(tv)["mqtt"] as? String == "connected to \(run.path)/mosquitto.sock")
        #expect(status(desk)["mqtt"] as? String == "connected to localhost:\(port) (TLS)")

        // Home Assistant: every entity of the three, and the gates' state; it cannot command.
        let (assistant, seen) = try testClient(
            broker, id: "homeassistant", user: ("homeassistant", "homeassistant-secret"),
            subscribe: ["homeassistant/#", "stepgate/#"], caFile: "\(certs)/ca.crt")
        defer { assistant.stop() }
        #expect(
            seen.wait(10) { received in
                ["desk", "tv", "pocket-pi"].allSatisfy { node in
                    received.messages.contains {
                        $0.topic == "homeassistant/sensor/stepgate_\(node)/steps_today/config"
                    }
                        && received.last("stepgate/\(node)/availability")?.text == "online"
                }
            }, "\(seen.messages.map(\.topic))")
        #expect(seen.wait { $0.last("stepgate/desk/steps")?.text.contains(#""today":\#(counted)"#) == true })
        assistant.publish(
            MQTTMessage(topic: "stepgate/tv/command", text: #"{"command": "status", "id": "ha"}"#))
        #expect(
            seen.wait { _ in
                broker.log.contains("Denied PUBLISH from homeassistant")
                    && broker.log.contains("'stepgate/tv/command'")
            },
            "\(broker.log)")

        // A parent: commands both gates, and is answered.
        let (parent, replies) = try testClient(
            broker, id: "parent", user: ("parent", "parent-secret"), subscribe: ["stepgate/+/reply"],
            caFile: "\(certs)/ca.crt")
        defer { parent.stop() }
        #expect(replies.wait { $0.connected() })
        for gate in ["desk", "tv"] {
            parent.publish(
                MQTTMessage(
                    topic: "stepgate/\(gate)/command",
                    text: #"{"command": "lock", "store": "games", "minutes": 5, "id": "p-\#(gate)"}"#))
            #expect(
                replies.wait {
                    $0.last("stepgate/\(gate)/reply").map {
                        $0.text.contains(#""id":"p-\#(gate)""#) && $0.text.contains(#""ok":true"#)
                    }
                        == true
                }, "\(replies.messages.map(\.text))")
        }
        #expect(replies.messages.allSatisfy { !$0.text.contains(#""id":"ha""#) })
        // Nobody lists a problem: the sensor read its sessions back, both gates get totals.
        for daemon in [sensor, desk, tv] {
            #expect(status(daemon)["problems"] as? [String] == [], "\(daemon.log)")
        }

        // use_username_as_clientid: a second login with the desk's account takes its connection,
        // and cannot write the desk's command topic either.
        let (intruder, intruded) = try testClient(
            broker, id: "anything", user: ("desk", "desk-secret"), caFile: "\(certs)/ca.crt")
        #expect(intruded.wait { $0.connected() })
        intruder.publish(
            MQTTMessage(topic: "stepgate/desk/command", text: #"{"command": "status", "id": "self"}"#))
        #expect(
            seen.wait(20) { _ in
                desk.log.contains("mqtt: the broker closed this gate's connection 3 times in a minute")
            },
            "\(desk.log)")
        #expect(seen.wait { _ in broker.log.contains("Denied PUBLISH from desk") }, "\(broker.log)")
        intruder.stop()
        #expect(seen.wait(15) { _ in (status(desk)["mqtt"] as? String)?.hasPrefix("connected") == true })
    }
}
