internal import CLinux
import Foundation
import Synchronization

/// Keeps gated users from opening a file in the folder of a shielded program before the exec
/// shield has judged it.
///
/// The exec shield marks shielded files by inode, so a file that appears later under a
/// shielded name (an upgrade written to a temporary name and renamed into place, a Python
/// cache compiled by root, a copy to a staging name, an editor's swap file) is open to
/// everyone for the moment between its creation and the shield's next look at the folder. A
/// gated user watching the folder (inotify) can open it in that moment and keep the
/// descriptor. This guard closes the moment: the folders of shielded files carry fanotify
/// permission marks for their children (`FAN_OPEN_PERM`, `FAN_OPEN_EXEC_PERM`,
/// `FAN_EVENT_ON_CHILD`), and a gated process's open of a file there is refused
///
/// - while the file is *young*: its inode changed (created, written, renamed, its mode
///   changed) less than ``settle`` before the guard's last listing of the folder, or after it.
///   A listing that finds young files is followed by another once they have settled, so an
///   ordinary new file is open to everyone about a second after its last change; a temporary
///   file renamed into a shielded name within that second never is;
/// - and, whatever its age, while it carries a shielded file's name (or a name the shielded
///   file's upgrade, backup or editor's swap file takes, or a shielded module's cache name) and
///   is not the file the exec shield marked (a new file under that name, not marked yet).
///
/// Files that have not changed are answered from the inode alone, so a folder like `/usr/bin`
/// costs each exec one `fstat` and a look-up.
///
/// The guard's group is its own and is never handed to systemd's descriptor store: if the
/// daemon stops, the kernel closes it and every open in the folders goes through as before
/// (the shielded files themselves stay held by the exec shield's group). A mark left by an
/// earlier instance cannot outlive it.
final class FolderGuard: Sendable {
    /// The events marked on a guarded folder.
    static let marks =
        UInt64(FAN_OPEN_PERM) | UInt64(FAN_OPEN_EXEC_PERM) | UInt64(FAN_EVENT_ON_CHILD)
    /// How long a change keeps a file held back: more than the time an upgrade or an editor takes
    /// from writing a temporary file to renaming it into place, and more than the coarse clock
    /// the kernel stamps inodes with lags by.
    static let settle: Int64 = 1_000_000_000
    /// How long a shielded module's folder must have been left alone before the guard makes
    /// its missing `__pycache__` (``Plan/makeCacheFolders()``).
    static let quietBeforeCacheFolder: Int64 = 2_000_000_000

    /// What a listing found, read by the responders.
    struct Judgement: Sendable {
        /// Changes at or after this time (nanoseconds since the epoch) are young; `Int64.max`
        /// when nothing is guarded.
        var youngSince: Int64 = .max
        /// Files found under a shielded file's name (or its companions') that are not the
        /// marked file.
        var held: Set<ExecDenyShield.FileID> = []
        /// The files the exec shield holds itself, with their change time when it marked them:
        /// left to its answer while they are unchanged. (The kernel asks the groups one after
        /// the other and stops at the first refusal, so a refusal here would keep the shield
        /// from hearing of a denied launch. The change time tells a new file that got the
        /// number of a removed shielded one, which carries no mark, from the shielded file.)
        var shielded: [ExecDenyShield.FileID: Int64] = [:]
    }

    /// What to guard, gathered from the shielded files' paths.
    struct Plan {
        var folders: Set<String> = []
        /// Per guarded folder, the shielded files' names there and their companions'.
        var names: [String: Set<String>] = [:]
        /// Per guarded `__pycache__` folder, the shielded modules beside it.
        var modules: [String: Set<String>] = [:]
        /// Folders of shielded Python modules, which get a `__pycache__` guarded beside them.
        var moduleFolders: Set<String> = []

