import Foundation
import KeychainEngine
import Testing

/// One row of the flags × factors table: whether a context holding `factors` covers an access control with `flags`.
struct CoverageCase: Sendable, CustomTestStringConvertible {
    let flags: AccessControlFlags
    let name: String
    let factors: Set<AuthenticationFactor>
    let covered: Bool

    var testDescription: String {
        "\(name) with \(factors.map(\.rawValue).sorted().joined(separator: "+")): \(covered ? "covered" : "asks")"
    }

    /// Every single factor against `flags`: `covering` are the factors that cover it, the others do not.
    static func row(_ name: String, _ flags: AccessControlFlags, coveredBy covering: Set<AuthenticationFactor>) -> [CoverageCase] {
        AuthenticationFactor.allCases.map { CoverageCase(flags: flags, name: name, factors: [$0], covered: covering.contains($0)) }
    }

    static let all: [CoverageCase] =
        row("userPresence", .userPresence, coveredBy: [.passcode, .biometry, .deviceOwner])
        + row("biometryAny", .biometryAny, coveredBy: [.biometry])
        + row("biometryCurrentSet", .biometryCurrentSet, coveredBy: [.biometry])
        + row("devicePasscode", .devicePasscode, coveredBy: [.passcode])
        + row("watch", .watch, coveredBy: [.companion])
        + row("biometryAny or devicePasscode", [.biometryAny, .devicePasscode, .or], coveredBy: [.biometry, .passcode, .deviceOwner])
        + row("biometryCurrentSet or devicePasscode", [.biometryCurrentSet, .devicePasscode, .or], coveredBy: [.biometry, .passcode])
        + row("watch or devicePasscode", [.watch, .devicePasscode, .or], coveredBy: [.companion, .passcode])
        + row("biometryAny or watch", [.biometryAny, .watch, .or], coveredBy: [.biometry, .companion])
        + row("biometryAny and devicePasscode", [.biometryAny, .devicePasscode, .and], coveredBy: [])
        + row("biometryAny, devicePasscode (no conjunction: all)", [.biometryAny, .devicePasscode], coveredBy: [])
        + row("applicationPassword", .applicationPassword, coveredBy: [])
        + row("userPresence + applicationPassword", [.userPresence, .applicationPassword], coveredBy: [])
        + row("privateKeyUsage + biometryAny", [.privateKeyUsage, .biometryAny], coveredBy: [.biometry])
        + [
            CoverageCase(flags: [.biometryAny, .devicePasscode, .and], name: "biometryAny and devicePasscode", factors: [.biometry, .passcode], covered: true),
            CoverageCase(flags: [.biometryAny, .devicePasscode], name: "biometryAny, devicePasscode (no conjunction: all)", factors: [.biometry, .passcode], covered: true),
            CoverageCase(flags: [.biometryAny, .devicePasscode, .and], name: "biometryAny and devicePasscode", factors: [.deviceOwner, .passcode], covered: false),
            CoverageCase(flags: [.watch, .devicePasscode, .and], name: "watch and devicePasscode", factors: [.companion, .passcode], covered: true),
            CoverageCase(flags: [.watch, .devicePasscode, .and], name: "watch and devicePasscode", factors: [.biometry, .passcode], covered: false),
            CoverageCase(flags: [.biometryCurrentSet, .devicePasscode, .or], name: "biometryCurrentSet or devicePasscode", factors: [.deviceOwner], covered: false),
            CoverageCase(flags: [.userPresence, .applicationPassword], name: "userPresence + applicationPassword", factors: Set(AuthenticationFactor.allCases), covered: false),
        ]
}

@Suite("Authentication contexts cover only what the person's factor satisfies")
struct AuthenticationFactorTests {
    static let start = Date(timeIntervalSinceReferenceDate: 800_000_000)
    static let enrolled = Data("enrolled set A".utf8)

    @Test("a context holding these factors covers exactly the access controls Apple's rules say they satisfy", arguments: CoverageCase.all)
    func coverage(_ row: CoverageCase) {
        let context = AuthenticationContext(reuseDuration: 30)
        context.record(row.factors, biometryDomainState: Self.enrolled, at: Self.start)
        let covered = context.covers(row.flags, at: Self.start.addingTimeInterval(10), currentBiometryDomainState: { Self.enrolled })
        #expect(covered == row.covered)
        // Past the reuse window nothing is covered.
        #expect(!context.covers(row.flags, at: Self.start.addingTimeInterval(31), currentBiometryDomainState: { Self.enrolled }))
    }

    @Test("the factors an authenticator that does not say which it used proves are inferred from the flags it was asked")
    func inferredFactors() {
        #expect(AccessControlRules.factorsProven(by: .userPresence) == [.deviceOwner])
        #expect(AccessControlRules.factorsProven(by: .biometryAny) == [.biometry])
        #expect(AccessControlRules.factorsProven(by: .biometryCurrentSet) == [.biometry])
        #expect(AccessControlRules.factorsProven(by: .devicePasscode) == [.passcode])
        #expect(AccessControlRules.factorsProven(by: .watch) == [.companion])
        #expect(AccessControlRules.factorsProven(by: [.biometryAny, .devicePasscode]) == [.biometry, .passcode])
        #expect(AccessControlRules.factorsProven(by: [.biometryAny, .devicePasscode, .or]) == [.deviceOwner])
        #expect(AccessControlRules.factorsProven(by: [.biometryAny, .watch, .or]) == [])
        #expect(AccessControlRules.factorsProven(by: [.devicePasscode, .applicationPassword]) == [.passcode, .applicationPassword])
        #expect(AuthenticationResult.inferred(.userCancel, for: .devicePasscode).factors.isEmpty)
    }

