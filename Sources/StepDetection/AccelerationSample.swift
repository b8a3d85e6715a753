/// One accelerometer reading: a timestamp on its source's monotonic timeline and the
/// acceleration along the device's three axes, in g, gravity included.
///
/// One g is 9.80665 m/s². Readers convert every source to this form once, at the boundary,
/// so the detector never sees raw counts or m/s².
@frozen
public struct AccelerationSample: Sendable, Hashable {
    /// Nanoseconds on one monotonic timeline of the source (IIO: `in_timestamp`; CSV: the
    /// file's time column). Only differences between timestamps matter.
    public var timestamp: Int64
    /// Acceleration along x, in g.
    public var x: Float
    /// Acceleration along y, in g.
    public var y: Float
    /// Acceleration along z, in g.
    public var z: Float

    @inlinable
    public init(timestamp: Int64, x: Float, y: Float, z: Float) {
        self.timestamp = timestamp
        self.x = x
        self.y = y
        self.z = z
    }

    /// The Euclidean norm of the acceleration vector, in g.
    @inlinable @inline(__always)
    public var magnitude: Float { (x * x + y * y + z * z).squareRoot() }
}

/// Standard gravity, in m/s² per g.
public let standardGravity: Double = 9.806_65
