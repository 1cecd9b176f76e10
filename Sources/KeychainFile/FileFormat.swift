import Crypto
import Foundation
import KeychainEngine
import KeychainSealing

/// The keychain file's format: its header and its tables.
///
/// A keychain file is a SQLite database with:
/// - `keystone_header (name, value)`: the fields of ``Header``;
/// - one table per item class (`genp`, `inet`, `cert`, `keys`, `idnt`): `rowid`, `pk` (HMAC digest of the whole
///   primary key, UNIQUE), one `d_<attr>` digest column per primary-key attribute, `pclass` (the protection
///   class), `wrapped` (the row key sealed by its class key) and `payload` (attributes, secret and access
///   control sealed by the row key).
///
/// Format versions: 1 bound each sealed row to its class, protection class and `pk`; 2 also binds the row id,
/// so whole rows moved to another row id (and so another persistent reference) fail to open, and adds the
/// file id and key check used by the unlock cache; 3 digests blob attributes (account, service, a key's tag…)
/// by their bytes, so a String and Data with the same bytes are one primary key, as on Apple's keychain
/// (``KeychainFile/writeMatchForm(_:of:in:byBytes:to:)``). Older files are upgraded on their first full unlock.
/// 4 is format 3 with the master key sealed to a Secure Enclave token (``SealedProtector``; `create-keychain
/// --tpm`), with or without a recovery password: only sealed files have it, so a Keystone that reads up to 3 refuses
/// them with `errSecWrongSecVersion` (rather than asking for a password they do not have), and still reads every
/// password file this version writes. Row sealing and digests of format 4 are format 3's.
enum FileFormat {
    /// The format password files are written with and older files are upgraded to (rows and digests).
    static let version: Int64 = 3
    /// The format of files sealed to a Secure Enclave token.
    static let sealedVersion: Int64 = 4
    /// The newest format this version reads.
    static let newestReadable: Int64 = sealedVersion
    static let magic = "keystone-keychain"
    static let fileIDLength = 16
    /// Pages written to the write-ahead log before SQLite copies them into the file.
    static let checkpointPages = 256
    /// The size the write-ahead log is given ahead of use: the log header and `checkpointPages` frames of 4 KiB
    /// pages with some room. A durable commit that overwrites blocks the file already has costs one flush; one
    /// that grows the file also commits the file system's journal, about twice the time.
    static let logCapacity = 32 + (checkpointPages + 64) * (4096 + 24)

    /// Secondary indexes over digest columns: the usual lookups (a service and its accounts, a server, a key's tag)
    /// stay indexed without an index per column, which would cost a WAL page per index on every durable write.
    static let secondaryIndexes: [ItemClass: [String]] = [
        .genericPassword: [Key.service, Key.account],
        .internetPassword: [Key.server, Key.account],
        .certificate: [Key.issuer, Key.serialNumber],
        .key: [Key.applicationTag, Key.applicationLabel],
        .identity: [Key.issuer, Key.serialNumber],
    ]

    static func tableSQL(_ cls: ItemClass) -> String {
        let table = cls.rawValue
        let columns = ClassSchema.of(cls).primaryKey.map { "d_\($0) BLOB NOT NULL" }.joined(separator: ", ")
        return """
        CREATE TABLE \(table) (rowid INTEGER PRIMARY KEY AUTOINCREMENT, pk BLOB NOT NULL UNIQUE, \
        \(columns), pclass TEXT NOT NULL, wrapped BLOB NOT NULL, payload BLOB NOT NULL);
        """ + indexSQL(cls)
    }

    /// The secondary indexes of a class table (format 2; created on upgrade for format 1 files):
    /// - `<table>_lookup` on the usual pair (service and account…): a lookup by both is one index probe;
    /// - `<table>_first` on the first attribute alone (the service, the server…): SQLite keeps an index's
    ///   entries of one value in row-id order, so a search by service alone streams its rows in row-id order
    ///   and a limit-one query stops at the first, instead of sorting every match first.
    static func indexSQL(_ cls: ItemClass) -> String {
        let table = cls.rawValue
        let pair = secondaryIndexes[cls] ?? []
        let indexed = pair.map { "d_\($0)" }.joined(separator: ", ")
        var sql = "CREATE INDEX IF NOT EXISTS \(table)_lookup ON \(table)(\(indexed));"
        if let first = pair.first { sql += "\nCREATE INDEX IF NOT EXISTS \(table)_first ON \(table)(d_\(first));" }
        return sql
    }
}

