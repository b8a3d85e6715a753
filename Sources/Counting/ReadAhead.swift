import Glibc
import SensorInput
import StepDetection
import Synchronization

/// A recording read on a thread of its own while the calling thread counts: parsing and
/// detecting overlap on two cores, so a long replay takes about as long as the slower of the
/// two instead of their sum.
///
/// The reading thread fills batches of samples into a ring of ``slotCount`` slots; two counting
/// semaphores hand each slot over (free → full → free), so the only waits are the reader waiting
/// for a free slot and the counter for a full one, and `sem_post`/`sem_wait` order the slot's
/// memory between the threads. The samples come out exactly as ``RecordingReader/next()``
/// gives them, and an error the reader meets comes out after the samples before it.
struct ReadAhead: ~Copyable {
    /// Samples per batch: 96 KB of samples, about 100 KB of a typical CSV.
    static let batchSize = 4096
    static let slotCount = 4

    /// What one slot carries from the reader to the counter: up to ``batchSize`` samples in
    /// memory of its own (no array, so no uniqueness or capacity check per sample).
    struct Slot {
        let samples = UnsafeMutablePointer<AccelerationSample>.allocate(capacity: ReadAhead.batchSize)
        var count = 0
        var bytesRead = 0
        /// Set on the last slot: how reading ended.
        var end: Result<SkippedRows, RecordingError>?

        /// Reads up to ``batchSize`` samples; sets ``end`` when the reader ends or fails (the
        /// samples before a failure stay in the batch). The reader parses plain rows straight
        /// into the slot's memory.
        mutating func fill(from reader: inout RecordingReader) {
            count = 0
            do throws(RecordingError) {
                if try !reader.read(into: samples, capacity: ReadAhead.batchSize, count: &count) {
                    end = .success(reader.skipped)
                }
            } catch {
                end = .failure(error)
            }
            bytesRead = reader.bytesRead
        }

        /// How reading ended, once ``end`` is set: rows skipped and bytes read, or the error.
        func ending() throws(RecordingError) -> (skipped: SkippedRows, bytesRead: Int)? {
            switch end {
            case nil: return nil
            case .success(let skipped): return (skipped, bytesRead)
            case .failure(let error): throw error
            }
        }
    }

    /// ``forEachBatch(_:)`` on the calling thread: the same batches, read between calls of
    /// `body` (for short files, single cores, and commands that count files in parallel).
    static func forEachBatch(
        reading reader: inout RecordingReader,
        _ body: (_ samples: UnsafeBufferPointer<AccelerationSample>, _ bytesRead: Int) -> Void
    ) throws(RecordingError) -> (skipped: SkippedRows, bytesRead: Int) {
        var slot = Slot()
        defer { slot.samples.deallocate() }
        while true {
            slot.fill(from: &reader)
            body(UnsafeBufferPointer(start: slot.samples, count: slot.count), slot.bytesRead)
            if let end = try slot.ending() { return end }
        }
    }

    /// Whether reading ahead is worth a thread: a file of at least `minimumBytes` on a machine
    /// with more than one core online.
    static func worthwhile(fileSize: Int, minimumBytes: Int = 1 << 19) -> Bool {
        fileSize >= minimumBytes && sysconf(Int32(_SC_NPROCESSORS_ONLN)) > 1
    }

    private let shared: Shared
    private let thread: pthread_t
    private var taken = 0
    private var finished = false

    /// What ``start(_:)`` made of a reader.
    enum Started: ~Copyable {
        /// The reader is being read on a thread of its own.
        case reading(ReadAhead)
        /// No thread could be started: the reader, given back untouched, to read on this one.
        case notStarted(RecordingReader)
    }

    /// Starts reading `reader` on a new thread, or gives it back when no thread could be
    /// started. The reader is moved, not copied, so its read buffer stays the only reference
    /// to its memory: a copy would have made the reading thread allocate and fill a buffer of
    /// its own (copy-on-write) before its first row.
    static func start(_ reader: consuming RecordingReader) -> Started {
        let shared = Shared(reader)
        guard let thread = Self.spawn(shared) else {
            return .notStarted(shared.reader.take()!)
        }
        return .reading(ReadAhead(shared: shared, thread: thread))
    }

