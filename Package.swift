// swift-tools-version: 6.2
import PackageDescription

// Release builds link with lld and pack the executable's ~75,000 relative relocations (DT_RELR,
// glibc 2.36): the loader reads 14 KB instead of 1.8 MB at every start, and `stepgate replay`
// stays about 3 MB smaller in memory. The functions the everyday commands run are placed
// together at the start of the code (scripts/hot-functions.sh writes the list): a command
// touches a few contiguous megabytes of code, not pages spread over all 17 MB. Both executables.
let executableLinking: [LinkerSetting] = [
    .unsafeFlags(
        [
            "-use-ld=lld", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs",
            "-Xlinker",
            "--symbol-ordering-file=\(Context.packageDirectory)/Sources/stepgate/hot-functions.order",
            "-Xlinker", "--no-warn-symbol-ordering",
            // SwiftPM exports every symbol of StepGate's own objects (6,400): the
            // loader then searches that table for each symbol of libiio and its
            // libraries, and `stepgate run` kept 0.5 MB of symbol names resident.
            // Nothing looks StepGate's symbols up (dlsym is only used on libraries).
            "-Xlinker", "--no-export-dynamic",
            // libstdc++ linked statically (Sources/stepgate/link/libstdc++.so says why).
            "-L\(Context.packageDirectory)/Sources/stepgate/link",
        ],
        .when(configuration: .release))
]

