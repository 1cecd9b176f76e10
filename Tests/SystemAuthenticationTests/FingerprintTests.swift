#if canImport(Glibc) && !canImport(Darwin)
import Foundation
import ProcessWatchdog
import KeychainEngine
import SystemAuthentication
import Testing

/// FingerprintReader against the REAL fprintd (with libfprint's virtual reader) on a private bus: see FprintdFixture.
/// Every blocking call runs on a thread of its own, never on Swift's cooperative pool.
@Suite("fprintd", .serialized,
       .enabled(if: FprintdFixture.unavailableReason == nil,
                Comment(rawValue: FprintdFixture.unavailableReason ?? "fprintd, dbus-daemon and python3-dbusmock are installed")))
struct FingerprintTests {
    static let device = "Virtual device for debugging"

    @Test("No enrolled finger: notEnrolled, no domain state, verify says notEnrolled")
    func notEnrolled() async throws {
        try await withFixture { fixture in
            let reader = FingerprintReader(configuration: .init(busAddress: fixture.busAddress))
            #expect(reader.availability() == .notEnrolled(device: Self.device))
            #expect(reader.domainState() == nil)
            let prompter = FingerPrompter { _ in }
            #expect(reader.verify(reason: nil, prompter: prompter, cancellation: AuthenticationCancellation()) == .notEnrolled)
            #expect(prompter.messages.current.isEmpty)
        }
    }

    @Test("After enrolling: ready with that finger")
    func ready() async throws {
        try await withFixture { fixture in
            try fixture.enroll(finger: "right-index-finger", scanID: "1001")
            let reader = FingerprintReader(configuration: .init(busAddress: fixture.busAddress))
            #expect(reader.availability() == .ready(device: Self.device, enrolledFingers: ["right-index-finger"]))
        }
    }

