// Linux-only: these tests use KeychainServices' own API (the default engine, SecItemBridge), which Apple
// platforms replace with the Security framework. AppleStyleCode.swift compiles on both.
#if !canImport(Darwin)
import DefaultKeychainLock
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

/// Every item of `itemClass` in the default keychain, attributes and data, read with SecItemCopyMatching itself.
func allItems(of itemClass: CFString) throws -> [[String: Any]] {
    let query: [String: Any] = [kSecClass as String: itemClass, kSecMatchLimit as String: kSecMatchLimitAll,
                                kSecReturnAttributes as String: true, kSecReturnData as String: true]
    var result: AnyObject?
    let status = SecItemCopyMatching(query as CFDictionary, &result)
    if status == errSecItemNotFound { return [] }
    try #require(status == errSecSuccess, "SecItemCopyMatching: \(status)")
    return try #require(result as? [[String: Any]])
}

/// Tests of the SecItem functions over the process-wide default keychain.
///
/// Every test replaces the default keychain with a fresh one in memory (never the user's keychain file), so
/// these suites run one at a time (`.serialized` covers the nested suites and `IdiomTests`' extension), and
/// only while no suite of another target that uses the default keychain runs (`.ownsDefaultKeychain`).
/// Unique service names would not be enough: the KeychainManager facade's `deleteAll` wipes every generic
/// password of the keychain, and some tests change the default engine itself.
@Suite("KeychainServices: Apple's API on Linux", .serialized, .ownsDefaultKeychain)
struct KeychainServicesTests {
    init() { KeychainServicesDefaults.useMemoryKeychain() }

    @Suite("SecureStore-style wrapper: generic passwords")
    struct GenericSecureStore {
        let store = SecureStore(queryable: GenericPasswordQueryable(service: "someService"))
        init() { KeychainServicesDefaults.useMemoryKeychain() }

        @Test("save adds one generic password: the service, the account and the value, nothing else")
        func save() throws {
            try store.setValue("pwd_1234", for: "genericPassword")
            // Read with SecItemCopyMatching itself, not the wrapper's getValue: every generic password of the keychain.
            let items = try allItems(of: kSecClassGenericPassword)
            try #require(items.count == 1, "\(items.count) generic passwords after one save")
            #expect(items[0][kSecAttrService as String] as? String == "someService")
            #expect(items[0][kSecAttrAccount as String] as? String == "genericPassword")
            #expect(items[0][kSecValueData as String] as? Data == Data("pwd_1234".utf8))
        }

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

        @Test("save adds one internet password with every attribute of the queryable, the account and the value")
        func save() throws {
            try store.setValue("pwd_1234", for: "internetPassword")
            let items = try allItems(of: kSecClassInternetPassword)
            try #require(items.count == 1, "\(items.count) internet passwords after one save")
            let item = items[0]
            #expect(item[kSecAttrServer as String] as? String == "someServer")
            #expect(item[kSecAttrPort as String] as? Int == 8080)
            #expect(item[kSecAttrPath as String] as? String == "somePath")
            #expect(item[kSecAttrSecurityDomain as String] as? String == "someDomain")
            #expect(item[kSecAttrProtocol as String] as? String == kSecAttrProtocolHTTPS)
            #expect(item[kSecAttrAuthenticationType as String] as? String == kSecAttrAuthenticationTypeHTTPBasic)
            #expect(item[kSecAttrAccount as String] as? String == "internetPassword")
            #expect(item[kSecValueData as String] as? Data == Data("pwd_1234".utf8))
        }

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
    }

