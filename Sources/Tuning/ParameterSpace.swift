public import Foundation
public import StepDetection
public import StepHistoryStore
import TypedJSON

/// The bounds of one tunable detector parameter.
public struct ParameterBounds: Sendable, Hashable {
    /// The parameter's key in ``DetectorConfiguration`` (`minimumPeak`, …).
    public var key: String
    public var minimum: Double
    public var maximum: Double
    /// Whether the parameter takes whole numbers (`stepsToConfirm`, `maximumSkippedPeaks`).
    public var isInteger: Bool

    public init(key: String, minimum: Double, maximum: Double, isInteger: Bool = false) {
        self.key = key
        self.minimum = minimum
        self.maximum = maximum
        self.isInteger = isInteger
    }

    /// The parameter value at `unit` in `0...1` of the range (rounded for integers).
    public func value(atUnit unit: Double) -> Double {
        let u = min(1, max(0, unit))
        let raw = minimum + u * (maximum - minimum)
        return isInteger ? raw.rounded() : raw
    }

    /// Where `value` lies in the range, as a fraction in `0...1`.
    public func unit(of value: Double) -> Double {
        maximum > minimum ? min(1, max(0, (value - minimum) / (maximum - minimum))) : 0
    }
}

/// A problem with a parameter space file: the file, where, the key and what was expected (the
/// same error as any configuration file's).
public typealias ParameterSpaceError = ConfigurationFileError

/// The box the tuner searches: bounds for some detector parameters. Parameters not in the
/// space keep the starting configuration's values.
///
/// As JSON: `{"minimumPeak": {"min": 0.03, "max": 0.1}, "stepsToConfirm": {"min": 6, "max": 12,
/// "integer": true}}`. Integer parameters are always integer; `"integer"` may be omitted.
public struct ParameterSpace: Sendable, Hashable {
    /// The parameters, in the order searched and reported.
    public var parameters: [ParameterBounds]

    public init(parameters: [ParameterBounds]) { self.parameters = parameters }

    /// Number of dimensions.
    public var count: Int { parameters.count }

    /// The parameters StepGate's tuning found to matter, with bounds around the plausible
    /// range (see docs/tuning.md). The filters and the sample rate are left out: they change
    /// little and cost the most to vary.
    public static let `default` = ParameterSpace(parameters: [
        ParameterBounds(key: "lowPassCutoff", minimum: 1.6, maximum: 2.8),
        ParameterBounds(key: "envelopeTime", minimum: 0.5, maximum: 2),
        ParameterBounds(key: "peakThreshold", minimum: 0.4, maximum: 1.0),
        ParameterBounds(key: "minimumPeak", minimum: 0.03, maximum: 0.1),
        ParameterBounds(key: "regularityTolerance", minimum: 0.15, maximum: 0.45),
        ParameterBounds(key: "stepsToConfirm", minimum: 6, maximum: 12, isInteger: true),
        ParameterBounds(key: "strideThreshold", minimum: 0.75, maximum: 1.05),
        ParameterBounds(key: "periodCorrelation", minimum: 0.3, maximum: 0.7),
        ParameterBounds(key: "halfPeriodCorrelation", minimum: 0.2, maximum: 0.6),
        ParameterBounds(key: "shortBoutCorrelation", minimum: 0.85, maximum: 0.99),
        ParameterBounds(key: "resumeCorrelation", minimum: 0.2, maximum: 0.6),
    ])

    /// Keys that can be searched: the numeric parameters of ``DetectorConfiguration``.
    public static let tunableKeys: [String] = DetectorConfiguration.keys.filter { $0 != "fillMissedSteps" }

    /// Keys taking whole numbers.
    public static let integerKeys: Set<String> = [
        "stepsToConfirm", "maximumSkippedPeaks", "minimumBoutSteps",
    ]

