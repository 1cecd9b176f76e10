import Crypto
import Foundation
import Keystone

// The sealed path of ProtectedFiles (every platform without Data Protection): keys from the keychain, the format
// of SealedFileFormat.swift, atomic writes of AtomicFileWriter.swift.

extension ProtectedFiles {
    /// Seals `source` into a new file replacing `url`, bound to `identifier` (or to `url`'s full path). The class
    /// key (and the rollback counter) are obtained first: a locked keychain fails before any file is created.
    func writeSealed(_ source: Source, to url: URL, identifier: String?, protection: FileProtection) throws {
        let identity = try SealedFileIdentity(url: url, identifier: identifier)
        let salt = Data(SymmetricKey(size: .bits256).withUnsafeBytes { Data($0) })
        let info = SealedFile.info(identity)
        let fileKey: SymmetricKey
        var header = SealedFileHeader(protection: protection, chunkSize: chunkSize, keyID: Data(), salt: salt, ephemeralPublicKey: Data())
        do {
            if rollbackProtection {
                let current = try versions.current(identity)
                guard current < UInt64.max else {
                    throw KeychainError(status: Status.param, reason: "the version counter of \(url.path) is exhausted")
                }
                header.fileVersion = current + 1
            }
            switch protection {
            case .complete, .completeUntilFirstUserAuthentication:
                let classKey = try keys.symmetricKey(protection, create: true)!
                header.keyID = SealedFile.keyID(of: classKey)
                fileKey = SealedFile.fileKey(classKey: classKey, salt: salt, info: info)
            case .completeUnlessOpen:
                let classPublic = try keys.agreementPublicKey()
                let ephemeral = P256.KeyAgreement.PrivateKey()
                header.keyID = SealedFile.keyID(of: classPublic)
                header.ephemeralPublicKey = ephemeral.publicKey.x963Representation
                let shared = try ephemeral.sharedSecretFromKeyAgreement(with: classPublic)
                fileKey = SealedFile.fileKey(sharedSecret: shared, salt: salt, info: info, ephemeral: header.ephemeralPublicKey,
                                             classPublic: classPublic.x963Representation)
            }
        } catch let error as KeychainError where error.isTransient {
            throw KeychainError(status: Status.interactionNotAllowed,
                                reason: "the \(protection.rawValue) class key\(rollbackProtection ? " or the file's version counter" : "") cannot be used while the keychain is locked; \(url.path) was not written. Try again after the unlock")
        }
        let writer = try AtomicFileWriter(target: url)
        // A stream (or a large buffer) is written by a thread of its own while the next chunks are sealed.
        switch source {
        case .bytes(let data) where data.count < 1 << 20: break
        default: writer.writeInBackground()
        }
        do {
            let sealer = try ChunkSealer(key: fileKey, header: header.encoded, chunkSize: chunkSize, writer: writer)
            switch source {
            case .bytes(let data): try data.withUnsafeBytes { try sealer.consume($0) }
            case .descriptor(let fd, let path): try sealer.consume(fileDescriptor: fd, path: path)
            case .pieces(let next):
                while let piece = try next() { try piece.withUnsafeBytes { try sealer.consume($0) } }
            }
            try sealer.finish()
            try writer.commit()
        } catch {
            writer.abandon()
            throw error
        }
        // After the rename: recorded before it, a crash in between would leave the only copy refused. A failure
        // here is not thrown (the new file is in place); the next read records its version.
        if rollbackProtection { try? versions.advance(identity, to: header.fileVersion) }
    }

    /// Opens the sealed file at `url`, handing each verified chunk to `body`.
    func readSealed(at url: URL, identifier: String?, _ body: (Data) throws -> Void) throws {
        let identity = try SealedFileIdentity(url: url, identifier: identifier)
        let fd: Int32
        do { fd = try FileIO.openForReading(url, what: "the protected file") } catch let error as KeychainError where error.isNotFound {
            throw KeychainError(status: Status.itemNotFound, reason: "there is no protected file at \(url.path)")
        }
        defer { close(fd) }
        let (header, headerBytes) = try SealedFileHeader.read(from: fd, path: url.path)
        let info: Data
        if header.formatVersion == 1 {
            guard readsFormatVersion1 else {
                throw SealedFile.damaged(url.path, "it is in sealed format 1, which binds only the file's name (a same-named copy from another directory would open). Read it with ProtectedFiles(readsFormatVersion1: true) (keystone unseal --format-1) and write it again to upgrade it")
            }
            info = SealedFile.info(version1Name: url.lastPathComponent)
        } else {
            info = SealedFile.info(identity)
        }
        let fileKey: SymmetricKey
        let noKey = SealedFile.damaged(url.path, "it was sealed under another keychain's key (this keychain has no \(header.protection.rawValue) class key under service \"\(service)\")")
        let otherKey = SealedFile.damaged(url.path, "it was sealed under another keychain's key (the key ids differ)")
        var recorded: UInt64 = 0
        do {
            if rollbackProtection {
                // Before any chunk is handed over. The header's version is authenticated with the first chunk: a
                // forged one fails there.
                recorded = try versions.current(identity)
                guard header.fileVersion >= recorded else {
                    throw SealedFile.damaged(url.path, "it is an older version of the file (version \(header.fileVersion); the keychain recorded version \(recorded) for its \(identity.description)): a copy put back (rollback protection)")
                }
            }
            switch header.protection {
            case .complete, .completeUntilFirstUserAuthentication:
                guard let classKey = try keys.symmetricKey(header.protection, create: false) else { throw noKey }
                guard SealedFile.keyID(of: classKey) == header.keyID else { throw otherKey }
                fileKey = SealedFile.fileKey(classKey: classKey, salt: header.salt, info: info)
            case .completeUnlessOpen:
                guard let classPrivate = try keys.agreementPrivateKey(create: false) else { throw noKey }
                guard SealedFile.keyID(of: classPrivate.publicKey) == header.keyID else { throw otherKey }
                let ephemeral: P256.KeyAgreement.PublicKey
                do { ephemeral = try P256.KeyAgreement.PublicKey(x963Representation: header.ephemeralPublicKey) } catch {
                    throw SealedFile.damaged(url.path, "its header is damaged")
                }
                let shared = try classPrivate.sharedSecretFromKeyAgreement(with: ephemeral)
                fileKey = SealedFile.fileKey(sharedSecret: shared, salt: header.salt, info: info, ephemeral: header.ephemeralPublicKey,
                                             classPublic: classPrivate.publicKey.x963Representation)
            }
        } catch let error as KeychainError where error.isTransient {
            throw KeychainError(status: Status.interactionNotAllowed,
                                reason: "\(url.path) cannot be read while the keychain is locked (its \(header.protection.rawValue) class key\(rollbackProtection ? " or its version counter" : "") is unavailable). The file is intact: try again after the unlock; do not delete it")
        }
        try openChunks(fd: fd, path: url.path, header: header, headerBytes: headerBytes, key: fileKey, body)
        // All of it verified: a newer version than recorded (its writer died before recording it) is recorded now,
        // so the file it replaced cannot come back. Best effort: the read itself succeeded.
        if rollbackProtection, header.fileVersion > recorded { try? versions.advance(identity, to: header.fileVersion) }
    }

    /// After removing the file at `url`: advances its counter, so a copy put back is refused.
    func recordRemoval(of url: URL, identifier: String?) throws {
        let identity = try SealedFileIdentity(url: url, identifier: identifier)
        let current = try versions.current(identity)
        guard current < UInt64.max else { return }
        try versions.advance(identity, to: current + 1)
    }
}