    @Suite("Access control and LocalAuthentication")
    struct AccessControlTests {
        let prompts = Prompts()
        let clock = Locked(Date(timeIntervalSinceReferenceDate: 800_000_000))
        let engine: KeychainEngine
        init() {
            var configuration = EngineConfiguration()
            configuration.now = { [clock] in clock.current }
            engine = KeychainServicesDefaults.useMemoryKeychain(configuration: configuration)
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
            #expect(try await context.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "Unlock"))
            var query = read
            query[kSecUseAuthenticationContext as String] = context
            var result: CFTypeRef?
            #expect(SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess)
            #expect(SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess)
            #expect(prompts.count.current == 1)
            context.invalidate()
            #expect(SecItemCopyMatching(query as CFDictionary, &result) == errSecAuthFailed)
        }

        @Test("a failed prompt is errSecAuthFailed; attributes-only reads never prompt and return the SecAccessControl")
        func attributesOnly() throws {
            addProtected()
            prompts.outcomes.withLock { $0 = [.failed] }
            var result: CFTypeRef?
            #expect(SecItemCopyMatching(read as CFDictionary, &result) == errSecAuthFailed)
            var attributes = read
            attributes[kSecReturnData as String] = nil
            attributes[kSecReturnAttributes as String] = true
            #expect(SecItemCopyMatching(attributes as CFDictionary, &result) == errSecSuccess)
            let item = try #require(result as? [String: Any])
            let access = try #require(item[kSecAttrAccessControl as String] as? SecAccessControl)
            #expect(access.accessControl.flags == .biometryCurrentSet)
            #expect(prompts.count.current == 1)
        }

        @Test("kSecUseAuthenticationUISkip leaves protected items out")
        func skip() {
            addProtected()
            var query = read
            query[kSecUseAuthenticationUI as String] = kSecUseAuthenticationUISkip
            var result: CFTypeRef?
            #expect(SecItemCopyMatching(query as CFDictionary, &result) == errSecItemNotFound)
            #expect(prompts.count.current == 0)
        }

        @Test("an LAContext with interactionNotAllowed turns the prompt into errSecInteractionNotAllowed")
        func contextNotInteractive() {
            addProtected()
            let context = LAContext()
            context.interactionNotAllowed = true
            var query = read
            query[kSecUseAuthenticationContext as String] = context
            var result: CFTypeRef?
            #expect(SecItemCopyMatching(query as CFDictionary, &result) == errSecInteractionNotAllowed)
            #expect(prompts.count.current == 0)
        }

        @Test("the reply form runs off the caller, records the success, and its reuse window ends")
        func replyAndExpiry() async {
            addProtected()
            let context = LAContext()
            context.touchIDAuthenticationAllowableReuseDuration = 60
            let replied: (Bool, (any Error)?) = await withCheckedContinuation { continuation in
                context.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "Unlock") { success, error in
                    continuation.resume(returning: (success, error))
                }
            }
            #expect(replied.0 && replied.1 == nil)
            var query = read
            query[kSecUseAuthenticationContext as String] = context
            var result: CFTypeRef?
            #expect(SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess)
            #expect(prompts.count.current == 1)
            clock.withLock { $0 += 61 }
            prompts.outcomes.withLock { $0 = [.userCancel] }
            #expect(SecItemCopyMatching(query as CFDictionary, &result) == errSecUserCanceled)
            #expect(prompts.count.current == 2)
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

    @Suite("Attribute values through the keychain")
    struct RoundTrips {
        init() { KeychainServicesDefaults.useMemoryKeychain() }

