import Crypto
import CSQLite
import Foundation
import KeychainEngine
@testable import KeychainFile
import KeychainSealing
import KeystoneTesting
import Testing
#if os(Linux)
import KeychainTPM
import Swtpm
#endif

/// The keychain header's value `name`, read as an attacker with the file would.
func headerValue(_ path: String, _ name: String) -> Data? {
    var db: OpaquePointer?
    sqlite3_open(path, &db)
    defer { sqlite3_close(db) }
    var select: OpaquePointer?
    sqlite3_prepare_v2(db, "SELECT value FROM keystone_header WHERE name = '\(name)'", -1, &select, nil)
    defer { sqlite3_finalize(select) }
    guard sqlite3_step(select) == SQLITE_ROW, let bytes = sqlite3_column_blob(select, 0) else { return nil }
    return Data(bytes: bytes, count: Int(sqlite3_column_bytes(select, 0)))
}

/// Replaces the keychain header's value `name` (nil: removes it), as an attacker with the file would.
func setHeaderValue(_ path: String, _ name: String, _ value: Data?) {
    var db: OpaquePointer?
    sqlite3_open(path, &db)
    defer { sqlite3_close(db) }
    var statement: OpaquePointer?
    if let value {
        sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO keystone_header (name, value) VALUES ('\(name)', ?1)", -1, &statement, nil)
        _ = value.withUnsafeBytes { sqlite3_bind_blob(statement, 1, $0.baseAddress, Int32($0.count), unsafeBitCast(OpaquePointer(bitPattern: -1), to: sqlite3_destructor_type.self)) }
    } else {
        sqlite3_prepare_v2(db, "DELETE FROM keystone_header WHERE name = '\(name)'", -1, &statement, nil)
    }
    sqlite3_step(statement)
    sqlite3_finalize(statement)
}

/// The SHA-256 of the keychain file and its write-ahead log: what "the file was not modified" compares.
func fileDigest(_ path: String) -> String {
    var bytes = fileBytes(path)
    bytes.append(fileBytes(path + "-wal"))
    return SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined()
}

func addSecret(_ file: KeychainFile, _ service: String, _ account: String, _ secret: String) throws {
    try KeychainEngine(storage: file).add(genp(service, account, [Key.valueData: .data(Data(secret.utf8))]))
}

func readSecret(_ file: KeychainFile, _ service: String, _ account: String) throws -> String? {
    try KeychainEngine(storage: file).secret(service, account)
}

/// The sealed header fields an attacker can edit, each with one byte offset to flip.
let sealedFields: [(name: String, offset: Int)] = [
    ("sealed-key", 0), ("sealed-key", 40), ("sealed-ephemeral", 0), ("sealed-ephemeral", 20), ("sealed-ephemeral", 64),
    ("sealed-master", 0), ("sealed-master", 20), ("sealed-master", 59), ("fileid", 3),
]

/// Flips one bit of the header value `name` at `offset` (clamped into the value).
func flipHeaderByte(_ path: String, _ name: String, _ offset: Int) {
    guard var value = headerValue(path, name), !value.isEmpty else { return }
    let at = min(offset, value.count - 1)
    value[at] ^= 0x01
    setHeaderValue(path, name, value)
}

@Suite("Keychain file sealed to a Secure Enclave token (KeystoneTesting's emulated enclave)")
struct SealedKeychainTests {
    @Test("a sealed keychain is format 4 with no password, opens unlocked with its token in a new instance, and reads its items")
    func sealedRoundTrip() throws {
        let dir = TempDir()
        let path = dir.path()
        let token = EmulatedSecureEnclave()
        let created = try KeychainFile.create(at: path, sealedTo: token)
        #expect(created.lockState == .unlocked)
        #expect(created.isSealedToSecureEnclave && !created.hasPassword && !created.isEmptyPassword)
        try addSecret(created, "svc", "acct", "tpm-bound secret")
        #expect(headerValue(path, "version") == Data("4".utf8))
        #expect(headerValue(path, "master") == nil && headerValue(path, "kdf") == nil)
        #expect(headerValue(path, "sealed-scheme") == Data(SealedProtector.scheme.utf8))
        #expect(headerValue(path, "sealed-ephemeral")?.count == 65)

        let before = token.keyAgreementCount
        let reopened = try KeychainFile.open(at: path, secureEnclave: token)
        #expect(token.keyAgreementCount == before + 1, "the token unsealed the master key")
        #expect(reopened.lockState == .unlocked)
        #expect(try readSecret(reopened, "svc", "acct") == "tpm-bound secret")
    }

