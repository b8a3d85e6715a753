public import StepDetection
import StepHistoryStore
import TypedJSON

/// Loads a detector configuration from JSON.
///
/// The file is either the detector object itself (`{"minimumPeak": 0.05, …}`) or a whole
/// StepGate configuration with a `"detector"` section. Absent keys take their defaults; unknown
/// keys, wrong types and out-of-range values are errors naming the key.
public func loadDetectorConfiguration(path: String) throws -> DetectorConfiguration {
    let (bytes, document) = try readConfigurationDocument(path: path)
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