        /// Adds a shielded file's path: its folder is guarded, and in that folder its name, its
        /// companions' (``ExecDenyShield/companionNames(of:)``) and (for `NAME.py`) the legacy
        /// caches beside it are watched for, and the module's caches in the `__pycache__`
        /// beside it. A name counts in its own folder only: a file of the same name elsewhere
        /// is not the shielded one's.
        mutating func add(_ path: String) {
            guard let slash = path.lastIndex(of: "/") else { return }
            let folder = slash == path.startIndex ? "/" : String(path[..<slash])
            let name = String(path[path.index(after: slash)...])
            guard !name.isEmpty else { return }
            folders.insert(folder)
            names[folder, default: []].insert(name)
            names[folder, default: []].formUnion(ExecDenyShield.companionNames(of: name))
            if name.hasSuffix(".py"), name.count > 3 {
                let module = String(name.dropLast(3))
                let cacheFolder = folder == "/" ? "/__pycache__" : folder + "/__pycache__"
                modules[cacheFolder, default: []].insert(module)
                names[folder, default: []].formUnion([module + ".pyc", module + ".pyo"])
                moduleFolders.insert(folder)
                folders.insert(cacheFolder)
            }
        }

        /// Makes the missing `__pycache__` folder of each shielded module whose folder is root's
        /// and writable by root alone (mode 0755, as Python makes it), so that it is guarded
        /// before a cache is ever written there: a folder Python made later would hold its
        /// first cache before the shield could guard it. Not while the folder is being filled
        /// (changed in the last ``quietBeforeCacheFolder``): an installer copying a folder in
        /// (`cp -r`, an install script's `mkdir __pycache__`) makes its own and would fail on
        /// ours; a later look makes it once the folder is quiet.
        func makeCacheFolders() {
            let now = FolderGuard.now()
            for folder in moduleFolders {
                var info = stat()
                guard stat(folder, &info) == 0, info.st_mode & S_IFMT == S_IFDIR, info.st_uid == 0,
                    info.st_mode & 0o022 == 0
                else { continue }
                let changed = FolderGuard.nanoseconds(info.st_ctim)
                guard
                    now - changed >= FolderGuard.quietBeforeCacheFolder
                        || FolderGuard.predatesClock(changed, now: now)
                else { continue }
                let cache = folder == "/" ? "/__pycache__" : folder + "/__pycache__"
                if mkdir(cache, 0o700) == 0 { _ = chmod(cache, 0o755) }
            }
        }
    }

    private let group: Int32
    private let judgement = Mutex<Judgement>(Judgement())
    private let privilegedGroup: UInt32?
    private let stopped = Atomic<Bool>(false)
    /// Guarded folders and the path each was marked through.
    private let folders = Mutex<[ExecDenyShield.FileID: String]>([:])
    /// What the last ``guardFolders(_:shielded:)`` asked for, and when the
    /// folders are to be listed again for files that were young (nanoseconds since the epoch).
    private let wanted = Mutex<(plan: Plan, shielded: [ExecDenyShield.FileID: String], due: Int64?)>(
        (Plan(), [:], nil))
    /// Held while the folders are listed and marked.
    private let listing = Mutex<Int>(0)
    /// Watches (inotify) of the folders above the guarded ones, for a guarded folder made again (a
    /// purge and reinstall, a folder moved aside and made anew): its watch descriptor, the
    /// parent's path and the names of guarded folders in it.
    private let notify: Int32
    private let parents = Mutex(AncestorWatches())
    /// Threads still running.
    private let running = Atomic<Int>(0)

