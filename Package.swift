// swift-tools-version: 6.2
import PackageDescription

let package = Package(
    name: "stepgate",
    products: [
        .executable(name: "stepgate", targets: ["stepgate"]),
        .library(name: "StepDetection", targets: ["StepDetection"]),
        .library(name: "SensorInput", targets: ["SensorInput"]),
    ],
    targets: [
        // libiio, the C library that reads Linux IIO devices (pkg-config "libiio").
        .systemLibrary(name: "CLibIIO", pkgConfig: "libiio", providers: [.apt(["libiio-dev"])]),
        // Core: pure Swift, no Foundation, no C.
        .target(name: "StepDetection", linkerSettings: [.linkedLibrary("m")]),
        // Readers: recorded CSV walks and live IIO accelerometers through libiio.
        .target(name: "SensorInput", dependencies: ["StepDetection", "CLibIIO"]),
        // Labelled recording sets, scoring, parameter search, reports.
        .target(name: "Tuning", dependencies: ["StepDetection", "SensorInput"]),
        // The shared unlock policy: pure engine, config, versioned state (Foundation only).
        .target(name: "UnlockPolicy"),
        // The system side of files: atomic durable writes, folder checks, the policy's state file.
        .target(name: "SystemFiles", dependencies: ["UnlockPolicy"]),
        // Linux interfaces Glibc's module lacks (fanotify, adjtimex).
        .systemLibrary(name: "CLinux"),
        // Enforcers of the policy's effects, one file per shield.
        .target(name: "Shields", dependencies: ["UnlockPolicy", "SystemFiles", "CLinux"]),
        // sd-bus, libsystemd's D-Bus client (pkg-config "libsystemd").
        .systemLibrary(name: "CSystemd", pkgConfig: "libsystemd", providers: [.apt(["libsystemd-dev"])]),
        // Desktop notifications on a user's session bus (org.freedesktop.Notifications).
        .target(name: "Notifications", dependencies: ["CSystemd"]),
        // The imperative shell: one file per subcommand.
        .target(
            name: "StepGateCLI",
            dependencies: [
                "StepDetection", "SensorInput", "Tuning", "UnlockPolicy", "SystemFiles", "Shields", "CLinux",
                "Notifications",
            ]),
        .executableTarget(name: "stepgate", dependencies: ["StepGateCLI"]),
        // Test support: fakes and fixture loading, for test targets only.
        .target(name: "StepGateTestSupport", dependencies: ["SensorInput", "StepDetection"]),
        // Tests
        .testTarget(name: "StepDetectionTests", dependencies: ["StepDetection", "StepGateTestSupport"]),
        .testTarget(name: "SensorInputTests", dependencies: ["SensorInput", "StepGateTestSupport"]),
        .testTarget(
            name: "UnlockPolicyTests", dependencies: ["UnlockPolicy", "SystemFiles", "StepGateTestSupport"],
            resources: [.copy("Scenarios")]),
        .testTarget(
            name: "SystemFilesTests", dependencies: ["SystemFiles", "UnlockPolicy", "StepGateTestSupport"]),
        .testTarget(
            name: "ShieldsTests", dependencies: ["Shields", "UnlockPolicy", "StepGateTestSupport", "CLinux"]),
        .testTarget(
            name: "NotificationsTests", dependencies: ["Notifications", "CSystemd", "StepGateTestSupport"]),
        .testTarget(
            name: "TuningTests",
            dependencies: ["Tuning", "StepDetection", "SensorInput", "StepGateTestSupport"]),
        .testTarget(
            name: "StepGateCLITests",
            dependencies: [
                "StepGateCLI", "StepGateTestSupport", "stepgate", "SensorInput", "StepDetection", "Tuning",
                "CLinux", "Notifications",
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
        ]
}
