import Foundation
import Testing
import KeychainEngine
import KeystoneTesting

@Suite("InMemoryKeychain: configuration changes are atomic")
struct InMemoryKeychainConfigurationTests {
    static let rounds = 1000

    @Test("a profile change, an added entitlement and a passcode change made at once from three tasks lose none")
    func concurrentChangesOfDifferentFieldsLoseNone() async {
        let keychain = InMemoryKeychain(profile: .device, entitledAccessGroups: [])
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for round in 0..<Self.rounds { keychain.profile = round.isMultiple(of: 2) ? .simulator : .device }
                keychain.profile = .simulator
            }
            group.addTask {
                // Only this task writes the groups, so reading them back before adding one is not itself a race.
                for round in 0..<Self.rounds {
                    keychain.entitledAccessGroups = (keychain.entitledAccessGroups ?? []) + ["group-\(round)"]
                }
            }
            group.addTask {
                for round in 0..<Self.rounds { keychain.passcodeSet = !round.isMultiple(of: 2) }
                keychain.passcodeSet = false
            }
        }
        // A change that read the whole configuration and wrote it back would undo one of the others.
        let groups = keychain.entitledAccessGroups ?? []
        let lost = (0..<Self.rounds).map { "group-\($0)" }.filter { !groups.contains($0) }
        #expect(lost.isEmpty, "\(lost.count) of \(Self.rounds) added groups were lost, the first \(lost.first ?? "")")
        #expect(groups.count == Self.rounds)
        #expect(keychain.profile == .simulator)
        #expect(keychain.passcodeSet == false)
        #expect(keychain.engine.configuration.secureEnclaveAvailable == false)
    }

    @Test("a profile change keeps the entitlements and the passcode setting, and back")
    func profileChangeKeepsTheOtherFields() {
        let keychain = InMemoryKeychain(profile: .device, entitledAccessGroups: ["group-a"])
        keychain.passcodeSet = false
        keychain.profile = .simulator
        #expect(keychain.entitledAccessGroups == ["group-a"])
        #expect(keychain.passcodeSet == false)
        keychain.entitledAccessGroups = nil
        #expect(keychain.profile == .simulator)
        #expect(keychain.engine.configuration.enforcesAccessControl == false)
    }
}