    /// Parses a space file. Errors name the file and the key.
    public static func parse(json data: Data, path: String) throws(ParameterSpaceError) -> ParameterSpace {
        let bytes = Array(data)
        let document: JSONDocument
        do {
            document = try JSONDocument.parse(bytes: bytes)
        } catch {
            let place = error.offset.map { JSONDocument.location(of: $0, in: bytes) }
            throw ParameterSpaceError(
                path: path, message: error.messageWithoutOffset, line: place?.line, column: place?.column)
        }
        /// An error at `key` (the whole file when empty), with its line and column.
        func failure(_ key: String, _ message: String) -> ParameterSpaceError {
            let place = document.location(of: key)
            return ParameterSpaceError(
                path: path, message: key.isEmpty ? message : "\(key): \(message)", line: place?.line,
                column: place?.column)
        }
        guard case .object = document.value else {
            throw failure(
                "",
                "expected a JSON object of parameters, e.g. {\"minimumPeak\": {\"min\": 0.03, \"max\": 0.1}}, "
                    + "found \(document.value.excerpt)")
        }
        let entries: [String: RawEntry]
        do {
            entries = try JSONDecoding.decode([String: RawEntry].self, from: document.value)
        } catch {
            throw failure(error.path, error.message)
        }
        guard !entries.isEmpty else {
            throw failure("", "expected at least one parameter")
        }
        for key in entries.keys.sorted() where !tunableKeys.contains(key) {
            let hint =
                key == "fillMissedSteps"
                ? "a true/false parameter cannot be searched; set it in --config"
                : "expected one of: \(tunableKeys.joined(separator: ", "))"
            throw failure(key, "unknown parameter: \(hint)")
        }
        var parameters: [ParameterBounds] = []
        // Search in the configuration's declaration order, so a file's key order does not matter.
        for key in tunableKeys {
            guard let entry = entries[key] else { continue }
            let (low, high) = (entry.min, entry.max)
            guard low.isFinite && high.isFinite && low <= high else {
                throw failure(key, "expected min ≤ max, found min \(low), max \(high)")
            }
            if integerKeys.contains(key) && entry.integer == false {
                throw failure("\(key).integer", "this parameter takes whole numbers")
            }
            let isInteger = integerKeys.contains(key) || entry.integer == true
            if isInteger && (low != low.rounded() || high != high.rounded()) {
                throw failure(key, "expected whole-number bounds, found \(low)...\(high)")
            }
            // Each end of the range must be valid for the parameter on its own (defaults elsewhere).
            for end in [low, high] {
                var probe = DetectorConfiguration()
                probe[parameter: key] = end
                do {
                    try probe.validate()
                } catch  where error.key == key {
                    throw failure(key, "\(jsonNumber(end)) is out of range: expected \(error.expected)")
                } catch {}
            }
            parameters.append(ParameterBounds(key: key, minimum: low, maximum: high, isInteger: isInteger))
        }
        return ParameterSpace(parameters: parameters)
    }

    /// One parameter's entry as written in the file.
    struct RawEntry: Decodable {
        var min: Double
        var max: Double
        var integer: Bool?

        private enum Key: String, CodingKey { case min, max, integer }

        init(from decoder: any Decoder) throws {
            let any = try decoder.container(keyedBy: AnyKey.self)
            for key in any.allKeys where Key(rawValue: key.stringValue) == nil {
                throw DecodingError.dataCorruptedError(
                    forKey: key, in: any, debugDescription: "unknown field; expected min, max, integer")
            }
            let c = try decoder.container(keyedBy: Key.self)
            min = try c.decode(Double.self, forKey: .min)
            max = try c.decode(Double.self, forKey: .max)
            integer = try c.decodeIfPresent(Bool.self, forKey: .integer)
        }
    }

    struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// The JSON form, keys in search order.
    public var json: String {
        var lines: [String] = []
        for p in parameters {
            var line = "  \"\(p.key)\": {\"min\": \(jsonNumber(p.minimum)), \"max\": \(jsonNumber(p.maximum))"
            if p.isInteger { line += ", \"integer\": true" }
            lines.append(line + "}")
        }
        return "{\n" + lines.joined(separator: ",\n") + "\n}\n"
    }