    @Test("another token: errSecDecode saying it is sealed to another TPM; the file is byte for byte unchanged and still opens with its own")
    func anotherToken() throws {
        let dir = TempDir()
        let path = dir.path()
        let token = EmulatedSecureEnclave()
        try addSecret(try KeychainFile.create(at: path, sealedTo: token), "svc", "acct", "s")
        let digest = fileDigest(path)
        var failure: EngineError?
        do { _ = try KeychainFile.open(at: path, secureEnclave: EmulatedSecureEnclave()) } catch let error as EngineError { failure = error }
        #expect(failure?.status == Status.decode)
        #expect(failure?.reason.contains("sealed to another TPM; the keychain cannot be opened here") == true)
        #expect(fileDigest(path) == digest)
        #expect(try readSecret(try KeychainFile.open(at: path, secureEnclave: token), "svc", "acct") == "s")
    }

    @Test("no token, or an unreachable one: errSecNotAvailable, file unchanged (unsealed keys are never cached in the kernel keyring)")
    func unreachableToken() throws {
        let dir = TempDir()
        let path = dir.path()
        let token = EmulatedSecureEnclave()
        try addSecret(try KeychainFile.create(at: path, sealedTo: token), "svc", "acct", "s")
        let digest = fileDigest(path)
        #expect(fileStatus { _ = try KeychainFile.open(at: path) } == Status.notAvailable)
        token.makeUnavailable()
        var failure: EngineError?
        do { _ = try KeychainFile.open(at: path, secureEnclave: token) } catch let error as EngineError { failure = error }
        #expect(failure?.status == Status.notAvailable)
        #expect(failure?.reason.contains("cannot be reached") == true)
        #expect(fileDigest(path) == digest)
        token.makeAvailable()
        #expect(try readSecret(try KeychainFile.open(at: path, secureEnclave: token), "svc", "acct") == "s")
    }

    @Test("a token refusing for a reason of its own keeps its status (not 'sealed to another TPM'); the file unchanged")
    func tokenRefusal() throws {
        let dir = TempDir()
        let path = dir.path()
        let token = EmulatedSecureEnclave()
        try addSecret(try KeychainFile.create(at: path, sealedTo: token), "svc", "acct", "s")
        let digest = fileDigest(path)
        token.refuseKeyUse(status: Status.internalComponent, reason: "out of memory for object contexts")
        var failure: EngineError?
        do { _ = try KeychainFile.open(at: path, secureEnclave: token) } catch let error as EngineError { failure = error }
        #expect(failure?.status == Status.internalComponent)
        #expect(failure?.reason.contains("out of memory for object contexts") == true)
        #expect(failure?.reason.contains("another TPM") == false)
        #expect(fileDigest(path) == digest)
    }

    @Test("creating with an unreachable token creates nothing")
    func createUnreachable() throws {
        let dir = TempDir()
        let path = dir.path()
        let token = EmulatedSecureEnclave()
        token.makeUnavailable()
        #expect(fileStatus { _ = try KeychainFile.create(at: path, sealedTo: token) } == Status.notAvailable)
        #expect(!FileManager.default.fileExists(atPath: path))
        let leftovers = (try? FileManager.default.contentsOfDirectory(atPath: dir.url.path)) ?? []
        #expect(leftovers.isEmpty, "\(leftovers)")
    }

    @Test("every edit of the sealed header fields is a typed error, never an unlocked keychain or another item's secret")
    func editedHeader() throws {
        let token = EmulatedSecureEnclave()
        for (name, offset) in sealedFields {
            let dir = TempDir()
            let path = dir.path()
            try addSecret(try KeychainFile.create(at: path, sealedTo: token), "svc", "acct", "s")
            flipHeaderByte(path, name, offset)
            let status = fileStatus { _ = try KeychainFile.open(at: path, secureEnclave: token) }
            #expect([Status.decode, Status.invalidKeychain].contains(status), "\(name)[\(offset)]: \(status)")
        }
    }

