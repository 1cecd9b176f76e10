import Foundation
import Testing
import KeychainEngine

/// One item class, a query naming its full primary key, and attributes outside the key.
struct ClassCase: Sendable, CustomTestStringConvertible {
    let itemClass: ItemClass
    let primaryKey: KeychainQuery
    var testDescription: String { itemClass.rawValue }

    var query: KeychainQuery { primaryKey.merging([Key.class: .string(itemClass.rawValue)]) { $1 } }

    static let all: [ClassCase] = [
        ClassCase(itemClass: .genericPassword, primaryKey: [Key.service: .string("svc"), Key.account: .string("alice")]),
        ClassCase(itemClass: .internetPassword, primaryKey: [
            Key.server: .string("example.com"), Key.account: .string("alice"), Key.protocol: .string("htps"),
            Key.port: .number(443), Key.path: .string("/login"), Key.securityDomain: .string("realm"),
            Key.authenticationType: .string("form"),
        ]),
        ClassCase(itemClass: .key, primaryKey: [
            Key.applicationTag: .data(Data("com.example.key".utf8)), Key.keyClass: .string("2"), Key.keyType: .number(73),
            Key.keySizeInBits: .number(256),
        ]),
        ClassCase(itemClass: .certificate, primaryKey: [
            Key.issuer: .data(Data([1, 2, 3])), Key.serialNumber: .data(Data([9, 9])), Key.certificateType: .number(3),
        ]),
    ]
}

@Suite("Data model: tables, primary keys and defaults")
struct DataModelTests {
    @Test("an add whose primary key exists fails with errSecDuplicateItem, even with another accessibility or label",
          arguments: ClassCase.all)
    func duplicateRegardlessOfNonKeyAttributes(_ c: ClassCase) throws {
        let f = Fixture()
        try f.engine.add(c.query.merging([Key.valueData: secret("one"), Key.label: .string("first")]) { $1 })
        var second = c.query
        second[Key.valueData] = secret("two")
        second[Key.label] = .string("second")
        second[Key.accessible] = .string(Accessibility.afterFirstUnlock.rawValue)
        #expect(status { try f.engine.add(second) } == Status.duplicateItem)
        // Nothing changed: the first item keeps its label and secret.
        var read = c.query
        read[Key.returnAttributes] = .bool(true)
        read[Key.returnData] = .bool(true)
        let attributes = try #require(try f.engine.copyMatching(read)?.attributes)
        #expect(attributes[Key.label] == .string("first"))
        #expect(attributes[Key.valueData] == secret("one"))
        #expect(attributes[Key.accessible] == .string("ak"))
    }

    @Test("items that differ in one primary-key attribute coexist", arguments: ClassCase.all)
    func differentKeysCoexist(_ c: ClassCase) throws {
        let f = Fixture()
        try f.engine.add(c.query)
        var other = c.query
        other[Key.accessGroup] = .string("group.other")
        try f.engine.add(other)
        var all = c.query
        all[Key.accessGroup] = nil
        all[Key.matchLimit] = .string(Key.matchLimitAll)
        all[Key.returnAttributes] = .bool(true)
        #expect(try f.engine.copyMatching(all)?.array?.count == 2)
    }

    @Test("a missing primary-key attribute is stored as its empty value, so the two adds collide")
    func missingKeyIsEmpty() throws {
        let f = Fixture()
        try f.engine.add(genp("svc", nil, [Key.valueData: secret("a")]))
        #expect(status { try f.engine.add(genp("svc", "", [Key.valueData: secret("b")])) } == Status.duplicateItem)
        let attributes = try #require(try f.engine.copyMatching(genp("svc", nil, [Key.returnAttributes: .bool(true)]))?.attributes)
        // Apple's default for a missing blob attribute is empty Data (SecDbItem.c, SecDbAttrCopyDefaultValue),
        // which matches "" byte for byte.
        guard case .data(let account)? = attributes[Key.account] else { Issue.record("account is not Data"); return }
        #expect(account.isEmpty)
    }

