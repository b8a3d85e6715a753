import Foundation
import StepGateTestSupport
import Synchronization
import Testing
import TypedJSON
import UnlockPolicy

@testable import StepHistoryStore
@testable import SystemFiles

private func temporaryDirectory(_ mode: mode_t = 0o755) throws -> String {
    let path = try TemporaryFolders.make("safety").path
    chmod(path, mode)
    return path
}

private func owner(_ path: String) -> (uid: uid_t, mode: mode_t) {
    var info = stat()
    lstat(path, &info)
    return (info.st_uid, info.st_mode & 0o7777)
}

/// Attacks on the files root writes: links planted at the temporary names and at the file
/// itself must never be followed.
@Suite("Durable files never follow planted links")
struct DurableFileLinkTests {
    /// A victim file: 0600, owned by whoever runs the test (root in CI), with known contents.
    func victim() throws -> String {
        let folder = try temporaryDirectory(0o700)
        let path = folder + "/secret"
        try "root's secret\n".write(toFile: path, atomically: false, encoding: .utf8)
        chmod(path, 0o600)
        return path
    }

    /// Links at the names the old `PATH.tmp-<pid>` scheme would use in this process and in the
    /// processes started around it, pointing at the victim. (Planting every possible pid took
    /// three tests 100,000 symbolic links, tens of seconds of one thread on a busy disk; that
    /// the names do not depend on the pid at all is `temporaryNamesAreUnpredictable`.)
    func plantTemporaryLinks(for path: String, to victim: String) {
        let me = Int(getpid())
        for pid in max(1, me - 256)...(me + 256) {
            symlink(victim, "\(path).tmp-\(pid)")
        }
    }

    /// The temporary name is `NAME.tmp-` and 64 random bits: different for every write and
    /// unrelated to the process id, so an attacker cannot plant a link at it in advance.
    @Test func temporaryNamesAreUnpredictable() throws {
        let folder = try temporaryDirectory(0o700)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let names = Mutex<[String]>([])
        let calls = DurableFile.SystemCalls(
            fsync: { fsync($0) },
            renameat: { from, old, to, new in
                names.withLock { $0.append(old) }
                return renameat(from, old, to, new)
            })
        for _ in 0..<8 {
            try DurableFile.writeAtomically(Array("x\n".utf8), to: folder + "/state.json", calls: calls)
        }
        let seen = names.withLock { $0 }
        #expect(seen.count == 8 && Set(seen).count == 8)
        for name in seen {
            let suffix = name.dropFirst("state.json.tmp-".count)
            #expect(
                name.hasPrefix("state.json.tmp-") && suffix.count == 16 && suffix.allSatisfy(\.isHexDigit))
            #expect(!name.contains(String(getpid())) || suffix.count == 16)
        }
    }

    @Test func linksAtTheTemporaryNamesAreNotFollowed() throws {
        let target = try victim()
        defer { try? FileManager.default.removeItem(atPath: (target as NSString).deletingLastPathComponent) }
        let folder = try temporaryDirectory(0o1777)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/state.json"
        try "old\n".write(toFile: path, atomically: false, encoding: .utf8)
        chmod(path, 0o640)
        plantTemporaryLinks(for: path, to: target)
        let before = owner(target)

        try DurableFile.writeAtomically(Array("new\n".utf8), to: path)

        #expect(try String(contentsOfFile: target, encoding: .utf8) == "root's secret\n")
        #expect(owner(target) == before)
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "new\n")
        #expect(owner(path).mode == 0o640)
    }

    /// The attack as it was found: the file root rewrites belongs to the gated user, who planted
    /// links at the temporary names; the old code wrote through a link into root's 0600 file and
    /// then gave that file to the user.
    @Test(.enabled(if: getuid() == 0, "needs root: the attack makes root give its file to nobody"))
    func aFileOwnedByNobodyCannotLureRootIntoItsFiles() throws {
        let target = try victim()
        defer { try? FileManager.default.removeItem(atPath: (target as NSString).deletingLastPathComponent) }
        let folder = try temporaryDirectory(0o1777)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/hosts"
        try "127.0.0.1 localhost\n".write(toFile: path, atomically: false, encoding: .utf8)
        chmod(path, 0o644)
        chown(path, 65_534, 65_534)
        plantTemporaryLinks(for: path, to: target)

        try DurableFile.writeAtomically(Array("0.0.0.0 example.com\n".utf8), to: path, mode: 0o644)

        #expect(try String(contentsOfFile: target, encoding: .utf8) == "root's secret\n")
        #expect(owner(target) == (0, 0o600))
        // The file itself keeps its owner and mode, as documented.
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "0.0.0.0 example.com\n")
        #expect(owner(path) == (65_534, 0o644))
    }

    @Test func aLinkAtTheFileItselfIsNeitherFollowedNorReplaced() throws {
        let target = try victim()
        defer { try? FileManager.default.removeItem(atPath: (target as NSString).deletingLastPathComponent) }
        let folder = try temporaryDirectory(0o1777)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/state.json"
        symlink(target, path)
        plantTemporaryLinks(for: path, to: target)
        let before = owner(target)

        let error = #expect(throws: FileError.self) {
            try DurableFile.writeAtomically(Array("new\n".utf8), to: path)
        }
        #expect(error?.reason.contains("symbolic link") == true)
        let readError = #expect(throws: FileError.self) { _ = try DurableFile.read(path) }
        #expect(readError?.reason.contains("symbolic link") == true)

        #expect(try String(contentsOfFile: target, encoding: .utf8) == "root's secret\n")
        #expect(owner(target) == before)
        #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: path)) == target)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: folder).filter {
            $0.hasPrefix("state.json.tmp-") && $0.count > "state.json.tmp-".count + 8
        }
        #expect(leftovers.isEmpty)
    }

    /// The policy state store refuses a linked state file: it is not read, and never replaced.
    @Test func theStateStoreNeitherReadsNorReplacesALinkedStateFile() throws {
        let target = try victim()
        defer { try? FileManager.default.removeItem(atPath: (target as NSString).deletingLastPathComponent) }
        let folder = try temporaryDirectory(0o700)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/state.json"
        symlink(target, path)
        var store = FilePolicyStateStore(path: path)
        #expect(store.load().error != nil)
        #expect(throws: PolicyStateError.self) { try store.save(PolicyState()) }
        #expect(try String(contentsOfFile: target, encoding: .utf8) == "root's secret\n")
    }

    /// A FIFO planted at a state file's path must not hang the daemon in open(2). The read runs
    /// on a thread of its own, so a regression fails here (the FIFO is then opened for writing
    /// to release it) rather than hanging the test run.
    @Test func aFifoIsRefusedWithoutHanging() throws {
        let folder = try temporaryDirectory(0o700)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/state.json"
        mkfifo(path, 0o600)
        final class Outcome: @unchecked Sendable { var error: FileError? }
        let outcome = Outcome()
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            do {
                _ = try DurableFile.read(path)
            } catch {
                outcome.error = error as? FileError
            }
            done.signal()
        }
        if done.wait(timeout: .now() + 10) == .timedOut {
            Issue.record("reading a FIFO blocked")
            close(open(path, O_WRONLY | O_NONBLOCK))
            done.wait()
        }
        #expect(outcome.error?.reason == "not a regular file")
    }
}