    @Test("The domain state changes when a second finger is enrolled, and is stable otherwise")
    func domainState() async throws {
        try await withFixture { fixture in
            try fixture.enroll(finger: "right-index-finger", scanID: "1001")
            let reader = FingerprintReader(configuration: .init(busAddress: fixture.busAddress))
            let first = try #require(reader.domainState())
            #expect(first.count == 32)
            #expect(reader.domainState() == first)
            // Another reader object (a new connection) computes the same state.
            #expect(FingerprintReader(configuration: .init(busAddress: fixture.busAddress)).domainState() == first)
            try fixture.enroll(finger: "left-index-finger", scanID: "1002")
            let second = try #require(reader.domainState())
            #expect(second != first)
            #expect(reader.domainState() == second)
            #expect(reader.availability()
                == .ready(device: Self.device, enrolledFingers: ["left-index-finger", "right-index-finger"].sorted())
                || reader.availability()
                == .ready(device: Self.device, enrolledFingers: ["right-index-finger", "left-index-finger"]))
        }
    }

    @Test("The enrolled finger matches; the instruction names the reader")
    func match() async throws {
        try await withFixture { fixture in
            try fixture.enroll(finger: "right-index-finger", scanID: "1001")
            let reader = FingerprintReader(configuration: .init(busAddress: fixture.busAddress))
            let prompter = FingerPrompter { _ in try fixture.send("SCAN 1001") }
            let result = reader.verify(reason: "Unlock the keychain", prompter: prompter,
                                       cancellation: AuthenticationCancellation())
            #expect(result == .match)
            #expect(prompter.failures.current.isEmpty, "\(prompter.failures.current)")
            let messages = prompter.messages.current
            #expect(messages.first == AuthenticationMessage(.info, "Unlock the keychain"))
            #expect(messages.contains { $0.style == .info && $0.text.hasSuffix(Self.device)
                && ($0.text.hasPrefix("Place your finger") || $0.text.hasPrefix("Swipe your finger")) })
        }
    }

    @Test("Another finger does not match")
    func noMatch() async throws {
        try await withFixture { fixture in
            try fixture.enroll(finger: "right-index-finger", scanID: "1001")
            let reader = FingerprintReader(configuration: .init(busAddress: fixture.busAddress))
            let prompter = FingerPrompter { _ in try fixture.send("SCAN 2002") }
            #expect(reader.verify(reason: nil, prompter: prompter, cancellation: AuthenticationCancellation()) == .noMatch)
            #expect(prompter.failures.current.isEmpty, "\(prompter.failures.current)")
        }
    }

    @Test("A scan the reader cannot use is a retry message, and the verification goes on")
    func retry() async throws {
        try await withFixture { fixture in
            try fixture.enroll(finger: "right-index-finger", scanID: "1001")
            let reader = FingerprintReader(configuration: .init(busAddress: fixture.busAddress))
            // libfprint's FP_DEVICE_RETRY_TOO_SHORT (1): fprintd's verify-swipe-too-short; then the right finger.
            let prompter = FingerPrompter { _ in
                try fixture.send("RETRY 1")
                try fixture.send("SCAN 1001")
            }
            #expect(reader.verify(reason: nil, prompter: prompter, cancellation: AuthenticationCancellation()) == .match)
            #expect(prompter.failures.current.isEmpty, "\(prompter.failures.current)")
            #expect(prompter.messages.current.contains(AuthenticationMessage(.error, "Swipe was too short, try again")))
        }
    }

    @Test("Cancelling a waiting verification ends it and releases the reader")
    func cancel() async throws {
        try await withFixture { fixture in
            try fixture.enroll(finger: "right-index-finger", scanID: "1001")
            let reader = FingerprintReader(configuration: .init(busAddress: fixture.busAddress))
            let monitor = try fixture.monitor()
            defer { monitor.stop() }
            let cancellation = AuthenticationCancellation()
            // The reader sleeps instead of scanning: the verification waits until cancelled.
            let prompter = FingerPrompter { _ in try fixture.send("SLEEP 600000") }
            // Cancelled from another thread once fprintd announced the running verification (VerifyFingerSelected,
            // emitted by VerifyStart).
            let watcherFailure = Locked<String?>(nil)
            let watcher = Thread {
                do { _ = try monitor.waitFor("VerifyFingerSelected") } catch {
                    watcherFailure.withLock { $0 = "\(error)" }
                }
                cancellation.cancel()
            }
            watcher.start()
            // The outcome is the signal: the reader sleeps for 600 s, so only the cancellation can end the
            // verification as .cancelled. The bound is a hang guard, not a measure of speed.
            let started = ContinuousClock.now
            #expect(reader.verify(reason: nil, prompter: prompter, cancellation: cancellation) == .cancelled)
            #expect(ContinuousClock.now - started < .seconds(60), "hang guard: the verification had not ended")
            #expect(prompter.failures.current.isEmpty, "\(prompter.failures.current)")
            #expect(watcherFailure.current == nil)

            // Released: a second verification claims the reader and matches.
            let again = FingerPrompter { _ in try fixture.send("SCAN 1001") }
            #expect(reader.verify(reason: nil, prompter: again, cancellation: AuthenticationCancellation()) == .match)
            #expect(again.failures.current.isEmpty, "\(again.failures.current)")
        }
    }

    @Test("A cancellation that fired before the call ends it at once")
    func cancelledBefore() async throws {
        let cancellation = AuthenticationCancellation()
        cancellation.cancel()
        let result = try await blocking {
            FingerprintReader(configuration: .init(busAddress: "unix:path=/nonexistent/keystone/bus.socket"))
                .verify(reason: nil, prompter: nil, cancellation: cancellation)
        }
        #expect(result == .cancelled)
    }

    @Test("No result before the verify timeout: timedOut, and the reader is released")
    func timedOut() async throws {
        try await withFixture { fixture in
            try fixture.enroll(finger: "right-index-finger", scanID: "1001")
            let reader = FingerprintReader(configuration: .init(busAddress: fixture.busAddress, verifyTimeout: 1))
            let prompter = FingerPrompter { _ in try fixture.send("SLEEP 600000") }
            #expect(reader.verify(reason: nil, prompter: prompter, cancellation: AuthenticationCancellation()) == .timedOut)
            let again = FingerPrompter { _ in try fixture.send("SCAN 1001") }
            let patient = FingerprintReader(configuration: .init(busAddress: fixture.busAddress))
            #expect(patient.verify(reason: nil, prompter: again, cancellation: AuthenticationCancellation()) == .match)
        }
    }

    @Test("A reader claimed by another process: claimedByAnotherProcess")
    func claimedElsewhere() async throws {
        try await withFixture { fixture in
            try fixture.enroll(finger: "right-index-finger", scanID: "1001")
            let holder = try fixture.holdClaim()
            let reader = FingerprintReader(configuration: .init(busAddress: fixture.busAddress))
            let prompter = FingerPrompter { _ in }
            #expect(reader.verify(reason: nil, prompter: prompter, cancellation: AuthenticationCancellation())
                == .claimedByAnotherProcess)
            #expect(prompter.messages.current.isEmpty)
            holder.release()
            let again = FingerPrompter { _ in try fixture.send("SCAN 1001") }
            #expect(reader.verify(reason: nil, prompter: again, cancellation: AuthenticationCancellation()) == .match)
        }
    }

    @Test("A reader unplugged while it waits for a finger ends the verification, never as a match")
    func unplugged() async throws {
        try await withFixture { fixture in
            try fixture.enroll(finger: "right-index-finger", scanID: "1001")
            let reader = FingerprintReader(configuration: .init(busAddress: fixture.busAddress))
            let prompter = FingerPrompter { _ in try fixture.send("UNPLUG") }
            let result = reader.verify(reason: nil, prompter: prompter, cancellation: AuthenticationCancellation())
            // fprintd 1.94 reports a removed virtual reader as verify-unknown-error (verify-disconnected is kept for
            // readers that say so): either way the verification ends, and never as a match.
            switch result {
            case .disconnected, .noDevice: break
            case .unavailable(let reason): #expect(reason.contains("verify-unknown-error"), "\(reason)")
            default: Issue.record("unexpected \(result)")
            }
            #expect(prompter.failures.current.isEmpty, "\(prompter.failures.current)")
        }
    }

    @Test("polkit refusing fprintd's actions: unavailable with the reason, and availability says so")
    func polkitRefuses() async throws {
        try await withFixture { fixture in
            try fixture.enroll(finger: "right-index-finger", scanID: "1001")
            _ = try fixture.gdbus(["call", "--address", fixture.busAddress, "--dest", "org.freedesktop.PolicyKit1",
                                   "--object-path", "/org/freedesktop/PolicyKit1/Authority",
                                   "--method", "org.freedesktop.DBus.Mock.SetAllowed", "@as []"])
            let reader = FingerprintReader(configuration: .init(busAddress: fixture.busAddress))
            let prompter = FingerPrompter { _ in try fixture.send("SCAN 1001") }
            let result = reader.verify(reason: nil, prompter: prompter, cancellation: AuthenticationCancellation())
            guard case .unavailable(let reason) = result else { Issue.record("expected unavailable, got \(result)"); return }
            #expect(reason.contains("PermissionDenied"), "\(reason)")
            #expect(!prompter.messages.current.contains { $0.text.hasPrefix("Place your finger") || $0.text.hasPrefix("Swipe your finger") })
        }
    }

    @Test("A bus without fprintd: noDaemon with a reason, verify unavailable")
    func noDaemon() async throws {
        try await withFixture(daemon: false) { fixture in
            let reader = FingerprintReader(configuration: .init(busAddress: fixture.busAddress))
            guard case .noDaemon(let reason) = reader.availability() else {
                Issue.record("expected noDaemon, got \(reader.availability())")
                return
            }
            #expect(reason.contains("fprintd"), "\(reason)")
            #expect(reason.contains("net.reactivated.Fprint"), "\(reason)")
            #expect(reader.domainState() == nil)
            guard case .unavailable(let why) = reader.verify(reason: nil, prompter: nil,
                                                             cancellation: AuthenticationCancellation()) else {
                Issue.record("expected unavailable")
                return
            }
            #expect(why.contains("fprintd"), "\(why)")
        }
    }

    @Test("fprintd leaving the bus: noDaemon afterwards")
    func daemonGone() async throws {
        try await withFixture { fixture in
            let reader = FingerprintReader(configuration: .init(busAddress: fixture.busAddress))
            #expect(reader.availability() == .notEnrolled(device: Self.device))
            fixture.stopFprintd()
            guard case .noDaemon = reader.availability() else {
                Issue.record("expected noDaemon, got \(reader.availability())")
                return
            }
        }
    }
}

