import Foundation
import KeychainServices
// On Apple platforms KeychainServices re-exports these; imported here too so the file reads as Apple code does.
// `canImport(Darwin)`, not `canImport(Security)`: on Linux a `Security` module exists (this package's, which
// Keystone does not depend on), and whether it is found would depend on the build order.
#if canImport(Darwin)
import Security
#if canImport(LocalAuthentication)
import LocalAuthentication
#endif
#endif

// The only file of Keystone that calls Keychain Services (SecItem*, SecAccessControl, LAContext); app-side
// biometric prompts (LAContext.evaluatePolicy) are BiometricAuthenticator.swift's.
// On Apple platforms these are Security's and LocalAuthentication's; elsewhere KeychainServices
// provides the same names over Keystone's keychain file.

/// The platform keychain as a ``KeychainStore``: Apple's `SecItemAdd`, `SecItemCopyMatching`,
/// `SecItemUpdate` and `SecItemDelete`.
///
/// On Apple platforms these are the Security framework's functions (the data protection keychain:
/// ``Keychain`` sets `kSecUseDataProtectionKeychain` on macOS). On Linux they are KeychainServices'
/// implementation over the process-wide default keychain file.
///
/// Typed queries are turned into `[String: Any]` dictionaries: strings, data, numbers, Booleans and
/// dates as themselves; an `AccessControl` into a `SecAccessControl`
/// (`SecAccessControlCreateWithFlags`); an `AuthenticationContext` into an `LAContext` kept for as
/// long as the context lives, so its successful authentication is reused.
///
/// - Important: SecItem calls block, and a read of an access-controlled item waits for the user.
///   Call the `async` forms of ``Keychain`` from the main actor.
public struct SystemKeychain: KeychainStore {
    /// The platform keychain.
    public init() {}

    /// `SecItemAdd`.
    ///
    /// - Throws: ``KeychainError`` with the `OSStatus` Keychain Services returned.
    public func add(_ attributes: KeychainQuery) throws -> ItemResult? {
        let dictionary = try Self.dictionary(attributes)
        var result: CFTypeRef?
        let status = SecItemAdd(dictionary as CFDictionary, &result)
        guard status == errSecSuccess else { throw KeychainError(status: status, reason: "SecItemAdd failed") }
        return try Self.itemResult(result, itemClass: Self.itemClass(of: attributes))
    }

    /// `SecItemCopyMatching`.
    ///
    /// - Throws: ``KeychainError`` with the `OSStatus` Keychain Services returned.
    public func copyMatching(_ query: KeychainQuery) throws -> ItemResult? {
        let dictionary = try Self.dictionary(query)
        var result: CFTypeRef?
        let status = SecItemCopyMatching(dictionary as CFDictionary, &result)
        guard status == errSecSuccess else { throw KeychainError(status: status, reason: "SecItemCopyMatching failed") }
        return try Self.itemResult(result, itemClass: Self.itemClass(of: query))
    }

    /// `SecItemUpdate`.
    ///
    /// - Throws: ``KeychainError`` with the `OSStatus` Keychain Services returned.
    public func update(_ query: KeychainQuery, with attributesToUpdate: KeychainQuery) throws {
        let dictionary = try Self.dictionary(query)
        let changes = try Self.dictionary(attributesToUpdate)
        let status = SecItemUpdate(dictionary as CFDictionary, changes as CFDictionary)
        guard status == errSecSuccess else { throw KeychainError(status: status, reason: "SecItemUpdate failed") }
    }

    /// `SecItemDelete`.
    ///
    /// - Throws: ``KeychainError`` with the `OSStatus` Keychain Services returned.
    public func delete(_ query: KeychainQuery) throws {
        let dictionary = try Self.dictionary(query)
        let status = SecItemDelete(dictionary as CFDictionary)
        guard status == errSecSuccess else { throw KeychainError(status: status, reason: "SecItemDelete failed") }
    }

    // MARK: - Typed query → [String: Any]

    /// The keys of a typed query are Apple's raw strings (`kSecClass as String == "class"`), so only
    /// the values need converting.
    static func dictionary(_ query: KeychainQuery) throws -> [String: Any] {
        var dictionary: [String: Any] = [:]
        for (key, value) in query {
            switch value {
            case .string(let string): dictionary[key] = string
            case .data(let data): dictionary[key] = data
            case .number(let number): dictionary[key] = NSNumber(value: number)
            case .double(let double): dictionary[key] = NSNumber(value: double)
            case .bool(let bool): dictionary[key] = bool
            case .date(let date): dictionary[key] = date
            case .accessControl(let accessControl): dictionary[key] = try secAccessControl(accessControl)
            case .authenticationContext(let context): dictionary[key] = authenticationContext(for: context)
            }
        }
        return dictionary
    }