let package = Package(
    name: "stepgate",
    products: [
        .executable(name: "stepgate", targets: ["stepgate"]),
        .executable(name: "stepgate-full", targets: ["stepgate-full"]),
        .library(name: "StepDetection", targets: ["StepDetection"]),
        .library(name: "SensorInput", targets: ["SensorInput"]),
    ],
    targets: [
        // libiio, the C library that reads Linux IIO devices: its header only; libiio.so.0 is
        // opened when first needed (Sources/SensorInput/LibIIO.swift), not linked.
        .systemLibrary(name: "CLibIIO", providers: [.apt(["libiio-dev"])]),
        // Core: pure Swift, no Foundation, no C.
        .target(name: "StepDetection", linkerSettings: [.linkedLibrary("m")]),
        // Readers: recorded CSV walks and live IIO accelerometers through libiio.
        .target(name: "SensorInput", dependencies: ["StepDetection", "CLibIIO"]),
        // Text output shared by the commands and the daemon: fixed-point numbers, JSON lines,
        // control characters made visible. No dependencies.
        .target(name: "Formatting"),
        // The one strict JSON reader: exact types, no duplicate keys, errors with a key path and
        // FILE:LINE:COLUMN; a Decoder over it for Codable types. No Foundation.
        .target(name: "TypedJSON", dependencies: ["Formatting"]),
        // The step history without Foundation: steps per local hour and day, its file, civil
        // days and the local clock; durable files and configuration files, which the policy's
        // side shares.
        .target(name: "StepHistoryStore", dependencies: ["TypedJSON"]),
        // Counting steps without Foundation, for the front door's `run` and `replay` and the
        // daemon: the counter and its ledger, recordings counted whole, log lines.
        .target(
            name: "Counting",
            dependencies: ["StepDetection", "SensorInput", "StepHistoryStore", "TypedJSON", "Formatting"]),
        // The command line both executables share, without Foundation: commands, options,
        // parsing, help, exit statuses; `run` and `replay`; the front door's hand-over to the
        // full program.
        .target(
            name: "CoreCommands",
            dependencies: [
                "Counting", "StepHistoryStore", "StepDetection", "SensorInput", "TypedJSON", "Formatting",
            ]),
        // Labelled recording sets, scoring, parameter search, reports.
        .target(
            name: "Tuning",
            dependencies: [
                "StepDetection", "SensorInput", "Formatting", "TypedJSON", "Counting", "StepHistoryStore",
            ]),
        // The shared unlock policy: pure engine, config, versioned state (Foundation only).
        .target(name: "UnlockPolicy", dependencies: ["Formatting", "TypedJSON", "StepHistoryStore"]),
        // The system side of files: atomic durable writes, folder checks, the policy's state file.
        .target(name: "SystemFiles", dependencies: ["UnlockPolicy", "TypedJSON", "StepHistoryStore"]),
        // Linux interfaces Glibc's module lacks (fanotify, adjtimex).
        .systemLibrary(name: "CLinux"),
        // Enforcers of the policy's effects, one file per shield.
        .target(
            name: "Shields",
            dependencies: ["UnlockPolicy", "SystemFiles", "TypedJSON", "CLinux", "StepHistoryStore"]),
        // sd-bus, libsystemd's D-Bus client: its header only; libsystemd.so.0 is opened when the
        // first desktop notice is sent (Sources/Notifications/LibSystemd.swift), not linked.
        .systemLibrary(name: "CSystemd", providers: [.apt(["libsystemd-dev"])]),
        // Desktop notifications on a user's session bus (org.freedesktop.Notifications).
        .target(name: "Notifications", dependencies: ["CSystemd"]),
        // libmosquitto 2.0, the MQTT client library: its header only; libmosquitto.so.1 is opened
        // when a daemon with an "mqtt" section starts (Sources/Household/LibMosquitto.swift).
        .systemLibrary(name: "CMosquitto", providers: [.apt(["libmosquitto-dev"])]),
        // The household over MQTT: the broker connection, the gate's state and Home Assistant
        // discovery out, commands in.
        .target(name: "Household", dependencies: ["CMosquitto", "TypedJSON"]),
        // The live pipeline: the event loop, the control socket, timers and the input, with the
        // clock, the shields, the socket and the sample source injected.
        .target(
            name: "StepGateDaemon",
            dependencies: [
                "StepDetection", "SensorInput", "UnlockPolicy", "SystemFiles", "Shields", "Formatting",
                "Notifications", "CLinux", "Household", "Counting", "StepHistoryStore",
            ]),
        // The imperative shell: one file per subcommand.
        .target(
            name: "StepGateCLI",
            dependencies: [
                "StepDetection", "SensorInput", "Tuning", "UnlockPolicy", "SystemFiles", "Shields",
                "Formatting", "StepGateDaemon", "Notifications", "CLinux", "Household", "Counting",
                "StepHistoryStore",
                "CoreCommands", "TypedJSON",
            ]),
        // `stepgate`, the front door: links no Foundation; runs `run`, `replay` and `--version`
        // and hands every other command line to `stepgate-full` beside it (CoreCommands/FrontDoor).
        .executableTarget(
            name: "stepgate", dependencies: ["CoreCommands"],
            exclude: ["hot-functions.order", "link"],
            linkerSettings: executableLinking),
        // `stepgate-full`: every command (the full program).
        .executableTarget(
            name: "stepgate-full", dependencies: ["StepGateCLI", "CoreCommands"],
            linkerSettings: executableLinking),
        // Test support: fakes and fixture loading, for test targets only.
        .target(name: "StepGateTestSupport", dependencies: ["SensorInput", "StepDetection", "Household"]),
        // Tests
        .testTarget(name: "StepDetectionTests", dependencies: ["StepDetection", "StepGateTestSupport"]),
        .testTarget(
            name: "SensorInputTests", dependencies: ["SensorInput", "StepGateTestSupport", "Tuning"],
            // Cuts of real phone exports, read by path (their origin and licence: Exports/NOTICE.md).
            exclude: ["Exports"]),
        .testTarget(
            name: "UnlockPolicyTests",
            dependencies: [
                "UnlockPolicy", "SystemFiles", "TypedJSON", "StepGateTestSupport", "StepHistoryStore",
            ],
            resources: [.copy("Scenarios")]),
        .testTarget(
            name: "SystemFilesTests",
            dependencies: [
                "SystemFiles", "UnlockPolicy", "TypedJSON", "StepGateTestSupport", "StepHistoryStore",
            ]),
        .testTarget(
            name: "ShieldsTests",
            dependencies: ["Shields", "UnlockPolicy", "TypedJSON", "StepGateTestSupport", "CLinux"]),
        .testTarget(name: "HouseholdTests", dependencies: ["Household", "TypedJSON", "StepGateTestSupport"]),
        .testTarget(
            name: "NotificationsTests", dependencies: ["Notifications", "CSystemd", "StepGateTestSupport"],
            // The test's own notification server calls sd-bus directly.
            linkerSettings: [.linkedLibrary("systemd")]),
        .testTarget(
            name: "TuningTests",
            dependencies: [
                "Tuning", "StepDetection", "SensorInput", "StepGateTestSupport", "Counting",
                "StepHistoryStore",
            ]),
        .testTarget(
            name: "StepGateDaemonTests",
            dependencies: [
                "StepGateDaemon", "UnlockPolicy", "Shields", "SensorInput", "StepDetection",
                "StepGateTestSupport", "Notifications", "Household", "Counting", "StepHistoryStore", "Tuning",
            ]),
        .testTarget(
            name: "StepGateCLITests",
            dependencies: [
                "StepGateCLI", "StepGateDaemon", "StepGateTestSupport", "stepgate", "stepgate-full",
                "SensorInput",
                "StepDetection",
                "Tuning", "UnlockPolicy", "Shields", "Formatting", "TypedJSON", "CLinux", "Notifications",
                "Household", "Counting", "CoreCommands", "StepHistoryStore",
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)

// Settings shared by every Swift target.
for target in package.targets where target.type != .system {
    target.swiftSettings =
        (target.swiftSettings ?? []) + [
            .enableUpcomingFeature("ExistentialAny"),
            .enableUpcomingFeature("MemberImportVisibility"),
            .enableUpcomingFeature("InternalImportsByDefault"),
            // Every function in a section of its own, so that the release link's symbol
            // ordering (see the stepgate target) moves only the functions listed, not the whole
            // object's local functions, closures and specializations along with them.
            .unsafeFlags(["-Xfrontend", "-function-sections"], .when(configuration: .release)),
        ]
}
