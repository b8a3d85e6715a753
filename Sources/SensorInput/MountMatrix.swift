/// A sensor's mounting rotation: the 3×3 matrix that turns the sensor's axes into the
/// device's, from udev's `ACCEL_MOUNT_MATRIX` or the IIO `mount_matrix` /
/// `in_accel_mount_matrix` attribute (`"a, b, c; d, e, f; g, h, i"`, row by row).
public struct MountMatrix: Hashable, Sendable, CustomStringConvertible {
    /// The nine entries, row-major.
    public var rows: [[Float]]

    /// The identity: sensor axes are device axes.
    public static let identity = MountMatrix(uncheckedRows: [[1, 0, 0], [0, 1, 0], [0, 0, 1]])

    private init(uncheckedRows: [[Float]]) { rows = uncheckedRows }

    /// Parses `"a, b, c; d, e, f; g, h, i"` (spaces optional; NUL bytes and newlines around it
    /// ignored). Rejects anything that is not nine finite numbers, and the all-zero matrix.
    public init(parsing text: String) throws(MountMatrixError) {
        let trimmed = text.trimmingIIOWhitespace()
        let rowTexts = trimmed.split(separator: ";", omittingEmptySubsequences: false)
        guard rowTexts.count == 3 else {
            throw MountMatrixError(text: trimmed, reason: "expected 3 rows separated by ';'")
        }
        var rows: [[Float]] = []
        for rowText in rowTexts {
            let cells = rowText.split(separator: ",", omittingEmptySubsequences: false)
            guard cells.count == 3 else {
                throw MountMatrixError(
                    text: trimmed, reason: "expected 3 numbers separated by ',' in each row")
            }
            var row: [Float] = []
            for cell in cells {
                let cellText = String(cell).trimmingIIOWhitespace()
                guard let value = Float(cellText), value.isFinite else {
                    throw MountMatrixError(text: trimmed, reason: "'\(cellText)' is not a number")
                }
                row.append(value)
            }
            rows.append(row)
        }
        guard rows.contains(where: { $0.contains { $0 != 0 } }) else {
            throw MountMatrixError(text: trimmed, reason: "all entries are zero")
        }
        self.rows = rows
    }

    /// Whether this is the identity.
    public var isIdentity: Bool { self == .identity }

    /// Rotates a sensor-frame vector into the device frame.
    @inlinable
    public func apply(x: Float, y: Float, z: Float) -> (x: Float, y: Float, z: Float) {
        (
            rows[0][0] * x + rows[0][1] * y + rows[0][2] * z,
            rows[1][0] * x + rows[1][1] * y + rows[1][2] * z,
            rows[2][0] * x + rows[2][1] * y + rows[2][2] * z
        )
    }

    /// The kernel's text form, `"1, 0, 0; 0, 1, 0; 0, 0, 1"`.
    public var description: String {
        rows.map { row in
            row.map { $0 == $0.rounded() ? String(Int($0)) : String($0) }.joined(separator: ", ")
        }
        .joined(separator: "; ")
    }
}

/// A mount matrix string that could not be parsed.
public struct MountMatrixError: Error, Hashable, CustomStringConvertible {
    /// The text that was parsed.
    public var text: String
    /// What is wrong with it.
    public var reason: String

    /// The message shown to the user.
    public var description: String { "invalid mount matrix '\(text)': \(reason)" }
}
