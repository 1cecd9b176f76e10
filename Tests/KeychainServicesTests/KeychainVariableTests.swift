#if !canImport(Darwin)
import Foundation
import KeychainEngine
import KeychainServices
import Testing

/// `KEYSTONE_KEYCHAIN` in the library: the keychain it names is used, never created by mistake.
///
/// Each test passes its own environment to ``KeychainServicesDefaults/environmentEngine(_:)`` (no setenv: other
/// test targets in this process read the environment concurrently), and never replaces the process's engine.
@Suite("KeychainServicesDefaults: a KEYSTONE_KEYCHAIN that does not exist is refused unless its creation is asked for")
struct KeychainVariableTests {
    private static func directory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-variable-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    private static func status(_ body: () throws -> Void) -> Int32? {
        do {
            try body()
            return nil
        } catch let error as EngineError {
            return error.status
        } catch {
            return Status.internalComponent
        }
    }

    @Test("a missing KEYSTONE_KEYCHAIN fails with errSecNoSuchKeychain, naming the variable and the fix, and creates nothing")
    func missingIsRefused() throws {
        let directory = try Self.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let typo = directory.appendingPathComponent("wrok.keychain-db").path
        var message = ""
        do {
            _ = try KeychainServicesDefaults.environmentEngine(["KEYSTONE_KEYCHAIN": typo, "KEYSTONE_SECURE_ENCLAVE": "none"])
            Issue.record("a missing keychain was opened")
        } catch let error as EngineError {
            #expect(error.status == Status.noSuchKeychain)
            message = error.reason
        }
        #expect(message.contains("KEYSTONE_KEYCHAIN") && message.contains(typo) && message.contains("KEYSTONE_KEYCHAIN_CREATE=1"), "\(message)")
        #expect(!FileManager.default.fileExists(atPath: typo), "nothing was created at the mistyped path")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).isEmpty)
    }

    @Test("KEYSTONE_KEYCHAIN_CREATE=1 creates it (empty password); then it opens without the variable and keeps its items")
    func creationAskedFor() throws {
        let directory = try Self.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("new.keychain-db").path
        let engine = try KeychainServicesDefaults.environmentEngine(["KEYSTONE_KEYCHAIN": path, "KEYSTONE_KEYCHAIN_CREATE": "1"])
        #expect(FileManager.default.fileExists(atPath: path))
        try engine.add([Key.class: .string("genp"), Key.service: .string("svc"), Key.valueData: .data(Data("kept".utf8))])
        let reopened = try KeychainServicesDefaults.environmentEngine(["KEYSTONE_KEYCHAIN": path])
        let found = try reopened.copyMatching([Key.class: .string("genp"), Key.service: .string("svc"), Key.returnData: .bool(true)])
        #expect(found?.data == Data("kept".utf8))
        // Any other value does not ask for it.
        let other = directory.appendingPathComponent("other.keychain-db").path
        #expect(Self.status { _ = try KeychainServicesDefaults.environmentEngine(["KEYSTONE_KEYCHAIN": other, "KEYSTONE_KEYCHAIN_CREATE": "yes"]) }
                == Status.noSuchKeychain)
        #expect(!FileManager.default.fileExists(atPath: other))
    }

    @Test("fileEngine(at:createIfMissing: false) refuses a missing file; the default still creates the file the program names")
    func fileEngineCreation() throws {
        let directory = try Self.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("named.keychain-db").path
        #expect(Self.status { _ = try KeychainServicesDefaults.fileEngine(at: path, createIfMissing: false) } == Status.noSuchKeychain)
        #expect(!FileManager.default.fileExists(atPath: path))
        _ = try KeychainServicesDefaults.fileEngine(at: path)
        #expect(FileManager.default.fileExists(atPath: path))
    }

    @Test("a KEYSTONE_BACKEND naming no storage is refused without echoing a URL's password")
    func backendRedacted() throws {
        var reason = ""
        do {
            _ = try KeychainServicesDefaults.environmentEngine(["KEYSTONE_BACKEND": "https://alice:Pa55-w0rd@example.com/x"])
        } catch let error as EngineError {
            #expect(error.status == Status.param)
            reason = error.reason
        }
        #expect(reason.contains("https://alice:***@example.com/x"), "\(reason)")
        #expect(!reason.contains("Pa55-w0rd"))
    }
}
#endif
