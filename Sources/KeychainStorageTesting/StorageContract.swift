import Foundation
import KeychainEngine

/// A clause of the storage contract that a storage broke: which clause, and what was seen instead of what was due.
public struct ContractViolation: Error, CustomStringConvertible, Sendable {
    /// The clause's name.
    public var clause: String
    /// What went wrong, in words a storage's author can act on.
    public var message: String
    /// Where in the contract's source the failed check is.
    public var location: String

    /// A violation of `clause`.
    public init(clause: String, message: String, location: String) {
        self.clause = clause
        self.message = message
        self.location = location
    }

    public var description: String { "storage contract, \"\(clause)\": \(message) (\(location))" }
}

/// How the contract makes storages to test: a fresh, empty keychain for each call, and the optional capabilities some
/// clauses need.
public struct StorageFactory: Sendable {
    /// A fresh, empty, unlocked keychain.
    public var makeStorage: @Sendable () throws -> any KeychainStorage
    /// Another fresh keychain on the same backend as the given one (another file in the same directory, another name
    /// on the same etcd cluster, another collection of the same Secret Service). Nil: the isolation clause does not apply.
    public var makeSecondKeychain: (@Sendable (any KeychainStorage) throws -> any KeychainStorage)?
    /// Damages the stored row (its ciphertext, its index columns) the way a bad disk or a tampering writer would. Nil:
    /// the damaged-row clause does not apply (a storage that keeps rows only in memory has nothing to damage).
    public var damageRow: (@Sendable (any KeychainStorage, ItemClass, Int64) throws -> Void)?
    /// Puts the storage in a lock state (`lock()`, `lockAfterFirstUnlock()`, `unlock(password:)`), one of
    /// ``reachableLockStates``. Nil: the lock-state clauses do not apply.
    public var setLockState: (@Sendable (any KeychainStorage, LockState) throws -> Void)?
    /// The lock states ``setLockState`` can reach (all three by default). A Secret Service collection is locked or
    /// unlocked, nothing in between: its factory leaves out `lockedAfterFirstUnlock`, and that state's clause does not
    /// apply to it.
    public var reachableLockStates: Set<LockState>
    /// Whether the storage itself withholds the rows its lock state makes unavailable, returning them as unreadable
    /// with `errSecInteractionNotAllowed` (true by default: a storage that encrypts rows cannot decrypt them).
    ///
    /// Decision: false only for a storage that keeps rows in the clear and has no key to withhold (the memory
    /// storage): it may serve every row in every state, because the engine applies `Accessibility.isAvailable(in:)`
    /// to every row it reads; the lock-state clauses then check that rule through the engine only.
    public var withholdsUnavailableRows: Bool
    /// How many rows the storage has decrypted (or otherwise opened) so far. Nil: the clause that counts the rows a
    /// limit-one search decrypts does not apply (the visit-count clause still does).
    public var decryptionCount: (@Sendable (any KeychainStorage) -> Int)?
    /// Why this factory lacks a capability, for the test report (``StorageContract/Clause/reasonNotApplicable(to:)``):
    /// "rows live only in memory", "sqlite3 is not installed".
    public var reasonsForMissingCapabilities: [StorageContract.Capability: String]

    /// A factory of fresh keychains, with the optional capabilities.
    public init(makeStorage: @escaping @Sendable () throws -> any KeychainStorage,
                makeSecondKeychain: (@Sendable (any KeychainStorage) throws -> any KeychainStorage)? = nil,
                damageRow: (@Sendable (any KeychainStorage, ItemClass, Int64) throws -> Void)? = nil,
                setLockState: (@Sendable (any KeychainStorage, LockState) throws -> Void)? = nil,
                reachableLockStates: Set<LockState> = Set(LockState.allCases),
                withholdsUnavailableRows: Bool = true,
                decryptionCount: (@Sendable (any KeychainStorage) -> Int)? = nil,
                reasonsForMissingCapabilities: [StorageContract.Capability: String] = [:]) {
        self.makeStorage = makeStorage
        self.makeSecondKeychain = makeSecondKeychain
        self.damageRow = damageRow
        self.setLockState = setLockState
        self.reachableLockStates = reachableLockStates
        self.withholdsUnavailableRows = withholdsUnavailableRows
        self.decryptionCount = decryptionCount
        self.reasonsForMissingCapabilities = reasonsForMissingCapabilities
    }

    /// The capabilities this factory offers.
    public var capabilities: Set<StorageContract.Capability> {
        var result: Set<StorageContract.Capability> = []
        if makeSecondKeychain != nil { result.insert(.secondKeychain) }
        if damageRow != nil { result.insert(.damageRow) }
        if setLockState != nil { result.formUnion(reachableLockStates.map(StorageContract.Capability.lockState)) }
        if decryptionCount != nil { result.insert(.decryptionCount) }
        return result
    }
}

