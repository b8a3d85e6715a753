import Foundation
import Glibc
import Household
import StepGateTestSupport
import Testing

/// The daemon with an `mqtt` section against a real Mosquitto broker: retained state and Home
/// Assistant discovery, availability through a goodbye and through the will.
@Suite(
    "the daemon over MQTT (real broker)",
    .enabled(if: TestBroker.unavailableReason == nil, "\(TestBroker.unavailableReason ?? "")"),
    // One at a time: a broker or daemon started by one test while another waits for a
    // `daemon --check` to end can inherit that check's output pipe, and the wait then lasts as
    // long as the broker (a full parallel run took 195 s for the check test's 12 runs).
    .serialized, .timeLimit(.minutes(5)))
struct HouseholdDaemonTests {
    private static let acl = """
        user gate
        topic readwrite stepgate/#
        topic readwrite homeassistant/#

        user viewer
        topic read #

        user parent
        topic write stepgate/test/command
        topic read stepgate/test/#

        """

    private func config(_ folder: URL, broker: TestBroker, commands: Bool = false) throws -> String {
        let password = folder.appendingPathComponent("mqtt-password").path
        try "gate-secret\n".write(toFile: password, atomically: true, encoding: .utf8)
        chmod(password, 0o600)
        return """
            {
              "input": {"replay": "\(Fixtures.samples.appendingPathComponent("walk-front-pocket-303.csv").path)", "speed": 20},
              "policy": {"stores": {"games": {
                 "selection": {"domains": ["example.com"]},
                 "gate": {"goals": [{"steps": 50, "minutes": 1}]}}}},
              "stateDirectory": "\(folder.appendingPathComponent("state").path)",
              "controlSocket": "\(folder.appendingPathComponent("control.sock").path)",
              "shields": {"domains": {"browserPolicies": false, "path": "\(folder.appendingPathComponent("hosts").path)"}},
              "mqtt": {\(broker.connectionJSON), "username": "gate", "passwordFile": "\(password)",
                       "keepalive": 5, "topicPrefix": "stepgate/test", "commands": \(commands)}
            }
            """
    }

    @Test func stateAndDiscoveryAreRetainedAndAvailabilityFollowsTheDaemon() throws {
        let broker = try TestBroker(users: ["gate": "gate-secret", "viewer": "look"], acl: Self.acl)
        let folder = try Fixtures.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        try "127.0.0.1 localhost\n".write(
            toFile: folder.appendingPathComponent("hosts").path, atomically: true, encoding: .utf8)
        let daemon = try TestDaemon(folder: folder, config: try config(folder, broker: broker))
        // The walk unlocks the store (50 steps at 20 × speed).
        try daemon.wait(30, for: "the unlock") { $0["shielded"] as? Bool == false }

        // A viewer connecting afterwards gets everything from the retained messages.
        let (viewer, seen) = try testClient(
            broker, id: "viewer", user: ("viewer", "look"), subscribe: ["stepgate/test/#", "homeassistant/#"])
        defer { viewer.stop() }
        #expect(
            seen.wait(10) {
                $0.last("stepgate/test/store/games")?.text.contains(#""state":"unlocked""#) == true
            },
            "\(seen.messages.map(\.topic))\n\(daemon.log)")
        #expect(seen.last("stepgate/test/availability")?.text == "online")
        let status = try daemon.status()
        let today = try #require(status["stepsToday"] as? Int)
        #expect(today >= 50)
        // Steps are published as they change; the replay may still be counting.
        #expect(
            seen.wait(10) {
                guard let text = $0.last("stepgate/test/steps")?.text,
                    let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
                else { return false }
                return (object["today"] as? Int ?? 0) >= today
            })
        #expect(seen.wait { $0.messages.filter { $0.topic.hasPrefix("homeassistant/") }.count >= 5 })
        let discovery = seen.messages.filter { $0.topic.hasPrefix("homeassistant/") }.map(\.topic)
        #expect(discovery.contains { $0.hasSuffix("/games_unlocked/config") }, "\(discovery)")
        #expect(seen.last("stepgate/test/problems")?.text == #"{"count":0,"problems":[]}"#)
        #expect(daemon.log.contains("mqtt: connected"))

