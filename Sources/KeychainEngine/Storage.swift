import Foundation

/// One keychain row: an item of one class with its attributes and its secret.
public struct StoredItem: Sendable, Hashable {
    /// The class (table) the row belongs to.
    public var itemClass: ItemClass
    /// The row's id in its table, assigned by the storage on insert (0 before).
    public var rowID: Int64
    /// Every stored attribute, defaults included: `pdmn`, `agrp`, `sync`, `cdat`, `mdat` and the primary key.
    public var attributes: [String: AttributeValue]
    /// The secret (`v_Data`), if the item has one.
    public var secret: Data?
    /// The access control, if the item was added with one (`accc`).
    public var accessControl: AccessControl?

    /// A row; `rowID` 0 until the storage assigns one.
    public init(itemClass: ItemClass, rowID: Int64 = 0, attributes: [String: AttributeValue], secret: Data?, accessControl: AccessControl? = nil) {
        self.itemClass = itemClass
        self.rowID = rowID
        self.attributes = attributes
        self.secret = secret
        self.accessControl = accessControl
    }

    /// The item's accessibility (`pdmn`), `whenUnlocked` if unreadable.
    public var accessibility: Accessibility {
        attributes[Key.accessible]?.stringValue.flatMap(Accessibility.init(rawValue:)) ?? .whenUnlocked
    }

    /// The primary-key values in schema order.
    public var primaryKey: [AttributeValue] { ClassSchema.of(itemClass).primaryKeyValues(of: attributes) }

    /// The persistent reference: the class tag followed by the row id (12 bytes, as Apple's).
    public var persistentReference: Data { PersistentReference(itemClass: itemClass, rowID: rowID).data }
}

/// A persistent reference: class and row id, 12 bytes (4-byte class tag, 8-byte big-endian row id).
public struct PersistentReference: Sendable, Hashable {
    /// The row's class.
    public let itemClass: ItemClass
    /// The row's id in its table.
    public let rowID: Int64

    /// The reference to row `rowID` of `itemClass`.
    public init(itemClass: ItemClass, rowID: Int64) {
        self.itemClass = itemClass
        self.rowID = rowID
    }

    /// Parses a reference handed out earlier; nil when `data` is not one.
    public init?(data: Data) {
        guard data.count == 12,
              let tag = String(bytes: data.prefix(4), encoding: .ascii),
              let cls = ItemClass(rawValue: tag) else { return nil }
        var id: Int64 = 0
        for byte in data.suffix(8) { id = (id << 8) | Int64(byte) }
        self.itemClass = cls
        self.rowID = id
    }

    /// The 12 bytes handed out as `kSecValuePersistentRef`.
    public var data: Data {
        var bytes = itemClass.tag
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: rowID >> Int64(shift))) }
        return Data(bytes)
    }
}

/// A row a storage returns for a search: readable, or present but unreadable (locked class key, failed integrity check).
public enum Candidate: Sendable {
    /// A row the storage could read and authenticate.
    case item(StoredItem)
    /// A row whose indexed columns matched but whose contents cannot be read.
    ///
    /// `error.status` is `errSecInteractionNotAllowed` when its key is not available in the current lock state,
    /// `errSecDecode` when it failed its integrity check.
    case unreadable(itemClass: ItemClass, rowID: Int64, error: EngineError)
}

/// Read access to the rows of a keychain, inside one transaction.
public protocol StorageReader {
    /// The rows of `itemClass` whose attributes equal every value in `constraints`.
    ///
    /// Contract:
    /// - `constraints` holds only primary-key attributes of the class, and the storage must honour all of
    ///   them: every returned row, readable or not, has exactly these values. Rows lacking a constraint
    ///   attribute count as holding its empty value. The engine does not trust this: it checks every query
    ///   attribute again on every readable row, and treats a row contradicting a constraint as damaged
    ///   (`errSecDecode`: never returned, changed or deleted). A storage whose index columns are not
    ///   authenticated must therefore return a row it cannot authenticate as unreadable, never as readable.
    /// - Lookups must use an index: with the full primary key, the cost must not grow with the table.
    /// - Rows that fail an integrity check are returned as ``Candidate/unreadable(itemClass:rowID:error:)``,
    ///   never as garbage and never silently dropped.
    func candidates(in itemClass: ItemClass, matching constraints: [String: AttributeValue]) throws -> [Candidate]