/// The contract every `KeychainStorage` keeps, as clauses any storage's own tests can run.
///
/// Framework-neutral: a clause throws ``ContractViolation`` (or the storage's own error) when the storage breaks it,
/// so Swift Testing and XCTest tests call it alike.
public enum StorageContract {
    /// An optional capability of a ``StorageFactory`` that a clause needs.
    public enum Capability: Sendable, Hashable, CustomStringConvertible {
        /// ``StorageFactory/makeSecondKeychain``.
        case secondKeychain
        /// ``StorageFactory/damageRow``.
        case damageRow
        /// ``StorageFactory/setLockState`` reaching this state (``StorageFactory/reachableLockStates``).
        case lockState(LockState)
        /// ``StorageFactory/decryptionCount``.
        case decryptionCount

        public var description: String {
            switch self {
            case .secondKeychain: "makeSecondKeychain"
            case .damageRow: "damageRow"
            case .lockState(let state): "setLockState(\(state.rawValue))"
            case .decryptionCount: "decryptionCount"
            }
        }
    }

    /// One rule of the contract.
    public struct Clause: Sendable, CustomStringConvertible {
        /// What the rule says, as a sentence.
        public let name: String
        /// The factory capabilities the clause needs; a factory without them cannot run it (``applies(to:)``).
        public let requires: Set<Capability>
        let body: @Sendable (StorageFactory, inout Checker) throws -> Void

        init(_ name: String, requires: Set<Capability> = [], _ body: @escaping @Sendable (StorageFactory, inout Checker) throws -> Void) {
            self.name = name
            self.requires = requires
            self.body = body
        }

        public var description: String { name }

        /// Whether `factory` offers every capability the clause needs.
        public func applies(to factory: StorageFactory) -> Bool { requires.isSubset(of: factory.capabilities) }

        /// Why the clause does not apply to `factory` (each missing capability, with the factory's reason for lacking
        /// it), or nil when it applies. A test reports it as the reason of a skip, so no clause drops out unseen.
        public func reasonNotApplicable(to factory: StorageFactory) -> String? {
            let missing = requires.subtracting(factory.capabilities)
            guard !missing.isEmpty else { return nil }
            return missing.map { capability in
                "no \(capability)" + (factory.reasonsForMissingCapabilities[capability].map { ": \($0)" } ?? "")
            }.sorted().joined(separator: "; ")
        }
    }

    /// Every clause, in a stable order.
    public static var clauses: [Clause] { rowClauses + queryClauses + engineClauses + robustnessClauses + lockStateClauses }

    /// Runs `clause` against storages of `factory`.
    ///
    /// - Throws: ``ContractViolation`` when the storage breaks the clause (or ``ContractViolation`` naming the missing
    ///   capability when the factory lacks one the clause needs: check ``Clause/applies(to:)`` first); any error the
    ///   storage throws where the clause expects success.
    public static func run(_ clause: Clause, on factory: StorageFactory) throws {
        if let reason = clause.reasonNotApplicable(to: factory) {
            throw ContractViolation(clause: clause.name, message: "the factory cannot run this clause: \(reason)",
                                    location: "StorageContract.run")
        }
        var checker = Checker(clause: clause.name)
        try clause.body(factory, &checker)
        if let first = checker.violations.first {
            var violation = first
            if checker.violations.count > 1 {
                violation.message += " (and \(checker.violations.count - 1) more: " + checker.violations.dropFirst().map(\.message).joined(separator: "; ") + ")"
            }
            throw violation
        }
    }

    /// Runs `clause` against fresh storages from `makeStorage` (no optional capabilities).
    ///
    /// - Throws: as ``run(_:on:)``.
    public static func run(_ clause: Clause, makeStorage: @escaping @Sendable () throws -> any KeychainStorage) throws {
        try run(clause, on: StorageFactory(makeStorage: makeStorage))
    }
}

/// Collects failed checks of one clause (every check runs, so one run reports every broken expectation).
struct Checker {
    let clause: String
    var violations: [ContractViolation] = []

    mutating func check(_ condition: Bool, _ message: @autoclosure () -> String, file: StaticString = #fileID, line: UInt = #line) {
        if !condition { violations.append(ContractViolation(clause: clause, message: message(), location: "\(file):\(line)")) }
    }

    /// Fails the clause now (what follows depends on this).
    func require(_ condition: Bool, _ message: @autoclosure () -> String, file: StaticString = #fileID, line: UInt = #line) throws {
        if !condition { throw ContractViolation(clause: clause, message: message(), location: "\(file):\(line)") }
    }

    /// The status `body` throws (0 when it succeeds, `Int32.min` for an error that is not an `EngineError`).
    func status(_ body: () throws -> Void) -> Int32 {
        do { try body(); return 0 } catch let e as EngineError { return e.status } catch { return Int32.min }
    }
}

/// A generic-password row with the defaults the engine stores.
func row(_ service: String, _ account: String, secret: String? = nil, label: String? = nil) -> StoredItem {
    var attributes: [String: AttributeValue] = [
        Key.service: .string(service), Key.account: .string(account), Key.accessGroup: .string("default"),
        Key.synchronizable: .bool(false), Key.accessible: .string("ak"),
    ]
    if let label { attributes[Key.label] = .string(label) }
    return StoredItem(itemClass: .genericPassword, attributes: attributes, secret: secret.map { Data($0.utf8) })
}

func items(_ candidates: [Candidate]) -> [StoredItem] {
    candidates.compactMap { if case .item(let i) = $0 { return i } else { return nil } }
}

/// Thrown by a transaction body to roll it back.
struct Rollback: Error {}
