import Foundation

// kSecClassIdentity. An identity is not stored: it is a certificate paired with the private key whose
// application label (`klbl`) equals the certificate's public key hash (`pkhh`), as in Apple's keychain, where a
// query of the identity class joins the certificate and key tables.
//
// Decisions where Apple is unclear or unsafe:
// - A query's attributes that certificates have (including the common ones: label, access group, sync,
//   accessibility) constrain the certificate; key-only attributes (`kcls`, `atag`, `type`, `bsiz`, usage flags…)
//   constrain the key. The key must be a private key (`kcls` 1).
// - A result's attributes are the certificate's, plus the key's key-only attributes and access control.
//   `kSecReturnData` gives the certificate's data (DER). A persistent reference is the identity class with the
//   certificate's row id.
// - Delete removes the certificate and the private key of each matching identity, and nothing else (Apple's
//   client deletes with the same query from both tables, which can take keys and certificates that form no
//   identity). Update changes both, each with the attributes its class has; a secret cannot be set.
// - An identity cannot be added as such (`errSecParam`): add its certificate and its private key (SecItemAdd
//   with a SecIdentity in kSecValueRef does that).
extension KeychainEngine {
    /// A certificate and the private key that completes it.
    struct IdentityPair {
        let certificate: StoredItem
        let key: StoredItem

        var persistentReference: Data { PersistentReference(itemClass: .identity, rowID: certificate.rowID).data }
    }

    /// The attribute of an identity's reference material holding the certificate's DER (Apple's
    /// `kSecAttrIdentityCertificateData`).
    package static let identityCertificateData = "certdata"

    /// The certificate part and the key part of an identity query.
    static func identityParts(of q: ParsedQuery) -> (certificate: ParsedQuery, key: ParsedQuery) {
        let certificateSchema = ClassSchema.of(.certificate)
        var certificate = q
        certificate.itemClass = .certificate
        certificate.attributes = [:]
        var key = q
        key.itemClass = .key
        key.attributes = [:]
        key.persistentReference = nil
        key.caseInsensitive = false
        for (name, value) in q.attributes {
            if certificateSchema.attributes[name] != nil { certificate.attributes[name] = value } else { key.attributes[name] = value }
        }
        if let ref = q.persistentReference {
            certificate.persistentReference = PersistentReference(itemClass: .certificate, rowID: ref.rowID)
        }
        key.attributes[Key.keyClass] = .number(1)
        return (certificate, key)
    }

    /// The identities matching `q`, in certificate row order, and the damaged rows met on the way.
    func identityMatches(_ q: ParsedQuery, in reader: any StorageReader, config: EngineConfiguration,
                         stopAfter: Int?) throws -> (pairs: [IdentityPair], damaged: [DamagedRow]) {
        let (certificateQuery, keyQuery) = Self.identityParts(of: q)
        let certificates = try matches(certificateQuery, in: reader, config: config)
        var pairs: [IdentityPair] = []
        var damaged = certificates.damaged
        for certificate in certificates.items {
            guard let hash = certificate.attributes[Key.publicKeyHash], hash.matchBytes?.isEmpty == false else { continue }
            var query = keyQuery
            query.attributes[Key.applicationLabel] = hash
            let keys = try matches(query, in: reader, config: config, stopAfter: 1)
            damaged += keys.damaged
            guard let key = keys.items.first else { continue }
            pairs.append(IdentityPair(certificate: certificate, key: key))
            if let stopAfter, pairs.count >= stopAfter { break }
        }
        return (pairs, damaged)
    }

