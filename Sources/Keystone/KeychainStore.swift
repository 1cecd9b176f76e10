import Foundation

/// The four keychain operations, as Apple's `SecItemAdd`, `SecItemCopyMatching`, `SecItemUpdate` and
/// `SecItemDelete` define them: what ``Keychain`` is built on.
///
/// Queries are SecItem dictionaries in typed form (`KeychainQuery`): Apple's raw key strings
/// (`"class"`, `"svce"`, `"acct"`, `"r_Data"` …, constants in `Key`) to `KeychainValue`s.
///
/// The contract every store keeps (Apple's SecItem rules, as documented in "Keychain Services"):
///
/// - ``KeychainStore/add(_:)`` inserts one item. An item whose primary key (class, access group, synchronizable and,
///   for generic passwords, service + account) already exists fails with `errSecDuplicateItem`
///   (-25299), whatever its other attributes. Without return keys the result is nil.
/// - ``copyMatching(_:)`` finds items; the match limit is One unless `m_Limit` says otherwise. No
///   match fails with `errSecItemNotFound` (-25300), also with limit All (never an empty array).
///   Shapes: no return key → nil; only `r_Data` → `ItemResult.data(_:)`; `r_Attributes` or several
///   return keys → `ItemResult.attributes(_:)`; a limit above one → `ItemResult.array(_:)`.
///   Attributes-only queries never show an authentication prompt.
/// - ``KeychainStore/update(_:with:)`` changes every match (there is no limit). The attributes to update hold
///   attributes and `v_Data` only. No match → `errSecItemNotFound`.
/// - `delete(_:)` removes every match. No match → `errSecItemNotFound`.
/// - An item not available in the current lock state fails with `errSecInteractionNotAllowed`
///   (-25308) and is left intact.
///
/// Errors are thrown as ``KeychainError``. `KeychainEngine` conforms as it is and throws
/// `EngineError`; ``Keychain`` converts both (``KeychainError/init(converting:)``), and
/// `catch KeychainError.itemNotFound` matches either.
///
/// Conformers: ``SystemKeychain`` (the platform keychain), `KeychainEngine`, and the test doubles
/// of `KeystoneTesting` (`InMemoryKeychain`).
public protocol KeychainStore: Sendable {
    /// `SecItemAdd`: inserts one item described by `attributes` (class, attributes, `v_Data`).
    ///
    /// - Returns: nil without return keys; otherwise what ``copyMatching(_:)`` would return for the new item.
    /// - Throws: ``KeychainError`` with `errSecDuplicateItem`, `errSecParam`, `errSecNoSuchAttr`,
    ///   `errSecInteractionNotAllowed`, `errSecMissingEntitlement`.
    func add(_ attributes: KeychainQuery) throws -> ItemResult?

    /// `SecItemCopyMatching`: finds items and returns them in the shape the return keys ask for.
    ///
    /// - Throws: ``KeychainError`` with `errSecItemNotFound`, `errSecInteractionNotAllowed`,
    ///   `errSecUserCanceled`, `errSecAuthFailed`, `errSecParam`, `errSecMissingEntitlement`.
    func copyMatching(_ query: KeychainQuery) throws -> ItemResult?

    /// `SecItemUpdate`: changes every item matching `query` with the attributes and `v_Data` in `with`.
    ///
    /// - Throws: ``KeychainError`` with `errSecItemNotFound`, `errSecDuplicateItem`, `errSecParam`,
    ///   `errSecInteractionNotAllowed`, `errSecUserCanceled`, `errSecAuthFailed`.
    func update(_ query: KeychainQuery, with: KeychainQuery) throws

    /// `SecItemDelete`: removes every item matching `query`.
    ///
    /// - Throws: ``KeychainError`` with `errSecItemNotFound`, `errSecParam`, `errSecInteractionNotAllowed`,
    ///   `errSecMissingEntitlement`.
    func delete(_ query: KeychainQuery) throws

