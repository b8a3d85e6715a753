/// Turns gravity-removed ("linear") acceleration into the signal the detector expects.
///
/// With gravity included, the magnitude |g + a| is about 1 g + the component of `a` along
/// gravity (the vertical bounce of each step), for accelerations well below 1 g. With gravity
/// removed, |a| is a different signal: rectified (every excursion, up or down, is positive),
/// so it has peaks at twice the step rate and none of the sign of the bounce. Gravity cannot be
/// put back (its direction is gone), but the bounce can be found: it is the direction along
/// which walking moves the sensor most. This stage keeps a running covariance of the three axes
/// (time constant `time`, by each sample's own interval, so irregular input is fine), follows
/// its principal axis by one power-iteration step per sample, and returns
/// 1 g + the acceleration along that axis — the same form as the magnitude of total
/// acceleration, so everything downstream is unchanged.
public struct GravityFreeProjection: Sendable {
    @usableFromInline var xx: Float = 0
    @usableFromInline var yy: Float = 0
    @usableFromInline var zz: Float = 0
    @usableFromInline var xy: Float = 0
    @usableFromInline var xz: Float = 0
    @usableFromInline var yz: Float = 0
    @usableFromInline var axis = SIMD3<Float>(0, 0, 1)
    @usableFromInline var lastTime: Int64 = 0
    @usableFromInline var started = false
    /// 1 / time constant, per nanosecond.
    @usableFromInline let rate: Double

    /// - Parameter time: Time constant of the running covariance, in seconds.
    public init(time: Double = 2) {
        rate = 1 / (time * 1e9)
    }

    /// The principal axis followed, a unit vector (sign arbitrary but continuous).
    public var principalAxis: SIMD3<Float> { axis }

    /// Feeds one sample; returns 1 g + its acceleration along the principal axis, in g.
    ///
    /// - Complexity: O(1), no allocation.
    @inlinable @inline(__always)
    public mutating func value(_ s: AccelerationSample) -> Float {
        var alpha: Float = 1
        if started {
            let dt = Double(max(0, s.timestamp &- lastTime))
            alpha = Float(min(1, dt * rate))
        }
        started = true
        lastTime = s.timestamp
        xx += alpha * (s.x * s.x - xx)
        yy += alpha * (s.y * s.y - yy)
        zz += alpha * (s.z * s.z - zz)
        xy += alpha * (s.x * s.y - xy)
        xz += alpha * (s.x * s.z - xz)
        yz += alpha * (s.y * s.z - yz)
        let v = SIMD3<Float>(
            xx * axis.x + xy * axis.y + xz * axis.z,
            xy * axis.x + yy * axis.y + yz * axis.z,
            xz * axis.x + yz * axis.y + zz * axis.z)
        let norm = (v * v).sum().squareRoot()
        if norm > 1e-12 { axis = v / norm }
        return 1 + (SIMD3(s.x, s.y, s.z) * axis).sum()
    }

    /// Forgets all history.
    public mutating func reset() {
        xx = 0
        yy = 0
        zz = 0
        xy = 0
        xz = 0
        yz = 0
        started = false
    }
}
