@preconcurrency import Glibc
package import TypedJSON

/// A configuration file that cannot be used: the file, and what is wrong where.
public struct ConfigurationFileError: Error, Hashable, CustomStringConvertible {
    public var path: String
    public var message: String
    /// Where in the file, when known (from 1).
    public var line: Int?
    public var column: Int?

    public init(path: String, message: String, line: Int? = nil, column: Int? = nil) {
        self.path = path
        self.message = message
        self.line = line
        self.column = column
    }

    /// A JSON problem in the file at `path` (its bytes), as `FILE:LINE:COLUMN: key.path: what`:
    /// a syntax error where reading stopped, any other at the value its key path names (or the
    /// nearest enclosing one, for a missing key).
    package init(path: String, bytes: [UInt8], document: JSONDocument?, error: JSONPathError) {
        var message = error.description
        var place: (line: Int, column: Int)?
        if let offset = error.offset {
            place = JSONDocument.location(of: offset, in: bytes)
            message = error.messageWithoutOffset
        } else {
            place = document?.location(of: error.path)
        }
        self.init(path: path, message: message, line: place?.line, column: place?.column)
    }

    public var description: String {
        guard let line, let column else { return "\(path): \(message)" }
        return "\(path):\(line):\(column): \(message)"
    }
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

/// A configuration file read and parsed by the strict JSON reader (duplicate keys refused,
/// `true`, `1` and `1.0` kept apart), with its bytes for locating later errors; a syntax error
/// names the file, line and column.
package func readConfigurationDocument(path: String) throws(ConfigurationFileError) -> (
    bytes: [UInt8], document: JSONDocument
) {
    let bytes = try readConfigurationFile(path: path)
    do throws(JSONPathError) {
        return (bytes, try JSONDocument.parse(bytes: bytes))
    } catch {
        throw ConfigurationFileError(path: path, bytes: bytes, document: nil, error: error)
    }
}
