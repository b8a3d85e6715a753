import Foundation
import StepDetection
import UnlockPolicy

/// A configuration file that cannot be used: the file, and what is wrong where.
struct ConfigurationFileError: Error, CustomStringConvertible {
    var path: String
    var message: String

    var description: String { "\(path): \(message)" }
}

/// Loads a detector configuration from JSON.
///
/// The file is either the detector object itself (`{"minimumPeak": 0.05, …}`) or a whole
/// StepGate configuration with a `"detector"` section. Absent keys take their defaults; unknown
/// keys, wrong types and out-of-range values are errors naming the key.
func loadDetectorConfiguration(path: String) throws -> DetectorConfiguration {
    guard let data = FileManager.default.contents(atPath: path) else {
        throw ConfigurationFileError(
            path: path, message: "cannot read the file (\(String(cString: strerror(errno))))")
    }
    do {
        try StrictJSON.validate(Array(data))
    } catch {
        throw ConfigurationFileError(path: path, message: "not valid JSON: \(error)")
    }
    let object: Any
    do {
        object = try JSONSerialization.jsonObject(with: data)
    } catch {
        throw ConfigurationFileError(path: path, message: "not valid JSON: \(jsonMessage(error))")
    }
    guard let dictionary = object as? [String: Any] else {
        throw ConfigurationFileError(path: path, message: "expected a JSON object at the top level")
    }
    var section = data
    var prefix = ""
    if let detector = dictionary["detector"] {
        guard detector is [String: Any] else {
            throw ConfigurationFileError(path: path, message: "'detector': expected an object")
        }
        section = try JSONSerialization.data(withJSONObject: detector)
        prefix = "detector."
    }
    let configuration: DetectorConfiguration
    do {
        configuration = try JSONDecoder().decode(DetectorConfiguration.self, from: section)
    } catch let error as DecodingError {
        throw ConfigurationFileError(path: path, message: describe(error, prefix: prefix))
    }
    do {
        try configuration.validate()
    } catch {
        throw ConfigurationFileError(path: path, message: prefix + error.description)
    }
    return configuration
}

/// Writes a detector configuration as pretty JSON with sorted keys.
func encodeDetectorConfiguration(_ configuration: DetectorConfiguration) -> String {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    guard let data = try? encoder.encode(configuration) else { return "{}" }
    return String(decoding: data, as: UTF8.self)
}

private func jsonMessage(_ error: any Error) -> String {
    let ns = error as NSError
    return (ns.userInfo[NSDebugDescriptionErrorKey] as? String) ?? ns.localizedDescription
}

private func describe(_ error: DecodingError, prefix: String) -> String {
    func path(_ context: DecodingError.Context) -> String {
        prefix + context.codingPath.map(\.stringValue).joined(separator: ".")
    }
    switch error {
    case .typeMismatch(let type, let context):
        return "'\(path(context))': expected \(typeName(type))"
    case .valueNotFound(let type, let context):
        return "'\(path(context))': expected \(typeName(type)), found null"
    case .keyNotFound(let key, let context):
        return "'\(path(context))': missing key '\(key.stringValue)'"
    case .dataCorrupted(let context):
        return (context.codingPath.isEmpty ? "" : "'\(path(context))': ") + context.debugDescription
    @unknown default:
        return "\(error)"
    }
}

private func typeName(_ type: Any.Type) -> String {
    switch type {
    case is Double.Type, is Float.Type: "a number"
    case is Int.Type: "a whole number"
    case is Bool.Type: "true or false"
    case is String.Type: "a string"
    default: "\(type)"
    }
}
