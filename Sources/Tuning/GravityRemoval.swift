public import StepDetection

/// Gravity taken out of total acceleration by an orientation estimate of its own, to measure the
/// detector on gravity-removed input with the truth of recordings that include gravity
/// (`stepgate eval --remove-gravity`).
///
/// Gravity's direction at each sample is the direction of the mean acceleration over a
/// *centred* window of ``window`` seconds; 1 g along it is subtracted, as a phone's
/// linear-acceleration sensor subtracts its 1 g gravity estimate. Centred, so the estimate does
/// not lag a change of posture or the start of a walk; long (several strides), so a walk's own
/// acceleration averages out of it; on the vector, before any magnitude, so it is not the
/// detector's own high-pass. Without a gyroscope it cannot follow rotation faster than the
/// window: a swinging wrist's or a thigh's turn stays in the result as acceleration, where a
/// phone's fusion would take it out. The gravity-removed recordings of those placements are
/// harder than a phone's export.
public enum GravityRemoval {
    /// Length of the centred window, in seconds.
    public static let window = 4.0

    /// `samples` (in g, time-ordered) with gravity removed.
    public static func removingGravity(
        _ samples: [AccelerationSample], window: Double = GravityRemoval.window
    ) -> [AccelerationSample] {
        let n = samples.count
        // Prefix sums, so each window's mean costs two subtractions.
        var sums = [SIMD3<Double>](repeating: .zero, count: n + 1)
        for (i, s) in samples.enumerated() {
            sums[i + 1] = sums[i] + SIMD3(Double(s.x), Double(s.y), Double(s.z))
        }
        let half = Int64(window * 5e8)
        var low = 0
        var high = 0
        return samples.map { s in
            while samples[low].timestamp < s.timestamp &- half { low += 1 }
            while high < n && samples[high].timestamp <= s.timestamp &+ half { high += 1 }
            let mean = (sums[high] - sums[low]) / Double(high - low)
            let length = (mean * mean).sum().squareRoot()
            let gravity = length > 0 ? mean / length : .zero
            return AccelerationSample(
                timestamp: s.timestamp, x: s.x - Float(gravity.x), y: s.y - Float(gravity.y),
                z: s.z - Float(gravity.z))
        }
    }
}
