import CSharedMemory
import Foundation
import KeychainEngine
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// Group commit across processes: writers in several processes share one flush of the keychain's log.
//
// Each process's connection writes its commits to the same write-ahead log (one file, one inode), and an `fdatasync`
// of that file by any process puts on disk every commit written to it before the flush began. The file
// `<keychain>-commit` (0600, created next to the keychain by the first writer) is mapped by every writing process:
//
// - `committed`: tickets handed out. A process takes one (an atomic add) after its commits were written to the log.
// - `flushed`: the highest ticket a finished flush covered. A flush leader reads `committed` before its `fdatasync`, so
//   every ticket up to what it read is covered; `failures`: flushes that failed.
// - a flush lock (`flock` on the file, exclusive): whoever holds it is the leader. A process that finds it free leads
//   (and returns after its own flush, whatever the file says); one that finds it held sleeps on a futex in the file
//   until the leader publishes, then returns when covered, or leads the next flush.
//
// Decision: the file only ever lets a process skip a flush when it proves another process's flush covered its commit;
// whatever else goes wrong (the file planted, wrong owner or mode, garbage, another log, a leader killed or stopped),
// the process flushes the log itself, which is always correct. Checked before use:
// - the file is a regular file (not a link), owned by this user, with no group or other permissions (else ignored);
// - its magic and layout, the device and inode of the log it serves (the log this connection writes), and its counters'
//   invariants (`flushed` ≤ `committed`, both far from overflowing); otherwise it is
//   re-initialised under the flush lock with a new generation, which every process that joined an earlier one notices
//   (it then flushes itself, or joins again);
// - a ticket counts as covered only when the generation is still the one it was taken in.
//
// Decision: after a failed flush anywhere, nobody trusts another's flush again. A failed write-back of a commit's pages
// (EIO) is reported by `fdatasync` once to each descriptor of the log opened before it: the leader that sees it does
// not publish, counts it in `failures` (and its own process fails every later write, as `LogFlusher` does), and every
// process that joined before then flushes alone from then on, so that its own descriptor reports the failure to it.
// Not covered: a write-back failure that no Keystone flush saw (the kernel's own write-back), followed by a flush made
// through a descriptor opened after it; the same holds for SQLite's own flushes (a checkpoint's `fsync` takes the report
// from the descriptor group commit flushes with), and for any program sharing a file with another.
//
// Decision: a waiter sleeps at most 10 ms at a time, and gives up waiting for a leader after 0.5 s: then it flushes the
// log itself. A leader killed with SIGKILL lets the flush lock go with its process (the kernel releases the `flock`);
// the waiters wake at their next timeout and one of them leads. A leader stopped (SIGSTOP, a debugger) only delays
// the others by the give-up time.
//
// Important: anyone who can write the file can make Keystone processes return from a write before it is on disk, but
// that is this user (the file is 0600 and checked): who can write the keychain's log directly, or kill the process.
// A same-user process that truncates the mapped file can crash writers with SIGBUS: the same power.

