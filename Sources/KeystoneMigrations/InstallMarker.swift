import Foundation
import Keystone
import KeystoneProtectedFiles
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where `Keychain.wipeIfFreshInstall(_:marker:onSharedKeychain:)` records that this install has already run.
///
/// The marker must be gone exactly when the app's data is gone (an uninstall) and survive everything Apple's
/// keychain survives: app updates, reboots, backup and restore, and a launch before the first unlock (iOS
/// prewarming). ``FileInstallMarker`` is the recommended store; `KeystoneTesting` has an in-memory one.
///
/// - Important: A marker that cannot be read now must throw, never answer "absent": "absent" wipes the app's
///   keychain items.
public protocol InstallMarkerStore: Sendable {
    /// Whether the marker is there.
    ///
    /// - Throws: `KeychainError` when it cannot be told now (the wipe is then deferred).
    func markerExists() throws(KeychainError) -> Bool
    /// Records the marker, whole or not at all.
    ///
    /// - Throws: `KeychainError` when it could not be written.
    func writeMarker() throws(KeychainError)

    /// Proves the marker could be written now, without writing it: the wipe calls it before deleting anything, so
    /// a marker that can never be written defers the wipe instead of deleting on every launch.
    ///
    /// The default does nothing (for stores written before it existed): a store that can fail to write should
    /// implement it.
    ///
    /// - Throws: `KeychainError` when the marker cannot be written here now.
    func checkWritable() throws(KeychainError)
}

extension InstallMarkerStore {
    /// Nothing to check: the store's ``writeMarker()`` alone tells.
    public func checkWritable() throws(KeychainError) {}
}

/// The install marker as a small file in the app's own data directory: the recommended ``InstallMarkerStore``.
///
/// - On Apple platforms: `Application Support/<name>` in the app's container, written with no file protection
///   (`FileProtectionType.none`), so it can be read before the first unlock. The container goes with an
///   uninstall and stays through updates, reboots and backup/restore, as the keychain's items do.
/// - On Linux: `$XDG_DATA_HOME/<name>` (`~/.local/share/<name>`), the directory 0700 and the file 0600.
///
/// The file's existence is the marker; it is written to a temporary name and renamed, so it is never partial.
/// Only "no such file" reads as absent: any other failure (a directory that cannot be searched) throws.
public struct FileInstallMarker: InstallMarkerStore {
    /// The marker file.
    public let url: URL

    /// A marker at `url` (its directory is created when the marker is written).
    public init(url: URL) { self.url = url }

    /// The marker named `name` in the app's data directory: Application Support on Apple platforms,
    /// `$XDG_DATA_HOME/<appIdentifier>/` (default `~/.local/share/<appIdentifier>/`) elsewhere.
    ///
    /// - Parameters:
    ///   - appIdentifier: the app's reverse-DNS name; on Linux the directory under `$XDG_DATA_HOME`.
    ///   - name: the file name. Default `"keystone-install-marker"`.
    /// - Throws: `KeychainError.invalidItem` for an empty identifier or name, or one with a `/`.
    public init(appIdentifier: String, name: String = "keystone-install-marker") throws(KeychainError) {
        guard !appIdentifier.isEmpty, !name.isEmpty, !appIdentifier.contains("/"), !name.contains("/"), name != "..", appIdentifier != ".." else {
            throw KeychainError(code: .invalidItem, reason: "the app identifier and marker name must be non-empty file names")
        }
        url = Self.dataDirectory(appIdentifier: appIdentifier).appendingPathComponent(name)
    }