/// The keychain file's header: everything needed to unlock it, nothing secret in the clear.
///
/// The master key is kept by one or two protectors (`KeyProtectors.swift`): a ``PasswordProtector`` (every file
/// before format 4, and a sealed file's recovery password) and a ``SealedProtector`` (a file sealed to a Secure
/// Enclave token, format 4). A file has at least one.
///
/// - Important: The header is readable and writable by whoever can write the file. Every field is validated
///   when read (a value out of range is `errSecInvalidKeychain`, never a trap); the master key is sealed, and the
///   key check ties cached keys to this file. The lock settings are not authenticated: whoever can write the
///   file can change them, as they can delete it.
struct Header: Equatable {
    var version: Int64
    /// The password's copy of the master key; nil in a file sealed to a token without a recovery password.
    var password: PasswordProtector?
    /// The token's copy of the master key (format 4 only).
    var sealed: SealedProtector?
    var settings: KeychainSettings
    /// Bumped by every lock, so other open instances lock too.
    var epoch: Int64
    /// A random id, new for every keychain file (absent in version 1 files until their first unlock).
    var fileID: Data?
    /// ``KeySet/check(fileID:)`` of this file's keys.
    var keyCheck: Data?

    /// Whether the password is empty (false when there is no password at all).
    var emptyPassword: Bool { password?.isEmpty ?? false }

    /// Reads and validates the header.
    ///
    /// - Throws: `EngineError` with `errSecInvalidKeychain` (not a keychain, a field missing or out of range),
    ///   `errSecWrongSecVersion` (a newer format, or a sealing scheme this version does not know); `SQLiteError`
    ///   when SQLite cannot read the file.
    static func read(from db: SQLiteConnection) throws -> Header {
        try decode(try fields(from: db))
    }

    /// The header's stored fields, undecoded (inside the caller's transaction).
    static func fields(from db: SQLiteConnection) throws -> [String: Data] {
        var values: [String: Data] = [:]
        let statement = try db.statement("SELECT name, value FROM keystone_header")
        defer { statement.reset() }
        while try statement.step() {
            if let name = statement.text(0), let value = statement.data(1) { values[name] = value }
        }
        return values
    }