    @Test("a sealed header swapped in from another keychain on the same token opens that keychain's keys, never this file's items as another's")
    func swappedHeader() throws {
        let token = EmulatedSecureEnclave()
        let dir = TempDir()
        let victim = dir.path("victim.keychain-db")
        let donor = dir.path("donor.keychain-db")
        try addSecret(try KeychainFile.create(at: victim, sealedTo: token), "svc", "acct", "victim secret")
        try addSecret(try KeychainFile.create(at: donor, sealedTo: token), "svc", "acct", "donor secret")
        for name in ["sealed-key", "sealed-ephemeral", "sealed-master"] {
            setHeaderValue(victim, name, headerValue(donor, name))
        }
        // The donor's sealed key under the victim's file id: the seal is bound to the file id.
        #expect(fileStatus { _ = try KeychainFile.open(at: victim, secureEnclave: token) } == Status.decode)
        for name in ["fileid", "keycheck"] { setHeaderValue(victim, name, headerValue(donor, name)) }
        let file = try KeychainFile.open(at: victim, secureEnclave: token)
        var secret: String?
        let status = fileStatus { secret = try readSecret(file, "svc", "acct") }
        #expect(secret == nil)
        #expect([Status.itemNotFound, Status.decode].contains(status))
    }

    @Test("edits that make older Keystones read it, or that a newer scheme made, are refused: version 3 with sealed fields, unknown scheme, format 5")
    func versionEdits() throws {
        let token = EmulatedSecureEnclave()
        let dir = TempDir()
        let path = dir.path()
        _ = try KeychainFile.create(at: path, sealedTo: token)
        setHeaderValue(path, "version", Data("3".utf8))
        #expect(fileStatus { _ = try KeychainFile.open(at: path, secureEnclave: token) } == Status.invalidKeychain)
        setHeaderValue(path, "version", Data("5".utf8))
        #expect(fileStatus { _ = try KeychainFile.open(at: path, secureEnclave: token) } == Status.wrongSecVersion)
        setHeaderValue(path, "version", Data("4".utf8))
        setHeaderValue(path, "sealed-scheme", Data("p256-ecdh-hkdf-sha512-v9".utf8))
        #expect(fileStatus { _ = try KeychainFile.open(at: path, secureEnclave: token) } == Status.wrongSecVersion)
        setHeaderValue(path, "sealed-scheme", nil)
        #expect(fileStatus { _ = try KeychainFile.open(at: path, secureEnclave: token) } == Status.invalidKeychain)
    }

    @Test("password keychains are written as before: format 3, no sealed field, password unlock unchanged")
    func passwordFilesUnchanged() throws {
        let dir = TempDir()
        let path = dir.path()
        let file = try KeychainFile.create(at: path, password: "pw")
        try addSecret(file, "svc", "acct", "s")
        #expect(headerValue(path, "version") == Data("3".utf8))
        #expect(headerValue(path, "sealed-key") == nil && headerValue(path, "sealed-scheme") == nil)
        #expect(!file.isSealedToSecureEnclave && file.hasPassword)
        file.lock()
        let reopened = try KeychainFile.open(at: path, secureEnclave: EmulatedSecureEnclave())
        #expect(reopened.lockState == .locked)
        #expect(fileStatus { try reopened.unlock() } == Status.authFailed)
        #expect(fileStatus { try reopened.unlock(password: "wrong") } == Status.authFailed)
        try reopened.unlock(password: "pw")
        #expect(try readSecret(reopened, "svc", "acct") == "s")
    }

    @Test("with a recovery password: the token opens it without one; elsewhere it opens locked and the recovery password unlocks it")
    func recoveryPassword() throws {
        let dir = TempDir()
        let path = dir.path()
        let token = EmulatedSecureEnclave()
        do {
            let created = try KeychainFile.create(at: path, sealedTo: token, recoveryPassword: "correct horse")
            #expect(created.hasPassword && created.isSealedToSecureEnclave)
            try addSecret(created, "svc", "acct", "s")
        }
        #expect(headerValue(path, "version") == Data("4".utf8))
        #expect(try readSecret(try KeychainFile.open(at: path, secureEnclave: token), "svc", "acct") == "s")

        let digest = fileDigest(path)
        let elsewhere = try KeychainFile.open(at: path, secureEnclave: EmulatedSecureEnclave())
        #expect(elsewhere.lockState == .locked)
        #expect(fileStatus { try elsewhere.unlock() } == Status.decode)
        #expect(fileStatus { try elsewhere.unlock(password: "wrong") } == Status.authFailed)
        #expect(fileDigest(path) == digest, "failed unlocks write nothing")
        try elsewhere.unlock(password: "correct horse")
        #expect(try readSecret(elsewhere, "svc", "acct") == "s")
        let noToken = try KeychainFile.open(at: path)
        if KeyringCache.isAvailable {
            // Keys a recovery password unlocked are shared, as any password's.
            #expect(noToken.lockState == .unlocked)
        }
    }