/// Which folders root may keep its files in (like OpenSSH's StrictModes).
@Suite(.enabled(if: geteuid() == 0, "needs root: folders owned by root and by nobody"))
struct FolderSafetyTests {
    func refusal(_ path: String, allowMissing: Bool = false) -> UnsafeFolderError? {
        do {
            try FolderSafety.checkOnlyRootCanChange(path, allowMissing: allowMissing)
            return nil
        } catch {
            return error
        }
    }

    @Test func aRootOwnedPrivateFolderUnderTmpIsAccepted() throws {
        let folder = try temporaryDirectory(0o700)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        #expect(refusal(folder) == nil)
        try FileManager.default.createDirectory(atPath: folder + "/state", withIntermediateDirectories: false)
        chmod(folder + "/state", 0o755)
        #expect(refusal(folder + "/state") == nil)
        #expect(refusal(folder + "/./state/../state") == nil)
        // A root-owned link to it, in a root-owned folder, is fine too.
        symlink(folder + "/state", folder + "/link")
        #expect(refusal(folder + "/link") == nil)
    }

    @Test func tmpItselfIsRefused() {
        let error = refusal("/tmp")
        #expect(error?.culprit == "/tmp")
        #expect(error?.description.contains("mode 1777") == true)
        #expect(error?.description.contains("owned by root (uid 0)") == true)
    }