        @Test("numbers, Booleans, dates and strings come back with their types")
        func typedAttributes() throws {
            let add: [String: Any] = [
                kSecClass as String: kSecClassInternetPassword, kSecAttrServer as String: "example.com",
                kSecAttrAccount as String: NSString(string: "ann"), kSecAttrPort as String: NSNumber(value: 1),
                kSecAttrProtocol as String: kSecAttrProtocolHTTPS, kSecAttrIsInvisible as String: kCFBooleanTrue!,
                kSecAttrLabel as String: "Example", kSecValueData as String: NSData(data: Data("pw".utf8)),
            ]
            #expect(SecItemAdd(add as CFDictionary, nil) == errSecSuccess)
            var result: AnyObject?
            let query: [String: Any] = [kSecClass as String: kSecClassInternetPassword, kSecAttrServer as String: "example.com",
                                        kSecAttrPort as String: 1, kSecReturnAttributes as String: true, kSecReturnData as String: true]
            #expect(SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess)
            let item = try #require(result as? [String: Any])
            #expect(item[kSecAttrAccount as String] as? String == "ann")
            #expect(item[kSecAttrPort as String] as? Int == 1)
            #expect(SecItemBridge.keychainValue(try #require(item[kSecAttrPort as String])) == .number(1))
            #expect(item[kSecAttrProtocol as String] as? String == kSecAttrProtocolHTTPS)
            #expect(item[kSecAttrIsInvisible as String] as? Bool == true)
            #expect(item[kSecAttrLabel as String] as? String == "Example")
            #expect(item[kSecValueData as String] as? Data == Data("pw".utf8))
            #expect(item[kSecAttrCreationDate as String] is Date)
            #expect(item[kSecAttrAccessible as String] as? String == kSecAttrAccessibleWhenUnlocked)
            // Decision: the attributes name the item's class. Apple's do on macOS and on recent iOS (dictionaries with
            // `persistref` printed from apps show `class = genp`; iOS 11's did not); the engine always adds it.
            #expect(item[kSecClass as String] as? String == kSecClassInternetPassword)
        }

