import Foundation
import KeychainServices
// As in SystemKeychain.swift: Apple's modules imported as Apple code does, `canImport(Darwin)` rather than
// `canImport(Security)` (on Linux this package has a `Security` module Keystone does not depend on).
#if canImport(Darwin)
import Security
#if canImport(LocalAuthentication)
import LocalAuthentication
#endif
#endif

// SystemKeychain's typed queries → the `[String: Any]` dictionaries SecItem takes: values, access controls
// (`SecAccessControlCreateWithFlags`) and authentication contexts (one `LAContext` per live context).
extension SystemKeychain {
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
}