    @Test(arguments: [mode_t(0o777), 0o1777, 0o775, 0o757])
    func aFolderOthersCanWriteIsRefused(mode: mode_t) throws {
        let folder = try temporaryDirectory(mode)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let error = refusal(folder)
        #expect(error?.culprit == folder)
        #expect(
            error?.description.contains(
                "mode \(String(mode, radix: 8).count == 3 ? "0" : "")\(String(mode, radix: 8))") == true,
            "\(String(describing: error))")
        // And anything below it: a non-sticky writable ancestor lets others rename folders.
        if mode & 0o1000 == 0 {
            try FileManager.default.createDirectory(
                atPath: folder + "/inner", withIntermediateDirectories: false)
            chmod(folder + "/inner", 0o700)
            #expect(refusal(folder + "/inner")?.culprit == folder)
        }
    }

    @Test func aFolderOwnedByNobodyIsRefusedAndSoIsEverythingBelowIt() throws {
        let folder = try temporaryDirectory(0o755)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        chown(folder, 65_534, 65_534)
        let error = refusal(folder)
        #expect(error?.culprit == folder)
        #expect(error?.description.contains("uid 65534") == true)
        #expect(error?.description.contains("mode 0755") == true)
        #expect(error?.description.contains("expected every folder on the path to be owned by root") == true)
        try FileManager.default.createDirectory(atPath: folder + "/state", withIntermediateDirectories: false)
        chmod(folder + "/state", 0o700)
        #expect(refusal(folder + "/state")?.culprit == folder)
        #expect(refusal(folder + "/missing/state", allowMissing: true)?.culprit == folder)
    }

    @Test func aPathThroughALinkToAFolderOwnedByNobodyIsRefused() throws {
        let base = try temporaryDirectory(0o755)
        defer { try? FileManager.default.removeItem(atPath: base) }
        let theirs = base + "/theirs"
        try FileManager.default.createDirectory(atPath: theirs + "/state", withIntermediateDirectories: true)
        chown(theirs, 65_534, 65_534)
        symlink(theirs, base + "/link")  // the link itself is root's
        #expect(refusal(base + "/link")?.culprit == theirs)
        #expect(refusal(base + "/link/state")?.culprit == theirs)

        // A link owned by nobody, even to a good folder, could be replaced by its owner.
        let good = try temporaryDirectory(0o700)
        defer { try? FileManager.default.removeItem(atPath: good) }
        symlink(good, base + "/their-link")
        lchown(base + "/their-link", 65_534, 65_534)
        let error = refusal(base + "/their-link")
        #expect(error?.culprit == base + "/their-link")
        #expect(error?.description.contains("symbolic link owned by") == true)
    }

    @Test func aMissingFolderIsRefusedUnlessAllowedAndItsAncestorsAreStillChecked() throws {
        let folder = try temporaryDirectory(0o700)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        #expect(refusal(folder + "/a/b")?.description.contains("does not exist") == true)
        #expect(refusal(folder + "/a/b", allowMissing: true) == nil)
        #expect(refusal("/tmp/stepgate-no-such-folder-\(UUID().uuidString)", allowMissing: true) == nil)
    }
}

@Suite("Durable files are durable")
struct DurableFileOrderTests {
    /// The file's data reaches the disk before the rename makes it visible, and the rename
    /// reaches the disk (the folder's fsync) after it; a crash in between leaves the old file or
    /// the new one, whole.
    @Test func fsyncsTheFileBeforeTheRenameAndTheFolderAfter() throws {
        let folder = try TemporaryFolders.make("durable")
        defer { TemporaryFolders.remove(folder) }
        let log = Mutex<[String]>([])
        let calls = DurableFile.SystemCalls(
            fsync: { fd in
                var info = stat()
                fstat(fd, &info)
                let kind = info.st_mode & S_IFMT == S_IFDIR ? "folder" : "file"
                log.withLock { $0.append("fsync \(kind)") }
                return fsync(fd)
            },
            renameat: { from, old, to, new in
                log.withLock { $0.append("rename") }
                return renameat(from, old, to, new)
            })
        let path = folder.appendingPathComponent("state.json").path
        for contents in ["first\n", "second\n"] {
            log.withLock { $0 = [] }
            try DurableFile.writeAtomically(Array(contents.utf8), to: path, calls: calls)
            #expect(log.withLock { $0 } == ["fsync file", "rename", "fsync folder"])
            #expect(try DurableFile.read(path) == Array(contents.utf8))
        }
    }

    /// A failed file fsync leaves the old file in place and no temporary file behind.
    @Test func aFailedFsyncNeverRenames() throws {
        let folder = try TemporaryFolders.make("durable")
        defer { TemporaryFolders.remove(folder) }
        let path = folder.appendingPathComponent("state.json").path
        try DurableFile.writeAtomically(Array("old\n".utf8), to: path)
        let renamed = Mutex(false)
        let calls = DurableFile.SystemCalls(
            fsync: { _ in
                errno = EIO
                return -1
            },
            renameat: { from, old, to, new in
                renamed.withLock { $0 = true }
                return renameat(from, old, to, new)
            })
        #expect(throws: FileError.self) {
            try DurableFile.writeAtomically(Array("new\n".utf8), to: path, calls: calls)
        }
        #expect(!renamed.withLock { $0 })
        #expect(try DurableFile.read(path) == Array("old\n".utf8))
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path) == ["state.json"])
    }
}

extension Result {
    fileprivate var error: Failure? {
        if case .failure(let e) = self { return e }
        return nil
    }
}