    /// Adds `attributes` or, when an item with its primary key exists (`errSecDuplicateItem`), updates the
    /// items matching `query` with `changes`: what ``Keychain``'s save does, in one call.
    ///
    /// The default implementation calls ``KeychainStore/add(_:)`` and, on `errSecDuplicateItem`, ``KeychainStore/update(_:with:)``.
    /// `KeychainEngine` does both in one storage transaction.
    ///
    /// - Throws: ``KeychainError`` (or `EngineError`) with the codes of ``KeychainStore/add(_:)`` and ``KeychainStore/update(_:with:)``.
    /// - Important: Never implement it as delete-then-add: the existing item must be updated in place.
    func addOrUpdate(_ attributes: KeychainQuery, matching query: KeychainQuery, with changes: KeychainQuery) throws

    /// The Secure Enclave of the device this store's items live on: where ``SigningKeyFactory`` makes hardware
    /// keys for it. Nil when there is none (a simulator, a Linux program that did not install the TPM backend, `KeychainServicesDefaults.bootstrap(.tpm)`).
    ///
    /// The default implementation is the platform's: on Apple platforms CryptoKit's `SecureEnclave` when
    /// `SecureEnclave.isAvailable`, else nil; on Linux `KeychainServicesDefaults.secureEnclave` (the TPM 2.0 by
    /// default; nil with `KEYSTONE_SECURE_ENCLAVE=none`). `InMemoryKeychain` answers with an emulated enclave for its
    /// device profile and nil for its simulator profile.
    ///
    /// - Important: A token's keys are usable only with that token: a store must answer with the same token (or one
    ///   on the same hardware) every time, or keys stored through it stop working (`errSecDecode`). A store that
    ///   wraps another (a logging or caching layer) should forward the wrapped store's token.
    var secureEnclave: (any SecureEnclaveToken)? { get }
}

extension KeychainStore {
    /// The platform's Secure Enclave (see ``KeychainStore/secureEnclave``).
    public var secureEnclave: (any SecureEnclaveToken)? { PlatformSecureEnclave.current }
}

extension KeychainStore {
    public func addOrUpdate(_ attributes: KeychainQuery, matching query: KeychainQuery, with changes: KeychainQuery) throws {
        do {
            _ = try add(attributes)
        } catch let error where KeychainError.duplicateItem ~= error {
            // The item exists: update it in place (never delete-then-add).
            try update(query, with: changes)
        }
    }
}

/// The engine is a store as it is: its `add`, `copyMatching`, `update(_:with:)` and `delete` are the
/// four operations. They throw `EngineError`, which ``Keychain`` converts to ``KeychainError``
/// (same status and reason), and which `catch KeychainError.itemNotFound` patterns also match.
/// A store that is a `KeychainEngine` underneath, whose compiled typed path ``Keychain`` may use:
/// `KeychainEngine` itself and `InMemoryKeychain`.
///
/// ``Keychain`` then saves and reads through `KeychainEngine.compiledSave` and `compiledSecret`: the same
/// SecItem rules without building dictionaries. Hooks on the engine (an `InMemoryKeychain`'s call log and
/// injected failures) still see each save as an add and, when the item exists, an update, and each read as
/// a copy, with the queries the SecItem path would have passed.
public protocol EngineBackedStore: KeychainStore {
    /// The engine whose operations the store's are.
    var engine: KeychainEngine { get }
}

extension KeychainEngine: EngineBackedStore {
    /// The engine itself.
    public var engine: KeychainEngine { self }
}

extension KeychainEngine: KeychainStore {
    /// The engine's one-transaction add-or-update (`KeychainEngine.addOrUpdate(_:matching:with:)`).
    ///
    /// - Throws: `EngineError` with the codes of ``KeychainStore/add(_:)`` and ``KeychainStore/update(_:with:)``.
    public func addOrUpdate(_ attributes: KeychainQuery, matching query: KeychainQuery, with changes: KeychainQuery) throws {
        let _: KeychainEngine.SaveOutcome = try addOrUpdate(attributes, matching: query, with: changes)
    }
}
