public import Foundation
import Glibc

/// A Mosquitto broker for a test, on a loopback port of its own, with a generated
/// configuration: no persistence (a restart forgets retained messages, as a broker that lost
/// its disk would), password file and ACL when given. Killed when the value goes.
public final class TestBroker {
    /// Why no broker can be started here; nil when one can.
    public static var unavailableReason: String? {
        for tool in ["/usr/sbin/mosquitto", "/usr/bin/mosquitto_passwd"]
        where !FileManager.default.isExecutableFile(atPath: tool) {
            return "\(tool) is missing (Debian packages mosquitto, mosquitto-clients)"
        }
        return nil
    }

    public let folder: URL
    public let port: Int
    /// With `tls`, the test CA's certificate (what a client checks the broker against).
    public private(set) var caFile: String?
    private let configPath: String
    private var process: BackgroundProcess?

    /// `users`: name → password (anonymous clients are then refused). `acl`: the ACL file's
    /// text (Mosquitto's `user NAME` / `topic read|write|readwrite FILTER` lines).
    /// With `tls`, the listener speaks TLS only, with a certificate for `localhost` signed by a
    /// CA made for the test (openssl, RSA 2048, valid one day).
    public init(users: [String: String] = [:], acl: String? = nil, tls: Bool = false) throws {
        folder = try TemporaryFolders.make("broker")
        port = try TestBroker.freePort()
        var config = [
            "listener \(port) 127.0.0.1", "persistence false", "log_dest file \(folder.path)/broker.log",
            "log_type all", "allow_anonymous \(users.isEmpty)", "set_tcp_nodelay true",
        ]
        // As root, Mosquitto drops to the user "mosquitto", who cannot read the test's folder.
        if geteuid() == 0 { config.append("user root") }
        if tls {
            let f = folder.path
            for command in [
                "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=StepGate-test-CA -keyout \(f)/ca.key -out \(f)/ca.crt",
                "openssl req -newkey rsa:2048 -nodes -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout \(f)/server.key -out \(f)/server.csr",
                "openssl x509 -req -in \(f)/server.csr -CA \(f)/ca.crt -CAkey \(f)/ca.key -CAcreateserial -days 1 -copy_extensions copy -out \(f)/server.crt",
            ] {
                let status = try TestBroker.run(
                    ["/usr/bin/openssl"] + command.split(separator: " ").dropFirst().map(String.init))
                guard status == 0 else { throw TestBrokerError("\(command) failed (\(status))") }
            }
            config += ["cafile \(f)/ca.crt", "certfile \(f)/server.crt", "keyfile \(f)/server.key"]
            caFile = "\(f)/ca.crt"
        }
        if !users.isEmpty {
            let passwords = folder.appendingPathComponent("passwords").path
            for (index, (name, password)) in users.sorted(by: { $0.key < $1.key }).enumerated() {
                let status = try TestBroker.run(
                    ["/usr/bin/mosquitto_passwd"] + (index == 0 ? ["-c"] : []) + [
                        "-b", passwords, name, password,
                    ])
                guard status == 0 else { throw TestBrokerError("mosquitto_passwd failed (\(status))") }
            }
            config.append("password_file \(passwords)")
        }
        if let acl {
            let path = folder.appendingPathComponent("acl").path
            try acl.write(toFile: path, atomically: true, encoding: .utf8)
            config.append("acl_file \(path)")
        }
        configPath = folder.appendingPathComponent("mosquitto.conf").path
        try (config.joined(separator: "\n") + "\n").write(
            toFile: configPath, atomically: true, encoding: .utf8)
        try start()
    }

    /// A broker with a configuration of the test's own (its listeners, files and user), in
    /// `folder`, listening on `port` of 127.0.0.1 (where ``start()`` waits for it); `folder` is
    /// removed with the broker.
    public init(folder: URL, port: Int, configuration: String) throws {
        self.folder = folder
        self.port = port
        configPath = folder.appendingPathComponent("mosquitto.conf").path
        try configuration.write(toFile: configPath, atomically: true, encoding: .utf8)
        try start()
    }

    deinit {
        process = nil
        TemporaryFolders.remove(folder)
    }

    /// Starts the broker (again, on the same port) and waits until it accepts connections.
    public func start() throws {
        process = try BackgroundProcess(["/usr/sbin/mosquitto", "-c", configPath])
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if TestBroker.accepts(port) { return }
            usleep(20_000)
        }
        throw TestBrokerError("the broker did not listen on port \(port) within 10 s: \(log)")
    }

    /// The members of a daemon's `mqtt` section that reach this broker (TLS with the test CA
    /// when it has one): `"host": …, "port": …` and `"tls": …`.
    public var connectionJSON: String {
        if let caFile {
            return #""host": "localhost", "port": \#(port), "tls": {"caFile": "\#(caFile)"}"#
        }
        return #""host": "127.0.0.1", "port": \#(port)"#
    }

    /// Kills the broker (SIGKILL: nothing is saved, clients see the connection drop).
    public func kill() { process = nil }

    /// The broker's log so far.
    public var log: String {
        (try? String(contentsOfFile: folder.appendingPathComponent("broker.log").path, encoding: .utf8)) ?? ""
    }

    /// A TCP port of 127.0.0.1 that no one listens on now.
    public static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        guard bound else {
            throw TestBrokerError("cannot find a free port: \(String(cString: strerror(errno)))")
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    private static func accepts(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    /// Runs a program to its end; its exit status.
    public static func run(_ arguments: [String]) throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: arguments[0])
        process.arguments = Array(arguments.dropFirst())
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        return process.terminationStatus
    }
}

public struct TestBrokerError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
