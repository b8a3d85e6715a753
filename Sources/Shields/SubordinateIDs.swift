import Foundation
import Glibc

/// The subordinate user ids of `/etc/subuid` (`useradd` writes a range for every new user): the
/// setuid `newuidmap` (package uidmap, which rootless Podman and Docker pull in) maps them into a
/// user namespace their owner creates, and a process there that switches to one of them runs as
/// that kernel uid. A shield that matches a user's sockets by uid must match these too.
///
/// One entry a line, `NAME:START:COUNT` or `UID:START:COUNT` (uids `START` to
/// `START + COUNT - 1`); blank lines and `#` comments are skipped, a count of 0 gives nothing, and
/// a line that is none of these is left out with a warning naming the file and the line.
public struct SubordinateIDs: Sendable, Equatable {
    /// One range of the file, and whose it is (a name or a decimal uid, as written).
    public struct Range: Sendable, Equatable {
        public var owner: String
        public var ids: ClosedRange<UInt32>
    }

    public var ranges: [Range] = []
    /// The lines left out, each as `FILE:LINE: why`.
    public var warnings: [String] = []

    /// The entries of `text`, read from `file` (named in the warnings).
    public static func parse(_ text: String, file: String) -> SubordinateIDs {
        var result = SubordinateIDs()
        for (index, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            func warn(_ why: String) {
                result.warnings.append("\(file):\(index + 1): \(why); line ignored")
            }
            let fields = line.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
            guard fields.count == 3 else {
                warn("not NAME:START:COUNT")
                continue
            }
            let owner = fields[0]
            guard !owner.isEmpty, !owner.contains(where: \.isWhitespace) else {
                warn("no user name or id")
                continue
            }
            guard let start = decimal(fields[1]), let count = decimal(fields[2]) else {
                warn("START and COUNT must be whole numbers up to 4294967295")
                continue
            }
            if count == 0 { continue }
            let (last, overflow) = start.addingReportingOverflow(count - 1)
            guard !overflow else {
                warn("the range \(start) + \(count) goes past the largest uid")
                continue
            }
            result.ranges.append(Range(owner: owner, ids: start...last))
        }
        return result
    }

    /// The entries of the file at `path`; a missing file has none (and no warning).
    public static func read(_ path: String) -> SubordinateIDs {
        do {
            return parse(try String(contentsOfFile: path, encoding: .utf8), file: path)
        } catch {
            if !FileManager.default.fileExists(atPath: path) { return SubordinateIDs() }
            return SubordinateIDs(warnings: ["\(path): cannot read: \(error.localizedDescription)"])
        }
    }

    /// The ranges of the users `uids`: lines naming one of them by uid, or by a name that
    /// `uidOf` gives one of them.
    public func ranges(
        of uids: some Sequence<UInt32>, uidOf: (String) -> UInt32? = SubordinateIDs.passwdUID
    ) -> [ClosedRange<UInt32>] {
        let wanted = Set(uids)
        guard !wanted.isEmpty else { return [] }
        return ranges.filter { range in
            guard let uid = Self.decimal(range.owner) ?? uidOf(range.owner) else { return false }
            return wanted.contains(uid)
        }
        .map(\.ids)
    }

    /// The uid of a user name in the user database (passwd, or whatever NSS is set up to ask).
    @Sendable public static func passwdUID(_ name: String) -> UInt32? {
        var entry = passwd()
        var found: UnsafeMutablePointer<passwd>? = nil
        var buffer = [CChar](repeating: 0, count: 4096)
        while true {
            let status = getpwnam_r(name, &entry, &buffer, buffer.count, &found)
            if status == ERANGE && buffer.count < 1 << 20 {
                buffer = [CChar](repeating: 0, count: buffer.count * 4)
                continue
            }
            return status == 0 && found != nil ? entry.pw_uid : nil
        }
    }

    private static func decimal(_ text: String) -> UInt32? {
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return UInt32(text)
    }
}

/// `ids` sorted, with overlapping and adjacent ranges merged into one.
func mergedRanges(_ ids: [ClosedRange<UInt32>]) -> [ClosedRange<UInt32>] {
    var merged: [ClosedRange<UInt32>] = []
    for range in ids.sorted(by: { $0.lowerBound < $1.lowerBound }) {
        if let last = merged.last,
            range.lowerBound <= last.upperBound || range.lowerBound - 1 == last.upperBound
        {
            merged[merged.count - 1] = last.lowerBound...max(last.upperBound, range.upperBound)
        } else {
            merged.append(range)
        }
    }
    return merged
}
