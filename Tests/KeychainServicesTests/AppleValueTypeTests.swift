// Linux-only: Keystone's SecItem implementation, checked against what Apple's keychain does with the types of
// the values it is given. Each rule cites the Apple source or documentation it comes from.
#if !canImport(Darwin)
import Foundation
import KeychainEngine
import KeychainServices
import Testing

/// The storages the SecItem functions run over in these tests.
enum SecItemStorage: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case memory, keychainFile
    var testDescription: String { rawValue }

    /// Makes the default keychain a fresh one of this kind; returns what to remove afterwards.
    @discardableResult
    func install() throws -> URL? {
        switch self {
        case .memory:
            KeychainServicesDefaults.useMemoryKeychain()
            return nil
        case .keychainFile:
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-types-\(UUID().uuidString)")
            KeychainServicesDefaults.setEngine(try KeychainServicesDefaults.fileEngine(at: directory.appendingPathComponent("t.keychain-db").path))
            return directory
        }
    }
}

/// Runs `body` over a fresh default keychain of `storage`, then removes it.
func withKeychain(_ storage: SecItemStorage, _ body: () throws -> Void) throws {
    let directory = try storage.install()
    defer {
        KeychainServicesDefaults.useMemoryKeychain()
        if let directory { try? FileManager.default.removeItem(at: directory) }
    }
    try body()
}

func addItem(_ attributes: [String: Any]) -> OSStatus { SecItemAdd(attributes as CFDictionary, nil) }

func copyItem(_ query: [String: Any]) -> (OSStatus, AnyObject?) {
    var result: AnyObject?
    let status = SecItemCopyMatching(query as CFDictionary, &result)
    return (status, result)
}

func attributesOf(_ query: [String: Any]) -> [String: Any]? {
    var query = query
    query[kSecReturnAttributes as String] = true
    return copyItem(query).1 as? [String: Any]
}

extension KeychainServicesTests {
    /// Apple's schema (SecItemSchema.c) types these attributes `Blob`: SecDbItem.c's `copyBlob` keeps a String
    /// as a String and Data as Data, and the searchable column holds the SHA-1 of the value's bytes
    /// (`SecDbAttrBind` with `copyData`: a String's UTF-8).
    @Suite("Blob attributes keep the type they were given and match by bytes")
    struct BlobAttributes {
        static let blobs: [(CFString, String)] = [
            (kSecClassGenericPassword, "acct"), (kSecClassGenericPassword, "svce"), (kSecClassGenericPassword, "gena"),
            (kSecClassGenericPassword, "labl"), (kSecClassGenericPassword, "alis"), (kSecClassGenericPassword, "desc"),
            (kSecClassGenericPassword, "icmt"), (kSecClassGenericPassword, "prot"),
            (kSecClassInternetPassword, "sdmn"), (kSecClassInternetPassword, "srvr"), (kSecClassInternetPassword, "atyp"),
            (kSecClassInternetPassword, "path"), (kSecClassInternetPassword, "acct"), (kSecClassKey, "atag"),
        ]

        static let cases: [(SecItemStorage, CFString, String)] = SecItemStorage.allCases.flatMap { s in blobs.map { (s, $0.0, $0.1) } }

        @Test("a blob attribute given as Data comes back as Data, given as a String comes back as a String",
              arguments: cases)
        func typeKept(storage: SecItemStorage, itemClass: CFString, key: String) throws {
            // Each add gets its own value of another primary-key attribute, so the two are separate items.
            let other = itemClass == kSecClassKey ? "klbl" : key == "acct" ? (itemClass == kSecClassGenericPassword ? "svce" : "srvr") : "acct"
            try withKeychain(storage) {
                let bytes = Data([0x74, 0x6F, 0x6B, 0x00, 0xFF])  // not UTF-8: only Data can hold it
                #expect(addItem([kSecClass as String: itemClass, key: bytes, other: Data("one".utf8),
                                 kSecValueData as String: Data("s1".utf8)]) == errSecSuccess)
                let asData = try #require(attributesOf([kSecClass as String: itemClass, key: bytes]))
                #expect(asData[key] as? Data == bytes)
                #expect(asData[key] as? String == nil)