/// The region shared by the processes writing one keychain file (see the comment at the top of `SharedCommit.swift`).
package final class SharedCommit: @unchecked Sendable {
    // @unchecked Sendable: the mapping is only read and written through atomic operations; the descriptor and the
    // joined state are changed only by the in-process flush leader (one thread at a time, `LogFlusher`).

    /// The name of the file next to the keychain: `<keychain>-commit`.
    static let suffix = "-commit"
    /// `KEYSTONE_SHARED_COMMIT=0`: no commit file; each process flushes its own commits (as before it existed: for
    /// measurements, or a file system where shared mappings of a file are not shared).
    static let disableVariable = "KEYSTONE_SHARED_COMMIT"
    static let size = 4096
    /// "KSTNCMT1", as a native-order integer (the file is shared by the processes of one machine only).
    static let magic: UInt64 = 0x4b53_544e_434d_5431
    static let layout: UInt64 = 1
    /// Counters beyond this are taken as garbage (the file is re-initialised).
    static let counterLimit: UInt64 = 1 << 62

    private enum Field {
        static let magic = 0, layout = 8, generation = 16, logDevice = 24, logInode = 32
        static let committed = 40, flushed = 48, failures = 56
        // 32-bit futex words.
        static let flushSequence = 72, flushWaiters = 76
    }

    /// How long a waiter sleeps before looking again (a leader killed never wakes anyone).
    static let waitSliceNanoseconds: Int64 = 10_000_000
    /// How long a waiter waits for other leaders before it flushes the log itself.
    static var patienceNanoseconds: Int64 { 500_000_000 }

    let path: String
    private let descriptor: Int32
    private let base: UnsafeMutableRawPointer
    private let logDevice: UInt64
    private let logInode: UInt64
    /// The generation this process joined, and the failed flushes counted then (nil: not joined; flush alone).
    private var joined: (generation: UInt64, failures: UInt64)?

    /// Flushes this process made as leader, and times another process's flush covered its commits (tests, benchmarks).
    private(set) var ledFlushes = 0
    private(set) var coveredByOthers = 0
    /// Test hooks: called with the flush lock held, before the leader reads `committed`; and when a waiter starts waiting.
    var leaderHook: (@Sendable () -> Void)?
    var waitingHook: (@Sendable () -> Void)?
    /// Tests: how long a waiter waits for a leader before flushing itself (nil: `patienceNanoseconds`).
    var patienceOverride: Int64?

    private init(path: String, descriptor: Int32, base: UnsafeMutableRawPointer, logDevice: UInt64, logInode: UInt64) {
        self.path = path
        self.descriptor = descriptor
        self.base = base
        self.logDevice = logDevice
        self.logInode = logInode
    }

    deinit {
        munmap(base, Self.size)
        close(descriptor)
    }

    /// Opens (creating when missing) the shared file of the keychain at `keychainPath`, for the log `logDescriptor`,
    /// Nil when the file cannot be trusted or used: the caller then flushes alone.
    static func open(keychainPath: String, logDescriptor: Int32) -> SharedCommit? {
        guard ProcessInfo.processInfo.environment[disableVariable] != "0" else { return nil }
        var log = stat()
        guard fstat(logDescriptor, &log) == 0 else { return nil }
        let path = keychainPath + suffix
        let fd = openFile(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            KeystoneLog.logger.notice("group commit across processes is off: the keychain's commit file cannot be opened",
                                      metadata: ["path": "\(path)", "error": "\(String(cString: strerror(errno)))"])
            return nil
        }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_uid == geteuid(), info.st_mode & 0o077 == 0 else {
            KeystoneLog.logger.warning("group commit across processes is off: the keychain's commit file is not a private file of this user",
                                       metadata: ["path": "\(path)"])
            close(fd)
            return nil
        }
        // Decision: the file's blocks are allocated (posix_fallocate, a no-op where they already are), never left as
        // the hole a bare ftruncate makes: a store into a page of a shared mapping that no block backs raises SIGBUS
        // when the disk or the quota is full. A full disk only turns sharing off: the writer flushes alone.
        let allocated = posix_fallocate(fd, 0, off_t(size))
        guard allocated == 0 else {
            KeystoneLog.logger.notice("group commit across processes is off: no space for the keychain's commit file",
                                      metadata: ["path": "\(path)", "error": "\(String(cString: strerror(allocated)))"])
            close(fd)
            return nil
        }
        guard let mapped = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), mapped != MAP_FAILED else {
            close(fd)
            return nil
        }
        // Joined at the first flush, with no lock of the keychain held: joining may wait for a leader's flush lock.
        return SharedCommit(path: path, descriptor: fd, base: mapped, logDevice: UInt64(log.st_dev), logInode: UInt64(log.st_ino))
    }

    // MARK: - Fields

    private func pointer64(_ offset: Int) -> UnsafeMutablePointer<UInt64> { (base + offset).assumingMemoryBound(to: UInt64.self) }
    private func pointer32(_ offset: Int) -> UnsafeMutablePointer<UInt32> { (base + offset).assumingMemoryBound(to: UInt32.self) }
    private func load(_ offset: Int) -> UInt64 { keystone_shared_load64(pointer64(offset)) }
    private func store(_ offset: Int, _ value: UInt64) { keystone_shared_store64(pointer64(offset), value) }

    /// The counters as they stand (tests): tickets taken, and the highest ticket a flush covered.
    var counters: (committed: UInt64, flushed: UInt64) { (load(Field.committed), load(Field.flushed)) }

    /// Whether this process takes part (joined the file's current generation).
    var isJoined: Bool { joined.map { $0.generation == load(Field.generation) } ?? false }

    // MARK: - Joining

    /// Takes the flush lock, blocking at most about `patience`; false when it stayed held.
    private func lockFlush(patience: Int64) -> Bool {
        let start = DispatchTime.now().uptimeNanoseconds
        while flock(descriptor, LOCK_EX | LOCK_NB) != 0 {
            guard errno == EWOULDBLOCK || errno == EINTR,
                  Int64(DispatchTime.now().uptimeNanoseconds - start) < patience else { return false }
            usleep(1_000)
        }
        return true
    }

    private func unlockFlush() { flock(descriptor, LOCK_UN) }

    /// Checks the file under the flush lock (re-initialising it when it is not a valid file for this log) and joins
    /// its generation. False when the lock stayed held (this process then flushes alone for now).
    @discardableResult
    private func join() -> Bool {
        guard lockFlush(patience: patienceOverride ?? Self.patienceNanoseconds) else { joined = nil; return false }
        defer { unlockFlush() }
        let committed = load(Field.committed)
        let valid = load(Field.magic) == Self.magic && load(Field.layout) == Self.layout
            && load(Field.logDevice) == logDevice && load(Field.logInode) == logInode
            && committed < Self.counterLimit && load(Field.flushed) <= committed
        if !valid {
            // A new generation first: a process that took a ticket in the old one sees it and flushes itself.
            keystone_shared_add64(pointer64(Field.generation), 1)
            store(Field.magic, 0)
            store(Field.logDevice, logDevice)
            store(Field.logInode, logInode)
            store(Field.committed, 0)
            store(Field.flushed, 0)
            store(Field.failures, 0)
            store(Field.layout, Self.layout)
            store(Field.magic, Self.magic)
        }
        joined = (load(Field.generation), load(Field.failures))
        return true
    }

    // MARK: - Flushing

    /// Returns once every commit this process wrote to the log (`logDescriptor`) before the call is on disk: covered by
    /// another process's flush, or by a flush of its own. Nil on success, else the errno of this process's failed flush.
    /// Call it with no lock held, from one thread at a time (the in-process flush leader).
    func makeDurable(logDescriptor: Int32) -> Int32? {
        if !isJoined { join() }
        guard let (generation, failures) = joined, load(Field.generation) == generation,
              load(Field.failures) == failures else { return flushAlone(logDescriptor) }
        let ticket = keystone_shared_add64(pointer64(Field.committed), 1)
        guard ticket < Self.counterLimit, load(Field.generation) == generation else { return flushAlone(logDescriptor) }
        let patience = patienceOverride ?? Self.patienceNanoseconds
        let start = DispatchTime.now().uptimeNanoseconds
        var announced = false
        while true {
            if covered(ticket, generation: generation, failures: failures) { coveredByOthers += 1; return nil }
            // Read before trying the lock: a leader that finishes in between has changed it, and the wait returns at once.
            let sequence = keystone_shared_load32(pointer32(Field.flushSequence))
            if flock(descriptor, LOCK_EX | LOCK_NB) == 0 {
                return lead(logDescriptor, ticket: ticket, generation: generation, failures: failures)
            }
            if Int64(DispatchTime.now().uptimeNanoseconds - start) >= patience { return flushAlone(logDescriptor) }
            if !announced { announced = true; waitingHook?() }
            keystone_shared_add32(pointer32(Field.flushWaiters), 1)
            if !covered(ticket, generation: generation, failures: failures) {
                _ = keystone_shared_wait(pointer32(Field.flushSequence), sequence, Self.waitSliceNanoseconds)
            }
            keystone_shared_add32(pointer32(Field.flushWaiters), UInt32.max)
        }
    }

    /// Whether a finished flush covered `ticket` of `generation`, with no failed flush since this process joined.
    /// Reads `flushed` first: a generation or failure count read after it is at least as new.
    private func covered(_ ticket: UInt64, generation: UInt64, failures: UInt64) -> Bool {
        load(Field.flushed) >= ticket && load(Field.generation) == generation && load(Field.failures) == failures
    }

    /// Leads a flush (the flush lock held): covers every ticket taken so far.
    private func lead(_ logDescriptor: Int32, ticket: UInt64, generation: UInt64, failures: UInt64) -> Int32? {
        leaderHook?()
        if covered(ticket, generation: generation, failures: failures) {
            unlockFlush()
            coveredByOthers += 1
            return nil
        }
        let target = load(Field.committed)
        let failed: Int32? = fdatasync(logDescriptor) == 0 ? nil : errno
        ledFlushes += 1
        if failed != nil {
            keystone_shared_add64(pointer64(Field.failures), 1)
        } else if load(Field.generation) == generation, target > load(Field.flushed), target < Self.counterLimit {
            store(Field.flushed, target)
        }
        keystone_shared_add32(pointer32(Field.flushSequence), 1)
        unlockFlush()
        if keystone_shared_load32(pointer32(Field.flushWaiters)) != 0 { keystone_shared_wake(pointer32(Field.flushSequence), Int32.max) }
        return failed
    }

    private func flushAlone(_ logDescriptor: Int32) -> Int32? {
        ledFlushes += 1
        return fdatasync(logDescriptor) == 0 ? nil : errno
    }
}
