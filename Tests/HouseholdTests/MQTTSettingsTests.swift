import Foundation
import Household
import StepGateTestSupport
import Testing
import TypedJSON

@Suite struct MQTTSettingsTests {
    private func parse(_ text: String) throws -> MQTTSettings? {
        let document = try JSONDocument.parse(bytes: Array(text.utf8))
        return try MQTTSettings.parse(document.value, host: "den")
    }

    private func error(_ text: String) -> JSONPathError? {
        do {
            _ = try parse(text)
            return nil
        } catch let error as JSONPathError {
            return error
        } catch {
            return JSONPathError(path: "?", message: "\(error)")
        }
    }

    @Test func defaultsNameTheHost() throws {
        let settings = try #require(try parse("{}"))
        #expect(settings.broker.address == .tcp(host: "localhost", port: 1883))
        #expect(settings.broker.clientID == "stepgate-den")
        #expect(settings.topicPrefix == "stepgate/den")
        #expect(settings.discoveryPrefix == "homeassistant")
        #expect(settings.broker.keepalive == 30)
        #expect(!settings.commands)
        #expect(try parse(#"{"commands": true}"#)?.commands == true)
        #expect(
            try parse(#"{"socket": "/run/mosquitto/mqtt.sock", "discoveryPrefix": false}"#)?.broker.address
                == .unixSocket("/run/mosquitto/mqtt.sock"))
    }

    @Test func mistakesNameTheKey() {
        #expect(error(#"{"socket": "/s", "port": 1}"#)?.path == "mqtt.socket")
        #expect(error(#"{"port": 0}"#)?.path == "mqtt.port")
        #expect(error(#"{"port": 1883.5}"#)?.path == "mqtt.port")
        #expect(error(#"{"keepalive": 2}"#)?.path == "mqtt.keepalive")
        #expect(error(#"{"topicPrefix": "a/+/b"}"#)?.path == "mqtt.topicPrefix")
        #expect(error(#"{"topicPrefix": "a//b"}"#)?.path == "mqtt.topicPrefix")
        #expect(error(#"{"topicPrefix": "/a"}"#)?.path == "mqtt.topicPrefix")
        #expect(error(#"{"discoveryPrefix": true}"#)?.path == "mqtt.discoveryPrefix")
        #expect(
            error(#"{"brokr": "x"}"#)?.message.hasPrefix("unknown key; expected one of: clientID") == true)
        #expect(error(#"{"passwordFile": "/etc/x"}"#)?.message == "a password needs a username")
        #expect(error(#"{"tls": {}}"#)?.path == "mqtt.tls.caFile")
        #expect(
            error(#"{"tls": {"caFile": "/nonexistent/ca.crt"}}"#)?.message.contains(
                "cannot read /nonexistent/ca.crt") == true)
        #expect(error("[]")?.path == "mqtt")
        #expect(error(#"{"commands": 1}"#)?.path == "mqtt.commands")
    }

    @Test func thePasswordIsReadFromAFileOnlyItsOwnerMayRead() throws {
        try withTemporaryFolder { folder in
            let file = folder.appendingPathComponent("password").path
            try "s3cret\nignored\n".write(toFile: file, atomically: true, encoding: .utf8)
            chmod(file, 0o600)
            let settings = try #require(try parse(#"{"username": "gate", "passwordFile": "\#(file)"}"#))
            #expect(settings.broker.username == "gate")
            #expect(settings.broker.password == "s3cret")
            #expect(settings.broker.address == .tcp(host: "localhost", port: 1883))
            chmod(file, 0o644)
            let refused = error(#"{"username": "gate", "passwordFile": "\#(file)"}"#)
            #expect(refused?.path == "mqtt.passwordFile")
            #expect(
                refused?.message.contains("readable by every user (mode 644)") == true,
                "\(String(describing: refused))")
            try "".write(toFile: file, atomically: true, encoding: .utf8)
            chmod(file, 0o600)
            #expect(
                error(#"{"username": "gate", "passwordFile": "\#(file)"}"#)?.message.contains("is empty")
                    == true)
        }
    }

    @Test func tlsMovesTheDefaultPortAndWantsBothCertificateAndKey() throws {
        try withTemporaryFolder { folder in
            let ca = folder.appendingPathComponent("ca.crt").path
            try "x".write(toFile: ca, atomically: true, encoding: .utf8)
            let settings = try #require(try parse(#"{"host": "broker", "tls": {"caFile": "\#(ca)"}}"#))
            #expect(settings.broker.address == .tcp(host: "broker", port: 8883))
            #expect(settings.broker.tls == MQTTBroker.TLS(caFile: ca))
            #expect(error(#"{"tls": {"caFile": "\#(ca)", "keyFile": "\#(ca)"}}"#)?.path == "mqtt.tls")
        }
    }
}