    /// Visits the rows ``candidates(in:matching:)`` would return, in row-id order, one at a time;
    /// `body` returns false to stop.
    ///
    /// Contract: the same rows and guarantees as ``candidates(in:matching:)``. A storage that decrypts rows
    /// must decrypt each one only when it is visited, so a search the engine stops early (a match limit of
    /// one) never decrypts the rows after it, and memory stays bounded by one row, not by the table.
    func forEachCandidate(in itemClass: ItemClass, matching constraints: [String: AttributeValue],
                          _ body: (Candidate) throws -> Bool) throws

    /// The row `rowID` of `itemClass`, or nil when there is none.
    func candidate(in itemClass: ItemClass, rowID: Int64) throws -> Candidate?

    /// The lock state this view reads its rows with, when the storage fixed it at the start of the transaction;
    /// nil (the default): the engine asks the storage's ``KeychainStorage/lockState``.
    ///
    /// A storage whose reads run in parallel answers here, so that a read neither asks the storage again (which
    /// may take a lock every reader shares) nor checks availability against another state than the keys it
    /// decrypted with.
    var lockState: LockState? { get }
}

extension StorageReader {
    /// Nil: the engine asks the storage's ``KeychainStorage/lockState``.
    public var lockState: LockState? { nil }

    /// Visits every row of ``candidates(in:matching:)``: storages that can stream rows override it.
    public func forEachCandidate(in itemClass: ItemClass, matching constraints: [String: AttributeValue],
                                 _ body: (Candidate) throws -> Bool) throws {
        for candidate in try candidates(in: itemClass, matching: constraints) {
            guard try body(candidate) else { return }
        }
    }
}

/// Write access inside one atomic transaction.
public protocol StorageWriter: StorageReader {
    /// Inserts a new row and returns its row id.
    ///
    /// Must fail with `errSecDuplicateItem` (and change nothing) when a row of the class has the same
    /// primary key (``StoredItem/primaryKey``): the storage enforces the UNIQUE constraint itself.
    func insert(_ item: StoredItem) throws -> Int64

    /// Replaces the row `item.rowID` of `item.itemClass` with `item`.
    ///
    /// Must fail with `errSecDuplicateItem` when the new primary key belongs to another row.
    func replace(_ item: StoredItem) throws

    /// Removes the row; removing a row that is not there is not an error.
    func delete(in itemClass: ItemClass, rowID: Int64) throws

    /// Inserts `item`, or, when a row of its class has its primary key, replaces that row with what
    /// `merge` makes of it: an insert-or-replace by primary key, in this transaction.
    ///
    /// Contract:
    /// - `merge` is called at most once, with the row holding `item`'s primary key, readable or not
    ///   (a storage never decides on its own to overwrite a row it could not read).
    /// - When `merge` returns a row, it replaces the existing row under the existing row id (as
    ///   ``replace(_:)`` does, so a changed primary key that collides fails with `errSecDuplicateItem`);
    ///   when it returns nil, nothing is written. When it throws, nothing is written and the error propagates.
    /// - The lookup must use the primary-key index: the cost must not grow with the table.
    ///
    /// - Returns: what happened, with the row id inserted, replaced or kept.
    func upsert(_ item: StoredItem, merge: (Candidate) throws -> StoredItem?) throws -> UpsertOutcome
}

/// What ``StorageWriter/upsert(_:merge:)`` did.
public enum UpsertOutcome: Sendable, Hashable {
    /// No row had the primary key: `item` was inserted with this row id.
    case inserted(rowID: Int64)
    /// The row with the primary key was replaced by what `merge` returned.
    case replaced(rowID: Int64)
    /// The row with the primary key was left as it was (`merge` returned nil).
    case kept(rowID: Int64)
}