    /// `base` with the parameters set from a point of the unit cube.
    public func configuration(at point: [Double], base: DetectorConfiguration) -> DetectorConfiguration {
        var configuration = base
        for (bounds, unit) in zip(parameters, point) {
            configuration[parameter: bounds.key] = bounds.value(atUnit: unit)
        }
        return configuration
    }

    /// Where `configuration` lies in the unit cube (clamped to the bounds).
    public func point(of configuration: DetectorConfiguration) -> [Double] {
        parameters.map { $0.unit(of: configuration[parameter: $0.key]) }
    }
}

func jsonNumber(_ value: Double) -> String {
    value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : "\(value)"
}

extension DetectorConfiguration {
    /// A numeric parameter by its JSON key (integers as `Double`; `fillMissedSteps` as 0 or 1).
    /// Setting an unknown key does nothing.
    public subscript(parameter key: String) -> Double {
        get {
            switch key {
            case "sampleRate": sampleRate
            case "maximumGap": maximumGap
            case "highPassCutoff": highPassCutoff
            case "lowPassCutoff": lowPassCutoff
            case "envelopeTime": envelopeTime
            case "peakThreshold": peakThreshold
            case "minimumPeak": minimumPeak
            case "minimumStepInterval": minimumStepInterval
            case "maximumStepInterval": maximumStepInterval
            case "regularityTolerance": regularityTolerance
            case "stepsToConfirm": Double(stepsToConfirm)
            case "fillMissedSteps": fillMissedSteps ? 1 : 0
            case "strideThreshold": strideThreshold
            case "maximumSkippedPeaks": Double(maximumSkippedPeaks)
            case "amplitudeRatio": amplitudeRatio
            case "periodCorrelation": periodCorrelation
            case "halfPeriodCorrelation": halfPeriodCorrelation
            case "minimumBoutSteps": Double(minimumBoutSteps)
            case "shortBoutCorrelation": shortBoutCorrelation
            case "longChainCorrelation": longChainCorrelation
            case "resumeTime": resumeTime
            case "resumeCorrelation": resumeCorrelation
            case "continuationCorrelation": continuationCorrelation
            case "sinusoidCorrelation": sinusoidCorrelation
            case "minimumImpactRatio": minimumImpactRatio
            case "correlationWindow": correlationWindow
            default: .nan
            }
        }
        set {
            switch key {
            case "sampleRate": sampleRate = newValue
            case "maximumGap": maximumGap = newValue
            case "highPassCutoff": highPassCutoff = newValue
            case "lowPassCutoff": lowPassCutoff = newValue
            case "envelopeTime": envelopeTime = newValue
            case "peakThreshold": peakThreshold = newValue
            case "minimumPeak": minimumPeak = newValue
            case "minimumStepInterval": minimumStepInterval = newValue
            case "maximumStepInterval": maximumStepInterval = newValue
            case "regularityTolerance": regularityTolerance = newValue
            case "stepsToConfirm": stepsToConfirm = Int(newValue.rounded())
            case "fillMissedSteps": fillMissedSteps = newValue >= 0.5
            case "strideThreshold": strideThreshold = newValue
            case "maximumSkippedPeaks": maximumSkippedPeaks = Int(newValue.rounded())
            case "amplitudeRatio": amplitudeRatio = newValue
            case "periodCorrelation": periodCorrelation = newValue
            case "halfPeriodCorrelation": halfPeriodCorrelation = newValue
            case "minimumBoutSteps": minimumBoutSteps = Int(newValue.rounded())
            case "shortBoutCorrelation": shortBoutCorrelation = newValue
            case "longChainCorrelation": longChainCorrelation = newValue
            case "resumeTime": resumeTime = newValue
            case "resumeCorrelation": resumeCorrelation = newValue
            case "continuationCorrelation": continuationCorrelation = newValue
            case "sinusoidCorrelation": sinusoidCorrelation = newValue
            case "minimumImpactRatio": minimumImpactRatio = newValue
            case "correlationWindow": correlationWindow = newValue
            default: break
            }
        }
    }
}
