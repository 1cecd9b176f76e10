import Foundation
import KeychainEngine
import KeychainFile
import Testing

/// The keychain file's UNIQUE index over the primary-key digests is the duplicate check (the engine does not look
/// first): it must answer errSecDuplicateItem also when the row holding the key is sealed under a discarded class key.
@Suite("Keychain file: the unique key is the duplicate check")
struct FileDuplicateCheckTests {
    @Test("an add whose primary key a locked item holds fails with errSecDuplicateItem and overwrites nothing")
    func addOverLockedItem() throws {
        let file = try KeychainFile.create(at: TempDir().path(), password: "pw")
        let engine = KeychainEngine(storage: file)
        try engine.add(genp("svc", "a", [Key.valueData: .data(Data("one".utf8)), Key.accessible: .string("ak")]))
        file.lockAfterFirstUnlock()
        // The new item's class key is available; the existing row's (ak) was discarded.
        #expect(fileStatus { try engine.add(genp("svc", "a", [Key.valueData: .data(Data("two".utf8)), Key.accessible: .string("ck")])) }
                == Status.duplicateItem)
        try file.unlock(password: "pw")
        #expect(try engine.secret("svc", "a") == "one")
        let all = try engine.copyMatching(genp("svc", "a", [Key.returnAttributes: .bool(true), Key.matchLimit: .string(Key.matchLimitAll)]))
        #expect(all?.array?.count == 1)
        #expect(all?.array?.first?.attributes?[Key.accessible] == .string("ak"))
    }

    @Test("an update giving an item a locked item's primary key fails with errSecDuplicateItem and changes nothing")
    func updateOntoLockedItem() throws {
        let file = try KeychainFile.create(at: TempDir().path(), password: "pw")
        let engine = KeychainEngine(storage: file)
        try engine.add(genp("svc", "a", [Key.valueData: .data(Data("locked".utf8)), Key.accessible: .string("ak")]))
        try engine.add(genp("svc", "b", [Key.valueData: .data(Data("open".utf8)), Key.accessible: .string("ck")]))
        file.lockAfterFirstUnlock()
        #expect(fileStatus { try engine.update(genp("svc", "b"), with: [Key.account: .string("a")]) } == Status.duplicateItem)
        try file.unlock(password: "pw")
        #expect(try engine.secret("svc", "a") == "locked")
        #expect(try engine.secret("svc", "b") == "open")
    }
}
