import Foundation
import KeychainEngine
import Keystone
import KeystoneTesting
import Testing

@Suite("Migration doubles")
struct MigrationDoublesTests {
    @Test("InMemoryDefaults persists only on synchronize; a crash loses what was not synchronized")
    func defaultsCrash() {
        let defaults = InMemoryDefaults(["a": "1"])
        defaults.set("2", forKey: "b")
        defaults.removeObject(forKey: "a")
        #expect(defaults.object(forKey: "a") == nil && defaults.object(forKey: "b") as? String == "2")
        defaults.simulateCrash()
        #expect(defaults.object(forKey: "a") as? String == "1" && defaults.object(forKey: "b") == nil)

        defaults.removeObject(forKey: "a")
        #expect(defaults.synchronize())
        defaults.simulateCrash()
        #expect(defaults.object(forKey: "a") == nil && defaults.synchronizeCount == 1)
    }

    @Test("InMemoryDefaults with synchronizeFails persists nothing and says so")
    func defaultsSynchronizeFails() {
        let defaults = InMemoryDefaults(["a": "1"])
        defaults.synchronizeFails = true
        defaults.removeObject(forKey: "a")
        #expect(defaults.synchronize() == false)
        defaults.simulateCrash()
        #expect(defaults.object(forKey: "a") as? String == "1")
    }

    @Test("InMemoryInstallMarker: read and write failures throw and change nothing; a write records the marker")
    func marker() throws {
        let marker = InMemoryInstallMarker()
        #expect(try marker.markerExists() == false)
        marker.writeFailure = .interactionNotAllowed
        #expect(throws: KeychainError.interactionNotAllowed) { try marker.writeMarker() }
        #expect(!marker.exists && marker.writeCount == 0)
        marker.writeFailure = nil
        try marker.writeMarker()
        #expect(marker.exists && marker.writeCount == 1)
        marker.readFailure = .interactionNotAllowed
        #expect(throws: KeychainError.interactionNotAllowed) { try marker.markerExists() }
        #expect(marker.readCount == 2)
    }
}