        @Test("a number limit above one returns an array; SecItemAdd with return keys returns the new item")
        func limitsAndAddResults() throws {
            for account in ["a", "b", "c"] {
                var added: CFTypeRef?
                let status = SecItemAdd([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "lim",
                                         kSecAttrAccount as String: account, kSecValueData as String: Data(account.utf8),
                                         kSecReturnAttributes as String: true] as CFDictionary, &added)
                #expect(status == errSecSuccess)
                #expect((added as? [String: Any])?[kSecAttrAccount as String] as? String == account)
            }
            var two: CFTypeRef?
            #expect(SecItemCopyMatching([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "lim",
                                         kSecMatchLimit as String: 2, kSecReturnData as String: true] as CFDictionary, &two) == errSecSuccess)
            #expect((two as? [Data])?.count == 2)
            var plain: CFTypeRef?
            #expect(SecItemAdd([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "lim",
                                kSecAttrAccount as String: "d"] as CFDictionary, &plain) == errSecSuccess)
            #expect(plain == nil)
        }

        @Test("synchronizable items are matched only with kSecAttrSynchronizableAny or sync true")
        func synchronizable() {
            let base: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "sync"]
            var local = base
            local[kSecAttrAccount as String] = "local"
            var synced = base
            synced[kSecAttrAccount as String] = "synced"
            synced[kSecAttrSynchronizable as String] = kCFBooleanTrue
            #expect(SecItemAdd(local as CFDictionary, nil) == errSecSuccess)
            #expect(SecItemAdd(synced as CFDictionary, nil) == errSecSuccess)

            func count(_ extra: [String: Any]) -> Int? {
                var result: CFTypeRef?
                let query = base.merging([kSecMatchLimit as String: kSecMatchLimitAll, kSecReturnAttributes as String: true]) { $1 }
                    .merging(extra) { $1 }
                guard SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess else { return nil }
                return (result as? [[String: Any]])?.count
            }
            #expect(count([:]) == 1)
            #expect(count([kSecAttrSynchronizable as String: true]) == 1)
            #expect(count([kSecAttrSynchronizable as String: kSecAttrSynchronizableAny]) == 2)
            // Deleting without syna leaves the synchronizable item.
            #expect(SecItemDelete(base as CFDictionary) == errSecSuccess)
            #expect(count([kSecAttrSynchronizable as String: kSecAttrSynchronizableAny]) == 1)
        }
    }

    @Suite("Update, delete and lock rules")
    struct Rules {
        let storage = MemoryStorage()
        init() { KeychainServicesDefaults.setEngine(KeychainEngine(storage: storage)) }

        let item: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "rules"]

        func add(_ account: String, _ extra: [String: Any] = [:]) -> OSStatus {
            SecItemAdd(item.merging([kSecAttrAccount as String: account, kSecValueData as String: Data(account.utf8)]) { $1 }
                .merging(extra) { $1 } as CFDictionary, nil)
        }

        func secret(_ account: String) -> Data? {
            var result: CFTypeRef?
            let query = item.merging([kSecAttrAccount as String: account, kSecReturnData as String: true]) { $1 }
            guard SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess else { return nil }
            return result as? Data
        }

        @Test("update changes every match, refuses class and return keys, and refuses collisions without changing anything")
        func update() {
            #expect(add("a") == errSecSuccess)
            #expect(add("b") == errSecSuccess)
            #expect(SecItemUpdate(item as CFDictionary, [kSecAttrLabel as String: "both"] as CFDictionary) == errSecSuccess)
            var result: CFTypeRef?
            _ = SecItemCopyMatching(item.merging([kSecMatchLimit as String: kSecMatchLimitAll, kSecReturnAttributes as String: true]) { $1 }
                as CFDictionary, &result)
            #expect((result as? [[String: Any]])?.allSatisfy { $0[kSecAttrLabel as String] as? String == "both" } == true)
            #expect(SecItemUpdate(item as CFDictionary, [kSecClass as String: kSecClassInternetPassword] as CFDictionary) == errSecParam)
            #expect(SecItemUpdate(item as CFDictionary, [kSecReturnData as String: true] as CFDictionary) == errSecParam)
            let renameA = item.merging([kSecAttrAccount as String: "a"]) { $1 }
            #expect(SecItemUpdate(renameA as CFDictionary, [kSecAttrAccount as String: "b"] as CFDictionary) == errSecDuplicateItem)
            #expect(secret("a") == Data("a".utf8))
            #expect(SecItemUpdate(item.merging([kSecAttrAccount as String: "zz"]) { $1 } as CFDictionary,
                                  [kSecAttrLabel as String: "x"] as CFDictionary) == errSecItemNotFound)
        }

        @Test("delete removes every match of the service and reports errSecItemNotFound after")
        func delete() {
            #expect(add("a") == errSecSuccess)
            #expect(add("b") == errSecSuccess)
            #expect(SecItemDelete(item as CFDictionary) == errSecSuccess)
            #expect(secret("a") == nil && secret("b") == nil)
            #expect(SecItemDelete(item as CFDictionary) == errSecItemNotFound)
        }

        @Test("a missing account is stored empty, so it collides with an explicit empty account")
        func emptyPrimaryKey() {
            #expect(SecItemAdd(item as CFDictionary, nil) == errSecSuccess)
            #expect(add("") == errSecDuplicateItem)
        }

        @Test("locked: items not available fail with errSecInteractionNotAllowed and stay intact")
        func locked() {
            #expect(add("when-unlocked") == errSecSuccess)
            #expect(add("after-first", [kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlock]) == errSecSuccess)
            storage.lockState = .lockedAfterFirstUnlock
            var result: CFTypeRef?
            #expect(SecItemCopyMatching(item.merging([kSecAttrAccount as String: "when-unlocked", kSecReturnData as String: true]) { $1 }
                as CFDictionary, &result) == errSecInteractionNotAllowed)
            #expect(result == nil)
            #expect(SecItemDelete(item.merging([kSecAttrAccount as String: "when-unlocked"]) { $1 } as CFDictionary) == errSecInteractionNotAllowed)
            #expect(secret("after-first") == Data("after-first".utf8))
            storage.lockState = .unlocked
            #expect(secret("when-unlocked") == Data("when-unlocked".utf8))
        }

        @Test("values of the wrong type are errSecParam; attributes of another class are errSecNoSuchAttr")
        func wrongValues() {
            #expect(add("a", [kSecAttrLabel as String: NSNull()]) == errSecParam)
            #expect(add("a", [kSecAttrAccount as String: URL(fileURLWithPath: "/tmp")]) == errSecParam)
            #expect(add("a", [kSecAttrPort as String: 443]) == errSecNoSuchAttr)
            #expect(add("a", [kSecAttrApplicationTag as String: Data("tag".utf8)]) == errSecNoSuchAttr)
            #expect(SecItemDelete(item.merging([kSecAttrServer as String: "example.com"]) { $1 } as CFDictionary) == errSecNoSuchAttr)
            #expect(SecItemAdd([kSecAttrService as String: "no class"] as CFDictionary, nil) == errSecParam)
            let numericKey: [AnyHashable: Any] = [kSecClass: kSecClassGenericPassword, kSecAttrAccount: "a", 42: "x"]
            #expect(SecItemAdd(numericKey, nil) == errSecParam)
            #expect(secret("a") == nil)
        }
    }

    @Test("without a chosen engine, SecItem calls make one with makeDefaultEngine: by default over a keychain file")
    func defaultIsFile() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-default-\(UUID().uuidString)")
        let path = directory.appendingPathComponent("login.keychain-db").path
        let previous = KeychainServicesDefaults.makeDefaultEngine
        defer {
            KeychainServicesDefaults.makeDefaultEngine = previous
            KeychainServicesDefaults.useMemoryKeychain()
            try? FileManager.default.removeItem(at: directory)
        }
        // No setenv(KEYSTONE_KEYCHAIN): other test targets in this process read the environment concurrently.
        KeychainServicesDefaults.makeDefaultEngine = { try KeychainServicesDefaults.fileEngine(at: path) }
        KeychainServicesDefaults.setEngine(nil)
        #expect(SecItemAdd([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "file",
                            kSecValueData as String: Data("x".utf8)] as CFDictionary, nil) == errSecSuccess)
        #expect(FileManager.default.fileExists(atPath: path))
        // A second engine over the same file sees the item: it was written to the file, not to memory.
        KeychainServicesDefaults.setEngine(try KeychainServicesDefaults.fileEngine(at: path))
        var result: CFTypeRef?
        #expect(SecItemCopyMatching([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "file",
                                     kSecReturnData as String: true] as CFDictionary, &result) == errSecSuccess)
        #expect(result as? Data == Data("x".utf8))
    }

    @Test("concurrent first calls make the default engine once")
    func defaultMadeOnce() async {
        let made = Locked(0)
        let previous = KeychainServicesDefaults.makeDefaultEngine
        defer {
            KeychainServicesDefaults.makeDefaultEngine = previous
            KeychainServicesDefaults.useMemoryKeychain()
        }
        KeychainServicesDefaults.makeDefaultEngine = {
            made.withLock { $0 += 1 }
            return KeychainEngine(storage: MemoryStorage())
        }
        KeychainServicesDefaults.setEngine(nil)
        let statuses = await withTaskGroup(of: OSStatus.self) { group in
            for i in 0..<16 {
                group.addTask {
                    SecItemAdd([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "once",
                                kSecAttrAccount as String: "a\(i)"] as CFDictionary, nil)
                }
            }
            return await group.reduce(into: [OSStatus]()) { $0.append($1) }
        }
        #expect(statuses.allSatisfy { $0 == errSecSuccess })
        #expect(made.current == 1)
        var result: CFTypeRef?
        #expect(SecItemCopyMatching([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "once",
                                     kSecMatchLimit as String: kSecMatchLimitAll, kSecReturnAttributes as String: true] as CFDictionary,
                                    &result) == errSecSuccess)
        #expect((result as? [[String: Any]])?.count == 16)
    }
}
#endif