    @Test(".biometryCurrentSet is covered only while the enrolled set is the one the biometry was checked against")
    func currentSet() {
        let context = AuthenticationContext(reuseDuration: 30)
        context.record([.biometry], biometryDomainState: Self.enrolled, at: Self.start)
        let later = Self.start.addingTimeInterval(1)
        #expect(context.covers(.biometryCurrentSet, at: later, currentBiometryDomainState: { Self.enrolled }))
        let changed = Data("enrolled set B".utf8)
        #expect(!context.covers(.biometryCurrentSet, at: later, currentBiometryDomainState: { changed }))
        #expect(context.covers(.biometryAny, at: later, currentBiometryDomainState: { changed }))
    }

    @Test("with .and, every factor must have succeeded within the reuse window; only the missing one is left to ask")
    func conjunctionWindow() {
        let context = AuthenticationContext(reuseDuration: 10)
        let both: AccessControlFlags = [.biometryAny, .devicePasscode, .and]
        context.record([.biometry], at: Self.start)
        #expect(context.uncovered(both, at: Self.start, currentBiometryDomainState: { nil }) == [.devicePasscode, .and])
        context.record([.passcode], at: Self.start.addingTimeInterval(8))
        #expect(context.covers(both, at: Self.start.addingTimeInterval(9), currentBiometryDomainState: { nil }))
        // 11 s after the finger, 3 s after the passcode: the finger has to be given again.
        #expect(context.uncovered(both, at: Self.start.addingTimeInterval(11), currentBiometryDomainState: { nil }) == [.biometryAny, .and])
        // With .or, a choice is asked whole.
        let either: AccessControlFlags = [.biometryAny, .watch, .or]
        #expect(context.uncovered(either, at: Self.start.addingTimeInterval(11), currentBiometryDomainState: { nil }) == either)
    }

    @Test("a success for an access control covers a later one with the same constraints, never one with other constraints")
    func sameConstraints() {
        let context = AuthenticationContext(reuseDuration: 30)
        // An authenticator that cannot say whether the finger or the watch was used proves no factor.
        context.record([], satisfying: [.biometryAny, .watch, .or], at: Self.start)
        let later = Self.start.addingTimeInterval(1)
        #expect(context.covers([.watch, .biometryAny, .or, .privateKeyUsage], at: later, currentBiometryDomainState: { nil }))
        #expect(!context.covers(.biometryAny, at: later, currentBiometryDomainState: { nil }))
        #expect(!context.covers(.watch, at: later, currentBiometryDomainState: { nil }))
        #expect(!context.covers([.biometryAny, .watch, .and], at: later, currentBiometryDomainState: { nil }))
    }

    @Test("recordSuccess(at:) covers every access control; invalidate() forgets every factor")
    func grantAndInvalidate() {
        let context = AuthenticationContext(reuseDuration: 30)
        context.recordSuccess(at: Self.start)
        #expect(context.covers([.biometryCurrentSet, .devicePasscode, .applicationPassword], at: Self.start, currentBiometryDomainState: { nil }))
        context.record([.passcode], at: Self.start)
        #expect(context.factors(at: Self.start) == [.passcode])
        context.invalidate()
        #expect(context.factors(at: Self.start).isEmpty)
        #expect(context.lastSuccess == nil)
        #expect(!context.covers(.devicePasscode, at: Self.start, currentBiometryDomainState: { nil }))
    }

    func add(_ f: Fixture, _ account: String, _ flags: AccessControlFlags) throws {
        try f.engine.add(genp("svc", account, [
            Key.valueData: secret("guarded-\(account)"),
            Key.accessControl: .accessControl(AccessControl(accessibility: .whenPasscodeSetThisDeviceOnly, flags: flags)),
        ]))
    }

    func read(_ f: Fixture, _ account: String, _ context: AuthenticationContext) throws -> String? {
        try f.engine.secretString(genp("svc", account, [Key.useAuthenticationContext: .authenticationContext(context)]))
    }

    @Test("the authenticator's reported factor, not the flags asked, decides what the context covers")
    func reportedFactor() throws {
        // An authenticator that reports the password for a .userPresence prompt.
        final class PasswordPerson: Authenticator {
            let count = Locked(0)
            func authenticate(_ request: AuthenticationRequest) -> AuthenticationOutcome { authenticateReportingFactors(request).outcome }
            func authenticateReportingFactors(_ request: AuthenticationRequest) -> AuthenticationResult {
                count.withLock { $0 += 1 }
                return AuthenticationResult(.success, factors: request.flags.contains(.biometryAny) ? [.biometry] : [.passcode])
            }
        }
        let f = Fixture()
        let person = PasswordPerson()
        f.engine.authenticator = person
        try add(f, "presence", .userPresence)
        try add(f, "pin", .devicePasscode)
        try add(f, "bio", .biometryAny)
        let context = AuthenticationContext(reuseDuration: 60)
        _ = try read(f, "presence", context)
        _ = try read(f, "pin", context)
        #expect(person.count.current == 1, "the password typed at the .userPresence prompt covers .devicePasscode")
        _ = try read(f, "bio", context)
        #expect(person.count.current == 2, "but never .biometryAny")
    }
}