extension StorageWriter {
    /// Looks the primary key up with ``StorageReader/candidates(in:matching:)``, then inserts or replaces:
    /// storages with a native upsert override it.
    public func upsert(_ item: StoredItem, merge: (Candidate) throws -> StoredItem?) throws -> UpsertOutcome {
        let key = ClassSchema.of(item.itemClass).primaryKey(of: item.attributes)
        guard let existing = try candidates(in: item.itemClass, matching: key).first else {
            return .inserted(rowID: try insert(item))
        }
        let rowID: Int64
        switch existing {
        case .item(let row): rowID = row.rowID
        case .unreadable(_, let id, _): rowID = id
        }
        guard var replacement = try merge(existing) else { return .kept(rowID: rowID) }
        replacement.rowID = rowID
        try replace(replacement)
        return .replaced(rowID: rowID)
    }
}

/// Where a keychain keeps its rows: memory, an encrypted file, the Secret Service.
///
/// The engine (``KeychainEngine``) implements Apple's rules; a storage only keeps rows. What every
/// storage must do, checked by the contract suite any storage can run, the `KeychainStorageTesting` product (`StorageContract.clauses`):
///
/// - **Tables**: one per ``ItemClass``, each with a UNIQUE constraint over the class's primary key
///   (``ClassSchema/primaryKey``); an insert or replace that would break it fails with
///   `errSecDuplicateItem` and changes nothing.
/// - **Atomicity**: ``write(_:)`` runs its body as one transaction. If the body throws, none of its
///   inserts, replaces or deletes are visible afterwards, in this process or any other.
/// - **Isolation**: concurrent ``read(_:)`` and ``write(_:)`` calls, from any thread, see whole
///   transactions only.
/// - **Fidelity**: a row reads back exactly as written: attributes, secret, access control, row id; each
///   value keeps its type (an account given as Data stays Data, a number attribute holding a String keeps it).
/// - **Equality**: constraints and the UNIQUE constraint compare values as ``AttributeValue``'s `==` does: a
///   String and Data with the same bytes are equal (Apple compares blob attributes by their bytes), two
///   strings are equal when their UTF-8 bytes are (no Unicode normalisation).
/// - **Lock state**: ``lockState`` tells which accessibility classes are available. A storage that
///   cannot decrypt a row returns it as unreadable with `errSecInteractionNotAllowed`; it never
///   deletes or rewrites a row it could not read.
public protocol KeychainStorage: AnyObject, Sendable {
    /// Which accessibility classes are available now.
    var lockState: LockState { get }

    /// Runs `body` with a consistent view of the rows.
    func read<T>(_ body: (any StorageReader) throws -> T) throws -> T

    /// Runs `body` as one atomic transaction: all of its changes land, or none do.
    ///
    /// A storage may run `body` more than once (an optimistic transaction that lost a race, or guessed wrong about
    /// rows it had not read, runs it again): only the last run's changes and result count, so `body` must have no
    /// effect outside the writer.
    func write<T>(_ body: (any StorageWriter) throws -> T) throws -> T

    /// Whether several machines share these rows (an etcd cluster): anything kept per machine (an install marker,
    /// a cache) then does not describe the keychain. False by default; a storage of the app's own that several
    /// machines reach returns true. Keystone's fresh-install wipe refuses such a keychain unless asked explicitly.
    var isSharedAcrossMachines: Bool { get }
}

extension KeychainStorage {
    /// One machine's rows: false.
    public var isSharedAcrossMachines: Bool { false }
}

/// What the operation a storage call serves allows: storages that can ask the user something (the Secret Service's
/// unlock prompt) read it; the engine binds it for each operation from the query's `kSecUseAuthenticationUI` and
/// its authentication context.
public enum StorageInteraction {
    /// True while an operation whose query allows user interface runs (`kSecUseAuthenticationUI` absent or Allow,
    /// and no context with `interactionNotAllowed`). False outside any operation.
    @TaskLocal public static var userInterfaceAllowed = false
}
