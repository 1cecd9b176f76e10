import Foundation
import Testing
import KeychainEngine

@Suite("Operations: add, copy, update, delete")
struct OperationTests {
    /// Three accounts of one service and one of another.
    func populated() throws -> Fixture {
        let f = Fixture()
        for account in ["a", "b", "c"] {
            try f.engine.add(genp("svc", account, [Key.valueData: secret("secret-\(account)")]))
        }
        try f.engine.add(genp("other", "a", [Key.valueData: secret("other-a")]))
        return f
    }

    @Test("an add without return keys returns nil; with return keys, what a copy would")
    func addResults() throws {
        let f = Fixture()
        #expect(try f.engine.add(genp("svc", "a", [Key.valueData: secret("x")])) == nil)
        let data = try f.engine.add(genp("svc", "b", [Key.valueData: secret("y"), Key.returnData: .bool(true)]))
        #expect(data?.string == "y")
        let attrs = try f.engine.add(genp("svc", "c", [Key.valueData: secret("z"), Key.returnAttributes: .bool(true)]))
        #expect(attrs?.attributes?[Key.account] == .string("c"))
        #expect(attrs?.attributes?[Key.valueData] == nil)
    }

    @Test("copy returns one item by default even when several match")
    func defaultLimitIsOne() throws {
        let f = try populated()
        let result = try f.engine.copyMatching(genp("svc", nil, [Key.returnAttributes: .bool(true)]))
        #expect(result?.attributes != nil)
        #expect(result?.array == nil)
    }

