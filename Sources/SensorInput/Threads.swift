#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Musl)
    internal import Musl
#endif

/// Runs `body` on a new detached thread called `name` (at most 15 bytes, as the kernel keeps
/// it); nil when it started, else the error number of `pthread_create`. A POSIX thread rather
/// than Foundation's `Thread`, so that the live path links no Foundation.
func startThread(named name: String, _ body: @escaping @Sendable () -> Void) -> Int32? {
    final class Work: Sendable {
        let name: String
        let body: @Sendable () -> Void
        init(name: String, body: @escaping @Sendable () -> Void) {
            self.name = name
            self.body = body
        }
    }
    let context = Unmanaged.passRetained(Work(name: name, body: body)).toOpaque()
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    defer { pthread_attr_destroy(&attributes) }
    pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
    var thread = pthread_t()
    let result = pthread_create(
        &thread, &attributes,
        { context in
            let work = Unmanaged<Work>.fromOpaque(context!).takeRetainedValue()
            nameThisThread(work.name)
            work.body()
            return nil
        }, context)
    guard result == 0 else {
        Unmanaged<Work>.fromOpaque(context).release()
        return result
    }
    return nil
}

/// Names the calling thread (`/proc/thread-self/comm`, as `pthread_setname_np` does), for `ps`
/// and `top -H`; the kernel keeps the first 15 bytes.
private func nameThisThread(_ name: String) {
    let descriptor = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
    guard descriptor >= 0 else { return }
    defer { close(descriptor) }
    var bytes = Array(name.utf8.prefix(15))
    _ = write(descriptor, &bytes, bytes.count)
}

/// The contents of a small text file (a sysfs attribute, a udev database entry), or nil when
/// it cannot be read or is not UTF-8.
func readTextFile(_ path: String, limit: Int = 1 << 20) -> String? {
    let descriptor = open(path, O_RDONLY | O_CLOEXEC)
    guard descriptor >= 0 else { return nil }
    defer { close(descriptor) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while bytes.count <= limit {
        let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        if count == 0 { return String(validating: bytes, as: UTF8.self) }
        if count < 0 {
            if errno == EINTR { continue }
            return nil
        }
        bytes += chunk[0..<count]
    }
    return nil
}