    /// Opens the guard's fanotify group; `nil` where the kernel refuses it (the exec shield
    /// then works as before, with the moment open).
    init?(privilegedGroup: UInt32?) {
        let fd = fanotify_init(
            UInt32(FAN_CLASS_CONTENT | FAN_CLOEXEC | FAN_NONBLOCK | FAN_UNLIMITED_QUEUE),
            UInt32(O_RDONLY | O_CLOEXEC))
        guard fd >= 0 else { return nil }
        group = fd
        notify = inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK))
        self.privilegedGroup = privilegedGroup
        for index in 0..<3 {
            running.add(1, ordering: .relaxed)
            let thread = Thread { [self] in
                if index == 0 { relist() } else { respond() }
                running.subtract(1, ordering: .relaxed)
            }
            thread.name = index == 0 ? "stepgate-folder-list" : "stepgate-folder-guard-\(index)"
            thread.start()
        }
    }

    deinit {
        close(group)
        if notify >= 0 { close(notify) }
    }

    func stop() {
        stopped.store(true, ordering: .relaxed)
        var waited = 0
        while running.load(ordering: .relaxed) > 0 && waited < 100 {
            usleep(5000)
            waited += 1
        }
    }

    /// Guards exactly the folders of `plan` (missing ones are skipped): lists them, publishes
    /// what was found, then marks the new ones and unmarks those no longer guarded.
    /// `shielded`: the files the exec shield marked, and the path each was marked through.
    func guardFolders(_ plan: Plan, shielded: [ExecDenyShield.FileID: String]) {
        wanted.withLock { $0 = (plan, shielded, nil) }
        watchParents(of: plan.folders)
        guardWanted()
    }

    /// Lists the wanted folders and marks them by what they are now (a folder made again under
    /// a guarded path is a new one: it is marked, the old one's mark is left to die with it).
    /// One at a time, so an older listing never unmarks what a newer one marked.
    private func guardWanted() {
        listing.withLock { _ in
            let ids = listUnlocked()
            mark(ids)
        }
    }

    private func mark(_ ids: [ExecDenyShield.FileID: String]) {
        folders.withLock { current in
            for (id, path) in ids where current[id] == nil {
                if fanotify_mark(group, UInt32(FAN_MARK_ADD | FAN_MARK_ONLYDIR), Self.marks, AT_FDCWD, path)
                    == 0
                {
                    current[id] = path
                }
            }
            for (id, path) in current where ids[id] == nil {
                if Self.folderID(path) == id {
                    _ = fanotify_mark(group, UInt32(FAN_MARK_REMOVE), Self.marks, AT_FDCWD, path)
                }
                current[id] = nil
            }
        }
    }

    /// Watches the folders above `folders` for a guarded folder that appears (made, moved in,
    /// or a folder above it replaced): it is guarded at once, on the listing thread, without
    /// waiting for the shield's next look.
    private func watchParents(of folders: Set<String>) {
        guard notify >= 0 else { return }
        let wanted = Self.ancestors(of: folders)
        parents.withLock { $0.update(wanted, fd: notify) }
    }

    /// Every folder above `folders` (up to the root), each with the names in it that lead down
    /// to one of them: a guarded folder arrives anew when any folder on its path is made, moved
    /// in or swapped in (`/opt/arcade` replaced makes `/opt/arcade/bin` a new folder).
    static func ancestors(of folders: Set<String>) -> [String: Set<String>] {
        var ancestors: [String: Set<String>] = [:]
        for folder in folders where folder.hasPrefix("/") {
            var path = Substring(folder)
            while path != "/", let slash = path.lastIndex(of: "/") {
                let parent = slash == path.startIndex ? "/" : path[..<slash]
                let name = path[path.index(after: slash)...]
                if !name.isEmpty { ancestors[String(parent), default: []].insert(String(name)) }
                path = parent
            }
        }
        return ancestors
    }

    /// Reads the parents' events; true when a guarded folder was made or moved in.
    private func guardedFolderAppeared() -> Bool {
        var appeared = false
        let size = 4096
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 8)
        defer { buffer.deallocate() }
        while true {
            let n = read(notify, buffer, size)
            guard n > 0 else { break }
            parents.withLock { watches in
                AncestorWatches.forEachEvent(in: UnsafeRawBufferPointer(start: buffer, count: n)) {
                    descriptor, mask, name in
                    if mask & UInt32(IN_ISDIR) != 0, watches.counts(descriptor, name: name) {
                        appeared = true
                    }
                    if mask & UInt32(IN_IGNORED) != 0 { watches.forget(descriptor) }
                }
            }
        }
        return appeared
    }

    /// Lists the wanted folders and publishes the judgement (before any mark is added: a file
    /// made between the listing and its folder's mark is young, so refused); schedules the next
    /// listing when young files were found. Returns the folders found, by identity. Called with
    /// `listing` held.
    private func listUnlocked() -> [ExecDenyShield.FileID: String] {
        let (plan, shieldedPaths, _) = wanted.withLock { $0 }
        var next = Judgement()
        for (id, path) in shieldedPaths {
            var info = stat()
            guard stat(path, &info) == 0, UInt64(info.st_dev) == id.device, UInt64(info.st_ino) == id.inode
            else { continue }
            next.shielded[id] = Self.nanoseconds(info.st_ctim)
        }
        var ids: [ExecDenyShield.FileID: String] = [:]
        var youngest: Int64?
        if !plan.folders.isEmpty {
            let now = Self.now()
            next.youngSince = now - Self.settle
            for path in plan.folders.sorted() {
                guard
                    let id = Self.list(
                        path, plan: plan, now: now, judgement: &next, youngest: &youngest)
                else { continue }
                ids[id] = path
            }
        }
        judgement.withLock { $0 = next }
        // Listed again once the youngest file has settled (a little after, for the clock's lag).
        wanted.withLock { $0.due = youngest.map { $0 + Self.settle + 100_000_000 } }
        return ids
    }

    /// Lists folder `path`: files under a shielded name that are not the marked file go into
    /// `held`, and the newest change of a young file into `youngest`. Returns the folder's
    /// identity, or `nil` when it is not a folder that can be read.
    private static func list(
        _ path: String, plan: Plan, now: Int64, judgement: inout Judgement, youngest: inout Int64?
    ) -> ExecDenyShield.FileID? {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        var info = stat()
        guard fstat(fd, &info) == 0, let folder = fdopendir(fd) else {
            close(fd)
            return nil
        }
        defer { closedir(folder) }
        let names = plan.names[path] ?? []
        let modules = plan.modules[path] ?? []
        while let entry = readdir(folder) {
            var entryInfo = stat()
            let name = withUnsafePointer(to: entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: 256) { name -> String? in
                    fstatat(fd, name, &entryInfo, AT_SYMLINK_NOFOLLOW) == 0 ? String(cString: name) : nil
                }
            }
            guard let name, entryInfo.st_mode & S_IFMT == S_IFREG else { continue }
            let id = ExecDenyShield.FileID(device: UInt64(entryInfo.st_dev), inode: UInt64(entryInfo.st_ino))
            let changed = nanoseconds(entryInfo.st_ctim)
            if changed >= judgement.youngSince, !predatesClock(changed, now: now) {
                youngest = max(youngest ?? changed, changed)
            }
            if judgement.shielded[id] != changed,
                isShieldedName(name, inCacheFolder: !modules.isEmpty, names: names, modules: modules)
            {
                judgement.held.insert(id)
            }
        }
        return ExecDenyShield.FileID(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
    }

    private static func folderID(_ path: String) -> ExecDenyShield.FileID? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return ExecDenyShield.FileID(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
    }

    static func nanoseconds(_ time: timespec) -> Int64 {
        Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
    }

    /// Whether an open of the file `id` (changed at `changed`) must wait for the shield's
    /// judgement at `now`, as far as the file goes (the opener is looked at after). A change
    /// stamped later than `now` (and the clock's lag) was made before the clock was set back:
    /// the file is as old as that, not young.
    func isHeldBack(_ id: ExecDenyShield.FileID, changed: Int64, now: Int64) -> Bool {
        judgement.withLock {
            $0.shielded[id] != changed
                && ((changed >= $0.youngSince && !Self.predatesClock(changed, now: now))
                    || $0.held.contains(id))
        }
    }

    /// Whether a change stamped `changed` lies beyond `now` by more than the settling time: made
    /// before the wall clock was set back (inode times come from the same clock, and no one can
    /// set a change time by hand).
    static func predatesClock(_ changed: Int64, now: Int64) -> Bool {
        changed > now &+ settle
    }

    static func now() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return nanoseconds(now)
    }

    /// Whether `name` is a shielded file's name (or a companion's), or, in a `__pycache__`
    /// folder, a shielded module's cache or the temporary file Python writes it to first.
    static func isShieldedName(
        _ name: String, inCacheFolder: Bool, names: Set<String>, modules: Set<String>
    ) -> Bool {
        if names.contains(name) { return true }
        guard inCacheFolder else { return false }
        // A cache, or its temporary file (`CACHE.ID`, ID a number).
        var entry = Substring(name)
        if let dot = entry.lastIndex(of: "."), dot < entry.index(before: entry.endIndex),
            entry[entry.index(after: dot)...].allSatisfy(\.isNumber)
        {
            entry = entry[..<dot]
        }
        return modules.contains { ExecDenyShield.isBytecodeCache(String(entry), of: $0) }
    }

    /// Whether `opener` may open a file owned by `owner` that waits for the shield's judgement:
    /// root and the admin group may, and a user may open a file of their own (their file
    /// system user id's, and never root's): what the guard keeps back is a file someone else
    /// made, not a user's own files in a folder of theirs. One gone or unreadable may not.
    static func mayOpen(owner: UInt32, _ opener: ProcessCredentials?, group: UInt32?) -> Bool {
        guard let opener else { return false }
        if opener.isPrivileged(group: group) { return true }
        return owner != 0 && opener.uids.count == 4 && opener.uids[3] == owner
    }

    /// Guards a guarded folder made again at once, and lists the folders again when files found
    /// young have settled.
    private func relist() {
        // Ahead of ordinary work, like the responders: a folder made again is guarded before
        // whoever made it has filled it.
        if stepgate_set_thread_realtime(1) != 0 { _ = stepgate_set_thread_nice(-10) }
        var poller = pollfd(fd: notify, events: Int16(POLLIN), revents: 0)
        while !stopped.load(ordering: .relaxed) {
            if notify >= 0 {
                if poll(&poller, 1, 100) > 0, guardedFolderAppeared() {
                    guardWanted()
                    continue
                }
            } else {
                usleep(100_000)
            }
            guard let due = wanted.withLock({ $0.due }) else { continue }
            if Self.now() >= due { guardWanted() }
        }
    }

    private func respond() {
        if stepgate_set_thread_realtime(1) != 0 { _ = stepgate_set_thread_nice(-10) }
        let size = 4096
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 8)
        defer { buffer.deallocate() }
        var poller = pollfd(fd: group, events: Int16(POLLIN), revents: 0)
        while !stopped.load(ordering: .relaxed) {
            guard poll(&poller, 1, 100) > 0 else { continue }
            let length = read(group, buffer, size)
            guard length > 0 else { continue }
            var offset = 0
            let header = MemoryLayout<fanotify_event_metadata>.size
            while offset + header <= length {
                let event = buffer.load(fromByteOffset: offset, as: fanotify_event_metadata.self)
                if event.event_len < UInt32(header) { break }
                offset += Int(event.event_len)
                guard event.fd >= 0 else { continue }
                var verdict = UInt32(FAN_ALLOW)
                var info = stat()
                if fstat(event.fd, &info) != 0 {
                    verdict = UInt32(FAN_DENY)  // cannot tell which file: fail closed
                } else {
                    let id = ExecDenyShield.FileID(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
                    let changed = Self.nanoseconds(info.st_ctim)
                    if isHeldBack(id, changed: changed, now: Self.now()),
                        !Self.mayOpen(
                            owner: info.st_uid, ProcessCredentials(pid: event.pid), group: privilegedGroup)
                    {
                        verdict = UInt32(FAN_DENY)
                        // Looked at again once it has settled, whether or not anything else
                        // makes the shield look.
                        if changed >= judgement.withLock({ $0.youngSince }) {
                            wanted.withLock { $0.due = $0.due ?? changed + Self.settle + 100_000_000 }
                        }
                    }
                }
                var response = fanotify_response(fd: event.fd, response: verdict)
                _ = withUnsafeBytes(of: &response) { write(group, $0.baseAddress, $0.count) }
                close(event.fd)
            }
        }
    }
}
