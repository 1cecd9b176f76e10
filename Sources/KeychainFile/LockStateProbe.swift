import Foundation
import KeychainEngine
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// `lockState` without SQL under the mutex.
//
// The lock state follows other processes: a lock anywhere bumps the header's epoch, and an unlock anywhere puts keys
// in the kernel keyring. `lockState` reads the epoch through a second connection of its own (`LockStateProbe`, behind
// its own lock, never waiting for another connection: a busy file leaves the last answer standing), then takes the
// mutex only to compare epochs, take keys from the keyring and apply the auto-lock timeout: no SQL, no waiting.

/// What `lockState` saw of the file, with no mutex held.
struct FileObservation {
    /// The file's device and inode at `path`; nil when it is gone.
    var identity: (device: UInt64, inode: UInt64)?
    /// The header's epoch and settings read through the probe; nil when they could not be read without waiting.
    var epoch: Int64?
    var settings: KeychainSettings?
    /// A connection to a file that replaced the one open, opened and checked with no mutex held.
    var replacement: (db: SQLiteConnection, header: Header, device: UInt64, inode: UInt64)?
}

/// A second connection to a keychain file, for ``KeychainFile/lockState``: it reads the header with no lock of the
/// instance held and never waits (busy timeout 0).
final class LockStateProbe {
    private struct State {
        var connection: SQLiteConnection?
        var device: UInt64 = 0
        var inode: UInt64 = 0
        var dataVersion: Int64 = -1
        var epoch: Int64?
        var settings: KeychainSettings?
        /// The stored bytes `epoch` and `settings` were decoded from: a commit that changed neither (every item
        /// write) costs one small read, not a decoding of the header.
        var epochBytes: Data?
        var settingsBytes: Data?
    }

    private let state = Locked(State())

    /// The epoch and settings of the file `device`/`inode` at `path`: read again when another connection has
    /// committed since the last read, else the last values. Nil when the file cannot be read without waiting.
    func header(path: String, device: UInt64, inode: UInt64) -> (epoch: Int64, settings: KeychainSettings)? {
        state.withLock { state in
            if state.connection == nil || state.device != device || state.inode != inode {
                // Opened through the same checks as the instance's own connection (safety, identity).
                guard let (db, header, dev, ino) = try? KeychainFile.openChecked(path, waiting: 0),
                      dev == device, ino == inode else { return nil }
                state = State(connection: db, device: dev, inode: ino, dataVersion: -1, epoch: header.epoch, settings: header.settings)
            }
            guard let db = state.connection else { return nil }
            if let statement = try? db.statement("PRAGMA data_version"), (try? statement.step()) == true {
                let version = statement.int64(0)
                statement.reset()
                if version != state.dataVersion {
                    do {
                        try db.exec("BEGIN")
                        defer { try? db.exec("COMMIT") }
                        let (epochBytes, settingsBytes) = try Self.lockFields(db)
                        if epochBytes != state.epochBytes || settingsBytes != state.settingsBytes {
                            let header = try Header.read(from: db)
                            state.epoch = header.epoch
                            state.settings = header.settings
                            state.epochBytes = epochBytes
                            state.settingsBytes = settingsBytes
                        }
                        state.dataVersion = version
                    } catch {
                        // Busy or unreadable: the last values stand; the next operation reads the header itself.
                    }
                }
            }
            guard let epoch = state.epoch, let settings = state.settings else { return nil }
            return (epoch, settings)
        }
    }

    /// The stored bytes of the header's `epoch` and `settings` fields (inside the caller's read transaction).
    private static func lockFields(_ db: SQLiteConnection) throws -> (Data?, Data?) {
        let statement = try db.statement("SELECT name, value FROM keystone_header WHERE name IN ('epoch', 'settings')")
        defer { statement.reset() }
        var epoch: Data?
        var settings: Data?
        while try statement.step() {
            switch statement.text(0) {
            case "epoch": epoch = statement.data(1)
            case "settings": settings = statement.data(1)
            default: break
            }
        }
        return (epoch, settings)
    }
}

extension KeychainFile {
    /// The lock state, brought up to date with the file (another process's lock or unlock, the auto-lock timeout).
    ///
    /// Runs no SQL under the instance's mutex and never waits for another connection: it returns while another
    /// thread derives keys, or waits for a busy file.
    public var lockState: LockState {
        let observed = observe()
        return withMutex {
            apply(observed)
            if keys?.lockState != .unlocked { loadSharedKeys() }
            applyTimeout()
            return keys?.lockState ?? .locked
        }
    }

    /// Looks at the file with no mutex held: its identity, the header's epoch through the probe, and, when the
    /// file was replaced, a connection to the new one.
    private func observe() -> FileObservation {
        var info = stat()
        guard stat(path, &info) == 0 else { return FileObservation() }
        let identity = (device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
        var observation = FileObservation(identity: identity)
        let (device, inode) = withMutex { (self.device, self.inode) }
        if identity.device != device || identity.inode != inode {
            if let (db, header, dev, ino) = try? Self.openChecked(path, waiting: 0), dev == identity.device, ino == identity.inode {
                observation.replacement = (db, header, dev, ino)
            }
            return observation
        }
        if let header = probe.header(path: path, device: device, inode: inode) {
            observation.epoch = header.epoch
            observation.settings = header.settings
        }
        return observation
    }

    /// Brings the instance up to date with what ``observe()`` saw. Mutex held; no SQL.
    private func apply(_ observed: FileObservation) {
        guard !inTransaction, observed.identity != nil else { return }
        if let replacement = observed.replacement {
            // Still the file observed as replaced (no other thread followed it meanwhile).
            if device != replacement.device || inode != replacement.inode {
                KeystoneLog.logger.notice("the keychain file was replaced; opening the new file", metadata: ["path": "\(path)"])
                adopt(replacement.db, replacement.header, device: replacement.device, inode: replacement.inode)
            }
            return
        }
        // Epochs only grow: one older than this instance's is a read from before this instance's own lock.
        if let seen = observed.epoch, seen > epoch {
            keys = nil
            unlockedAt = nil
            caches.clearRows()
            epoch = seen
            dataVersion = -1  // the next operation reads the whole header again
        }
        if let settings = observed.settings, settings != header.settings {
            // Another instance changed them: the next operation reads the header; the timeout applies now.
            dataVersion = -1
            if settings.lockAfterTimeout.map({ t in header.settings.lockAfterTimeout.map { t < $0 } ?? true }) ?? false {
                header.settings.lockAfterTimeout = settings.lockAfterTimeout
            }
        }
    }
}
