import TypedJSON

/// What a shield blocks: executables, desktop-entry categories, systemd units, web domains and
/// named hooks. Each list is kept sorted and free of duplicates.
///
/// An empty selection never counts as an active shield.
public struct Selection: Sendable, Hashable, CustomStringConvertible {
    /// Absolute paths or command names of programs to deny.
    public var executables: [String]
    /// freedesktop desktop-entry categories (`Game`, `Chat`).
    public var desktopCategories: [String]
    /// systemd units to stop and mask.
    public var systemdUnits: [String]
    /// Web domains to block (a domain covers its subdomains).
    public var domains: [String]
    /// Named hooks, run with `apply`/`remove`.
    public var hooks: [String]

    /// Creates a selection; the lists are sorted and de-duplicated.
    public init(
        executables: [String] = [], desktopCategories: [String] = [], systemdUnits: [String] = [],
        domains: [String] = [], hooks: [String] = []
    ) {
        self.executables = Array(Set(executables)).sorted()
        self.desktopCategories = Array(Set(desktopCategories)).sorted()
        self.systemdUnits = Array(Set(systemdUnits)).sorted()
        self.domains = Array(Set(domains)).sorted()
        self.hooks = Array(Set(hooks)).sorted()
    }

    /// A selection with nothing in it.
    public static let empty = Selection()

    /// True when no target is selected.
    public var isEmpty: Bool {
        executables.isEmpty && desktopCategories.isEmpty && systemdUnits.isEmpty && domains.isEmpty
            && hooks.isEmpty
    }

    /// The number of targets.
    public var count: Int {
        executables.count + desktopCategories.count + systemdUnits.count + domains.count + hooks.count
    }

    /// The selection's targets, each tagged with its kind.
    public var targets: Set<Target> {
        var result = Set<Target>()
        for (kind, list) in lists { for value in list { result.insert(Target(kind: kind, value: value)) } }
        return result
    }

    /// Builds a selection from targets.
    public init(targets: some Sequence<Target>) {
        var lists: [Target.Kind: [String]] = [:]
        for target in targets { lists[target.kind, default: []].append(target.value) }
        self.init(
            executables: lists[.executable] ?? [], desktopCategories: lists[.desktopCategory] ?? [],
            systemdUnits: lists[.systemdUnit] ?? [], domains: lists[.domain] ?? [], hooks: lists[.hook] ?? [])
    }

    var lists: [(Target.Kind, [String])] {
        [
            (.executable, executables), (.desktopCategory, desktopCategories), (.systemdUnit, systemdUnits),
            (.domain, domains), (.hook, hooks),
        ]
    }

    public var description: String {
        lists.filter { !$0.1.isEmpty }.map { "\($0.0.rawValue): \($0.1.joined(separator: ", "))" }
            .joined(separator: "; ")
    }

    var json: JSONValue {
        .object(lists.filter { !$0.1.isEmpty }.map { ($0.0.jsonKey, .array($0.1.map { .string($0) })) })
    }
}

/// One shielded thing: a kind and a name.
public struct Target: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The kinds of target a selection can hold.
    public enum Kind: String, Sendable, Hashable, CaseIterable, Comparable {
        case executable
        case desktopCategory = "desktop-category"
        case systemdUnit = "systemd-unit"
        case domain
        case hook

        /// The key of this kind's list in JSON.
        var jsonKey: String {
            switch self {
            case .executable: "executables"
            case .desktopCategory: "desktopCategories"
            case .systemdUnit: "systemdUnits"
            case .domain: "domains"
            case .hook: "hooks"
            }
        }

        public static func < (lhs: Kind, rhs: Kind) -> Bool {
            allCases.firstIndex(of: lhs) ?? 0 < allCases.firstIndex(of: rhs) ?? 0
        }
    }

    /// What kind of thing this is.
    public var kind: Kind
    /// Its name: a path, category, unit, domain or hook name.
    public var value: String

    /// Creates a target.
    public init(kind: Kind, value: String) {
        self.kind = kind
        self.value = value
    }

    public static func < (lhs: Target, rhs: Target) -> Bool {
        (lhs.kind, lhs.value) < (rhs.kind, rhs.value)
    }

    public var description: String { "\(kind.rawValue):\(value)" }
}