                #expect(addItem([kSecClass as String: itemClass, key: "text", other: Data("two".utf8),
                                 kSecValueData as String: Data("s2".utf8)]) == errSecSuccess)
                let asString = try #require(attributesOf([kSecClass as String: itemClass, key: "text"]))
                #expect(asString[key] as? String == "text")
                #expect(asString[key] as? Data == nil)
                // The String is found by its bytes too.
                #expect(attributesOf([kSecClass as String: itemClass, key: Data("text".utf8)])?[key] as? String == "text")
            }
        }

        @Test("an item added with a String account is found by the same account as Data, and the reverse",
              arguments: SecItemStorage.allCases)
        func matchesAcrossTypes(storage: SecItemStorage) throws {
            try withKeychain(storage) {
                #expect(addItem([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "api",
                                 kSecAttrAccount as String: "alice", kSecValueData as String: Data("a".utf8)]) == errSecSuccess)
                #expect(addItem([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: Data("api".utf8),
                                 kSecAttrAccount as String: Data("bob".utf8), kSecValueData as String: Data("b".utf8)]) == errSecSuccess)
                let (s1, alice) = copyItem([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: Data("api".utf8),
                                            kSecAttrAccount as String: Data("alice".utf8), kSecReturnData as String: true])
                #expect(s1 == errSecSuccess && alice as? Data == Data("a".utf8))
                let (s2, bob) = copyItem([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "api",
                                          kSecAttrAccount as String: "bob", kSecReturnData as String: true])
                #expect(s2 == errSecSuccess && bob as? Data == Data("b".utf8))
                // A service-wide query finds both, each with the type it was added with.
                let (s3, all) = copyItem([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "api",
                                          kSecReturnAttributes as String: true, kSecMatchLimit as String: kSecMatchLimitAll])
                let items = try #require(all as? [[String: Any]])
                #expect(s3 == errSecSuccess && items.count == 2)
                #expect(items.contains { $0[kSecAttrAccount as String] as? String == "alice" })
                #expect(items.contains { $0[kSecAttrAccount as String] as? Data == Data("bob".utf8) })
            }
        }

        @Test("the same bytes as a String and as Data are one primary key: the second add is errSecDuplicateItem",
              arguments: SecItemStorage.allCases)
        func sameBytesCollide(storage: SecItemStorage) throws {
            try withKeychain(storage) {
                let item: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "api",
                                           kSecAttrAccount as String: "alice", kSecValueData as String: Data("first".utf8)]
                #expect(addItem(item) == errSecSuccess)
                var asData = item
                asData[kSecAttrAccount as String] = Data("alice".utf8)
                asData[kSecValueData as String] = Data("second".utf8)
                #expect(addItem(asData) == errSecDuplicateItem)
                // A missing account is empty Data (Apple's default for blobs), the same key as "".
                let noAccount: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "svc2"]
                #expect(addItem(noAccount) == errSecSuccess)
                #expect(addItem(noAccount.merging([kSecAttrAccount as String: ""]) { $1 }) == errSecDuplicateItem)
                #expect(attributesOf(noAccount)?[kSecAttrAccount as String] as? Data == Data())
                // Precomposed and decomposed "é" differ in bytes, so they are two items.
                #expect(addItem(item.merging([kSecAttrAccount as String: "caf\u{E9}"]) { $1 }) == errSecSuccess)
                #expect(addItem(item.merging([kSecAttrAccount as String: "cafe\u{301}"]) { $1 }) == errSecSuccess)
                // An update that would give an item another's key by bytes is refused, and changes nothing.
                #expect(SecItemUpdate([kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "caf\u{E9}"] as CFDictionary,
                                      [kSecAttrAccount as String: Data("alice".utf8)] as CFDictionary) == errSecDuplicateItem)
                #expect(attributesOf([kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "caf\u{E9}"]) != nil)
            }
        }

        @Test("a non-UTF-8 account is never found by a string query, and deleting by bytes removes only it",
              arguments: SecItemStorage.allCases)
        func binaryAccounts(storage: SecItemStorage) throws {
            try withKeychain(storage) {
                let binary = Data([0xC3, 0x28])  // invalid UTF-8
                #expect(addItem([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "s",
                                 kSecAttrAccount as String: binary]) == errSecSuccess)
                #expect(addItem([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "s",
                                 kSecAttrAccount as String: "\u{FFFD}("]) == errSecSuccess)
                #expect(SecItemDelete([kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: binary] as CFDictionary) == errSecSuccess)
                #expect(attributesOf([kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "\u{FFFD}("]) != nil)
                #expect(copyItem([kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: binary]).0 == errSecItemNotFound)
            }
        }
    }

    /// SecDbItem.c's `copyNumber`: a number, a Boolean (0 or 1), or a String; a string that does not print back
    /// as the 32-bit integer it parses to is kept as the string (older code passes four-character codes so).
    @Suite("Number attributes given as strings")
    struct NumberAttributesAsStrings {
        @Test("kSecAttrCreator and kSecAttrType as four-character strings are stored and returned as strings",
              arguments: SecItemStorage.allCases)
        func fourCharacterStrings(storage: SecItemStorage) throws {
            try withKeychain(storage) {
                let item: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "s",
                                           kSecAttrAccount as String: "a", kSecAttrCreator as String: "aapl",
                                           kSecAttrType as String: "note"]
                #expect(addItem(item) == errSecSuccess)
                let attributes = try #require(attributesOf([kSecClass as String: kSecClassGenericPassword, kSecAttrCreator as String: "aapl"]))
                #expect(attributes[kSecAttrCreator as String] as? String == "aapl")
                #expect(attributes[kSecAttrType as String] as? String == "note")
                // The number with the same four bytes is another value.
                #expect(copyItem([kSecClass as String: kSecClassGenericPassword, kSecAttrCreator as String: 0x6161_706C]).0 == errSecItemNotFound)
            }
        }

        @Test("a decimal string becomes the number; an out-of-range or padded one stays a string",
              arguments: SecItemStorage.allCases)
        func decimalStrings(storage: SecItemStorage) throws {
            try withKeychain(storage) {
                #expect(addItem([kSecClass as String: kSecClassInternetPassword, kSecAttrServer as String: "h",
                                 kSecAttrPort as String: "443", kSecAttrCreator as String: "-7"]) == errSecSuccess)
                let attributes = try #require(attributesOf([kSecClass as String: kSecClassInternetPassword, kSecAttrPort as String: 443]))
                #expect((attributes[kSecAttrPort as String] as? NSNumber)?.intValue == 443)
                #expect(attributes[kSecAttrPort as String] as? String == nil)
                #expect((attributes[kSecAttrCreator as String] as? NSNumber)?.intValue == -7)
                #expect(addItem([kSecClass as String: kSecClassInternetPassword, kSecAttrServer as String: "h2",
                                 kSecAttrCreator as String: "4294967296", kSecAttrType as String: "007"]) == errSecSuccess)
                let kept = try #require(attributesOf([kSecClass as String: kSecClassInternetPassword, kSecAttrServer as String: "h2"]))
                #expect(kept[kSecAttrCreator as String] as? String == "4294967296")
                #expect(kept[kSecAttrType as String] as? String == "007")
                // Data is no number: errSecParam, nothing stored.
                #expect(addItem([kSecClass as String: kSecClassInternetPassword, kSecAttrServer as String: "h3",
                                 kSecAttrPort as String: Data([1])]) == errSecParam)
                #expect(copyItem([kSecClass as String: kSecClassInternetPassword, kSecAttrServer as String: "h3"]).0 == errSecItemNotFound)
            }
        }
    }

    /// Apple documents that `kSecAttrSynchronizable` does not go with a `…ThisDeviceOnly` accessibility, but the
    /// keychain on iOS accepts such an item and reads it back as synchronizable: it simply never syncs.
    @Suite("Synchronizable with a ThisDeviceOnly accessibility")
    struct SynchronizableThisDeviceOnly {
        @Test("SecItemAdd accepts it and it reads back synchronizable with its accessibility",
              arguments: SecItemStorage.allCases)
        func accepted(storage: SecItemStorage) throws {
            try withKeychain(storage) {
                #expect(addItem([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "s",
                                 kSecAttrAccount as String: "a", kSecAttrSynchronizable as String: true,
                                 kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly]) == errSecSuccess)
                let attributes = try #require(attributesOf([kSecClass as String: kSecClassGenericPassword,
                                                            kSecAttrSynchronizable as String: true]))
                #expect((attributes[kSecAttrSynchronizable as String] as? NSNumber)?.boolValue == true)
                #expect(attributes[kSecAttrAccessible as String] as? String == kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly as String)
                // A local query does not see it: it is still a synchronizable item.
                #expect(copyItem([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "s"]).0 == errSecItemNotFound)
            }
        }

        @Test("SecItemUpdate may give a synchronizable item a ThisDeviceOnly accessibility, and the reverse",
              arguments: SecItemStorage.allCases)
        func updateAccepted(storage: SecItemStorage) throws {
            try withKeychain(storage) {
                #expect(addItem([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "s",
                                 kSecAttrSynchronizable as String: true]) == errSecSuccess)
                let query = [kSecClass as String: kSecClassGenericPassword, kSecAttrSynchronizable as String: kSecAttrSynchronizableAny] as [String: Any]
                #expect(SecItemUpdate(query as CFDictionary, [kSecAttrAccessible as String: kSecAttrAccessibleWhenUnlockedThisDeviceOnly] as CFDictionary) == errSecSuccess)
                #expect(attributesOf(query)?[kSecAttrAccessible as String] as? String == "aku")
                #expect(addItem([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "local",
                                 kSecAttrAccessible as String: kSecAttrAccessibleWhenUnlockedThisDeviceOnly]) == errSecSuccess)
                #expect(SecItemUpdate([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "local"] as CFDictionary,
                                      [kSecAttrSynchronizable as String: true] as CFDictionary) == errSecSuccess)
            }
        }
    }

    /// Apple makes references only for keys, certificates and identities (SecItem.c,
    /// `SecItemCreateFromAttributeDictionary` has no password case), and every attributes result carries an
    /// access control (`accc`), made from the protection class for items added with `kSecAttrAccessible` only.
    @Suite("Result shapes: references and access controls")
    struct ResultShapes {
        @Test("kSecReturnRef adds no v_Ref to a password's result, and alone asks for nothing",
              arguments: SecItemStorage.allCases.flatMap { s in [kSecClassGenericPassword, kSecClassInternetPassword].map { (s, $0) } })
        func noReferenceForPasswords(storage: SecItemStorage, itemClass: CFString) throws {
            try withKeychain(storage) {
                #expect(addItem([kSecClass as String: itemClass, kSecAttrAccount as String: "a", kSecValueData as String: Data("s".utf8)]) == errSecSuccess)
                let (status, result) = copyItem([kSecClass as String: itemClass, kSecReturnRef as String: true,
                                                 kSecReturnAttributes as String: true])
                let attributes = try #require(result as? [String: Any])
                #expect(status == errSecSuccess)
                #expect(attributes[kSecValueRef as String] == nil)
                #expect(attributes[kSecAttrAccount as String] as? String == "a")
                let (aloneStatus, alone) = copyItem([kSecClass as String: itemClass, kSecReturnRef as String: true])
                #expect(aloneStatus == errSecSuccess)
                #expect(alone == nil)
                // Data with a reference is the data alone: the reference adds nothing.
                let (_, data) = copyItem([kSecClass as String: itemClass, kSecReturnRef as String: true, kSecReturnData as String: true])
                #expect(data as? Data == Data("s".utf8))
            }
        }

        @Test("an item added with kSecAttrAccessible returns a SecAccessControl of that protection and no flags",
              arguments: SecItemStorage.allCases)
        func derivedAccessControl(storage: SecItemStorage) throws {
            try withKeychain(storage) {
                #expect(addItem([kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "a",
                                 kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlock]) == errSecSuccess)
                #expect(addItem([kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "b"]) == errSecSuccess)
                let a = try #require(attributesOf([kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "a"]))
                let control = try #require(a[kSecAttrAccessControl as String] as? SecAccessControl)
                #expect(control.accessControl == AccessControl(accessibility: .afterFirstUnlock, flags: []))
                let b = try #require(attributesOf([kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "b"]))
                #expect((b[kSecAttrAccessControl as String] as? SecAccessControl)?.accessControl == AccessControl(accessibility: .whenUnlocked, flags: []))
                // An item added with an access control returns it, flags included.
                let flagged = try #require(SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlockedThisDeviceOnly, .devicePasscode, nil))
                #expect(addItem([kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "c",
                                 kSecAttrAccessControl as String: flagged]) == errSecSuccess)
                let c = try #require(attributesOf([kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "c"]))
                #expect((c[kSecAttrAccessControl as String] as? SecAccessControl)?.accessControl
                        == AccessControl(accessibility: .whenUnlockedThisDeviceOnly, flags: .devicePasscode))
            }
        }
    }
}
#endif