    @Test("an empty recovery password is refused and creates nothing")
    func emptyRecovery() throws {
        let dir = TempDir()
        let path = dir.path()
        #expect(fileStatus { _ = try KeychainFile.create(at: path, sealedTo: EmulatedSecureEnclave(), recoveryPassword: "") } == Status.param)
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    @Test("passwords on a sealed keychain: none to unlock with or add (errSecParam, unchanged); a recovery password changes, never to empty")
    func passwordsOnSealed() throws {
        let dir = TempDir()
        let token = EmulatedSecureEnclave()
        let bare = dir.path("bare.keychain-db")
        let file = try KeychainFile.create(at: bare, sealedTo: token)
        withExtendedLifetime(file) {
            // (While the file stays open: its last connection closing would move the log into the file.)
            let digest = fileDigest(bare)
            #expect(fileStatus { try file.unlock(password: "") } == Status.param)
            #expect(fileStatus { try file.changePassword(old: "", new: "new") } == Status.param)
            #expect(fileDigest(bare) == digest)
        }

        let recoverable = dir.path("recoverable.keychain-db")
        let withRecovery = try KeychainFile.create(at: recoverable, sealedTo: token, recoveryPassword: "old")
        #expect(fileStatus { try withRecovery.changePassword(old: "old", new: "") } == Status.param)
        #expect(fileStatus { try withRecovery.changePassword(old: "wrong", new: "new") } == Status.authFailed)
        try withRecovery.changePassword(old: "old", new: "new")
        let elsewhere = try KeychainFile.open(at: recoverable, secureEnclave: EmulatedSecureEnclave())
        #expect(fileStatus { try elsewhere.unlock(password: "old") } == Status.authFailed)
        try elsewhere.unlock(password: "new")
        #expect(try KeychainFile.open(at: recoverable, secureEnclave: token).lockState == .unlocked, "the token's copy is untouched")
    }

    @Test("lock locks every open instance; unlock() unseals again with the token, no password")
    func lockAndUnlock() throws {
        let dir = TempDir()
        let path = dir.path()
        let token = EmulatedSecureEnclave()
        let first = try KeychainFile.create(at: path, sealedTo: token)
        try addSecret(first, "svc", "acct", "s")
        let second = try KeychainFile.open(at: path, secureEnclave: token)
        first.lock()
        #expect(first.lockState == .locked)
        #expect(second.lockState == .locked)
        #expect(fileStatus { _ = try readSecret(second, "svc", "acct") } == Status.interactionNotAllowed)
        try second.unlock()
        #expect(try readSecret(second, "svc", "acct") == "s")
    }

    @Test("doctor's diagnosis: a sealed keychain says so; the wrong token is a problem with the reason, the file untouched")
    func diagnosis() throws {
        let dir = TempDir()
        let path = dir.path()
        let token = EmulatedSecureEnclave()
        try addSecret(try KeychainFile.create(at: path, sealedTo: token), "svc", "acct", "s")
        let good = KeychainDiagnosis.examine(keychainAt: path, secureEnclave: token)
        #expect(good.severity < .problem)
        #expect(good.findings.contains { $0.check == "sealed" && $0.severity == .ok })
        #expect(good.findings.contains { $0.check == "items" && $0.detail.contains("1 item") })
        let digest = fileDigest(path)
        let bad = KeychainDiagnosis.examine(keychainAt: path, secureEnclave: EmulatedSecureEnclave())
        #expect(bad.severity == .problem)
        #expect(bad.findings.contains { $0.check == "sealed" && $0.detail.contains("sealed to another TPM") })
        #expect(!bad.findings.contains { $0.check == "header" })
        #expect(fileDigest(path) == digest)
    }
}

#if os(Linux)
/// Sealed keychain files on a REAL software TPM (swtpm, a fresh one per test). Every TPM call runs on a thread of its
/// own (withSwtpm); one token per swtpm (swtpm serves one connection at a time).
@Suite("Keychain file sealed to a TPM (swtpm)",
       .enabled(if: SwtpmFixture.unavailableReason == nil,
                Comment(rawValue: SwtpmFixture.unavailableReason ?? "swtpm, tpm2-tools and openssl are installed")))
struct SealedKeychainTPMTests {
    @Test("create sealed to the TPM, add an item, reopen in a new instance without a password: the item reads")
    func roundTrip() async throws {
        try await withSwtpm { fixture in
            let dir = TempDir()
            let path = dir.path()
            let token = TPMSecureEnclaveToken(tcti: fixture.tcti)
            let created = try KeychainFile.create(at: path, sealedTo: token)
            try addSecret(created, "svc", "acct", "sealed by a TPM")
            #expect(headerValue(path, "sealed-key")?.starts(with: Array("KSTK".utf8)) == true, "the TPM's key blob")
            let reopened = try KeychainFile.open(at: path, secureEnclave: token)
            #expect(reopened.lockState == .unlocked)
            #expect(try readSecret(reopened, "svc", "acct") == "sealed by a TPM")
            reopened.lock()
            try reopened.unlock()
            #expect(try readSecret(reopened, "svc", "acct") == "sealed by a TPM")
        }
    }

