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
    let bytes = try readConfigurationFile(path: path)
    let document: JSONDocument
    do {
        document = try JSONDocument.parse(bytes: bytes)
    } catch {
        throw ConfigurationFileError(path: path, bytes: bytes, document: nil, error: error)
    }
    guard case .object(let members) = document.value else {
        throw ConfigurationFileError(
            path: path, message: "expected a JSON object at the top level, found \(document.value.excerpt)")
    }
    var section = document.value
    var sectionPath = ""
    if let detector = members.first(where: { $0.0 == "detector" })?.1 {
        section = detector
        sectionPath = "detector"
    }
    do throws(JSONPathError) {
        let configuration = try JSONDecoding.decode(
            DetectorConfiguration.self, from: section, path: sectionPath)
        do {
            try configuration.validate()
        } catch {
            throw JSONPathError(
                path: sectionPath.isEmpty ? error.key : "\(sectionPath).\(error.key)",
                message: "expected \(error.expected), found \(error.found)")
        }
        return configuration
    } catch {
        throw ConfigurationFileError(path: path, bytes: bytes, document: document, error: error)
    }
}

/// Writes a detector configuration as pretty JSON with sorted keys.
func encodeDetectorConfiguration(_ configuration: DetectorConfiguration) -> String {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    guard let data = try? encoder.encode(configuration) else { return "{}" }
    return String(decoding: data, as: UTF8.self)
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
