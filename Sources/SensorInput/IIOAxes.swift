internal import CLibIIO
import StepDetection

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The three acceleration channels of one device and how to turn their raw counts into g:
/// `(raw + offset) × scale` gives m/s² (the IIO ABI), divided by standard gravity, then
/// rotated by the mount matrix. Shared by the buffered and the polled reader.
struct IIOAxes {
    let channels: [OpaquePointer]
    let scales: [Double]
    let offsets: [Double]
    let matrix: MountMatrix
    let matrixSource: String

    init(device: OpaquePointer, context: IIOContext) throws(IIOError) {
        var channels: [OpaquePointer] = []
        var scales: [Double] = []
        var offsets: [Double] = []
        for axis in ["accel_x", "accel_y", "accel_z"] {
            guard let channel = IIODevice.channel(device, axis) else {
                throw IIOError(
                    code: ENODEV, operation: "iio_device_find_channel \(axis)",
                    subject: "\(IIODevice.displayName(device)) has no \(axis) input channel")
            }
            channels.append(channel)
            // The attribute text, not libiio's float-rounded iio_data_format.scale.
            let scaleText = IIODevice.channelAttribute(channel, "scale") ?? "1"
            guard let scale = Double(scaleText), scale.isFinite, scale != 0 else {
                throw IIOError(
                    code: EINVAL, operation: "parse \(axis) scale",
                    subject: "\(IIODevice.displayName(device)): scale '\(scaleText)' is not a number")
            }
            let offsetText = IIODevice.channelAttribute(channel, "offset") ?? "0"
            guard let offset = Double(offsetText), offset.isFinite else {
                throw IIOError(
                    code: EINVAL, operation: "parse \(axis) offset",
                    subject: "\(IIODevice.displayName(device)): offset '\(offsetText)' is not a number")
            }
            scales.append(scale)
            offsets.append(offset)
        }
        self.channels = channels
        self.scales = scales.map { $0 / standardGravity }
        self.offsets = offsets
        (matrix, matrixSource) = IIODeviceInfo.mountMatrix(device, context: context)
    }

    /// Raw counts of x, y, z to a sample in g, in the device frame.
    @inline(__always)
    func sample(timestamp: Int64, x: Int64, y: Int64, z: Int64) -> AccelerationSample {
        let gx = Float((Double(x) + offsets[0]) * scales[0])
        let gy = Float((Double(y) + offsets[1]) * scales[1])
        let gz = Float((Double(z) + offsets[2]) * scales[2])
        let r = matrix.apply(x: gx, y: gy, z: gz)
        return AccelerationSample(timestamp: timestamp, x: r.x, y: r.y, z: r.z)
    }

    /// Sets `sampling_frequency` to the available value nearest `requested` and returns the
    /// rate the device reports afterwards. Devices without the attribute keep their rate.
    static func setRate(_ device: OpaquePointer, requested: Double) throws(IIOError) -> Double? {
        guard IIODevice.hasAttribute(device, "sampling_frequency") else { return nil }
        let available = nearestAvailable(
            requested, in: IIODevice.attribute(device, "sampling_frequency_available") ?? "")
        let target = available ?? requested
        let current = IIODevice.attribute(device, "sampling_frequency").flatMap(Double.init)
        if current != target {
            try IIODevice.writeAttribute(device, "sampling_frequency", formatRate(target))
        }
        return IIODevice.attribute(device, "sampling_frequency").flatMap(Double.init) ?? target
    }

    /// The value of a `*_available` list nearest `requested` (ties: the higher one), or
    /// nil when the list is empty or a range (`[min step max]`, which is clamped).
    static func nearestAvailable(_ requested: Double, in list: String) -> Double? {
        let trimmed = list.trimmingIIOWhitespace()
        if trimmed.hasPrefix("[") {
            let parts = trimmed.dropFirst().dropLast().split(separator: " ").compactMap { Double($0) }
            guard parts.count == 3, parts[1] > 0 else { return nil }
            let steps = ((requested - parts[0]) / parts[1]).rounded()
            return min(parts[2], max(parts[0], parts[0] + steps * parts[1]))
        }
        let values = trimmed.split(separator: " ").compactMap { Double($0) }.filter { $0.isFinite && $0 > 0 }
        return values.min { a, b in
            let da = abs(a - requested)
            let db = abs(b - requested)
            return da == db ? a > b : da < db
        }
    }
}