/// Without any bus: needs nothing installed.
@Suite("fprintd without a bus")
struct FingerprintNoBusTests {
    @Test("A bogus bus address: noDaemon naming the bus, verify unavailable")
    func noBus() async throws {
        let address = "unix:path=/nonexistent/keystone/bus.socket"
        let (availability, verification) = try await blocking {
            let reader = FingerprintReader(configuration: .init(busAddress: address))
            return (reader.availability(), reader.verify(reason: nil, prompter: nil, cancellation: AuthenticationCancellation()))
        }
        guard case .noDaemon(let reason) = availability else {
            Issue.record("expected noDaemon, got \(availability)")
            return
        }
        #expect(reason.contains("no D-Bus bus at \(address)"), "\(reason)")
        guard case .unavailable(let why) = verification else {
            Issue.record("expected unavailable, got \(verification)")
            return
        }
        #expect(why.contains(address), "\(why)")
    }

    @Test("Not an address at all: noDaemon")
    func malformedAddress() async throws {
        let availability = try await blocking {
            FingerprintReader(configuration: .init(busAddress: "no-such-transport:")).availability()
        }
        guard case .noDaemon = availability else {
            Issue.record("expected noDaemon, got \(availability)")
            return
        }
    }

    @Test("The configuration's defaults")
    func defaults() {
        let configuration = FingerprintConfiguration()
        #expect(configuration.busAddress == nil)
        #expect(configuration.user == nil)
        #expect(configuration.callTimeout == 10)
        #expect(configuration.verifyTimeout == 60)
    }
}