    /// What a copy returns for one identity.
    func identityResult(_ pair: IdentityPair, _ q: ParsedQuery, config: EngineConfiguration) -> ItemResult {
        let keys = [q.returnData, q.returnAttributes, q.returnRef, q.returnPersistentRef].filter { $0 }.count
        if keys == 1 && q.returnData { return .data(pair.certificate.secret ?? Data()) }
        if keys == 1 && q.returnPersistentRef { return .data(pair.persistentReference) }
        var dictionary: KeychainQuery = [:]
        if q.returnAttributes || q.returnRef {
            let keyOnly = ClassSchema.of(.key).attributes.keys.filter { ClassSchema.of(.certificate).attributes[$0] == nil }
            for name in keyOnly { if let value = pair.key.attributes[name] { dictionary[name] = KeychainValue(value) } }
            for (name, value) in pair.certificate.attributes where !name.hasPrefix("_") { dictionary[name] = KeychainValue(value) }
            dictionary[Key.class] = .string(ItemClass.identity.rawValue)
            dictionary[Key.accessControl] = .accessControl(pair.key.accessControl ?? AccessControl(accessibility: pair.key.accessibility, flags: []))
        }
        if q.returnData { dictionary[Key.valueData] = .data(pair.certificate.secret ?? Data()) }
        if q.returnPersistentRef { dictionary[Key.valuePersistentRef] = .data(pair.persistentReference) }
        if q.returnRef {
            // The material of a SecIdentity: the certificate's DER, and the private key's data unless reading it
            // needs an authentication (the object then fetches it when used, through the key's reference).
            dictionary[Key.valueRef] = .data(pair.persistentReference)
            dictionary[Self.identityCertificateData] = .data(pair.certificate.secret ?? Data())
            dictionary[Self.identityKeyReference] = .data(pair.key.persistentReference)
            let protected = config.enforcesAccessControl && (pair.key.accessControl?.flags.requiresAuthentication ?? false)
            if !protected { dictionary[Self.identityKeyData] = .data(pair.key.secret ?? Data()) }
        }
        return .attributes(dictionary)
    }

    /// The attribute of an identity's reference material holding the private key's data (Keystone's own).
    package static let identityKeyData = "_keydata"
    /// The attribute of an identity's reference material holding the private key's persistent reference.
    package static let identityKeyReference = "_keyref"

    func performIdentityCopy(_ q: ParsedQuery, _ report: inout OperationReport) throws -> ItemResult? {
        let config = configuration
        let limit: Int? = { switch q.limit { case .one: return 1; case .all: return nil; case .count(let n): return n } }()
        let found = try storage.read { try identityMatches(q, in: $0, config: config, stopAfter: limit) }
        report.damagedSkipped = found.damaged.count
        guard !found.pairs.isEmpty else {
            throw Matches(items: [], damaged: found.damaged).noMatchError
        }
        guard q.hasReturnKeys else { return nil }
        return shape(found.pairs.map { identityResult($0, q, config: config) }, q, limitOverride: nil)
    }

    func performIdentityDelete(_ q: ParsedQuery, _ report: inout OperationReport) throws {
        let config = configuration
        try storage.write { tx in
            let found = try identityMatches(q, in: tx, config: config, stopAfter: nil)
            report.damagedSkipped = found.damaged.count
            guard !found.pairs.isEmpty else { throw Matches(items: [], damaged: found.damaged).noMatchError }
            var deletedKeys: Set<Int64> = []
            for pair in found.pairs {
                try tx.delete(in: .certificate, rowID: pair.certificate.rowID)
                if deletedKeys.insert(pair.key.rowID).inserted { try tx.delete(in: .key, rowID: pair.key.rowID) }
            }
        }
    }

    func performIdentityUpdate(_ plan: UpdatePlan, _ report: inout OperationReport) throws {
        let config = configuration
        guard plan.changes.valueData == nil else { throw EngineError.param("an identity's data cannot be set: update its certificate or key") }
        let certificateSchema = ClassSchema.of(.certificate), keySchema = ClassSchema.of(.key)
        var certificateChanges = plan.changes
        certificateChanges.itemClass = .certificate
        certificateChanges.attributes = plan.changes.attributes.filter { certificateSchema.attributes[$0.key] != nil }
        var keyChanges = plan.changes
        keyChanges.itemClass = .key
        keyChanges.attributes = plan.changes.attributes.filter { keySchema.attributes[$0.key] != nil }
        try storage.write { tx in
            let found = try identityMatches(plan.query, in: tx, config: config, stopAfter: plan.limit)
            report.damagedSkipped = found.damaged.count
            guard !found.pairs.isEmpty else { throw Matches(items: [], damaged: found.damaged).noMatchError }
            if plan.changesSecret && config.enforcesAccessControl,
               found.pairs.contains(where: { $0.key.accessControl?.flags.requiresAuthentication ?? false }) {
                throw EngineError.interactionNotAllowed("changing the protection of an identity whose key needs an authentication: update the key itself")
            }
            let now = config.now()
            var updatedKeys: Set<Int64> = []
            for pair in found.pairs {
                try tx.replace(try updated(pair.certificate, with: certificateChanges, now: now))
                if updatedKeys.insert(pair.key.rowID).inserted { try tx.replace(try updated(pair.key, with: keyChanges, now: now)) }
            }
        }
    }
}