    @Test("no match is errSecItemNotFound, also with limit All (never an empty array)")
    func notFound() throws {
        let f = try populated()
        #expect(status { _ = try f.engine.copyMatching(genp("svc", "zzz")) } == Status.itemNotFound)
        #expect(status { _ = try f.engine.copyMatching(genp("svc", "zzz", [
            Key.matchLimit: .string(Key.matchLimitAll), Key.returnAttributes: .bool(true),
        ])) } == Status.itemNotFound)
    }

    @Test("result shapes follow the return keys")
    func shapes() throws {
        let f = try populated()
        #expect(try f.engine.copyMatching(genp("svc", "a")) == nil)
        #expect(try f.engine.copyMatching(genp("svc", "a", [Key.returnData: .bool(true)]))?.string == "secret-a")
        let ref = try #require(try f.engine.copyMatching(genp("svc", "a", [Key.returnPersistentRef: .bool(true)]))?.data)
        #expect(ref.count == 12)
        let dict = try #require(try f.engine.copyMatching(genp("svc", "a", [Key.returnAttributes: .bool(true)]))?.attributes)
        #expect(dict[Key.service] == .string("svc") && dict[Key.valueData] == nil)
        let both = try #require(try f.engine.copyMatching(genp("svc", "a", [
            Key.returnAttributes: .bool(true), Key.returnData: .bool(true),
        ]))?.attributes)
        #expect(both[Key.valueData] == secret("secret-a"))
        let dataAndRef = try #require(try f.engine.copyMatching(genp("svc", "a", [
            Key.returnData: .bool(true), Key.returnPersistentRef: .bool(true),
        ]))?.attributes)
        #expect(dataAndRef[Key.valuePersistentRef] == .data(ref))
        #expect(dataAndRef[Key.account] == nil)
        let one = try #require(try f.engine.copyMatching(genp("svc", "a", [
            Key.matchLimit: .string(Key.matchLimitAll), Key.returnData: .bool(true),
        ]))?.array)
        #expect(one == [.data(Data("secret-a".utf8))])
        let two = try #require(try f.engine.copyMatching(genp("svc", nil, [
            Key.matchLimit: .number(2), Key.returnAttributes: .bool(true),
        ]))?.array)
        #expect(two.count == 2)
        let all = try #require(try f.engine.copyMatching(genp("svc", nil, [
            Key.matchLimit: .string(Key.matchLimitAll), Key.returnAttributes: .bool(true),
        ]))?.array)
        #expect(Set(all.compactMap { $0.attributes?[Key.account]?.stringValue }) == ["a", "b", "c"])
    }

    @Test("a persistent reference finds its item again, and only it")
    func persistentReference() throws {
        let f = try populated()
        let ref = try #require(try f.engine.copyMatching(genp("svc", "b", [Key.returnPersistentRef: .bool(true)]))?.data)
        let found = try f.engine.copyMatching([Key.valuePersistentRef: .data(ref), Key.returnData: .bool(true)])
        #expect(found?.string == "secret-b")
        let withClass = try f.engine.copyMatching([Key.class: .string("genp"), Key.valuePersistentRef: .data(ref), Key.returnData: .bool(true)])
        #expect(withClass?.string == "secret-b")
        try f.engine.delete([Key.class: .string("genp"), Key.valuePersistentRef: .data(ref)])
        #expect(status { _ = try f.engine.copyMatching([Key.valuePersistentRef: .data(ref)]) } == Status.itemNotFound)
        #expect(try f.engine.secretString(genp("svc", "a")) == "secret-a")
    }

    @Test("update changes every match")
    func updateAll() throws {
        let f = try populated()
        try f.engine.update(genp("svc"), with: [Key.label: .string("relabelled")])
        let all = try #require(try f.engine.copyMatching(genp("svc", nil, [
            Key.matchLimit: .string(Key.matchLimitAll), Key.returnAttributes: .bool(true),
        ]))?.array)
        #expect(all.count == 3)
        #expect(all.allSatisfy { $0.attributes?[Key.label] == .string("relabelled") })
        let other = try f.engine.copyMatching(genp("other", "a", [Key.returnAttributes: .bool(true)]))
        #expect(other?.attributes?[Key.label] == nil)
    }

    @Test("update with no match is errSecItemNotFound")
    func updateNotFound() throws {
        let f = try populated()
        #expect(status { try f.engine.update(genp("svc", "zzz"), with: [Key.valueData: secret("x")]) } == Status.itemNotFound)
    }

    @Test("an update that would collide with another item's key fails with errSecDuplicateItem and changes nothing")
    func updateCollision() throws {
        let f = try populated()
        #expect(status { try f.engine.update(genp("svc", "a"), with: [Key.account: .string("b"), Key.valueData: secret("evil")]) }
                == Status.duplicateItem)
        #expect(try f.engine.secretString(genp("svc", "a")) == "secret-a")
        #expect(try f.engine.secretString(genp("svc", "b")) == "secret-b")
        // Several matches renamed to the same key: the first succeeds inside the transaction, the second collides; all roll back.
        #expect(status { try f.engine.update(genp("svc"), with: [Key.account: .string("z")]) } == Status.duplicateItem)
        #expect(try f.engine.secretString(genp("svc", "c")) == "secret-c")
        #expect(status { _ = try f.engine.copyMatching(genp("svc", "z")) } == Status.itemNotFound)
    }

    @Test("delete takes no match limit other than All and no return keys; update takes no return keys and honours a limit")
    func updateDeleteLimits() throws {
        let f = try populated()
        #expect(status { try f.engine.update(genp("svc", nil, [Key.returnData: .bool(true)]), with: [Key.label: .string("x")]) } == Status.param)
        try f.engine.update(genp("svc", nil, [Key.matchLimit: .string(Key.matchLimitOne)]), with: [Key.label: .string("x")])
        let labelled = try f.engine.copyMatching(genp("svc", nil, [Key.label: .string("x"), Key.matchLimit: .string(Key.matchLimitAll), Key.returnAttributes: .bool(true)]))
        #expect(labelled?.array?.count == 1)
        #expect(status { try f.engine.delete(genp("svc", nil, [Key.matchLimit: .string(Key.matchLimitOne)])) } == Status.param)
        #expect(status { try f.engine.delete(genp("svc", nil, [Key.returnData: .bool(true)])) } == Status.param)
        try f.engine.delete(genp("svc", "a", [Key.matchLimit: .string(Key.matchLimitAll)]))
        #expect(status { _ = try f.engine.copyMatching(genp("svc", "a")) } == Status.itemNotFound)
    }

    @Test("delete with class and service removes every account of that service and nothing else")
    func deleteService() throws {
        let f = try populated()
        try f.engine.delete(genp("svc"))
        #expect(status { _ = try f.engine.copyMatching(genp("svc")) } == Status.itemNotFound)
        #expect(try f.engine.secretString(genp("other", "a")) == "other-a")
        #expect(status { try f.engine.delete(genp("svc")) } == Status.itemNotFound)
    }

    @Test("delete with only the class removes every item of the class (the KeychainManager.deleteAll hazard)")
    func deleteClass() throws {
        let f = try populated()
        try f.engine.add([Key.class: .string("inet"), Key.server: .string("example.com")])
        try f.engine.delete([Key.class: .string("genp")])
        #expect(status { _ = try f.engine.copyMatching(genp("other")) } == Status.itemNotFound)
        #expect(try f.engine.copyMatching([Key.class: .string("inet")]) == nil)
    }

    @Test("accessibility can be migrated in place with update, keeping the creation date")
    func accessibilityMigration() throws {
        let f = Fixture()
        try f.engine.add(genp("svc", "token", [Key.valueData: secret("t")]))
        f.clock.advance(10)
        try f.engine.update(genp("svc", "token"), with: [Key.accessible: .string(Accessibility.afterFirstUnlock.rawValue)])
        let attributes = try #require(try f.engine.copyMatching(genp("svc", "token", [Key.returnAttributes: .bool(true)]))?.attributes)
        #expect(attributes[Key.accessible] == .string("ck"))
        #expect(attributes[Key.creationDate] != attributes[Key.modificationDate])
        f.storage.lockState = .lockedAfterFirstUnlock
        #expect(try f.engine.secretString(genp("svc", "token")) == "t")
    }

    @Test("entitlements: another access group fails with errSecMissingEntitlement; queries see only entitled groups")
    func entitlements() throws {
        let storage = MemoryStorage()
        let other = KeychainEngine(storage: storage, configuration: { var c = EngineConfiguration(); c.accessGroups = .entitled(["TEAM.other"]); return c }())
        try other.add(genp("svc", "a", [Key.valueData: secret("other's")]))
        let app = KeychainEngine(storage: storage, configuration: { var c = EngineConfiguration(); c.accessGroups = .entitled(["TEAM.app"]); return c }())
        #expect(status { try app.add(genp("svc", "a", [Key.accessGroup: .string("TEAM.other")])) } == Status.missingEntitlement)
        #expect(status { _ = try app.copyMatching(genp("svc", "a")) } == Status.itemNotFound)
        #expect(status { _ = try app.copyMatching(genp("svc", "a", [Key.accessGroup: .string("TEAM.other")])) } == Status.missingEntitlement)
        try app.add(genp("svc", "a", [Key.valueData: secret("mine")]))  // same service/account, another group: no collision
        #expect(try app.secretString(genp("svc", "a")) == "mine")
        let none = KeychainEngine(storage: storage, configuration: { var c = EngineConfiguration(); c.accessGroups = .entitled([]); return c }())
        #expect(status { try none.add(genp("svc", "b")) } == Status.missingEntitlement)
    }

    @Test("concurrent adds of one item: exactly one succeeds, the rest get errSecDuplicateItem")
    func concurrentDuplicateAdds() async throws {
        let f = Fixture()
        let engine = f.engine
        let statuses = await withTaskGroup(of: Int32.self) { group in
            for i in 0..<32 {
                group.addTask { status { try engine.add(genp("svc", "same", [Key.valueData: secret("\(i)")])) } }
            }
            return await group.reduce(into: [Int32]()) { $0.append($1) }
        }
        #expect(statuses.filter { $0 == Status.success }.count == 1)
        #expect(statuses.filter { $0 == Status.duplicateItem }.count == 31)
        #expect(f.storage.count == 1)
    }

    @Test("concurrent adds of distinct items all land")
    func concurrentDistinctAdds() async throws {
        let f = Fixture()
        let engine = f.engine
        await withTaskGroup(of: Void.self) { group in
            for i in 0..<200 {
                group.addTask { _ = status { try engine.add(genp("svc", "acct-\(i)")) } }
            }
        }
        let all = try f.engine.copyMatching(genp("svc", nil, [Key.matchLimit: .string(Key.matchLimitAll), Key.returnAttributes: .bool(true)]))
        #expect(all?.array?.count == 200)
    }

    @Test("addOrUpdate adds, then updates in place: the creation date is kept and every item the query matches changes, as add then update would")
    func addOrUpdate() throws {
        let f = Fixture()
        try f.engine.add(genp("svc", "a", [Key.accessGroup: .string("other"), Key.valueData: secret("other")]))
        let add = genp("svc", "a", [Key.valueData: secret("one")])
        #expect(try f.engine.addOrUpdate(add, matching: genp("svc", "a"), with: [Key.valueData: secret("one")]) == .added)
        let created = try f.engine.copyMatching(genp("svc", "a", [Key.accessGroup: .string("default"), Key.returnAttributes: .bool(true)]))?
            .attributes?[Key.creationDate]
        f.clock.advance(60)
        #expect(try f.engine.addOrUpdate(add, matching: genp("svc", "a"), with: [Key.valueData: secret("two")]) == .updated)
        let all = try f.engine.copyMatching(genp("svc", "a", [Key.returnAttributes: .bool(true), Key.returnData: .bool(true),
                                                              Key.matchLimit: .string(Key.matchLimitAll)]))?.array ?? []
        #expect(all.count == 2)
        #expect(all.allSatisfy { $0.attributes?[Key.valueData] == secret("two") })
        let dflt = all.first { $0.attributes?[Key.accessGroup] == .string("default") }?.attributes
        #expect(dflt?[Key.creationDate] == created)
        #expect(dflt?[Key.modificationDate] == .date(f.clock.now))
        // Naming the group pins the primary key: only that item changes.
        let pinned = genp("svc", "a", [Key.accessGroup: .string("default")])
        #expect(try f.engine.addOrUpdate(pinned, matching: pinned, with: [Key.valueData: secret("three")]) == .updated)
        #expect(try f.engine.secretString(genp("svc", "a", [Key.accessGroup: .string("other")])) == "two")
        #expect(try f.engine.secretString(pinned) == "three")
        #expect(f.storage.count == 2)
    }

    @Test("addOrUpdate fails as add then update would: a parameter error from the changes, nothing written")
    func addOrUpdateErrors() throws {
        let f = Fixture()
        let add = genp("svc", "a", [Key.valueData: secret("one")])
        try f.engine.add(add)
        #expect(status { try f.engine.addOrUpdate(add, matching: genp("svc", "a"), with: [Key.class: .string("genp")]) } == Status.param)
        #expect(status { try f.engine.addOrUpdate(genp("svc", "b", [Key.accessible: .string("nope")]), matching: genp("svc", "b"), with: [:]) } == Status.param)
        #expect(try f.engine.secretString(genp("svc", "a")) == "one")
        #expect(f.storage.count == 1)
    }
}

