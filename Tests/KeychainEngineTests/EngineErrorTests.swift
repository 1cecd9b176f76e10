import Foundation
import Testing
import KeychainEngine

@Suite("EngineError: one typed error with the OSStatus")
struct EngineErrorTests {
    @Test("a duplicate add is caught by name, whatever its reason")
    func catchByName() throws {
        let f = Fixture()
        try f.engine.add(genp("svc", "alice", [Key.valueData: secret("s")]))
        var caught = false
        do {
            try f.engine.add(genp("svc", "alice", [Key.valueData: secret("t")]))
        } catch EngineError.itemNotFound {
            Issue.record("a duplicate matched errSecItemNotFound")
        } catch EngineError.duplicateItem {
            caught = true
        }
        #expect(caught)
    }

    @Test("a missing item is caught by its code, and the code compares by name")
    func catchByCode() throws {
        let f = Fixture()
        do {
            _ = try f.engine.copyMatching(genp("svc", "nobody"))
            Issue.record("the copy of a missing item succeeded")
        } catch let error as EngineError where error.code == .itemNotFound {
            #expect(error.status == -25300)
        }
        do {
            try f.engine.delete(genp("svc", "nobody"))
            Issue.record("the delete of a missing item succeeded")
        } catch EngineError.Code.itemNotFound {
            // matched by the code pattern
        }
    }

    @Test("a code pattern matches only an EngineError with that status")
    func codePatternIsExact() {
        #expect(EngineError.Code.decode ~= EngineError(Status.decode, "the row failed its integrity check"))
        #expect(!(EngineError.Code.decode ~= EngineError(Status.param)))
        #expect(!(EngineError.Code.decode ~= CocoaError(.fileNoSuchFile)))
        #expect(EngineError.interactionNotAllowed ~= EngineError.interactionNotAllowed("locked"))
        #expect(!(EngineError.interactionNotAllowed ~= CocoaError(.fileNoSuchFile)))
    }

    @Test("errors are equal when their statuses are; the reason is not compared, and hashing agrees")
    func equality() {
        let a = EngineError(Status.decode, "one reason")
        let b = EngineError(.decode, "another reason")
        #expect(a == b)
        #expect(a.hashValue == b.hashValue)
        #expect(Set([a, b]).count == 1)
        #expect(a != EngineError.param)
    }

    @Test("the named codes keep Apple's OSStatus values")
    func statusValues() {
        let expected: [(EngineError.Code, Int32, String)] = [
            (.unimplemented, -4, "errSecUnimplemented"), (.diskFull, -34, "errSecDiskFull"), (.io, -36, "errSecIO"),
            (.param, -50, "errSecParam"), (.wrPerm, -61, "errSecWrPerm"), (.allocate, -108, "errSecAllocate"),
            (.userCanceled, -128, "errSecUserCanceled"), (.internalComponent, -2070, "errSecInternalComponent"),
            (.notAvailable, -25291, "errSecNotAvailable"), (.authFailed, -25293, "errSecAuthFailed"),
            (.noSuchKeychain, -25294, "errSecNoSuchKeychain"), (.invalidKeychain, -25295, "errSecInvalidKeychain"),
            (.duplicateKeychain, -25296, "errSecDuplicateKeychain"), (.duplicateItem, -25299, "errSecDuplicateItem"),
            (.itemNotFound, -25300, "errSecItemNotFound"), (.dataTooLarge, -25302, "errSecDataTooLarge"),
            (.noSuchAttr, -25303, "errSecNoSuchAttr"), (.interactionNotAllowed, -25308, "errSecInteractionNotAllowed"),
            (.wrongSecVersion, -25310, "errSecWrongSecVersion"), (.decode, -26275, "errSecDecode"),
            (.missingEntitlement, -34018, "errSecMissingEntitlement"), (.internalError, -67671, "errSecInternalError"),
            (.quotaExceeded, -67596, "errSecQuotaExceeded"),
        ]
        for (code, status, name) in expected {
            #expect(code.rawValue == status)
            #expect(code.description == name)
            #expect(EngineError(code).status == status)
        }
        #expect(EngineError.itemNotFound.code == .itemNotFound)
        #expect(EngineError.Code(rawValue: 12345).description == "OSStatus 12345")
    }

    @Test("the description names the status and the reason")
    func description() {
        let error = EngineError(Status.itemNotFound, "no item matched the service")
        #expect(error.description == "errSecItemNotFound (-25300): The specified item could not be found in the keychain. no item matched the service")
        #expect(EngineError.duplicateItem.description == "errSecDuplicateItem (-25299): The specified item already exists in the keychain.")
    }

    @Test("no engine error holds the secret or the attribute values of the query that failed")
    func noSecretsInErrors() throws {
        let f = Fixture()
        let password = "correct horse battery staple"
        let account = "account-value-7f3a"
        try f.engine.add(genp("svc", account, [Key.valueData: secret(password)]))
        var failures: [EngineError] = []
        func record(_ body: () throws -> Void) {
            do { try body(); Issue.record("the call succeeded") } catch let e as EngineError { failures.append(e) } catch { Issue.record("not an EngineError: \(error)") }
        }
        // A duplicate, a wrong value type, a key foreign to the class, an update with a class key, a locked keychain.
        record { try f.engine.add(genp("svc", account, [Key.valueData: secret(password)])) }
        record { try f.engine.add(genp("svc", "b", [Key.valueData: .string(password), Key.isInvisible: .string(password)])) }
        record { try f.engine.add(genp("svc", "c", [Key.valueData: secret(password), Key.server: .string(password)])) }
        record { try f.engine.update(genp("svc", account), with: [Key.class: .string("genp"), Key.valueData: secret(password)]) }
        f.storage.lockState = .locked
        record { _ = try f.engine.copyMatching(genp("svc", account, [Key.returnData: .bool(true)])) }
        #expect(failures.count == 5)
        for failure in failures {
            #expect(!failure.description.contains(password), "\(failure.status)")
            #expect(!failure.description.contains(account), "\(failure.status)")
            #expect(!failure.reason.contains(password))
        }
    }
}