    @Test("an add fills in access group, accessibility, sync = false and both dates")
    func defaultsFilledIn() throws {
        let f = Fixture()
        try f.engine.add(genp("svc", "a"))
        let attributes = try #require(try f.engine.copyMatching(genp("svc", "a", [Key.returnAttributes: .bool(true)]))?.attributes)
        #expect(attributes[Key.accessGroup] == .string("default"))
        #expect(attributes[Key.accessible] == .string("ak"))
        #expect(attributes[Key.synchronizable] == .bool(false))
        #expect(attributes[Key.creationDate] == .date(f.clock.now))
        #expect(attributes[Key.modificationDate] == .date(f.clock.now))
        #expect(attributes[Key.class] == .string("genp"))
    }

    @Test("the default access group is the first entitled group")
    func entitledDefaultGroup() throws {
        let f = Fixture { $0.accessGroups = .entitled(["TEAM.app", "TEAM.shared"]) }
        try f.engine.add(genp("svc", "a"))
        let attributes = try #require(try f.engine.copyMatching(genp("svc", "a", [Key.returnAttributes: .bool(true)]))?.attributes)
        #expect(attributes[Key.accessGroup] == .string("TEAM.app"))
    }

    @Test("an update refreshes the modification date and keeps the creation date")
    func modificationDateRefreshed() throws {
        let f = Fixture()
        try f.engine.add(genp("svc", "a", [Key.valueData: secret("1")]))
        let created = f.clock.now
        f.clock.advance(60)
        try f.engine.update(genp("svc", "a"), with: [Key.valueData: secret("2")])
        let attributes = try #require(try f.engine.copyMatching(genp("svc", "a", [Key.returnAttributes: .bool(true)]))?.attributes)
        #expect(attributes[Key.creationDate] == .date(created))
        #expect(attributes[Key.modificationDate] == .date(created.addingTimeInterval(60)))
    }

    @Test("an attribute foreign to the class fails with errSecNoSuchAttr on add and on delete")
    func foreignAttribute() throws {
        let f = Fixture()
        var cert = ClassCase.all[3].query
        cert[Key.applicationTag] = .data(Data("tag".utf8))
        #expect(status { try f.engine.add(cert) } == Status.noSuchAttr)
        #expect(status { try f.engine.add(genp("svc", "a", [Key.server: .string("example.com")])) } == Status.noSuchAttr)
        try f.engine.add(genp("svc", "a"))
        #expect(status { try f.engine.delete(genp("svc", "a", [Key.server: .string("example.com")])) } == Status.noSuchAttr)
        #expect(try f.engine.copyMatching(genp("svc", "a")) == nil)  // still there
    }

    @Test("a query without kSecAttrSynchronizable matches only non-synchronizable items; Any matches both")
    func synchronizableMatching() throws {
        let f = Fixture()
        try f.engine.add(genp("svc", "a", [Key.synchronizable: .bool(true), Key.valueData: secret("cloud")]))
        #expect(status { _ = try f.engine.copyMatching(genp("svc", "a")) } == Status.itemNotFound)
        try f.engine.add(genp("svc", "a", [Key.valueData: secret("local")]))  // another key: sync differs
        #expect(try f.engine.secretString(genp("svc", "a")) == "local")
        #expect(try f.engine.secretString(genp("svc", "a", [Key.synchronizable: .bool(true)])) == "cloud")
        let both = try f.engine.copyMatching(genp("svc", "a", [
            Key.synchronizable: .string(Key.synchronizableAny), Key.matchLimit: .string(Key.matchLimitAll),
            Key.returnAttributes: .bool(true),
        ]))
        #expect(both?.array?.count == 2)
        // A delete without sync leaves the synchronizable item alone.
        try f.engine.delete(genp("svc"))
        #expect(try f.engine.secretString(genp("svc", "a", [Key.synchronizable: .bool(true)])) == "cloud")
    }

    @Test("kSecAttrSynchronizableAny cannot be added")
    func synchronizableAnyCannotBeAdded() {
        let f = Fixture()
        #expect(status { try f.engine.add(genp("svc", "a", [Key.synchronizable: .string(Key.synchronizableAny)])) } == Status.param)
        #expect(f.storage.count == 0)
    }

