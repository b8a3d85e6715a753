import Formatting

/// A small SVG document builder: a value you append shapes to, then `render()`.
///
/// Coordinates are in SVG user units (pixels at 100 %), y growing downwards. Text is escaped;
/// numbers are written with at most two decimals so files stay small.
public struct SVGDocument: Sendable, Hashable {
    public var width: Double
    public var height: Double
    private var body: [String] = []

    public init(width: Double, height: Double) {
        self.width = width
        self.height = height
    }

    /// Text anchoring.
    public enum Anchor: String, Sendable {
        case start, middle, end
    }

    /// A rectangle.
    public mutating func rect(
        x: Double, y: Double, width: Double, height: Double, fill: String, stroke: String? = nil,
        opacity: Double? = nil
    ) {
        var s =
            "<rect x=\"\(n(x))\" y=\"\(n(y))\" width=\"\(n(max(0, width)))\" height=\"\(n(max(0, height)))\""
        s += " fill=\"\(escape(fill))\""
        if let stroke { s += " stroke=\"\(escape(stroke))\"" }
        if let opacity { s += " fill-opacity=\"\(n(opacity))\"" }
        body.append(s + "/>")
    }

    /// A straight line.
    public mutating func line(
        x1: Double, y1: Double, x2: Double, y2: Double, stroke: String, width: Double = 1, dash: String? = nil
    ) {
        var s = "<line x1=\"\(n(x1))\" y1=\"\(n(y1))\" x2=\"\(n(x2))\" y2=\"\(n(y2))\""
        s += " stroke=\"\(escape(stroke))\" stroke-width=\"\(n(width))\""
        if let dash { s += " stroke-dasharray=\"\(escape(dash))\"" }
        body.append(s + "/>")
    }

    /// A polyline through `points`.
    public mutating func polyline(
        _ points: [(x: Double, y: Double)], stroke: String, width: Double = 1.5, dash: String? = nil
    ) {
        guard !points.isEmpty else { return }
        var s = "<polyline fill=\"none\" stroke=\"\(escape(stroke))\" stroke-width=\"\(n(width))\""
        s += " stroke-linejoin=\"round\""
        if let dash { s += " stroke-dasharray=\"\(escape(dash))\"" }
        s += " points=\""
        var first = true
        for p in points {
            if !first { s += " " }
            first = false
            s += n(p.x) + "," + n(p.y)
        }
        body.append(s + "\"/>")
    }

    /// A circle.
    public mutating func circle(x: Double, y: Double, radius: Double, fill: String, stroke: String? = nil) {
        var s = "<circle cx=\"\(n(x))\" cy=\"\(n(y))\" r=\"\(n(radius))\" fill=\"\(escape(fill))\""
        if let stroke { s += " stroke=\"\(escape(stroke))\"" }
        body.append(s + "/>")
    }

    /// An unfilled circle.
    public mutating func ring(x: Double, y: Double, radius: Double, stroke: String, width: Double = 2.5) {
        body.append(
            "<circle cx=\"\(n(x))\" cy=\"\(n(y))\" r=\"\(n(radius))\" fill=\"none\" stroke=\"\(escape(stroke))\" stroke-width=\"\(n(width))\"/>"
        )
    }

    /// A closed path from `points` (for markers such as triangles).
    public mutating func polygon(_ points: [(x: Double, y: Double)], fill: String) {
        let list = points.map { n($0.x) + "," + n($0.y) }.joined(separator: " ")
        body.append("<polygon points=\"\(list)\" fill=\"\(escape(fill))\"/>")
    }

    /// Text.
    public mutating func text(
        _ string: String, x: Double, y: Double, size: Double = 13, anchor: Anchor = .start,
        weight: String? = nil, fill: String = "#222", rotate: Double? = nil, halo: Bool = false
    ) {
        var s =
            "<text x=\"\(n(x))\" y=\"\(n(y))\" font-size=\"\(n(size))\" text-anchor=\"\(anchor.rawValue)\""
        s += " fill=\"\(escape(fill))\""
        if let weight { s += " font-weight=\"\(escape(weight))\"" }
        if let rotate { s += " transform=\"rotate(\(n(rotate)) \(n(x)) \(n(y)))\"" }
        // A white outline under the glyphs keeps a label readable over lines and dots.
        if halo {
            s += " stroke=\"white\" stroke-width=\"3\" paint-order=\"stroke\" stroke-linejoin=\"round\""
        }
        body.append(s + ">\(escape(string))</text>")
    }

