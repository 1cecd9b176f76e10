import Foundation
import Testing
import KeychainEngine

/// The duplicate check's owner is the storage's UNIQUE constraint (the engine does not look first): what SecItemAdd
/// and SecItemUpdate answer must not change, also when the row holding the key cannot be read.
@Suite("Duplicate check: the storage's unique key")
struct DuplicateCheckTests {
    @Test("an add whose primary key a locked item holds fails with errSecDuplicateItem and overwrites nothing")
    func addOverLockedItem() throws {
        let f = Fixture()
        try f.engine.add(genp("svc", "a", [Key.valueData: secret("one"), Key.accessible: .string("ak")]))
        f.storage.lockState = .lockedAfterFirstUnlock
        // The new item's class is available; the existing row's (ak) is not.
        #expect(status { try f.engine.add(genp("svc", "a", [Key.valueData: secret("two"), Key.accessible: .string("ck")])) }
                == Status.duplicateItem)
        #expect(f.storage.count == 1)
        f.storage.lockState = .unlocked
        var read = genp("svc", "a")
        read[Key.returnAttributes] = .bool(true)
        read[Key.returnData] = .bool(true)
        let attributes = try #require(try f.engine.copyMatching(read)?.attributes)
        #expect(attributes[Key.valueData] == secret("one"))
        #expect(attributes[Key.accessible] == .string("ak"))
    }

    @Test("an update giving an item a locked item's primary key fails with errSecDuplicateItem and changes nothing")
    func updateOntoLockedItem() throws {
        let f = Fixture()
        try f.engine.add(genp("svc", "a", [Key.valueData: secret("locked"), Key.accessible: .string("ak")]))
        try f.engine.add(genp("svc", "b", [Key.valueData: secret("open"), Key.accessible: .string("ck")]))
        f.storage.lockState = .lockedAfterFirstUnlock
        #expect(status { try f.engine.update(genp("svc", "b"), with: [Key.account: .string("a")]) } == Status.duplicateItem)
        f.storage.lockState = .unlocked
        #expect(try f.engine.secretString(genp("svc", "a")) == "locked")
        #expect(try f.engine.secretString(genp("svc", "b")) == "open")
    }

    @Test("a compiled save adds once, then updates the item in place: the table's unique key decides")
    func compiledSaveAddsThenUpdates() throws {
        let f = Fixture()
        let key = CompiledItemKey(genericPasswordService: "svc", account: "a")
        let save = { (value: String) throws -> CompiledOutcome<KeychainEngine.SaveOutcome> in
            try f.engine.compiledSave(Data(value.utf8), for: key, accessGroup: nil, synchronizable: false,
                                      accessibility: .whenUnlocked, label: nil, comment: nil)
        }
        guard case .done(.added) = try save("one") else { Issue.record("the first save did not add"); return }
        guard case .done(.updated) = try save("two") else { Issue.record("the second save did not update"); return }
        #expect(f.storage.count == 1)
        #expect(try f.engine.secretString(genp("svc", "a")) == "two")
        // The item in another group is another primary key: a save there adds.
        guard case .done(.added) = try f.engine.compiledSave(Data("g".utf8), for: key, accessGroup: "other", synchronizable: false,
                                                               accessibility: .whenUnlocked, label: nil, comment: nil) else {
            Issue.record("a save in another group did not add"); return
        }
        #expect(f.storage.count == 2)
    }
}

@Suite("Primary key: a missing attribute is its type's empty value")
struct PrimaryKeyRuleTests {
    @Test("each missing primary-key attribute counts as its type's empty value; given ones are kept")
    func missingAttributesAreEmpty() {
        let schema = ClassSchema.of(.internetPassword)
        let key = schema.primaryKey(of: [Key.server: .string("example.com")])
        #expect(Set(key.keys) == Set(schema.primaryKey))
        #expect(key[Key.server] == .string("example.com"))
        #expect(key[Key.account] == .data(Data()))           // a blob
        #expect(key[Key.protocol] == .string(""))            // a string
        #expect(key[Key.port] == .number(0))                 // a number
        #expect(key[Key.synchronizable] == .bool(false))     // a Boolean
        #expect(schema.primaryKeyValues(of: [:]) == schema.primaryKey.map { schema.primaryKeyValue($0, of: [:]) })
        // An attribute the class does not know has no empty value.
        #expect(schema.storedValue(of: "no-such-attribute", in: [:]) == nil)
        #expect(schema.storedValue(of: Key.label, in: [Key.label: .string("l")]) == .string("l"))
    }

    @Test("the primary-key query of a SecItem dictionary names every key attribute and nothing else")
    func primaryKeyQuery() {
        let schema = ClassSchema.of(.genericPassword)
        let query = schema.primaryKeyQuery(of: [Key.service: .string("svc"), Key.label: .string("not in the key")])
        #expect(query == [Key.service: .string("svc"), Key.account: .data(Data()), Key.accessGroup: .string(""),
                          Key.synchronizable: .bool(false)])
    }
}
