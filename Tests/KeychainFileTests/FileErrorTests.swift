import Crypto
import Foundation
import KeychainEngine
@testable import KeychainFile
import KeychainSealing
import Testing

@Suite("Keychain file errors: EngineError only, no secrets")
struct FileErrorTests {
    struct Foreign: Error, CustomStringConvertible {
        let description = "foreign failure carrying value-9d1c"
    }

    @Test("a failure that is not an EngineError surfaces as errSecInternalError naming its type only")
    func foreignErrors() {
        do {
            _ = try engineErrors { () throws -> Int in throw Foreign() }
            Issue.record("no error")
        } catch {
            #expect(error.code == .internalError)
            #expect(error.reason.contains("Foreign"))
            #expect(!error.description.contains("value-9d1c"))
        }
    }

    @Test("a SQLite failure surfaces as the keychain status it means; an EngineError passes unchanged")
    func sqliteAndEngineErrors() {
        do {
            _ = try engineErrors { () throws -> Int in throw SQLiteError(code: 13 /* SQLITE_FULL */, message: "database or disk is full") }
        } catch {
            #expect(error.code == .diskFull)
        }
        do {
            _ = try engineErrors { () throws -> Int in throw EngineError(.authFailed, "wrong keychain password") }
        } catch {
            #expect(error == EngineError.authFailed)
            #expect(error.reason == "wrong keychain password")
        }
    }

    @Test("sealed bytes that fail authentication are errSecDecode, not a swift-crypto error")
    func sealingErrors() throws {
        let key = SymmetricKey(size: .bits256)
        let sealed = try Sealing.seal(Data("the secret".utf8), key: key, aad: Data("aad".utf8))
        #expect(try Sealing.open(sealed, key: key, aad: Data("aad".utf8)) == Data("the secret".utf8))
        for (bytes, aad) in [(sealed, Data("other".utf8)), (Data([1, 2, 3]), Data("aad".utf8))] {
            do {
                _ = try Sealing.open(bytes, key: key, aad: aad)
                Issue.record("tampered bytes opened")
            } catch {
                #expect(error.code == .decode)
            }
        }
    }

    @Test("a wrong password, a missing file and a file that is not a keychain are EngineErrors without the password")
    func publicErrors() throws {
        let dir = TempDir()
        defer { try? FileManager.default.removeItem(at: dir.url) }
        let path = dir.path()
        let password = "pw-4e7b-not-in-errors"
        let file = try KeychainFile.create(at: path, password: password)
        file.lock()
        var caught: [EngineError] = []
        do { try file.unlock(password: password + "x") } catch EngineError.authFailed { caught.append(EngineError.authFailed) }
        do { _ = try KeychainFile.open(at: dir.path("missing.keychain-db")) } catch let e as EngineError where e.code == .noSuchKeychain { caught.append(e) }
        let notKeychain = dir.path("plain.txt")
        #expect(FileManager.default.createFile(atPath: notKeychain, contents: Data(password.utf8), attributes: [.posixPermissions: 0o600]))
        do { _ = try KeychainFile.open(at: notKeychain) } catch let e as EngineError where e.code == .invalidKeychain { caught.append(e) }
        #expect(caught.count == 3)
        for error in caught { #expect(!error.description.contains(password)) }
    }
}