    private init(shared: Shared, thread: pthread_t) {
        self.shared = shared
        self.thread = thread
    }

    /// Starts the reading thread on `shared`; nil if it could not be started (then the thread
    /// never ran, and the reader is still in `shared`).
    private static func spawn(_ shared: Shared) -> pthread_t? {
        var thread = pthread_t()
        let context = Unmanaged.passRetained(shared).toOpaque()
        let started = pthread_create(
            &thread, nil,
            { context in
                let shared = Unmanaged<Shared>.fromOpaque(context!).takeRetainedValue()
                shared.read()
                return nil
            }, context)
        guard started == 0 else {
            Unmanaged<Shared>.fromOpaque(context).release()
            return nil
        }
        return thread
    }

    /// Calls `body` with each batch in order, then returns how reading ended (rows skipped and
    /// bytes read), or throws the reader's error after the samples before it.
    mutating func forEachBatch(
        _ body: (_ samples: UnsafeBufferPointer<AccelerationSample>, _ bytesRead: Int) -> Void
    ) throws(RecordingError) -> (skipped: SkippedRows, bytesRead: Int) {
        while true {
            let slot = shared.slots + taken % Self.slotCount
            taken += 1
            ReadAhead.wait(shared.full)
            body(
                UnsafeBufferPointer(start: slot.pointee.samples, count: slot.pointee.count),
                slot.pointee.bytesRead)
            if slot.pointee.end != nil {
                join()
                return try slot.pointee.ending()!
            }
            sem_post(shared.free)
        }
    }

    /// Takes one count of `semaphore`: first by trying for a moment without sleeping, since the
    /// other thread is usually about to post (sleeping and being woken cost tens of
    /// microseconds each on a virtual machine, a dozen times over a replay), then by waiting.
    static func wait(_ semaphore: UnsafeMutablePointer<sem_t>) {
        for _ in 0..<2000 where sem_trywait(semaphore) == 0 { return }
        while sem_wait(semaphore) != 0 {}  // EINTR
    }

    private mutating func join() {
        guard !finished else { return }
        finished = true
        pthread_join(thread, nil)
    }

    deinit {
        // Never left running: a reader abandoned mid-file is stopped at its next batch.
        if !finished {
            shared.stop.store(true, ordering: .relaxed)
            sem_post(shared.free)
            pthread_join(thread, nil)
        }
    }

    /// The state both threads reach: the ring, the semaphores and the reader (touched only by
    /// the reading thread until it ends).
    private final class Shared: @unchecked Sendable {
        /// Taken by the reading thread when it starts: a class's stored `var` is checked for
        /// exclusive access at every use, which per sample cost 7 % of a replay.
        var reader: RecordingReader?
        let slots: UnsafeMutablePointer<Slot>
        let free: UnsafeMutablePointer<sem_t>
        let full: UnsafeMutablePointer<sem_t>
        let stop = Atomic<Bool>(false)

        init(_ reader: consuming RecordingReader) {
            self.reader = reader
            slots = .allocate(capacity: ReadAhead.slotCount)
            for i in 0..<ReadAhead.slotCount { (slots + i).initialize(to: Slot()) }  // each its own memory
            free = .allocate(capacity: 1)
            full = .allocate(capacity: 1)
            sem_init(free, 0, UInt32(ReadAhead.slotCount))
            sem_init(full, 0, 0)
        }

        /// The reading thread: fills slot after slot until the file ends or fails.
        func read() {
            guard var reader = reader.take() else { return }
            var index = 0
            while true {
                ReadAhead.wait(free)
                if stop.load(ordering: .relaxed) { return }
                let slot = slots + index % ReadAhead.slotCount
                index += 1
                slot.pointee.fill(from: &reader)
                let last = slot.pointee.end != nil
                sem_post(full)
                if last { return }
            }
        }

        deinit {
            for i in 0..<ReadAhead.slotCount { slots[i].samples.deallocate() }
            slots.deinitialize(count: ReadAhead.slotCount)
            slots.deallocate()
            sem_destroy(free)
            sem_destroy(full)
            free.deallocate()
            full.deallocate()
        }
    }
}