    /// Decodes and validates stored fields (the errors of ``read(from:)``).
    static func decode(_ values: [String: Data]) throws -> Header {
        guard values["magic"] == Data(FileFormat.magic.utf8) else {
            throw EngineError(Status.invalidKeychain, "the file is not a Keystone keychain")
        }
        func invalid(_ what: String) -> EngineError { EngineError(Status.invalidKeychain, "the keychain header's \(what) is invalid") }
        func integer(_ name: String) -> Int64? {
            values[name].flatMap { String(data: $0, encoding: .utf8) }.flatMap { Int64($0) }
        }
        guard let version = integer("version"), version >= 1 else { throw invalid("format version") }
        guard version <= FileFormat.newestReadable else {
            throw EngineError(Status.wrongSecVersion, "the keychain has format version \(version); this Keystone reads up to \(FileFormat.newestReadable)")
        }
        let decoder = JSONDecoder()
        var password: PasswordProtector?
        // Before format 4 the password is the only protector; from 4 on it is there when the file has one.
        if version < FileFormat.sealedVersion || values["master"] != nil || values["kdf"] != nil {
            guard let kdfData = values["kdf"], let kdf = try? decoder.decode(KDFParameters.self, from: kdfData) else {
                throw invalid("key-derivation parameters")
            }
            try kdf.validate()
            guard let wrapped = values["master"], wrapped.count == PasswordProtector.wrappedLength else { throw invalid("wrapped master key") }
            guard let empty = values["empty"], empty == Data("0".utf8) || empty == Data("1".utf8) else { throw invalid("password flag") }
            password = PasswordProtector(kdf: kdf, wrappedMaster: wrapped, isEmpty: empty == Data("1".utf8))
        }
        var sealed: SealedProtector?
        let sealedFields = ["sealed-scheme", "sealed-key", "sealed-ephemeral", "sealed-master"]
        if version >= FileFormat.sealedVersion {
            guard let scheme = values["sealed-scheme"] else { throw invalid("sealed master key") }
            guard scheme == Data(SealedProtector.scheme.utf8) else {
                throw EngineError(Status.wrongSecVersion, "the keychain is sealed with a scheme this Keystone does not know; use a newer Keystone")
            }
            guard let key = values["sealed-key"], (1...SealedProtector.maximumKeyLength).contains(key.count) else { throw invalid("sealed token key") }
            guard let ephemeral = values["sealed-ephemeral"], ephemeral.count == 65,
                  (try? P256.KeyAgreement.PublicKey(x963Representation: ephemeral)) != nil else { throw invalid("sealed ephemeral key") }
            guard let wrapped = values["sealed-master"], wrapped.count == PasswordProtector.wrappedLength else { throw invalid("sealed master key") }
            sealed = SealedProtector(tokenKey: key, ephemeralPublicKey: ephemeral, wrappedMaster: wrapped)
        } else if sealedFields.contains(where: { values[$0] != nil }) {
            // Sealed fields in an older format: the version was edited down (to make older Keystones read it).
            throw invalid("format version")
        }
        guard let settingsData = values["settings"], let settings = try? decoder.decode(KeychainSettings.self, from: settingsData) else {
            throw invalid("settings")
        }
        if let timeout = settings.lockAfterTimeout {
            guard timeout.isFinite, timeout >= 0, timeout <= KeychainSettings.maximumTimeout else { throw invalid("lock timeout") }
        }
        let epoch: Int64
        if values["epoch"] == nil { epoch = 0 } else {
            guard let e = integer("epoch"), e >= 0 else { throw invalid("lock epoch") }
            epoch = e
        }
        let fileID = values["fileid"]
        if let fileID, fileID.count != FileFormat.fileIDLength { throw invalid("file id") }
        let keyCheck = values["keycheck"]
        if let keyCheck, keyCheck.count != 32 { throw invalid("key check") }
        if version >= 2, fileID == nil || keyCheck == nil { throw invalid("file id") }
        return Header(version: version, password: password, sealed: sealed, settings: settings,
                      epoch: epoch, fileID: fileID, keyCheck: keyCheck)
    }

    /// Writes every field (and the magic when `magic` is true) inside the caller's transaction; removes the fields
    /// of a protector the header no longer has.
    func write(to db: SQLiteConnection, magic: Bool = false) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        var values: [(String, Data)] = [
            ("version", Data(String(version).utf8)),
            ("settings", try encoder.encode(settings)),
            ("epoch", Data(String(epoch).utf8)),
        ]
        var removed: [String] = []
        if let password {
            values += [("kdf", try encoder.encode(password.kdf)), ("master", password.wrappedMaster),
                       ("empty", Data((password.isEmpty ? "1" : "0").utf8))]
        } else {
            removed += ["kdf", "master", "empty"]
        }
        if let sealed {
            values += [("sealed-scheme", Data(SealedProtector.scheme.utf8)), ("sealed-key", sealed.tokenKey),
                       ("sealed-ephemeral", sealed.ephemeralPublicKey), ("sealed-master", sealed.wrappedMaster)]
        } else {
            removed += ["sealed-scheme", "sealed-key", "sealed-ephemeral", "sealed-master"]
        }
        if let fileID { values.append(("fileid", fileID)) }
        if let keyCheck { values.append(("keycheck", keyCheck)) }
        if magic { values.append(("magic", Data(FileFormat.magic.utf8))) }
        let statement = try db.statement("INSERT OR REPLACE INTO keystone_header (name, value) VALUES (?1, ?2)")
        for (name, value) in values {
            statement.reset()
            try statement.bind(1, name).bind(2, value).run()
        }
        let delete = try db.statement("DELETE FROM keystone_header WHERE name = ?1")
        for name in removed {
            delete.reset()
            try delete.bind(1, name).run()
        }
    }
}