    /// `SecAccessControlCreateWithFlags` with the access control's protection class and flags.
    static func secAccessControl(_ accessControl: AccessControl) throws -> SecAccessControl {
        // The flags' raw values are Apple's SecAccessControlCreateFlags.
        let flags = SecAccessControlCreateFlags(rawValue: .init(accessControl.flags.rawValue))
        let created: SecAccessControl?
        #if canImport(Darwin)
        // The protection constants are CFStrings equal to the raw values ("ak", "cku"…); passing the
        // raw value avoids the deprecated kSecAttrAccessibleAlways constants.
        created = SecAccessControlCreateWithFlags(kCFAllocatorDefault, accessControl.accessibility.rawValue as CFString, flags, nil)
        #else
        switch accessControl.accessibility {
        case .whenUnlocked: created = SecAccessControlCreateWithFlags(kCFAllocatorDefault, kSecAttrAccessibleWhenUnlocked, flags, nil)
        case .afterFirstUnlock: created = SecAccessControlCreateWithFlags(kCFAllocatorDefault, kSecAttrAccessibleAfterFirstUnlock, flags, nil)
        case .always: created = SecAccessControlCreateWithFlags(kCFAllocatorDefault, kSecAttrAccessibleAlways, flags, nil)
        case .whenUnlockedThisDeviceOnly: created = SecAccessControlCreateWithFlags(kCFAllocatorDefault, kSecAttrAccessibleWhenUnlockedThisDeviceOnly, flags, nil)
        case .afterFirstUnlockThisDeviceOnly: created = SecAccessControlCreateWithFlags(kCFAllocatorDefault, kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly, flags, nil)
        case .alwaysThisDeviceOnly: created = SecAccessControlCreateWithFlags(kCFAllocatorDefault, kSecAttrAccessibleAlwaysThisDeviceOnly, flags, nil)
        case .whenPasscodeSetThisDeviceOnly: created = SecAccessControlCreateWithFlags(kCFAllocatorDefault, kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly, flags, nil)
        }
        #endif
        guard let created else {
            throw KeychainError(status: Status.param, reason: "SecAccessControlCreateWithFlags refused the access control")
        }
        return created
    }

    // MARK: - Authentication contexts → LAContext

    #if canImport(LocalAuthentication) || !canImport(Darwin)
    /// An LAContext per live `AuthenticationContext`: reusing the same LAContext is what makes a
    /// successful authentication cover the following operations.
    ///
    /// `@unchecked Sendable`: `owner` (weak, so mutable) is read and written only inside `contexts.withLock`, and
    /// `laContext` never changes. The LAContext itself is shared as Apple's keychain code shares one: handed to
    /// SecItem calls (`kSecUseAuthenticationContext`) on whichever thread makes them, its settings written under
    /// that lock (Apple does not declare LAContext Sendable; on Linux it is).
    private final class ContextEntry: @unchecked Sendable {
        weak var owner: AuthenticationContext?
        let laContext: LAContext
        init(owner: AuthenticationContext, laContext: LAContext) {
            self.owner = owner
            self.laContext = laContext
        }
    }

    private static let contexts = Locked<[ObjectIdentifier: ContextEntry]>([:])

    static func authenticationContext(for context: AuthenticationContext) -> LAContext {
        contexts.withLock { table -> LAContext in
            table = table.filter { $0.value.owner != nil }
            let entry: ContextEntry
            if let existing = table[ObjectIdentifier(context)], existing.owner === context {
                entry = existing
            } else {
                entry = ContextEntry(owner: context, laContext: LAContext())
                table[ObjectIdentifier(context)] = entry
            }
            let laContext = entry.laContext
            // Apple has these two properties on iOS, macOS and visionOS only. Spelled as the platforms without
            // them (same meaning everywhere), so the Apple SDK stand-in check (Tests/AppleSDKStandIn/check.sh:
            // Linux with a stand-in Darwin) compiles this branch.
            #if !os(tvOS) && !os(watchOS)
            laContext.touchIDAuthenticationAllowableReuseDuration = context.reuseDuration
            laContext.interactionNotAllowed = context.interactionNotAllowed
            #endif
            if context.isInvalidated { laContext.invalidate() }
            return laContext
        }
    }
    #else
    /// No LocalAuthentication on this platform: the context is not passed.
    static func authenticationContext(for context: AuthenticationContext) -> Any? { nil }
    #endif

    // MARK: - Results → ItemResult

    static func itemClass(of query: KeychainQuery) -> ItemClass? {
        query[Key.class]?.stringValue.flatMap(ItemClass.init(rawValue:))
    }

    static func itemResult(_ result: CFTypeRef?, itemClass: ItemClass?) throws -> ItemResult? {
        guard let result else { return nil }
        return try convert(result as Any, itemClass: itemClass)
    }

    private static func convert(_ value: Any, itemClass: ItemClass?) throws -> ItemResult {
        if let data = value as? Data { return .data(data) }
        if let dictionary = value as? [String: Any] { return .attributes(attributes(dictionary, itemClass: itemClass)) }
        if let array = value as? [Any] { return .array(try array.map { try convert($0, itemClass: itemClass) }) }
        throw KeychainError(code: .unexpectedResult, reason: "Keychain Services returned a \(type(of: value))")
    }

    private static func attributes(_ dictionary: [String: Any], itemClass: ItemClass?) -> KeychainQuery {
        let cls = (dictionary[Key.class] as? String).flatMap(ItemClass.init(rawValue:)) ?? itemClass
        let schema = cls.map(ClassSchema.of)
        var query: KeychainQuery = [:]
        for (key, value) in dictionary {
            // A SecAccessControl cannot be read back into flags with public API: it is left out.
            if key == Key.accessControl { continue }
            let type = schema?.attributes[key]?.type
            switch value {
            case let string as String: query[key] = .string(string)
            case let data as Data: query[key] = .data(data)
            case let date as Date: query[key] = .date(date)
            case let number as NSNumber:
                query[key] = (type == .bool || key == Key.synchronizable) ? .bool(number.boolValue) : .number(number.int64Value)
            case let bool as Bool: query[key] = .bool(bool)
            case let int as Int: query[key] = .number(Int64(int))
            default: continue
            }
        }
        if let cls { query[Key.class] = .string(cls.rawValue) }
        return query
    }
}
