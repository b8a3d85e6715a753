internal import StepDetection

/// The CSV layouts ``RecordingReader`` understands. The raw value is the name used on the
/// command line (`--format sensor-logger`).
public enum RecordingFormat: String, CaseIterable, Sendable, CustomStringConvertible {
    /// StepGate's own export: header `time_s,x_g,y_g,z_g` (seconds, g), extra columns allowed.
    case stepgate
    /// Bangle.js `accellog`: header `Time (ms),X,Y,Z[,Total]`, raw counts (8192 = 1 g) or g.
    case bangle
    /// Oxford Step Counter / Android: no header, `timestamp_ns,accuracy,x,y,z` in m/s².
    case oxford
    /// phyphox: quoted header `"Time (s)","Acceleration x (m/s^2)",…` separated by `,` `;` or TAB.
    case phyphox
    /// Sensor Logger: header `time,seconds_elapsed,z,y,x` or `time,z,y,x`, epoch ns, m/s².
    case sensorLogger = "sensor-logger"
    /// Physics Toolbox Sensor Suite g-Force Meter or Multi Record: `time,gFx,gFy,gFz,…` (s, g).
    case physicsToolbox = "physics-toolbox"
    /// AndroSensor: `ACCELEROMETER X (m/s²);…;Time since start in ms ;…` (after a `sep=;` line
    /// when separated by `;`), columns found by name, ms, m/s² with gravity.
    case androSensor = "androsensor"
    /// SensorLog (iOS): `…,accelerometerTimestamp_sinceReboot(s),accelerometerAccelerationX(G),…`,
    /// seconds since boot, g with gravity.
    case sensorLog = "sensorlog"
    /// Any delimited file whose columns the reader is told (``ColumnLayout``, `--columns`);
    /// never detected, and not a `--format` name.
    case columns

    /// The formats detection tries and `--format` names, in that order (all but ``columns``).
    public static let named: [RecordingFormat] = allCases.filter { $0 != .columns }

    /// The format a `--format` value or a manifest's `format` cell names; nil for ``columns``
    /// (a column layout must come with it) and for unknown names.
    public init?(name: String) {
        guard let format = RecordingFormat(rawValue: name), format != .columns else { return nil }
        self = format
    }

    /// The command-line name, for example `sensor-logger`.
    public var description: String { rawValue }
}

/// The unit of the axis columns of a recording.
///
/// Parsed from the command-line spellings `g`, `m/s2` (also `m/s^2`, `mps2`) and
/// `counts:<counts per g>` (for example `counts:8192`).
public enum AccelerationUnit: Sendable, Hashable, CustomStringConvertible, LosslessStringConvertible {
    /// Standard gravities.
    case g
    /// Metres per second squared (one g is ``standardGravity`` m/s²).
    case metersPerSecondSquared
    /// Raw sensor counts, `perG` counts to one g (Bangle.js: 8192).
    case counts(perG: Double)

    /// How many of this unit make one g.
    public var perG: Double {
        switch self {
        case .g: 1
        case .metersPerSecondSquared: standardGravity
        case .counts(let perG): perG
        }
    }

    /// The command-line spelling: `g`, `m/s2` or `counts:8192`.
    public var description: String {
        switch self {
        case .g: "g"
        case .metersPerSecondSquared: "m/s2"
        case .counts(let perG):
            perG == perG.rounded() && abs(perG) < 1e15 ? "counts:\(Int64(perG))" : "counts:\(perG)"
        }
    }

    /// Parses `g`, `m/s2`, `m/s^2`, `mps2` or `counts:<positive number>`; nil for anything else.
    public init?(_ text: String) {
        switch text.lowercased() {
        case "g":
            self = .g
        case "m/s2", "m/s^2", "mps2", "m/s²":
            self = .metersPerSecondSquared
        case let other where other.hasPrefix("counts:"):
            guard let perG = Double(other.dropFirst("counts:".count)), perG.isFinite, perG > 0 else {
                return nil
            }
            self = .counts(perG: perG)
        default:
            return nil
        }
    }

    /// Parses a unit like ``init(_:)``, throwing an ``RecordingError`` of kind `invalidUnit`
    /// that lists the accepted spellings.
    public static func parse(_ text: String) throws(RecordingError) -> AccelerationUnit {
        guard let unit = AccelerationUnit(text) else {
            throw RecordingError(
                kind: .invalidUnit,
                path: "",
                expected: "a unit: g, m/s2, mps2 or counts:<counts per g> (for example counts:8192)",
                found: "'\(text)'"
            )
        }
        return unit
    }
}