        // Killed, the daemon cannot say goodbye: the broker says offline for it (its will).
        daemon.kill(SIGKILL)
        #expect(seen.wait(10) { $0.last("stepgate/test/availability")?.text == "offline" })

        // Started again and stopped cleanly: online, then offline from its goodbye.
        let again = try TestDaemon(folder: folder, config: try config(folder, broker: broker))
        #expect(seen.wait(10) { $0.last("stepgate/test/availability")?.text == "online" })
        again.kill(SIGTERM)
        #expect(seen.wait(10) { $0.last("stepgate/test/availability")?.text == "offline" })
        #expect(!again.log.contains("mqtt: the broker refused"))
    }

    @Test func theGateRunsOnWithoutTheBrokerAndCatchesUpWhenItComes() throws {
        let broker = try TestBroker(users: ["gate": "gate-secret", "viewer": "look"], acl: Self.acl)
        broker.kill()
        let folder = try Fixtures.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        try "127.0.0.1 localhost\n".write(
            toFile: folder.appendingPathComponent("hosts").path, atomically: true, encoding: .utf8)
        let daemon = try TestDaemon(folder: folder, config: try config(folder, broker: broker))
        defer { daemon.kill(SIGKILL) }
        // Enforcement goes on: the walk unlocks with no broker.
        try daemon.wait(30, for: "the unlock without a broker") { $0["shielded"] as? Bool == false }
        #expect(daemon.log.contains("mqtt: "), "\(daemon.log)")
        // The gate says so (attack round 13: a port taken by something that fails TLS kept a
        // gate from its commands, and nothing at the gate showed it).
        let down = try daemon.status()["mqtt"] as? String ?? ""
        #expect(down.hasPrefix("not connected to 127.0.0.1:\(broker.port) since "), "\(down)")
        try broker.start()
        let (viewer, seen) = try testClient(
            broker, id: "viewer", user: ("viewer", "look"), subscribe: ["stepgate/test/#"])
        defer { viewer.stop() }
        // The daemon's reconnection pause doubles from 1 s; within 15 s it is back.
        #expect(
            seen.wait(15) {
                $0.last("stepgate/test/store/games")?.text.contains(#""state":"unlocked""#) == true
            },
            "\(daemon.log)\n\(broker.log)")
        #expect(seen.last("stepgate/test/availability")?.text == "online")
        #expect(try daemon.status()["mqtt"] as? String == "connected to 127.0.0.1:\(broker.port)")
        let text = try daemon.client(["status"])
        #expect(
            text.standardOutput.contains("mqtt: connected to 127.0.0.1:\(broker.port)"),
            "\(text.standardOutput)")
    }

    @Test func commandsAreTakenOnlyFromWhomTheBrokerLetsPublishThem() throws {
        let broker = try TestBroker(
            users: ["gate": "gate-secret", "viewer": "look", "parent": "in-charge"], acl: Self.acl, tls: true)
        let folder = try Fixtures.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        try "127.0.0.1 localhost\n".write(
            toFile: folder.appendingPathComponent("hosts").path, atomically: true, encoding: .utf8)
        let daemon = try TestDaemon(
            folder: folder, config: try config(folder, broker: broker, commands: true))
        try daemon.wait(30, for: "the unlock") { $0["shielded"] as? Bool == false }
        #expect(daemon.hostsBecome(blocked: false))
        let (parent, replies) = try testClient(
            broker, id: "parent", user: ("parent", "in-charge"), subscribe: ["stepgate/test/reply"])
        defer { parent.stop() }
        let (viewer, viewed) = try testClient(broker, id: "viewer", user: ("viewer", "look"))
        defer { viewer.stop() }
        #expect(replies.wait { $0.connected() } && viewed.wait { $0.connected() })
        let lock = #"{"command": "lock", "store": "games", "minutes": 5, "id": "p1"}"#

        // Someone who may only read: the broker drops the command, nothing changes.
        viewer.publish(MQTTMessage(topic: "stepgate/test/command", text: lock))
        usleep(1_500_000)
        #expect(try daemon.store("games")["shielded"] as? Bool == false)
        #expect(replies.messages.isEmpty)

        // The parent: shielded within a second, answered on the reply topic, journaled.
        let sent = Date()
        parent.publish(MQTTMessage(topic: "stepgate/test/command", text: lock))
        try daemon.wait(5, for: "the lock") { $0["shielded"] as? Bool == true }
        #expect(Date().timeIntervalSince(sent) < 1.5)
        #expect(daemon.hostsBecome(blocked: true))
        #expect(replies.wait { !$0.messages.isEmpty })
        let answer = try #require(replies.messages.first).text
        #expect(answer.hasPrefix(#"{"id":"p1","reply":{"#) && answer.contains(#""ok":true"#), "\(answer)")
        #expect(
            daemon.log.contains(#"mqtt stepgate/test/command (id p1): {"command":"lock""#), "\(daemon.log)")
        let owners = try daemon.store("games")["owners"] as? [String] ?? []
        #expect(owners.contains { $0.contains("mqtt stepgate/test/command") }, "\(owners)")

        // Delivered twice (at least once): carried out once, answered again with the first
        // answer (attack round 13: a repeat was dropped unanswered). A malformed command is
        // answered with what is wrong.
        parent.publish(MQTTMessage(topic: "stepgate/test/command", text: lock))
        parent.publish(
            MQTTMessage(
                topic: "stepgate/test/command", text: #"{"command": "lock", "store": "games", "id": "p2"}"#))
        #expect(replies.wait { $0.messages.count >= 3 }, "\(replies.messages.map(\.text))")
        usleep(300_000)
        var texts = replies.messages.map(\.text)
        let firsts = texts.filter { $0.contains(#""id":"p1""#) }
        #expect(firsts.count == 2 && Set(firsts).count == 1, "\(texts)")
        // Carried out once: the policy's one event line (the journaled answer quotes it too).
        #expect(
            daemon.log.components(separatedBy: "\nstepgate: owner-added games [lock:mqtt").count == 2,
            "\(daemon.log)")
        #expect(
            texts.contains { $0.contains(#""id":"p2""#) && $0.contains(#"\"minutes\" must be a number"#) },
            "\(texts)")

        // A command published retained would reach a gate again at every (re)subscription: it
        // is refused on every delivery, its first, live one too (the gate subscribes with MQTT
        // 5's retain as published), so a retained emergency or unlock is never carried out.
        try daemon.wait(5, for: "the lock") { $0["shielded"] as? Bool == true }
        parent.publish(
            MQTTMessage(
                topic: "stepgate/test/command",
                text: #"{"command": "emergency", "store": "games", "id": "r1"}"#,
                retain: true))
        #expect(
            replies.wait {
                $0.messages.contains {
                    $0.text.contains(#""id":"r1""#) && $0.text.contains("retained commands are ignored")
                }
            }, "\(replies.messages.map(\.text))")
        #expect(try daemon.store("games")["shielded"] as? Bool == true)
        daemon.kill(SIGTERM)
        let again = try TestDaemon(
            folder: folder, config: try config(folder, broker: broker, commands: true))
        defer { again.kill(SIGKILL) }
        #expect(
            replies.wait(10) {
                $0.messages.contains {
                    $0.text.contains(#""id":"r1""#) && $0.text.contains("retained commands are ignored")
                }
            })
        texts = replies.messages.map(\.text)
        #expect(texts.filter { $0.contains(#""id":"r1""#) }.count == 2, "\(texts)")
        #expect(again.log.contains("a retained command on stepgate/test/command was ignored"))
        // The retained command is cleared, so later tests of this broker do not see it.
        parent.publish(MQTTMessage(topic: "stepgate/test/command", payload: [], retain: true))
    }

    /// A sensor host walks 300-odd steps while the broker is restarted twice (losing every
    /// retained message each time); two gates taking their steps from it count exactly what it
    /// counted.
    @Test func twoGatesCountExactlyTheSensorsStepsThroughTwoBrokerRestarts() throws {
        let broker = try TestBroker(tls: true)
        let folder = try Fixtures.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        func config(_ name: String, input: String, share: Bool) throws -> (URL, String) {
            let home = folder.appendingPathComponent(name)
            try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
            try "127.0.0.1 localhost\n".write(
                toFile: home.appendingPathComponent("hosts").path, atomically: true, encoding: .utf8)
            return (
                home,
                """
                {
                  "input": \(input),
                  "policy": {"stores": {"games": {"selection": {"domains": ["example.com"]},
                     "gate": {"goals": [{"steps": 5000, "minutes": 1}]}}}},
                  "stateDirectory": "\(home.appendingPathComponent("state").path)",
                  "controlSocket": "\(home.appendingPathComponent("control.sock").path)",
                  "shields": {"domains": {"browserPolicies": false, "path": "\(home.appendingPathComponent("hosts").path)"}},
                  "mqtt": {\(broker.connectionJSON), "clientID": "\(name)", "keepalive": 5,
                           "topicPrefix": "stepgate/\(name)", "shareSteps": \(share)}
                }
                """
            )
        }
        // The gates first, so the walk's session is new to them (not a past they adopt).
        let gates = try ["desk", "tv"].map { name in
            let (home, text) = try config(name, input: #"{"mqtt": "stepgate/sensor"}"#, share: false)
            return try TestDaemon(folder: home, config: text)
        }
        defer { for gate in gates { gate.kill(SIGKILL) } }
        let walk = Fixtures.samples.appendingPathComponent("walk-front-pocket-303.csv").path
        let (home, text) = try config("sensor", input: #"{"replay": "\#(walk)", "speed": 10}"#, share: true)
        let sensor = try TestDaemon(folder: home, config: text)
        defer { sensor.kill(SIGKILL) }
        // The walk takes 17 s at 10 ×: the broker is killed and started again twice during it.
        for _ in 0..<2 {
            usleep(5_000_000)
            broker.kill()
            usleep(500_000)
            try broker.start()
        }
        func steps(_ daemon: TestDaemon) -> Int? { (try? daemon.status())?["stepsSinceStart"] as? Int }
        let deadline = Date().addingTimeInterval(40)
        while Date() < deadline, (try? sensor.status())?["input"] as? String != "ended" { usleep(200_000) }
        let counted = try #require(steps(sensor))
        #expect(counted > 250, "\(sensor.log)")
        for gate in gates {
            let until = Date().addingTimeInterval(20)
            while Date() < until, steps(gate) != counted { usleep(200_000) }
            #expect(steps(gate) == counted, "\(gate.log)")
            #expect(try gate.status()["stepsToday"] as? Int == counted)
        }
        // Both gates were cut off and came back: no step twice, none lost.
        #expect(gates.allSatisfy { $0.log.components(separatedBy: "mqtt: connected").count >= 3 })
    }

    /// The sensor host killed (SIGKILL) while its last steps are published but not yet in
    /// step-sessions.json (written 5 s after a step): started again, it reads the broker's
    /// retained total for that session before publishing its sessions again, keeps the larger,
    /// and never publishes the lower one from disk (which a gate that was away would take).
    @Test func aSensorKilledBeforeItWroteItsLastStepsNeverPublishesALowerTotal() throws {
        let broker = try TestBroker(tls: true)
        let folder = try Fixtures.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        try "127.0.0.1 localhost\n".write(
            toFile: folder.appendingPathComponent("hosts").path, atomically: true, encoding: .utf8)
        let walk = Fixtures.samples.appendingPathComponent("walk-front-pocket-303.csv").path
        let config = """
            {
              "input": {"replay": "\(walk)", "speed": 10},
              "policy": {"stores": {"games": {"selection": {"domains": ["example.com"]},
                 "gate": {"goals": [{"steps": 5000, "minutes": 1}]}}}},
              "stateDirectory": "\(folder.appendingPathComponent("state").path)",
              "controlSocket": "\(folder.appendingPathComponent("control.sock").path)",
              "shields": {"domains": {"browserPolicies": false, "path": "\(folder.appendingPathComponent("hosts").path)"}},
              "mqtt": {\(broker.connectionJSON), "clientID": "sensor", "keepalive": 5,
                       "topicPrefix": "stepgate/sensor", "shareSteps": true}
            }
            """
        let (viewer, seen) = try testClient(
            broker, id: "viewer", subscribe: ["stepgate/sensor/steps/session/+"])
        defer { viewer.stop() }
        #expect(seen.wait { $0.connected() })
        func totals(_ messages: ArraySlice<MQTTMessage>) -> [(session: String, total: Int)] {
            messages.compactMap { message in
                (try? StepSession.parse(message.payload)).map { ($0.session, $0.total) }
            }
        }
        let sensor = try TestDaemon(folder: folder, config: config)
        // Killed right after a new total reached the broker: the file is up to 5 s behind.
        #expect(seen.wait(30) { totals($0.messages[...]).contains { $0.total >= 100 } })
        let count = seen.messages.count
        #expect(seen.wait(10) { $0.messages.count > count })
        sensor.kill(SIGKILL)
        let published = try #require(totals(seen.messages[...]).max { $0.total < $1.total })
        let file = folder.appendingPathComponent("state/step-sessions.json").path
        let onDisk = try StepSessionFile.decode(Array(try Data(contentsOf: URL(fileURLWithPath: file))))
        let written = onDisk.first { $0.session == published.session }?.total ?? 0
        try #require(written < published.total, "the kill came after the last write: nothing to show")

        let before = seen.messages.count
        let again = try TestDaemon(folder: folder, config: config)
        defer { again.kill(SIGKILL) }
        #expect(
            seen.wait(10) { _ in
                again.log.contains(
                    "mqtt: the broker has session \(published.session) at \(published.total) steps")
            }, "\(again.log)")
        // Its next session is published, and nothing lower for the old one, ever.
        #expect(seen.wait(10) { totals($0.messages[before...]).contains { $0.session != published.session } })
        let old = totals(seen.messages[before...]).filter { $0.session == published.session }
        #expect(old.allSatisfy { $0.total >= published.total }, "\(old)")
        // And the larger total is written down (5 s after it was taken).
        #expect(
            seen.wait(15) { _ in
                let bytes = (try? Data(contentsOf: URL(fileURLWithPath: file))).map(Array.init) ?? []
                let sessions = (try? StepSessionFile.decode(bytes)) ?? []
                return sessions.first { $0.session == published.session }?.total == published.total
            })
        #expect(try again.status()["problems"] as? [String] == [], "\(again.log)")
    }

    @Test func checkSaysWhatMQTTWillDoAndRefusesStepsOverMQTTWithoutABroker() throws {
        let folder = try Fixtures.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let config = folder.appendingPathComponent("config.json").path
        func check(_ text: String) throws -> ProcessResult {
            try text.write(toFile: config, atomically: true, encoding: .utf8)
            return try runProcess(Fixtures.stepgateExecutable, ["daemon", "--check", "--config", config])
        }
        let base = """
              "policy": {"stores": {"games": {"selection": {"domains": ["example.com"]},
                 "gate": {"goals": [{"steps": 50, "minutes": 1}]}}}},
              "stateDirectory": "\(folder.appendingPathComponent("state").path)",
              "controlSocket": "\(folder.appendingPathComponent("control.sock").path)",
              "shields": {"domains": {"browserPolicies": false, "path": "\(folder.appendingPathComponent("hosts").path)"}}
            """
        let ca = folder.appendingPathComponent("ca.crt").path
        try "a CA certificate".write(toFile: ca, atomically: true, encoding: .utf8)
        let good = try check(
            """
            {"input": {"mqtt": "stepgate/pocket"},
             "mqtt": {"host": "broker.home", "tls": {"caFile": "\(ca)"}, "topicPrefix": "stepgate/desk", "commands": true},
            \(base)}
            """)
        #expect(good.status == 0, "\(good.standardError)")
        #expect(
            good.standardOutput.contains(
                "input: steps counted by the host publishing under stepgate/pocket, over MQTT"))
        #expect(
            good.standardOutput.contains(
                "mqtt: publishes steps and each store's state (retained) under stepgate/desk at broker.home:8883 (TLS)"
            ), "\(good.standardOutput)")
        #expect(
            good.standardOutput.contains("takes lock, skip and emergency commands from stepgate/desk/command")
        )
        #expect(
            good.standardOutput.contains("Home Assistant discovery under homeassistant/ (node id stepgate_"))
        let sensor = try check(
            """
            {"input": {"replay": "\(Fixtures.samples.appendingPathComponent("walk-front-pocket-303.csv").path)"},
             "mqtt": {"host": "broker.home", "tls": {"caFile": "\(ca)"}, "topicPrefix": "stepgate/pocket", "shareSteps": true, "node": "pocket"},
            \(base)}
            """)
        #expect(
            sensor.standardOutput.contains(
                "shares the steps it counts on stepgate/pocket/steps/session/SESSION for gates on other hosts (the broker's ACL must let this host read and write stepgate/pocket/steps/#, and no one else write there)"
            ), "\(sensor.standardOutput)\(sensor.standardError)")
        #expect(sensor.standardOutput.contains("(node id stepgate_pocket)"))
        // Attack round 12: over plain TCP, a gated user's own broker on the address (while the
        // real one restarts) got the gate's password, and gave it steps and an emergency unlock.
        for (input, extra, what) in [
            (#"{"mqtt": "stepgate/pocket"}"#, "", "steps over MQTT (input.mqtt)"),
            (#"{"replay": "walk.csv"}"#, #", "commands": true"#, "commands"),
            (#"{"replay": "walk.csv"}"#, #", "shareSteps": true"#, "shared steps"),
        ] {
            let plain = try check(
                #"{"input": \#(input), "mqtt": {"host": "127.0.0.1"\#(extra)},"# + base + "}")
            #expect(plain.status != 0)
            #expect(
                plain.standardError.contains(
                    "mqtt.tls: missing: \(what) need a broker the gate can be sure of"),
                "\(plain.standardError)")
        }
        let state = try check(
            #"{"input": {"replay": "walk.csv"}, "mqtt": {"host": "127.0.0.1"},"# + base + "}")
        #expect(!state.standardError.contains("mqtt.tls"), "\(state.standardError)")
        let socket = try check(
            #"{"input": {"mqtt": "p"}, "mqtt": {"socket": "\#(folder.path)/broker.sock"},"# + base + "}")
        #expect(socket.status == 0, "\(socket.standardError)")
        if geteuid() == 0 {
            // A socket in a folder the gated user could change: their broker could answer there.
            let theirs = folder.appendingPathComponent("theirs").path
            try FileManager.default.createDirectory(atPath: theirs, withIntermediateDirectories: false)
            chown(theirs, 65_534, 65_534)
            let planted = try check(
                #"{"input": {"mqtt": "p"}, "mqtt": {"socket": "\#(theirs)/mq.sock"},"# + base + "}")
            #expect(planted.status != 0)
            #expect(
                planted.standardError.contains("MQTT broker socket folder: unsafe folder \(theirs)"),
                "\(planted.standardError)")
            // Attack round 13: a CA file of the gated user's would vouch for their broker; a key
            // or password file they could read would let them take the gate's place.
            let theirCA = folder.appendingPathComponent("their-ca.crt").path
            try "a CA".write(toFile: theirCA, atomically: true, encoding: .utf8)
            chown(theirCA, 65_534, 65_534)
            let key = folder.appendingPathComponent("client.key").path
            try "a key".write(toFile: key, atomically: true, encoding: .utf8)
            chmod(key, 0o644)
            let password = folder.appendingPathComponent("password").path
            try "secret\n".write(toFile: password, atomically: true, encoding: .utf8)
            chmod(password, 0o600)
            chown(password, 65_534, 65_534)
            for (mqtt, expected) in [
                (#""tls": {"caFile": "\#(theirCA)"}"#, "mqtt.tls.caFile: \(theirCA) is owned by uid 65534"),
                (
                    #""tls": {"caFile": "\#(ca)", "certificateFile": "\#(ca)", "keyFile": "\#(key)"}"#,
                    "mqtt.tls.keyFile: \(key) is owned by uid 0, mode 644; expected a regular file of root's that no one else may write or read"
                ),
                (
                    #""tls": {"caFile": "\#(ca)"}, "username": "gate", "passwordFile": "\#(password)""#,
                    "mqtt.passwordFile: \(password) is owned by uid 65534"
                ),
            ] {
                let refused = try check(
                    #"{"input": {"mqtt": "p"}, "mqtt": {"host": "broker.home", \#(mqtt)},"# + base + "}")
                #expect(refused.status != 0)
                #expect(refused.standardError.contains(expected), "\(refused.standardError)")
            }
        }
        let missing = try check(#"{"input": {"mqtt": "stepgate/pocket"},"# + base + "}")
        #expect(missing.status != 0)
        #expect(
            missing.standardError.contains(
                #"input.mqtt: steps over MQTT need an "mqtt" section (the broker)"#),
            "\(missing.standardError)")
        let wildcard = try check(#"{"input": {"mqtt": "stepgate/+"}, "mqtt": {},"# + base + "}")
        #expect(
            wildcard.standardError.contains("input.mqtt: expected the sensor host's topic prefix"),
            "\(wildcard.standardError)")
    }
}
