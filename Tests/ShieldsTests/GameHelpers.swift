import CLinux
import Foundation
import StepGateTestSupport
import Testing
import UnlockPolicy

@testable import Shields

/// Runs a shell command as the unprivileged user `nobody`.
func asNobody(_ command: String) throws -> ProcessResult {
    try runProcess(
        URL(fileURLWithPath: "/usr/bin/setpriv"),
        ["--reuid=nobody", "--regid=nogroup", "--clear-groups", "/bin/sh", "-c", command])
}

/// Starts `arguments` as `nobody` and returns at once (the caller ends it).
func startAsNobody(_ arguments: [String]) throws -> Process {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
    process.arguments = ["--reuid=nobody", "--regid=nogroup", "--clear-groups"] + arguments
    try process.run()
    return process
}

/// Whether the file at `path` grows within 200 ms (a game's heartbeat).
func isGrowing(_ path: String) -> Bool {
    let size = { (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0 }
    let before = size()
    usleep(200_000)
    return size() > before
}

/// Shields `game` (with `shield`, or a new shield with a grace period of 0.3 s) and rechecks,
/// as the daemon does every tick, until the file `beats` the game writes to has not grown for a
/// second (five looks of 200 ms), for up to 8 s; whether it fell silent.
func fallsSilentAfterRelock(_ game: String, beats: String, shield given: ExecDenyShield? = nil) throws -> Bool
{
    let shield = try given ?? ExecDenyShield(gracePeriod: .milliseconds(300))
    try shield.apply([Target(kind: .executable, value: game)], context: ShieldContext(store: "games"))
    var silent = 0
    for _ in 0..<40 where silent < 5 {
        _ = shield.recheck()
        silent = isGrowing(beats) ? 0 : silent + 1
    }
    return silent >= 5
}

/// A C compiler: the Swift toolchain's clang, or the system's `cc`.
func cCompiler() -> URL? {
    ["/usr/bin/clang", "/usr/bin/cc", "/opt/swift/usr/bin/clang"]
        .first { FileManager.default.isExecutableFile(atPath: $0) }
        .map(URL.init(fileURLWithPath:))
}

/// The dynamic loader of this machine, if it is at one of the usual places.
func dynamicLoader() -> String? {
    ["/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1", "/lib/ld-linux-armhf.so.3"]
        .first { FileManager.default.isExecutableFile(atPath: $0) }
}

/// C source of `copy_mappings_of(file)`: every mapping of `file` in the calling process becomes
/// an anonymous copy moved over it (what a game that hides what it runs does). Needs
/// `<stdio.h>`, `<string.h>` and `<sys/mman.h>`.
let copyMappingsC = """
    static void copy_mappings_of(const char *file) {
        char line[8192];
        unsigned long from[32], to[32];
        char modes[32][5];
        int count = 0;
        FILE *maps = fopen("/proc/self/maps", "r");
        while (file && maps && count < 32 && fgets(line, sizeof line, maps)) {
            char path[4096] = "";
            if (sscanf(line, "%lx-%lx %4s %*s %*s %*s %4095[^\\n]", &from[count], &to[count],
                       modes[count], path) == 4 && strcmp(path, file) == 0) count++;
        }
        if (maps) fclose(maps);
        for (int i = 0; i < count; i++) {
            size_t length = to[i] - from[i];
            int prot = (modes[i][0] == 'r' ? PROT_READ : 0) | (modes[i][1] == 'w' ? PROT_WRITE : 0)
                | (modes[i][2] == 'x' ? PROT_EXEC : 0);
            void *copy = mmap(0, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (prot & PROT_READ) memcpy(copy, (void *)from[i], length);
            mprotect(copy, length, prot);
            mremap(copy, length, length, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)from[i]);
        }
    }
    """

/// C (after `#define _GNU_SOURCE` and the includes of <linux/prctl.h>, <stdio.h>, <stdlib.h>,
/// <string.h>, <sys/prctl.h> and <unistd.h>): `move_command_line(start, end)` points the
/// process's command line (`/proc/PID/cmdline`) at [start, end) of its own memory with
/// PR_SET_MM_MAP, which needs no privilege; 0 on success. The rest of the memory map is kept as
/// `/proc/self/stat` gives it.
let moveCommandLineC = """
    static int move_command_line(char *start, char *end) {
        char stat[4096] = {0};
        FILE *f = fopen("/proc/self/stat", "r");
        if (!f || !fgets(stat, sizeof stat, f)) return -1;
        fclose(f);
        unsigned long field[64] = {0};
        char *p = strrchr(stat, ')') + 2;
        for (int i = 3; i < 64 && *p; i++) {
            field[i] = strtoul(p, &p, 10);
            while (*p && *p != ' ') p++;
            while (*p == ' ') p++;
        }
        struct prctl_mm_map map = {
            .start_code = field[26], .end_code = field[27], .start_stack = field[28],
            .start_data = field[45], .end_data = field[46], .start_brk = field[47],
            .brk = (unsigned long)sbrk(0), .arg_start = (unsigned long)start,
            .arg_end = (unsigned long)end, .env_start = field[50], .env_end = field[51],
            .exe_fd = (unsigned)-1,
        };
        if (prctl(PR_SET_MM, PR_SET_MM_MAP, &map, sizeof map, 0) != 0) { perror("PR_SET_MM_MAP"); return -1; }
        return 0;
    }
    """

/// The scan's view of the single shielded file `path` (its device, inode and path).
func shieldedFiles(_ path: String) throws -> ShieldedFiles {
    var info = stat()
    guard stat(path, &info) == 0 else { throw CocoaError(.fileNoSuchFile) }
    return ShieldedFiles(
        [ExecDenyShield.FileID(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))], paths: [path])
}