    @Test("another swtpm: errSecDecode (sealed to another TPM), the file's bytes unchanged")
    func anotherTPM() async throws {
        try await withSwtpm { fixture in
            let dir = TempDir()
            let path = dir.path()
            try addSecret(try KeychainFile.create(at: path, sealedTo: TPMSecureEnclaveToken(tcti: fixture.tcti)), "svc", "acct", "s")
            let digest = fileDigest(path)
            let other = try SwtpmFixture.start()
            defer { other.stop() }
            var failure: EngineError?
            do { _ = try KeychainFile.open(at: path, secureEnclave: TPMSecureEnclaveToken(tcti: other.tcti)) } catch let error as EngineError { failure = error }
            #expect(failure?.status == Status.decode, "\(String(describing: failure))")
            #expect(failure?.reason.contains("sealed to another TPM; the keychain cannot be opened here") == true)
            #expect(fileDigest(path) == digest)
            #expect(FileManager.default.fileExists(atPath: path))
        }
    }

    @Test("swtpm killed: errSecNotAvailable, the file's bytes unchanged")
    func killedTPM() async throws {
        try await withSwtpm { fixture in
            let dir = TempDir()
            let path = dir.path()
            let token = TPMSecureEnclaveToken(tcti: fixture.tcti)
            try addSecret(try KeychainFile.create(at: path, sealedTo: token), "svc", "acct", "s")
            let digest = fileDigest(path)
            try fixture.killTPM()
            var failure: EngineError?
            do { _ = try KeychainFile.open(at: path, secureEnclave: token) } catch let error as EngineError { failure = error }
            #expect(failure?.status == Status.notAvailable, "\(String(describing: failure))")
            // A fresh token finds nothing listening: the same status.
            #expect(fileStatus { _ = try KeychainFile.open(at: path, secureEnclave: TPMSecureEnclaveToken(tcti: fixture.tcti)) } == Status.notAvailable)
            #expect(fileDigest(path) == digest)
        }
    }

    @Test("flipped bytes in the TPM blob, the ephemeral key or the sealed master key: a typed error, never an unlocked keychain")
    func editedHeader() async throws {
        try await withSwtpm { fixture in
            let token = TPMSecureEnclaveToken(tcti: fixture.tcti)
            for (name, offset) in sealedFields {
                let dir = TempDir()
                let path = dir.path()
                try addSecret(try KeychainFile.create(at: path, sealedTo: token), "svc", "acct", "s")
                flipHeaderByte(path, name, offset)
                let status = fileStatus { _ = try KeychainFile.open(at: path, secureEnclave: token) }
                #expect([Status.decode, Status.invalidKeychain].contains(status), "\(name)[\(offset)]: \(status)")
            }
            // The blob's last byte (inside the TPM's wrapped private part): the TPM's integrity check refuses it.
            let dir = TempDir()
            let path = dir.path()
            try addSecret(try KeychainFile.create(at: path, sealedTo: token), "svc", "acct", "s")
            flipHeaderByte(path, "sealed-key", Int.max)
            #expect(fileStatus { _ = try KeychainFile.open(at: path, secureEnclave: token) } == Status.decode)
        }
    }
}
#endif
