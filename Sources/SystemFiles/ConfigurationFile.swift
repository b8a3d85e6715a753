@preconcurrency import Glibc

/// A configuration file that cannot be used: the file, and what is wrong where.
public struct ConfigurationFileError: Error, CustomStringConvertible {
    public var path: String
    public var message: String

    public init(path: String, message: String) {
        self.path = path
        self.message = message
    }

    public var description: String { "\(path): \(message)" }
}

/// The bytes of a configuration or script file, or an error saying why they cannot be read
/// (missing, a folder, no permission), never a Foundation debug string.
public func readConfigurationFile(path: String) throws(ConfigurationFileError) -> [UInt8] {
    let descriptor = open(path, O_RDONLY | O_CLOEXEC)
    guard descriptor >= 0 else {
        throw ConfigurationFileError(
            path: path, message: "cannot read the file: \(String(cString: strerror(errno)))")
    }
    defer { close(descriptor) }
    var status = stat()
    if fstat(descriptor, &status) == 0 && (status.st_mode & S_IFMT) == S_IFDIR {
        throw ConfigurationFileError(path: path, message: "this is a folder; expected a file")
    }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        if count == 0 { break }
        if count < 0 {
            if errno == EINTR { continue }
            throw ConfigurationFileError(
                path: path, message: "cannot read the file: \(String(cString: strerror(errno)))")
        }
        bytes += chunk[0..<count]
    }
    return bytes
}