/// Apple's server answers kSecReturnRef with what its client needs to make the object (SecDbItemCopyResult adds
/// the attributes and the data when a reference is asked); passwords get no reference at all.
@Suite("kSecReturnRef: the material of a reference")
struct ReferenceMaterialTests {
    let key: KeychainQuery = [Key.class: .string("keys"), Key.applicationTag: .string("tag"), Key.keyClass: .string("1"),
                              Key.valueData: .data(Data("private-key-bytes".utf8))]

    @Test("a key's reference brings its class, attributes, persistent reference and data")
    func keyMaterial() throws {
        let f = Fixture()
        try f.engine.add(key)
        let material = try #require(try f.engine.copyMatching([Key.class: .string("keys"), Key.returnRef: .bool(true)])?.attributes)
        #expect(material[Key.class] == .string("keys"))
        #expect(material[Key.applicationTag] == .string("tag"))
        #expect(material[Key.keyClass] == .number(1))
        #expect(material[Key.valueData] == .data(Data("private-key-bytes".utf8)))
        guard case .data(let ref)? = material[Key.valueRef] else { Issue.record("no persistent reference"); return }
        #expect(PersistentReference(data: ref)?.itemClass == .key)
    }

    @Test("a key that needs an authentication gives its reference without its data, and without a prompt")
    func protectedKeyMaterial() throws {
        let f = Fixture()
        var protected = key
        protected[Key.accessControl] = .accessControl(AccessControl(accessibility: .whenUnlocked, flags: .userPresence))
        try f.engine.add(protected)
        f.engine.authenticator = FixedAuthenticator(.userCancel)
        let material = try #require(try f.engine.copyMatching([Key.class: .string("keys"), Key.returnRef: .bool(true)])?.attributes)
        #expect(material[Key.valueData] == nil)
        #expect(material[Key.valueRef] != nil)
    }
}
