import Foundation
import StepGateTestSupport
import Testing

@testable import Shields

@Suite("Browser policies")
struct BrowserPoliciesTests {
    let root: String
    var firefox: String { root + "/etc/firefox/policies/policies.json" }
    var chromium: String { root + "/etc/chromium/policies/managed/stepgate-dns.json" }

    init() throws {
        root = try Fixtures.temporaryFolder().path
        // Firefox, Chromium and Chrome are "installed" in this root; Brave and Edge are not.
        for program in ["usr/bin/firefox", "usr/bin/chromium", "opt/google/chrome"] {
            try FileManager.default.createDirectory(
                atPath: root + "/" + program, withIntermediateDirectories: true)
        }
    }

    private func read(_ path: String) -> String? { try? String(contentsOfFile: path, encoding: .utf8) }

    private func write(_ text: String, to path: String) throws {
        try FileManager.default.createDirectory(
            atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try text.write(toFile: path, atomically: true, encoding: .utf8)
    }

    @Test func installsAndRemovesWhatItOwns() throws {
        let policies = BrowserPolicies(root: root)
        // The log names what it kept DNS over HTTPS off in, and only that.
        #expect(policies.installedBrowsers() == ["Firefox", "Chromium", "Google Chrome"])
        #expect(BrowserPolicies(root: root + "/nothing-here").installedBrowsers().isEmpty)
        #expect(policies.install().isEmpty)
        #expect(read(chromium) == "{\n  \"DnsOverHttpsMode\": \"off\"\n}\n")
        #expect(read(root + "/etc/opt/chrome/policies/managed/stepgate-dns.json") != nil)
        // Brave is not installed: nothing is written for it.
        #expect(!FileManager.default.fileExists(atPath: root + "/etc/brave"))
        let text = try #require(read(firefox))
        #expect(text.contains("\"DNSOverHTTPS\""))
        #expect(text.contains("\"Enabled\": false") && text.contains("\"Locked\": true"))
        #expect(policies.install().isEmpty)  // again: nothing changes
        #expect(read(firefox) == text)
        #expect(policies.remove().isEmpty)
        #expect(read(chromium) == nil)
        #expect(read(firefox) == nil)
    }

    /// An administrator's own Firefox policies are kept, and only StepGate's key goes again.
    @Test func keepsTheAdministratorsFirefoxPolicies() throws {
        try write("{\"policies\": {\"DisableTelemetry\": true}}\n", to: firefox)
        let policies = BrowserPolicies(root: root)
        #expect(policies.install().isEmpty)
        let merged = try #require(read(firefox))
        #expect(merged.contains("\"DisableTelemetry\": true") && merged.contains("\"DNSOverHTTPS\""))
        #expect(policies.remove().isEmpty)
        let restored = try #require(read(firefox))
        #expect(restored.contains("\"DisableTelemetry\": true") && !restored.contains("DNSOverHTTPS"))
    }

    @Test func aPolicyOfSomeoneElsesIsLeftAndReported() throws {
        let own = "{\"policies\": {\"DNSOverHTTPS\": {\"Enabled\": true}}}\n"
        try write(own, to: firefox)
        let policies = BrowserPolicies(root: root)
        let problems = policies.install()
        #expect(problems.count == 1 && problems[0].contains("already sets DNSOverHTTPS; left as it is"))
        #expect(read(firefox) == own)
        #expect(policies.remove().isEmpty)
        #expect(read(firefox) == own)  // not ours: not removed
    }

    @Test func aBrokenPolicyFileIsReportedNotRewritten() throws {
        try write("{\"policies\": {", to: firefox)
        let problems = BrowserPolicies(root: root).install()
        #expect(problems.count == 1 && problems[0].contains("not valid JSON"))
        #expect(read(firefox) == "{\"policies\": {")
        #expect(read(chromium) != nil)  // the other browsers are still covered
    }
}
