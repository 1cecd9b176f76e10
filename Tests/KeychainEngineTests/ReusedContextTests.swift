import Foundation
import KeychainEngine
import Testing

/// The finding's scenarios through the engine: a context passed as `kSecUseAuthenticationContext` and reused.
@Suite("A reused authentication context opens only what its factor satisfies (engine)")
struct ReusedContextEngineTests {
    func add(_ f: Fixture, _ account: String, _ flags: AccessControlFlags) throws {
        try f.engine.add(genp("svc", account, [
            Key.valueData: secret("guarded-\(account)"),
            Key.accessControl: .accessControl(AccessControl(accessibility: .whenPasscodeSetThisDeviceOnly, flags: flags)),
        ]))
    }

    func read(_ f: Fixture, _ account: String, _ context: AuthenticationContext) throws -> String? {
        try f.engine.secretString(genp("svc", account, [Key.useAuthenticationContext: .authenticationContext(context)]))
    }

    @Test("after a .userPresence success (the password or a finger, unknown which), a .biometryAny item asks for biometry")
    func presenceThenBiometry() throws {
        let f = Fixture()
        try add(f, "presence", .userPresence)
        try add(f, "bio", .biometryAny)
        let context = AuthenticationContext(reuseDuration: 60)
        #expect(try read(f, "presence", context) == "guarded-presence")
        #expect(f.auth.prompts == 1)
        f.clock.advance(5)
        #expect(try read(f, "presence", context) == "guarded-presence")
        #expect(f.auth.prompts == 1, "the same access control is covered")
        #expect(try read(f, "bio", context) == "guarded-bio")
        #expect(f.auth.prompts == 2, "the .userPresence success must not open a biometry-only item")
        #expect(f.auth.requests.last?.flags == .biometryAny)
    }

    @Test("after a biometric success, a .devicePasscode item asks for the passcode; with interactionNotAllowed it fails")
    func biometryThenPasscode() throws {
        let f = Fixture()
        try add(f, "bio", .biometryAny)
        try add(f, "pin", .devicePasscode)
        let context = AuthenticationContext(reuseDuration: 60)
        #expect(try read(f, "bio", context) == "guarded-bio")
        context.interactionNotAllowed = true
        #expect(try read(f, "bio", context) == "guarded-bio")
        #expect(status { _ = try read(f, "pin", context) } == Status.interactionNotAllowed,
                "a finger never opens a passcode-only item")
        context.interactionNotAllowed = false
        #expect(try read(f, "pin", context) == "guarded-pin")
        #expect(f.auth.prompts == 2)
        #expect(f.auth.requests.last?.flags == .devicePasscode)
        // Both factors now: a .userPresence item is covered.
        try add(f, "presence", .userPresence)
        #expect(try read(f, "presence", context) == "guarded-presence")
        #expect(f.auth.prompts == 2)
    }

    @Test("an item needing biometry and the passcode asks, with a context holding the passcode, only for biometry")
    func onlyTheMissingFactor() throws {
        let f = Fixture()
        try add(f, "pin", .devicePasscode)
        try add(f, "both", [.biometryAny, .devicePasscode, .and])
        let context = AuthenticationContext(reuseDuration: 60)
        _ = try read(f, "pin", context)
        #expect(try read(f, "both", context) == "guarded-both")
        #expect(f.auth.prompts == 2)
        #expect(f.auth.requests.last?.flags == [.biometryAny, .and])
        #expect(try read(f, "both", context) == "guarded-both")
        #expect(f.auth.prompts == 2)
    }

    @Test("an application password is never carried from one read to the next")
    func applicationPasswordAsksEachTime() throws {
        let f = Fixture()
        try add(f, "app", .applicationPassword)
        let context = AuthenticationContext(reuseDuration: 60)
        _ = try read(f, "app", context)
        _ = try read(f, "app", context)
        #expect(f.auth.prompts == 2)
    }
}