    static func dataDirectory(appIdentifier: String) -> URL {
        #if canImport(Darwin)
        // The app's container on iOS; on macOS Application Support is shared, so the app's own folder.
        let base = FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask).first
            ?? URL(fileURLWithPath: NSHomeDirectory()).appendingPathComponent("Library/Application Support")
        return base.appendingPathComponent(appIdentifier, isDirectory: true)
        #else
        let environment = ProcessInfo.processInfo.environment
        let base: URL
        if let xdg = environment["XDG_DATA_HOME"], xdg.hasPrefix("/") {
            base = URL(fileURLWithPath: xdg, isDirectory: true)
        } else {
            base = URL(fileURLWithPath: environment["HOME"] ?? NSHomeDirectory(), isDirectory: true).appendingPathComponent(".local/share")
        }
        return base.appendingPathComponent(appIdentifier, isDirectory: true)
        #endif
    }

    /// Whether the marker file exists.
    ///
    /// - Throws: `KeychainError` with `errSecIO` (-36) when the file's existence cannot be told (`stat` fails
    ///   with anything but "no such file").
    public func markerExists() throws(KeychainError) -> Bool {
        var info = stat()
        if stat(url.path, &info) == 0 { return true }
        let code = errno
        if code == ENOENT { return false }
        throw KeychainError(status: Status.io, reason: "the install marker cannot be checked (errno \(code)): the fresh-install wipe is deferred")
    }

    /// Proves the marker file can be written: creates its directory (0700) when missing, then creates, writes,
    /// fsyncs and removes a temporary file there (`.<name>.probe.<random>`, 0600), so a directory that cannot be
    /// created (a `HOME` that does not exist, a parent that is not writable) or written (read-only, full) is
    /// found before the wipe deletes anything.
    ///
    /// - Throws: `KeychainError` with `errSecIO` (-36) naming the directory and the system's reason.
    public func checkWritable() throws(KeychainError) {
        let directory = url.deletingLastPathComponent()
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        } catch {
            throw KeychainError(status: Status.io, reason: "the install marker's directory \(directory.path) cannot be created "
                                + "(\((error as NSError).localizedDescription)): the fresh-install wipe is deferred")
        }
        let probe = directory.appendingPathComponent(".\(url.lastPathComponent).probe.\(UUID().uuidString)").path
        func failure(_ what: String, _ code: Int32) -> KeychainError {
            KeychainError(status: Status.io, reason: "the install marker's directory \(directory.path) cannot be written (\(what): "
                          + "\(String(cString: strerror(code)))): the fresh-install wipe is deferred")
        }
        let descriptor = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw failure("create", errno) }
        defer { unlink(probe) }
        let byte: [UInt8] = [0x0A]
        let written = byte.withUnsafeBytes { write(descriptor, $0.baseAddress, 1) }
        let writeError = written == 1 ? 0 : errno
        let synced = writeError == 0 ? fsync(descriptor) : 0
        let syncError = synced == 0 ? 0 : errno
        close(descriptor)
        if writeError != 0 { throw failure("write", writeError) }
        if syncError != 0 { throw failure("fsync", syncError) }
    }

    /// Writes the marker file (0600 from creation, in a 0700 directory), atomically and durably: a temporary file,
    /// fsync'ed, renamed into place, and the directory fsync'ed.
    ///
    /// Durable because a marker lost in a power cut after the app has saved new items would make the next launch
    /// wipe them.
    ///
    /// - Throws: `KeychainError` with `errSecIO` (-36) when it could not be written.
    public func writeMarker() throws(KeychainError) {
        let directory = url.deletingLastPathComponent()
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
            // The protected files' atomic writer: O_CREAT|O_EXCL|O_NOFOLLOW with mode 0600, fsync, rename, fsync.
            let writer = try AtomicFileWriter(target: url) { path in
                #if canImport(Darwin)
                // Readable before the first unlock (prewarming): the marker holds nothing secret.
                try FileManager.default.setAttributes([.protectionKey: FileProtectionType.none], ofItemAtPath: path)
                #endif
            }
            do {
                try writer.write(Data("keystone install marker 1\n".utf8))
                try writer.commit()
            } catch {
                writer.abandon()
                throw error
            }
        } catch let error as KeychainError {
            throw KeychainError(status: Status.io, reason: "the install marker \(url.path) could not be written (\(error.reason))")
        } catch {
            throw KeychainError(status: Status.io, reason: "the install marker could not be written (\(type(of: error)))")
        }
    }
}
