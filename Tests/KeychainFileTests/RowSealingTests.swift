import Crypto
import Foundation
import KeychainEngine
import KeychainSealing
import Testing

@Suite("Row sealing: fresh randomness for every row")
struct RowSealingTests {
    static let item = StoredItem(itemClass: .genericPassword, attributes: [
        Key.service: .string("svc"), Key.account: .string("acct"), Key.accessible: .string(Accessibility.whenUnlocked.rawValue),
    ], secret: Data("secret".utf8))

    @Test("sealing one item twice uses a new row key and new nonces, never one nonce for both seals, and both open")
    func freshKeysAndNonces() throws {
        let keys = KeySet(master: SymmetricKey(size: .bits256))
        let aad = Data("bound".utf8)
        var nonces: Set<Data> = []
        var wrappedKeys: Set<Data> = []
        for _ in 0..<4 {
            let sealed = try SealedItem(sealing: Self.item, keys: keys) { _ in aad }
            // AES-GCM's combined form starts with its 12-byte nonce.
            nonces.insert(sealed.wrappedKey.prefix(12))
            nonces.insert(sealed.payload.prefix(12))
            wrappedKeys.insert(sealed.wrappedKey)
            guard case .item(let opened) = sealed.open(itemClass: .genericPassword, rowID: 7, keys: keys, aad: aad) else {
                Issue.record("a sealed row did not open")
                return
            }
            #expect(opened.secret == Self.item.secret)
            #expect(opened.attributes[Key.account] == .string("acct"))
            guard case .damaged = sealed.open(itemClass: .genericPassword, rowID: 7, keys: keys, aad: Data("other".utf8)) else {
                Issue.record("a sealed row opened under other associated data")
                return
            }
        }
        #expect(nonces.count == 8)
        #expect(wrappedKeys.count == 4)
    }

    @Test("the system's random bytes come in the length asked, and differ between calls")
    func systemRandom() {
        #expect(SystemRandom.bytes(0).isEmpty)
        let big = SystemRandom.bytes(600)  // more than one getentropy call (256 bytes each)
        #expect(big.count == 600)
        #expect(big[512...].contains { $0 != 0 })
        #expect(SystemRandom.bytes(32) != SystemRandom.bytes(32))
        var bytes = SystemRandom.bytes(64)
        SystemRandom.zero(&bytes)
        #expect(bytes == [UInt8](repeating: 0, count: 64))
    }
}
