import Formatting
import Foundation
import StepDetection
import StepGateDaemon
import SystemFiles
import Tuning
import TypedJSON
import UnlockPolicy

/// Loads a detector configuration from JSON.
///
/// The file is either the detector object itself (`{"minimumPeak": 0.05, …}`) or a whole
/// StepGate configuration with a `"detector"` section. Absent keys take their defaults; unknown
/// keys, wrong types and out-of-range values are errors naming the key.
func loadDetectorConfiguration(path: String) throws -> DetectorConfiguration {
    let data = Data(try readConfigurationFile(path: path))
    do {
        try StrictJSON.validate(Array(data))
    } catch {
        throw ConfigurationFileError(path: path, message: "not valid JSON: \(error)")
    }
    let object: Any
    do {
        object = try JSONSerialization.jsonObject(with: data, options: .fragmentsAllowed)
    } catch {
        throw ConfigurationFileError(path: path, message: "not valid JSON: \(jsonMessage(error))")
    }
    guard let dictionary = object as? [String: Any] else {
        throw ConfigurationFileError(
            path: path, message: "expected a JSON object at the top level, found \(jsonText(object))")
    }
    var section = data
    var members = dictionary
    var prefix = ""
    if let detector = dictionary["detector"] {
        guard let detector = detector as? [String: Any] else {
            throw ConfigurationFileError(
                path: path, message: "'detector': expected an object, found \(jsonText(detector))")
        }
        section = try JSONSerialization.data(withJSONObject: detector)
        members = detector
        prefix = "detector."
    }
    let configuration: DetectorConfiguration
    do {
        configuration = try JSONDecoder().decode(DetectorConfiguration.self, from: section)
    } catch let error as DecodingError {
        // Foundation reports a number that does not fit its type (7.5 or 1e20 for a whole
        // number) without the key: find the key by decoding one member at a time.
        if case .dataCorrupted(let context) = error, context.codingPath.isEmpty,
            let culprit = culprit(in: members, prefix: prefix)
        {
            throw ConfigurationFileError(path: path, message: culprit)
        }
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

/// The first member of a detector object that does not decode on its own, described with its
/// key, the type expected and the value found; `nil` when every member decodes alone.
private func culprit(in object: [String: Any], prefix: String) -> String? {
    for key in object.keys.sorted() {
        guard let value = object[key],
            let data = try? JSONSerialization.data(withJSONObject: [key: value], options: .fragmentsAllowed)
        else { continue }
        do {
            _ = try JSONDecoder().decode(DetectorConfiguration.self, from: data)
        } catch {
            guard DetectorConfiguration.keys.contains(key) else {
                return (error as? DecodingError).map { describe($0, prefix: prefix) } ?? "\(error)"
            }
            let expected =
                key == "fillMissedSteps"
                ? "true or false" : ParameterSpace.integerKeys.contains(key) ? "a whole number" : "a number"
            return "'\(prefix)\(key)': expected \(expected), found \(jsonText(value))"
        }
    }
    return nil
}

/// A JSON value as JSON text, for messages (`7.5`, `1e+20`, `null`, `"text"`).
func jsonText(_ value: Any) -> String {
    if value is NSNull { return "null" }
    if let string = value as? String { return StrictJSON.quoted(string) }
    if value is [Any] { return "an array" }
    if value is [String: Any] { return "an object" }
    guard let data = try? JSONSerialization.data(withJSONObject: [value], options: .fragmentsAllowed) else {
        return "\(value)"
    }
    return String(decoding: data.dropFirst().dropLast(), as: UTF8.self)
}

/// The operating system's reason behind a Foundation file error ("Permission denied"), rather
/// than Foundation's own text ("The operation could not be completed").
func systemReason(_ error: any Error) -> String {
    var current: NSError? = error as NSError
    while let ns = current {
        if ns.domain == NSPOSIXErrorDomain { return String(cString: strerror(Int32(ns.code))) }
        current = ns.userInfo[NSUnderlyingErrorKey] as? NSError
    }
    if let posix = error as? POSIXError { return String(cString: strerror(posix.code.rawValue)) }
    let ns = error as NSError
    if ns.domain == NSCocoaErrorDomain {
        switch ns.code {
        case NSFileNoSuchFileError, NSFileReadNoSuchFileError: return "No such file or directory"
        case NSFileReadNoPermissionError, NSFileWriteNoPermissionError: return "Permission denied"
        case NSFileWriteOutOfSpaceError: return "No space left on device"
        case NSFileWriteVolumeReadOnlyError: return "Read-only file system"
        default: break
        }
    }
    return ns.localizedDescription
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