    /// A `<title>` for the whole document (shown as a tooltip, read by screen readers).
    public mutating func title(_ string: String) {
        body.insert("<title>\(escape(string))</title>", at: 0)
    }

    /// The document as text.
    public func render() -> String {
        var s = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        s += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(n(width))\" height=\"\(n(height))\""
        s += " viewBox=\"0 0 \(n(width)) \(n(height))\""
        s += " font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n"
        s += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
        for element in body { s += element + "\n" }
        return s + "</svg>\n"
    }
}

/// A number for SVG: at most two decimals, no trailing zeros.
func n(_ value: Double) -> String {
    guard value.isFinite else { return "0" }
    var s = fixed(value, 2)
    if s.contains(".") {
        while s.hasSuffix("0") { s.removeLast() }
        if s.hasSuffix(".") { s.removeLast() }
    }
    return s == "-0" ? "0" : s
}

/// Escapes text for XML content and attributes.
func escape(_ text: String) -> String {
    var out = ""
    for c in text {
        switch c {
        case "&": out += "&amp;"
        case "<": out += "&lt;"
        case ">": out += "&gt;"
        case "\"": out += "&quot;"
        case "'": out += "&apos;"
        default: out.append(c)
        }
    }
    return out
}

/// "Nice" axis ticks: multiples of a step of 1, 2, 2.5 or 5 × 10ⁿ inside `low...high`, the
/// step chosen to give the number of ticks closest to `count`.
public func niceTicks(low: Double, high: Double, count: Int = 6) -> [Double] {
    guard low.isFinite, high.isFinite else { return [] }
    let (a, b) = low == high ? (low - 1, high + 1) : (min(low, high), max(low, high))
    let step = niceTickStep(low: a, high: b, count: count)
    let first = (a / step - 1e-9).rounded(.up)
    let last = (b / step + 1e-9).rounded(.down)
    guard last >= first, last - first < 1000 else { return [a, b] }
    return stride(from: first, through: last, by: 1).map { value in
        let v = value * step
        return abs(v) < step * 1e-9 ? 0 : v
    }
}

/// The step ``niceTicks(low:high:count:)`` uses.
public func niceTickStep(low: Double, high: Double, count: Int = 6) -> Double {
    let span = abs(high - low)
    guard span > 0, span.isFinite else { return 1 }
    let base = niceStep(span / Double(max(1, count - 1)))
    var best = base
    var bestMiss = Int.max
    for step in [base / 2.5, base / 2, base, base * 2, base * 2.5].map({ niceStep($0 * (1 - 1e-9)) }) {
        let ticks = Int((high / step + 1e-9).rounded(.down) - (low / step - 1e-9).rounded(.up)) + 1
        let miss = abs(ticks - count)
        if miss < bestMiss || (miss == bestMiss && step > best) {
            best = step
            bestMiss = miss
        }
    }
    return best
}

/// The nice step (1, 2, 2.5 or 5 × 10ⁿ) at or above `raw`.
public func niceStep(_ raw: Double) -> Double {
    guard raw > 0, raw.isFinite else { return 1 }
    var magnitude = 1.0
    while magnitude * 10 <= raw { magnitude *= 10 }
    while magnitude > raw { magnitude /= 10 }
    for factor in [1.0, 2, 2.5, 5, 10] where factor * magnitude >= raw * (1 - 1e-9) {
        return factor * magnitude
    }
    return 10 * magnitude
}

/// A tick label: as few decimals as the step needs.
public func tickLabel(_ value: Double, step: Double) -> String {
    var decimals = 0
    var s = step
    while decimals < 6 && abs(s - s.rounded()) > 1e-9 * max(1, abs(s)) {
        s *= 10
        decimals += 1
    }
    return fixed(value, decimals)
}
