import Foundation
import Keystone

#if canImport(Darwin)
// The Apple-platform path of ProtectedFiles: plain files with a Data Protection class, written atomically.
//
// The class is set on the new, still empty temporary file (FileManager's `.protectionKey`) before its first byte is
// written, then the content is written in chunks and the file renamed over the target: the renamed file keeps its
// class. iOS refuses reading (and creating) a file whose class key is unavailable with EPERM; Keystone reports that
// as errSecInteractionNotAllowed (-25308), like a locked keychain item, and never rewrites the file. EACCES (the
// file's permissions) stays errSecWrPerm (-61).
//
// Decision: on macOS the same calls are made; the class is enforced only in the contexts where macOS applies Data
// Protection (see ProtectedFiles' documentation), elsewhere the file is an ordinary 0600 file.

extension FileProtection {
    /// The Data Protection class.
    var fileProtectionType: FileProtectionType {
        switch self {
        case .complete: return .complete
        case .completeUnlessOpen: return .completeUnlessOpen
        case .completeUntilFirstUserAuthentication: return .completeUntilFirstUserAuthentication
        }
    }
}

extension ProtectedFiles {
    /// errSecInteractionNotAllowed for EPERM (protected data unavailable), else as ``FileIO/error(_:_:)``.
    static func dataProtectionError(_ code: Int32, _ url: URL, reading: Bool) -> KeychainError {
        guard code == EPERM else {
            return FileIO.error(code, reading ? "could not read the protected file \(url.path)" : "could not write \(url.path)")
        }
        return KeychainError(status: Status.interactionNotAllowed,
                             reason: "protected data is unavailable (the device is locked): \(url.path) cannot be \(reading ? "read" : "written") now. The file is intact: try again after the unlock; do not delete it")
    }

    func writeWithDataProtection(_ source: Source, to url: URL, protection: FileProtection) throws {
        let writer: AtomicFileWriter
        do {
            writer = try AtomicFileWriter(target: url) { path in
                try FileManager.default.setAttributes([.protectionKey: protection.fileProtectionType], ofItemAtPath: path)
            }
        } catch let error as KeychainError where error.status == Status.wrPerm {
            throw KeychainError(status: Status.interactionNotAllowed,
                                reason: "\(url.path) cannot be created with \(protection.rawValue) protection now (protected data is unavailable); try again after the unlock")
        } catch let error as KeychainError {
            throw error
        } catch {
            throw KeychainError(status: Status.io, reason: "could not set the \(protection.rawValue) protection class on a new file next to \(url.path)")
        }
        do {
            switch source {
            case .bytes(let data):
                var offset = 0
                repeat {
                    let end = min(offset + chunkSize, data.count)
                    try writer.write(data[offset..<end])
                    offset = end
                } while offset < data.count
            case .descriptor(let fd, let path):
                var buffer = [UInt8](repeating: 0, count: chunkSize)
                while true {
                    let count = try buffer.withUnsafeMutableBytes { try FileIO.readFully(fd, into: $0, path: path) }
                    if count == 0 { break }
                    try buffer.withUnsafeBytes { try writer.write(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
                }
            case .pieces(let next):
                while let piece = try next() { try writer.write(piece) }
            }
            try writer.commit()
        } catch {
            writer.abandon()
            throw error
        }
    }

    func readWithDataProtection(at url: URL, _ body: (Data) throws -> Void) throws {
        let fd = open(url.path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            let code = errno
            if code == ENOENT { throw KeychainError(status: Status.itemNotFound, reason: "there is no protected file at \(url.path)") }
            throw Self.dataProtectionError(code, url, reading: true)
        }
        defer { close(fd) }
        var buffer = Data(count: chunkSize)
        while true {
            let count: Int
            do {
                count = try buffer.withUnsafeMutableBytes { try FileIO.readFully(fd, into: $0, path: url.path) }
            } catch let error as KeychainError where error.status == Status.wrPerm {
                throw Self.dataProtectionError(EPERM, url, reading: true)
            }
            if count == 0 { return }
            try body(buffer.prefix(count))
            if count < chunkSize { return }
        }
    }

    func dataProtectionClass(of url: URL) throws -> FileProtection {
        let attributes: [FileAttributeKey: Any]
        do { attributes = try FileManager.default.attributesOfItem(atPath: url.path) } catch {
            throw KeychainError(status: Status.itemNotFound, reason: "there is no protected file at \(url.path)")
        }
        // Compared by raw value (FileProtectionType's string): the same on every SDK.
        let stored = (attributes[.protectionKey] as? FileProtectionType)?.rawValue
        switch stored {
        case FileProtectionType.complete.rawValue?: return .complete
        case FileProtectionType.completeUnlessOpen.rawValue?: return .completeUnlessOpen
        case FileProtectionType.completeUntilFirstUserAuthentication.rawValue?: return .completeUntilFirstUserAuthentication
        default:
            throw KeychainError(status: Status.decode, reason: "\(url.path) has no Data Protection class Keystone writes")
        }
    }
}
#endif