    @Test("string matching is exact unless kSecMatchCaseInsensitive")
    func caseSensitivity() throws {
        let f = Fixture()
        try f.engine.add(genp("Svc", "Alice", [Key.valueData: secret("s")]))
        #expect(status { _ = try f.engine.copyMatching(genp("svc", "alice")) } == Status.itemNotFound)
        #expect(try f.engine.secretString(genp("svc", "alice", [Key.matchCaseInsensitive: .bool(true)])) == "s")
    }
}

@Suite("Malformed input: errSecParam, nothing stored")
struct MalformedInputTests {
    @Test("invalid dictionaries fail with errSecParam and store nothing", arguments: [
        ("no class", [Key.service: KeychainValue.string("svc")]),
        ("unknown class", [Key.class: .string("pass"), Key.service: .string("svc")]),
        ("class of wrong type", [Key.class: .number(1)]),
        ("secret not data", [Key.class: .string("genp"), Key.valueData: .string("secret")]),
        ("service a Boolean", [Key.class: .string("genp"), Key.service: .bool(true)]),
        ("service a date", [Key.class: .string("genp"), Key.service: .date(Date())]),
        ("port as data", [Key.class: .string("inet"), Key.port: .data(Data([0, 80]))]),
        ("access group not UTF-8", [Key.class: .string("genp"), Key.accessGroup: .data(Data([0xFF, 0xFE]))]),
        ("unknown accessibility", [Key.class: .string("genp"), Key.accessible: .string("sometimes")]),
        ("return key not a Boolean", [Key.class: .string("genp"), Key.returnData: .string("yes")]),
        ("access control and accessibility together", [Key.class: .string("genp"), Key.accessible: .string("ak"),
            Key.accessControl: .accessControl(AccessControl(accessibility: .whenUnlocked, flags: .userPresence))]),
        ("unknown return key", [Key.class: .string("genp"), "r_Everything": .bool(true)]),
    ] as [(String, KeychainQuery)])
    func rejected(_ name: String, _ query: KeychainQuery) {
        let f = Fixture()
        #expect(status { try f.engine.add(query) } == Status.param, "\(name)")
        #expect(f.storage.count == 0)
    }

    @Test("bad match limits fail with errSecParam", arguments: [
        KeychainValue.string("m_LimitSome"), .number(0), .number(-3), .data(Data()),
    ])
    func badLimit(_ limit: KeychainValue) throws {
        let f = Fixture()
        try f.engine.add(genp("svc", "a"))
        #expect(status { _ = try f.engine.copyMatching(genp("svc", "a", [Key.matchLimit: limit])) } == Status.param)
    }

    @Test("update attributes may not hold class, search, return or use keys", arguments: [
        Key.class, Key.matchLimit, Key.returnData, Key.returnAttributes, Key.useAuthenticationUI,
    ])
    func updateRejectsNonAttributes(_ key: String) throws {
        let f = Fixture()
        try f.engine.add(genp("svc", "a", [Key.valueData: secret("old")]))
        let value: KeychainValue = key == Key.class ? .string("genp") : key == Key.matchLimit ? .string(Key.matchLimitAll)
            : key == Key.useAuthenticationUI ? .string(Key.useAuthenticationUIFail) : .bool(true)
        #expect(status { try f.engine.update(genp("svc", "a"), with: [key: value, Key.valueData: secret("new")]) } == Status.param)
        #expect(try f.engine.secretString(genp("svc", "a")) == "old")
    }

    @Test("a FourCharCode and numeric strings are accepted where Apple stores numbers")
    func numericCoercion() throws {
        // Apple's copyNumber (SecDbItem.c): a string that prints back as its 32-bit value is that number;
        // any other string is kept as the string.
        let f = Fixture()
        try f.engine.add(genp("svc", "a", [Key.creator: .string("abcd"), Key.type: .string("42")]))
        let attributes = try #require(try f.engine.copyMatching(genp("svc", "a", [Key.returnAttributes: .bool(true)]))?.attributes)
        #expect(attributes[Key.creator] == .string("abcd"))
        #expect(attributes[Key.type] == .number(42))
    }
}
