/// Where each enabled scan element sits in one IIO scan (one sample of every enabled
/// channel), following the kernel and libiio 0.24: elements in index order, each aligned to
/// its own storage size. The scan is padded to its largest element, as the kernel does;
/// for the layouts accelerometers use (the 8-byte timestamp last) that padding is zero, so
/// it matches `iio_device_get_sample_size`.
public struct ScanLayout: Hashable, Sendable {
    /// One element of the scan.
    public struct Element: Hashable, Sendable {
        /// The channel id, e.g. `accel_x` or `timestamp`.
        public var id: String
        /// The `*_index` value that orders the scan.
        public var index: Int
        /// The storage format.
        public var type: ScanType
        /// Byte offset of the element within the scan.
        public var offset: Int
    }

    /// Enabled elements, in scan order, with their offsets.
    public private(set) var elements: [Element]
    /// Bytes per scan.
    public private(set) var scanSize: Int

    /// Lays out the given enabled elements (any order; they are sorted by index).
    public init(_ enabled: [(id: String, index: Int, type: ScanType)]) {
        var offset = 0
        var largest = 1
        elements = []
        for item in enabled.sorted(by: { $0.index < $1.index }) {
            let align = item.type.storageBytes
            if offset % align != 0 { offset += align - offset % align }
            elements.append(Element(id: item.id, index: item.index, type: item.type, offset: offset))
            offset += item.type.totalBytes
            largest = max(largest, align)
        }
        if offset % largest != 0 { offset += largest - offset % largest }
        scanSize = offset
    }

    mutating func replace(elements: [Element], scanSize: Int) {
        self.elements = elements
        self.scanSize = scanSize
    }

    /// The element with the given channel id.
    public func element(_ id: String) -> Element? { elements.first { $0.id == id } }
}