// MARK: - Helpers

/// A prompter that records every message and runs `onInstruction` (on the verifying thread) when told to place or
/// swipe a finger: the moment a person would touch the reader.
final class FingerPrompter: AuthenticationPrompter {
    let messages = Locked<[AuthenticationMessage]>([])
    let failures = Locked<[String]>([])
    private let onInstruction: @Sendable (AuthenticationMessage) throws -> Void

    init(onInstruction: @escaping @Sendable (AuthenticationMessage) throws -> Void) {
        self.onInstruction = onInstruction
    }

    var isInteractive: Bool { true }

    func prompt(_ message: AuthenticationMessage, cancellation: AuthenticationCancellation) -> String? {
        messages.withLock { $0.append(message) }
        if message.style == .info,
           message.text.hasPrefix("Place your finger on") || message.text.hasPrefix("Swipe your finger across") {
            do { try onInstruction(message) } catch { failures.withLock { $0.append("\(error)") } }
        }
        return nil
    }
}

/// Runs `body` on a thread of its own (blocking calls never run on Swift's cooperative pool), in the calling task, so
/// an `#expect` in `body` is recorded against the running test.
func blocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await onDedicatedThread(body)
}

/// A fixture for one test, started and stopped on a thread of its own.
func withFixture(daemon: Bool = true, _ body: @escaping @Sendable (FprintdFixture) throws -> Void) async throws {
    try await blocking {
        let fixture = try FprintdFixture.start(daemon: daemon)
        defer { fixture.stop() }
        do { try body(fixture) } catch {
            throw FprintdFixture.Failure(description: "\(error)\nfprintd.log:\n\(fixture.log("fprintd.log"))")
        }
    }
}
#endif
