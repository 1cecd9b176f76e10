import Foundation
import Keystone

// The async forms: the same blocking file and keychain work, run off the caller's actor and off Swift's cooperative
// pool (BlockingCalls), as Keychain's async forms are. In an async context Swift picks these overloads.

extension ProtectedFiles {
    /// Writes `data` to a protected file at `url` off the caller's actor.
    ///
    /// - Throws: as the synchronous `write(_:to:protection:identifier:)`, or `CancellationError` before it starts.
    public func write(_ data: Data, to url: URL, protection: FileProtection = .complete, identifier: String? = nil) async throws {
        try await offActor { try self.write(data, to: url, protection: protection, identifier: identifier) }
    }

    /// Streams the file at `source` into a protected file at `url` off the caller's actor.
    ///
    /// - Throws: as the synchronous `write(contentsOf:to:protection:identifier:)`.
    public func write(contentsOf source: URL, to url: URL, protection: FileProtection = .complete, identifier: String? = nil) async throws {
        try await offActor { try self.write(contentsOf: source, to: url, protection: protection, identifier: identifier) }
    }

    /// Reads the whole protected file at `url` off the caller's actor; nothing unless all of it verified.
    ///
    /// - Throws: as the synchronous `read(at:identifier:)`.
    /// - Important: `errSecInteractionNotAllowed` (-25308) means locked: the file is intact, never delete it.
    public func read(at url: URL, identifier: String? = nil) async throws -> Data {
        try await offActor { try self.read(at: url, identifier: identifier) }
    }

    /// Reads the protected file at `url` into a new file at `destination` off the caller's actor, atomically.
    ///
    /// - Throws: as the synchronous `read(at:identifier:to:)`.
    /// - Important: The destination holds the plaintext, unprotected: remove it when done.
    public func read(at url: URL, identifier: String? = nil, to destination: URL) async throws {
        try await offActor { try self.read(at: url, identifier: identifier, to: destination) }
    }
}
