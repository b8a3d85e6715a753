// Small elementary functions for configuration-time work (filter design), so that the
// detector stays free of Foundation and C. None of these run per sample.

/// The natural exponential, accurate to a few ulps for |x| < 700.
@usableFromInline
func elementaryExp(_ x: Double) -> Double {
    if x.isNaN { return x }
    if x > 709 { return .infinity }
    if x < -745 { return 0 }
    // exp(x) = 2^k · exp(r) with r = x − k·ln2, |r| ≤ ln2/2.
    let ln2 = 0.693_147_180_559_945_3
    let k = (x / ln2).rounded()
    let r = x - k * ln2
    var term = 1.0
    var sum = 1.0
    for n in 1...20 {
        term *= r / Double(n)
        sum += term
    }
    return sum * Double(sign: .plus, exponent: Int(k), significand: 1)
}

/// Sine and cosine of `x` (radians), accurate to a few ulps for |x| < 1e6.
@usableFromInline
func elementarySinCos(_ x: Double) -> (sin: Double, cos: Double) {
    let halfPi = Double.pi / 2
    let quadrant = (x / halfPi).rounded()
    let r = x - quadrant * halfPi
    var s = 0.0
    var c = 0.0
    var term = r
    for n in 0..<12 {
        s += term
        term *= -r * r / Double((2 * n + 2) * (2 * n + 3))
    }
    term = 1
    for n in 0..<12 {
        c += term
        term *= -r * r / Double((2 * n + 1) * (2 * n + 2))
    }
    switch Int(quadrant.truncatingRemainder(dividingBy: 4) + 4) % 4 {
    case 0: return (s, c)
    case 1: return (c, -s)
    case 2: return (-s, -c)
    default: return (-c, s)
    }
}

/// The tangent of `x` (radians).
@usableFromInline
func elementaryTan(_ x: Double) -> Double {
    let (s, c) = elementarySinCos(x)
    return s / c
}
