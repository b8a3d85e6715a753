public import Formatting

/// A one-line progress bar on standard error, drawn only when standard error is a terminal.
public struct ProgressBar {
    private let label: String
    private let enabled: Bool
    private var lastPercent = -1

    public init(label: String, enabled: Bool = isTerminal(2)) {
        self.label = label
        self.enabled = enabled
    }

    /// Redraws when the percentage changed.
    public mutating func update(done: Int, total: Int) {
        guard enabled, total > 0 else { return }
        let percent = min(100, done * 100 / total)
        guard percent != lastPercent else { return }
        lastPercent = percent
        let width = 30
        let filled = percent * width / 100
        let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
        printRaw("\r\(label) [\(bar)] \(leftPad(String(percent), 3))%")
    }

    /// Clears the line.
    public func finish() {
        guard enabled, lastPercent >= 0 else { return }
        printRaw("\r" + String(repeating: " ", count: label.count + 40) + "\r")
    }

    private func printRaw(_ text: String) {
        var line = text
        line.withUTF8 { buffer in _ = writeAll(2, buffer) }
    }
}
