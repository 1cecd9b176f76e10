import Foundation
import KeychainEngine
import KeychainServices
import Testing

/// A scripted authenticator for access-control tests.
final class Prompts: Authenticator {
    let outcomes = Locked<[AuthenticationOutcome]>([])
    let count = Locked(0)
    func authenticate(_ request: AuthenticationRequest) -> AuthenticationOutcome {
        count.withLock { $0 += 1 }
        return outcomes.withLock { $0.isEmpty ? .success : $0.removeFirst() }
    }
}

/// Every test replaces the process-wide keychain with a fresh one in memory, so the suites run one at a time.
@Suite("KeychainServices: Apple's API on Linux", .serialized)
struct KeychainServicesTests {
    init() { KeychainServicesDefaults.useMemoryKeychain() }

    @Suite("SecureStore-style wrapper: generic passwords")
    struct GenericSecureStore {
        let store = SecureStore(queryable: GenericPasswordQueryable(service: "someService"))
        init() { KeychainServicesDefaults.useMemoryKeychain() }

        @Test("save") func save() throws { try store.setValue("pwd_1234", for: "genericPassword") }

        @Test("read") func read() throws {
            try store.setValue("pwd_1234", for: "genericPassword")
            #expect(try store.getValue(for: "genericPassword") == "pwd_1234")
        }

        @Test("update") func update() throws {
            try store.setValue("pwd_1234", for: "genericPassword")
            try store.setValue("pwd_1235", for: "genericPassword")
            #expect(try store.getValue(for: "genericPassword") == "pwd_1235")
        }

        @Test("remove") func remove() throws {
            try store.setValue("pwd_1234", for: "genericPassword")
            try store.removeValue(for: "genericPassword")
            #expect(try store.getValue(for: "genericPassword") == nil)
        }

        @Test("remove all of the service, and only it") func removeAll() throws {
            try store.setValue("pwd_1234", for: "genericPassword")
            try store.setValue("pwd_1235", for: "genericPassword2")
            let other = SecureStore(queryable: GenericPasswordQueryable(service: "otherService"))
            try other.setValue("keep", for: "genericPassword")
            try store.removeAllValues()
            #expect(try store.getValue(for: "genericPassword") == nil)
            #expect(try store.getValue(for: "genericPassword2") == nil)
            #expect(try other.getValue(for: "genericPassword") == "keep")
        }
    }

    @Suite("SecureStore-style wrapper: internet passwords")
    struct InternetSecureStore {
        let store = SecureStore(queryable: InternetPasswordQueryable(server: "someServer", port: 8080, path: "somePath",
                                                                    securityDomain: "someDomain", webProtocol: .https, authentication: .httpBasic))
        init() { KeychainServicesDefaults.useMemoryKeychain() }

        @Test("save") func save() throws { try store.setValue("pwd_1234", for: "internetPassword") }

        @Test("read") func read() throws {
            try store.setValue("pwd_1234", for: "internetPassword")
            #expect(try store.getValue(for: "internetPassword") == "pwd_1234")
        }

        @Test("update") func update() throws {
            try store.setValue("pwd_1234", for: "internetPassword")
            try store.setValue("pwd_1235", for: "internetPassword")
            #expect(try store.getValue(for: "internetPassword") == "pwd_1235")
        }

        @Test("remove") func remove() throws {
            try store.setValue("pwd_1234", for: "internetPassword")
            try store.removeValue(for: "internetPassword")
            #expect(try store.getValue(for: "internetPassword") == nil)
        }

        @Test("remove all") func removeAll() throws {
            try store.setValue("pwd_1234", for: "internetPassword")
            try store.setValue("pwd_1235", for: "internetPassword2")
            try store.removeAllValues()
            #expect(try store.getValue(for: "internetPassword") == nil)
            #expect(try store.getValue(for: "internetPassword2") == nil)
        }

        @Test("another port is another item") func portIsKey() throws {
            try store.setValue("pwd_8080", for: "internetPassword")
            let other = SecureStore(queryable: InternetPasswordQueryable(server: "someServer", port: 443, path: "somePath",
                                                                        securityDomain: "someDomain", webProtocol: .https, authentication: .httpBasic))
            #expect(try other.getValue(for: "internetPassword") == nil)
        }
    }

    @Suite("Add-or-update and the KeychainManager facade")
    struct Facades {
        init() { KeychainServicesDefaults.useMemoryKeychain() }

        @Test("add-or-update adds, then updates in place keeping the creation date")
        func addOrUpdate() throws {
            #expect(storeSecret(service: "svc", account: "a", data: Data("one".utf8)) == errSecSuccess)
            let query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "svc",
                                        kSecAttrAccount as String: "a", kSecReturnAttributes as String: true]
            var first: CFTypeRef?
            #expect(SecItemCopyMatching(query as CFDictionary, &first) == errSecSuccess)
            let created = (first as? [String: Any])?[kSecAttrCreationDate as String] as? Date
            #expect(created != nil)
            #expect(storeSecret(service: "svc", account: "a", data: Data("two".utf8)) == errSecSuccess)
            var second: CFTypeRef?
            #expect(SecItemCopyMatching(query as CFDictionary, &second) == errSecSuccess)
            #expect((second as? [String: Any])?[kSecAttrCreationDate as String] as? Date == created)
        }

        @Test("the facade round-trips, and its deleteAll wipes every generic password of every service")
        func managerHazard() {
            let manager = LegacyKeychainManager()
            #expect(manager.save("token", forKey: "auth_token"))
            #expect(manager.get(forKey: "auth_token") == "token")
            #expect(storeSecret(service: "com.other.app", account: "x", data: Data("theirs".utf8)) == errSecSuccess)
            #expect(manager.deleteAll())
            let query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "com.other.app"]
            #expect(SecItemCopyMatching(query as CFDictionary, nil) == errSecItemNotFound)
            #expect(manager.get(forKey: "auth_token") == nil)
        }
    }

    @Suite("Result shapes and status codes")
    struct Shapes {
        init() {
            KeychainServicesDefaults.useMemoryKeychain()
            for account in ["a", "b"] {
                _ = SecItemAdd([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "svc",
                                kSecAttrAccount as String: account, kSecValueData as String: Data("s-\(account)".utf8)] as CFDictionary, nil)
            }
        }

        func q(_ extra: [String: Any]) -> [String: Any] {
            [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "svc"].merging(extra) { $1 }
        }

        @Test("no return key: success and a nil result")
        func none() {
            var result: AnyObject? = NSString(string: "untouched")
            #expect(SecItemCopyMatching(q([:]) as CFDictionary, &result) == errSecSuccess)
            #expect(result == nil)
        }

        @Test("data alone: bare Data; attributes: a dictionary; limit All: an array even of one")
        func shapes() {
            var data: CFTypeRef?
            #expect(SecItemCopyMatching(q([kSecAttrAccount as String: "a", kSecReturnData as String: kCFBooleanTrue!]) as CFDictionary, &data) == errSecSuccess)
            #expect((data as? Data) == Data("s-a".utf8))
            var dict: CFTypeRef?
            _ = SecItemCopyMatching(q([kSecAttrAccount as String: "a", kSecReturnAttributes as String: true, kSecReturnData as String: true]) as CFDictionary, &dict)
            let item = dict as? [String: Any]
            #expect(item?[kSecAttrAccount as String] as? String == "a")
            #expect(item?[kSecValueData as String] as? Data == Data("s-a".utf8))
            #expect(item?[kSecAttrSynchronizable as String] as? Bool == false)
            var one: CFTypeRef?
            _ = SecItemCopyMatching(q([kSecAttrAccount as String: "a", kSecReturnData as String: true, kSecMatchLimit as String: kSecMatchLimitAll]) as CFDictionary, &one)
            #expect((one as? [Data])?.count == 1)
            var all: CFTypeRef?
            _ = SecItemCopyMatching(q([kSecReturnAttributes as String: true, kSecMatchLimit as String: kSecMatchLimitAll]) as CFDictionary, &all)
            #expect((all as? [[String: Any]])?.count == 2)
        }

        @Test("a persistent reference finds the item again")
        func persistentReference() {
            var ref: CFTypeRef?
            #expect(SecItemCopyMatching(q([kSecAttrAccount as String: "b", kSecReturnPersistentRef as String: true]) as CFDictionary, &ref) == errSecSuccess)
            let reference = ref as? Data
            #expect(reference != nil)
            var data: CFTypeRef?
            #expect(SecItemCopyMatching([kSecValuePersistentRef as String: reference as Any, kSecReturnData as String: true] as CFDictionary, &data) == errSecSuccess)
            #expect(data as? Data == Data("s-b".utf8))
        }

        @Test("duplicate, not found with limit All, wrong types, foreign attributes, missing result pointer")
        func statuses() {
            #expect(SecItemAdd(q([kSecAttrAccount as String: "a"]) as CFDictionary, nil) == errSecDuplicateItem)
            #expect(SecItemCopyMatching(q([kSecAttrAccount as String: "zz", kSecMatchLimit as String: kSecMatchLimitAll,
                                           kSecReturnAttributes as String: true]) as CFDictionary, nil) == errSecParam)
            var result: CFTypeRef?
            #expect(SecItemCopyMatching(q([kSecAttrAccount as String: "zz", kSecMatchLimit as String: kSecMatchLimitAll,
                                           kSecReturnAttributes as String: true]) as CFDictionary, &result) == errSecItemNotFound)
            #expect(SecItemAdd(q([kSecAttrAccount as String: "c", kSecValueData as String: "not data"]) as CFDictionary, nil) == errSecParam)
            #expect(SecItemAdd(q([kSecAttrAccount as String: "c", kSecAttrServer as String: "example.com"]) as CFDictionary, nil) == errSecNoSuchAttr)
            #expect(SecItemAdd(q([kSecAttrAccount as String: "c", kSecAttrLabel as String: NSObject()]) as CFDictionary, nil) == errSecParam)
            #expect(SecItemDelete(q([kSecMatchLimit as String: kSecMatchLimitOne]) as CFDictionary) == errSecParam)
        }

        @Test("messages are Apple's, and unknown codes read OSStatus <code>", arguments: [
            (errSecSuccess, "No error."), (errSecParam, "One or more parameters passed to a function were not valid."),
            (errSecUserCanceled, "User canceled the operation."), (errSecAuthFailed, "The user name or passphrase you entered is not correct."),
            (errSecDuplicateItem, "The specified item already exists in the keychain."),
            (errSecItemNotFound, "The specified item could not be found in the keychain."),
            (errSecInteractionNotAllowed, "User interaction is not allowed."), (errSecDecode, "Unable to decode the provided data."),
            (errSecMissingEntitlement, "A required entitlement isn't present."), (OSStatus(-99_999), "OSStatus -99999"),
        ] as [(OSStatus, String)])
        func messages(_ status: OSStatus, _ message: String) {
            #expect(SecCopyErrorMessageString(status, nil) as String? == message)
        }
    }

    @Suite("Access control and LocalAuthentication")
    struct AccessControlTests {
        let prompts = Prompts()
        init() {
            let engine = KeychainServicesDefaults.useMemoryKeychain()
            engine.authenticator = prompts
        }

        func addProtected() {
            var error: Unmanaged<CFError>?
            let access = SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly, .biometryCurrentSet, &error)
            #expect(access != nil && error == nil)
            let status = SecItemAdd([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "bio", kSecAttrAccount as String: "a",
                                     kSecAttrAccessControl as String: access as Any, kSecValueData as String: Data("g".utf8)] as CFDictionary, nil)
            #expect(status == errSecSuccess)
        }

        let read: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "bio",
                                   kSecAttrAccount as String: "a", kSecReturnData as String: true]

        @Test("an invalid protection class gives nil and an error")
        func invalidProtection() {
            var error: Unmanaged<CFError>?
            #expect(SecAccessControlCreateWithFlags(nil, "sometimes", .userPresence, &error) == nil)
            #expect(error != nil)
            error?.release()
        }

        @Test("a cancelled prompt is errSecUserCanceled; UI fail is errSecInteractionNotAllowed; success returns the secret")
        func outcomes() {
            addProtected()
            prompts.outcomes.withLock { $0 = [.userCancel] }
            var result: CFTypeRef?
            #expect(SecItemCopyMatching(read as CFDictionary, &result) == errSecUserCanceled)
            var failUI = read
            failUI[kSecUseAuthenticationUI as String] = kSecUseAuthenticationUIFail
            #expect(SecItemCopyMatching(failUI as CFDictionary, &result) == errSecInteractionNotAllowed)
            #expect(SecItemCopyMatching(read as CFDictionary, &result) == errSecSuccess)
            #expect(result as? Data == Data("g".utf8))
            #expect(prompts.count.current == 2)
        }

        @Test("an evaluated LAContext with a reuse window is not asked again")
        func laContextReuse() async throws {
            addProtected()
            let context = LAContext()
            context.touchIDAuthenticationAllowableReuseDuration = 10
            #expect(try await context.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "Unlock"))
            var query = read
            query[kSecUseAuthenticationContext as String] = context
            var result: CFTypeRef?
            #expect(SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess)
            #expect(SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess)
            #expect(prompts.count.current == 1)
            context.invalidate()
            #expect(SecItemCopyMatching(query as CFDictionary, &result) == errSecAuthFailed)
        }

        @Test("a cancelled evaluation throws LAError.userCancel")
        func evaluationCancel() async {
            prompts.outcomes.withLock { $0 = [.userCancel] }
            do {
                _ = try await LAContext().evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "Unlock")
                Issue.record("expected a cancel")
            } catch LAError.userCancel {
            } catch {
                Issue.record("unexpected \(error)")
            }
            var error: NSError?
            #expect(!LAContext().canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error))
            #expect(error?.code == LAError.Code.biometryNotAvailable.rawValue)
        }
    }

    @Test("the default keychain is the keychain file when none is chosen")
    func defaultIsFile() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-default-\(UUID().uuidString)")
        let path = directory.appendingPathComponent("login.keychain-db").path
        KeychainServicesDefaults.setEngine(nil)
        let previous = KeychainServicesDefaults.makeDefaultEngine
        setenv("KEYSTONE_KEYCHAIN", path, 1)
        defer {
            unsetenv("KEYSTONE_KEYCHAIN")
            KeychainServicesDefaults.makeDefaultEngine = previous
            KeychainServicesDefaults.useMemoryKeychain()
        }
        KeychainServicesDefaults.makeDefaultEngine = { try KeychainServicesDefaults.fileEngine() }
        #expect(SecItemAdd([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "file",
                            kSecValueData as String: Data("x".utf8)] as CFDictionary, nil) == errSecSuccess)
        #expect(FileManager.default.fileExists(atPath: path))
    }
}
