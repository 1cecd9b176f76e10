import CFprintd
import Crypto
import Foundation
import KeychainEngine

/// Where and how ``FingerprintReader`` reaches fprintd.
public struct FingerprintConfiguration: Sendable, Hashable {
    /// The D-Bus address of fprintd's bus (`unix:path=…`); nil: the system bus (`DBUS_SYSTEM_BUS_ADDRESS`, else
    /// `unix:path=/var/run/dbus/system_bus_socket`).
    public var busAddress: String?
    /// Whose enrolled fingers are listed and verified; nil: `""`, which fprintd takes as the calling process's user.
    ///
    /// - Important: Naming another user than the caller's needs polkit's `net.reactivated.fprint.device.setusername`,
    ///   which fprintd grants to root only by default.
    public var user: String?
    /// The deadline of each D-Bus call (and of connecting to the bus), in seconds. Default 10.
    public var callTimeout: TimeInterval
    /// How long a verification waits for the person, in seconds, before it ends with
    /// ``FingerprintVerification/timedOut``. Default 60: a person may be slow, but a verification always ends.
    public var verifyTimeout: TimeInterval

    public init(busAddress: String? = nil, user: String? = nil, callTimeout: TimeInterval = 10,
                verifyTimeout: TimeInterval = 60) {
        self.busAddress = busAddress
        self.user = user
        self.callTimeout = callTimeout
        self.verifyTimeout = verifyTimeout
    }
}

/// Whether a fingerprint verification can be attempted now, answered without asking anyone.
public enum FingerprintAvailability: Sendable, Equatable {
    /// fprintd has a reader (`device` is its name) and the user has `enrolledFingers` on it (fprintd's names:
    /// `right-index-finger`, …).
    case ready(device: String, enrolledFingers: [String])
    /// fprintd has a reader, but the user has no finger enrolled on it (`fprintd-enroll` enrolls one).
    case notEnrolled(device: String)
    /// fprintd runs, but no fingerprint reader is attached.
    case noDevice
    /// fprintd cannot be used: no bus at the address, no fprintd on it (not installed, not activatable), or fprintd
    /// refused or failed the query. `reason` says which, and what to install or start.
    case noDaemon(reason: String)
}

/// How one fingerprint verification ended.
public enum FingerprintVerification: Sendable, Equatable {
    /// The finger matched an enrolled print (fprintd's `verify-match`).
    case match
    /// A finger was read and matched none of the enrolled prints (`verify-no-match`).
    case noMatch
    /// The `AuthenticationCancellation` fired while the verification waited.
    case cancelled
    /// Another process holds the reader (fprintd's `net.reactivated.Fprint.Error.AlreadyInUse`).
    case claimedByAnotherProcess
    /// The user has no finger enrolled on the reader.
    case notEnrolled
    /// fprintd has no reader.
    case noDevice
    /// The reader went away during the verification (`verify-disconnected`).
    case disconnected
    /// No finger was read before ``FingerprintConfiguration/verifyTimeout``.
    case timedOut
    /// fprintd could not be used: no bus, no daemon, permission denied by polkit, or another D-Bus error (its name is
    /// in `reason`).
    case unavailable(reason: String)
}

/// A client of fprintd (`net.reactivated.Fprint` on the D-Bus system bus), the fingerprint half of
/// LocalAuthentication on Linux.
///
/// Each call makes its own private connection to the bus (never the process-wide one, which can end the process
/// when the bus closes), and every D-Bus call has a deadline (``FingerprintConfiguration/callTimeout``).
///
/// - Important: The match happens in fprintd, not in this process: fprintd reads the finger and compares it with
///   the prints it stores (`/var/lib/fprint`), and this process only learns the result. fprintd asks polkit whether
///   the caller may verify (`net.reactivated.fprint.device.verify`); the default policy allows it for the active
///   local session and for root, so a process in a remote (SSH) session may get ``FingerprintVerification/unavailable(reason:)``.
/// - Important: Every method blocks (up to the call timeout, and ``verify(reason:prompter:cancellation:)`` up to the
///   verify timeout): call them on a thread of your own, never on Swift's cooperative pool.
public final class FingerprintReader: Sendable {
    /// The bus, the user and the deadlines.
    public let configuration: FingerprintConfiguration

    public init(configuration: FingerprintConfiguration = .init()) {
        self.configuration = configuration
    }

    /// Whether a verification can be attempted: fprintd's default reader and the user's enrolled fingers on it.
    ///
    /// Blocking: at most three D-Bus calls, each within ``FingerprintConfiguration/callTimeout``. Asks no one.
    public func availability() -> FingerprintAvailability {
        let outcome = withConnection(cancellation: nil) { handle -> Result<(Device, [String]), FprintdFailure> in
            let device: Device
            switch Device.default(handle) {
            case .success(let found): device = found
            case .failure(let failure): return .failure(failure)
            }
            return enrolledFingers(handle, device: device).map { (device, $0) }
        }
        switch outcome {
        case .success(let (device, fingers)):
            return fingers.isEmpty ? .notEnrolled(device: device.name)
                : .ready(device: device.name, enrolledFingers: fingers)
        case .failure(let failure):
            if failure.errorName == FprintdFailure.noSuchDevice { return .noDevice }
            return .noDaemon(reason: failure.reason(busAddress: configuration.busAddress))
        }
    }

    /// An opaque digest of the enrolled fingers: SHA-256 over the reader's name and the sorted names of the user's
    /// enrolled fingers; nil unless ``availability()`` is ``FingerprintAvailability/ready(device:enrolledFingers:)``.
    ///
    /// It changes when a finger is enrolled or deleted, and when the reader changes.
    ///
    /// - Important: Re-enrolling the same finger (delete and enroll again, or `fprintd-enroll` over an existing one)
    ///   leaves it unchanged: fprintd's D-Bus API tells finger names, never the prints themselves.
    public func domainState() -> Data? {
        guard case .ready(let device, let fingers) = availability() else { return nil }
        var hash = SHA256()
        hash.update(data: Data("keystone.fprintd.v1\u{0}".utf8))
        hash.update(data: Data(device.utf8))
        for finger in fingers.sorted() {
            hash.update(data: Data("\u{0}\(finger)".utf8))
        }
        return Data(hash.finalize())
    }

    /// Verifies one finger: claims fprintd's default reader, waits for one match or no-match result, and releases
    /// the reader.
    ///
    /// Blocking: call it on a thread of your own (never on Swift's cooperative pool). Before waiting it shows
    /// `reason` (when given) and “Place your finger on <reader>” (“Swipe your finger across <reader>” on a swipe
    /// sensor) as ``AuthenticationMessage/Style/info`` messages; a scan the reader could not use is reported as a
    /// message too (“Swipe was too short, try again”, …) and the wait goes on. With no `prompter` nothing is shown
    /// (the reader still works); its ``AuthenticationPrompter/isInteractive`` is not consulted, since touching a
    /// reader needs no terminal. One verification is one result:
    /// ``FingerprintVerification/match`` or ``FingerprintVerification/noMatch``, never a second try.
    ///
    /// It ends early with ``FingerprintVerification/cancelled`` when `cancellation` fires (from any thread), and with
    /// ``FingerprintVerification/timedOut`` after ``FingerprintConfiguration/verifyTimeout``. The reader is released
    /// in every case.
    ///
    /// - Important: fprintd asks polkit (`net.reactivated.fprint.device.verify`) whether this process may verify;
    ///   a refusal is ``FingerprintVerification/unavailable(reason:)``. The finger is matched inside fprintd.
    public func verify(reason: String?, prompter: (any AuthenticationPrompter)?,
                       cancellation: AuthenticationCancellation) -> FingerprintVerification {
        if cancellation.isCancelled { return .cancelled }
        let user = configuration.user ?? ""
        let verifyTimeout = Self.milliseconds(configuration.verifyTimeout)
        let outcome = withConnection(cancellation: cancellation) { handle -> Result<String, FprintdFailure> in
            let device: Device
            switch Device.default(handle) {
            case .success(let found): device = found
            case .failure(let failure): return .failure(failure)
            }
            switch enrolledFingers(handle, device: device) {
            case .success(let fingers) where fingers.isEmpty:
                return .failure(FprintdFailure(status: KS_FPRINT_DAEMON_ERROR, errorName: FprintdFailure.noEnrolledPrints,
                                               message: "no finger enrolled"))
            case .success: break
            case .failure(let failure): return .failure(failure)
            }
            let session = VerifySession(reason: reason, device: device, prompter: prompter, cancellation: cancellation)
            return withExtendedLifetime(session) {
                var error = ks_fprint_error()
                defer { ks_fprint_error_clear(&error) }
                var result: UnsafeMutablePointer<CChar>?
                let context = Unmanaged.passUnretained(session).toOpaque()
                let rc = ks_fprint_verify(handle, device.path, user, "any", verifyTimeout, { context in
                    guard let context else { return }
                    Unmanaged<VerifySession>.fromOpaque(context).takeUnretainedValue().claimed()
                }, { result, done, context in
                    guard let context, let result else { return }
                    Unmanaged<VerifySession>.fromOpaque(context).takeUnretainedValue()
                        .status(String(cString: result), done: done != 0)
                }, context, &result, &error)
                guard rc == 0, let result else { return .failure(FprintdFailure(error)) }
                defer { ks_fprint_free(result) }
                return .success(String(cString: result))
            }
        }
        switch outcome {
        case .success("verify-match"): return .match
        case .success("verify-no-match"): return .noMatch
        case .success("verify-disconnected"): return .disconnected
        case .success(let other):
            return .unavailable(reason: "fprintd ended the verification with \(other)")
        case .failure(let failure):
            if failure.status == KS_FPRINT_CANCELLED { return .cancelled }
            if failure.status == KS_FPRINT_VERIFY_TIMED_OUT { return .timedOut }
            switch failure.errorName {
            case FprintdFailure.alreadyInUse: return .claimedByAnotherProcess
            case FprintdFailure.noSuchDevice: return .noDevice
            case FprintdFailure.noEnrolledPrints: return .notEnrolled
            default: return .unavailable(reason: failure.reason(busAddress: configuration.busAddress))
            }
        }
    }

    // MARK: - The C boundary

    /// A seconds interval as the C side's milliseconds, at least 1 ms, at most a day.
    static func milliseconds(_ interval: TimeInterval) -> Int32 {
        guard interval.isFinite else { return 86_400_000 }
        return Int32(min(max(interval * 1000, 1), 86_400_000))
    }

    /// Opens a connection, runs `body` with it and closes it. A firing `cancellation` wakes whatever the handle waits
    /// for; it can never reach a closed handle (the handle is taken out under the lock before it is closed).
    private func withConnection<T>(cancellation: AuthenticationCancellation?,
                                   _ body: (OpaquePointer) -> Result<T, FprintdFailure>) -> Result<T, FprintdFailure> {
        var error = ks_fprint_error()
        defer { ks_fprint_error_clear(&error) }
        guard let handle = ks_fprint_open(configuration.busAddress, Self.milliseconds(configuration.callTimeout), &error)
        else { return .failure(FprintdFailure(error)) }
        let shared = Locked<CancellableHandle?>(CancellableHandle(pointer: handle))
        let token = cancellation?.onCancel {
            shared.withLock { if let handle = $0 { ks_fprint_cancel(handle.pointer) } }
        }
        defer {
            cancellation?.removeHandler(token)
            shared.withLock { $0 = nil }
            ks_fprint_close(handle)
        }
        return body(handle)
    }

    private func enrolledFingers(_ handle: OpaquePointer, device: Device) -> Result<[String], FprintdFailure> {
        var error = ks_fprint_error()
        defer { ks_fprint_error_clear(&error) }
        var list: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
        var count = 0
        guard ks_fprint_list_enrolled(handle, device.path, configuration.user ?? "", &list, &count, &error) == 0
        else { return .failure(FprintdFailure(error)) }
        defer { ks_fprint_strv_free(list) }
        return .success((0..<count).compactMap { list?[$0].map { String(cString: $0) } })
    }
}

/// A connection handle as the cancellation handler (which may run on any thread) sees it.
///
/// `@unchecked Sendable`: the only call made through it from another thread is `ks_fprint_cancel`, which the C side
/// documents as callable from any thread; it is reached under `withConnection`'s lock and taken out of it before the
/// handle is closed.
private struct CancellableHandle: @unchecked Sendable {
    let pointer: OpaquePointer
}

/// fprintd's default reader.
private struct Device {
    let path: String
    let name: String
    /// fprintd's `scan-type`: `press` or `swipe`.
    let scanType: String

    static func `default`(_ handle: OpaquePointer) -> Result<Device, FprintdFailure> {
        var error = ks_fprint_error()
        defer { ks_fprint_error_clear(&error) }
        var path: UnsafeMutablePointer<CChar>?
        var name: UnsafeMutablePointer<CChar>?
        var scanType: UnsafeMutablePointer<CChar>?
        guard ks_fprint_default_device(handle, &path, &name, &scanType, &error) == 0, let path, let name, let scanType
        else { return .failure(FprintdFailure(error)) }
        defer {
            ks_fprint_free(path)
            ks_fprint_free(name)
            ks_fprint_free(scanType)
        }
        return .success(Device(path: String(cString: path), name: String(cString: name),
                               scanType: String(cString: scanType)))
    }
}

/// A failed call, copied out of the C side's `ks_fprint_error`.
private struct FprintdFailure: Error {
    static let alreadyInUse = "net.reactivated.Fprint.Error.AlreadyInUse"
    static let noSuchDevice = "net.reactivated.Fprint.Error.NoSuchDevice"
    static let noEnrolledPrints = "net.reactivated.Fprint.Error.NoEnrolledPrints"
    static let permissionDenied = "net.reactivated.Fprint.Error.PermissionDenied"

    let status: ks_fprint_status
    let errorName: String?
    let message: String

    init(status: ks_fprint_status, errorName: String?, message: String) {
        self.status = status
        self.errorName = errorName
        self.message = message
    }

    init(_ error: ks_fprint_error) {
        status = error.status
        errorName = error.name.map { String(cString: $0) }
        message = error.message.map { String(cString: $0) } ?? "unknown error"
    }

    /// What went wrong and what to do about it, for ``FingerprintAvailability/noDaemon(reason:)`` and
    /// ``FingerprintVerification/unavailable(reason:)``.
    func reason(busAddress: String?) -> String {
        let bus = busAddress ?? "the system bus"
        switch status {
        case KS_FPRINT_NO_BUS:
            return "no D-Bus bus at \(bus) (\(message)): start dbus (systemctl start dbus) or set busAddress"
        case KS_FPRINT_NO_DAEMON:
            return "fprintd (net.reactivated.Fprint) is not on \(bus) and cannot be started there (\(message)): "
                + "install fprintd (apt-get install fprintd) or start it (systemctl start fprintd)"
        case KS_FPRINT_NO_REPLY:
            return "fprintd did not answer in time on \(bus) (\(message))"
        default:
            if errorName == Self.permissionDenied {
                return "\(Self.permissionDenied): polkit refused this process the fingerprint reader (\(message))"
            }
            if let errorName { return "\(errorName): \(message)" }
            return message
        }
    }
}

/// What a verification's C callbacks need: the prompter and the reader's name. Lives on the verifying thread's stack
/// for the duration of `ks_fprint_verify`; the callbacks run on that thread.
private final class VerifySession {
    let reason: String?
    let device: Device
    let prompter: (any AuthenticationPrompter)?
    let cancellation: AuthenticationCancellation

    init(reason: String?, device: Device, prompter: (any AuthenticationPrompter)?,
         cancellation: AuthenticationCancellation) {
        self.reason = reason
        self.device = device
        self.prompter = prompter
        self.cancellation = cancellation
    }

    private var swipe: Bool { device.scanType == "swipe" }

    private func show(_ style: AuthenticationMessage.Style, _ text: String) {
        guard let prompter, !cancellation.isCancelled else { return }
        _ = prompter.prompt(AuthenticationMessage(style, text), cancellation: cancellation)
    }

    /// The device is claimed: tell the person what to do.
    func claimed() {
        if let reason, !reason.isEmpty { show(.info, reason) }
        show(.info, swipe ? "Swipe your finger across \(device.name)" : "Place your finger on \(device.name)")
    }

    /// A VerifyStatus result: the retry results become messages (pam_fprintd's wording); the final one is returned.
    func status(_ result: String, done: Bool) {
        guard !done else { return }
        switch result {
        case "verify-retry-scan":
            show(.info, swipe ? "Swipe your finger again" : "Place your finger on the reader again")
        case "verify-swipe-too-short":
            show(.error, "Swipe was too short, try again")
        case "verify-finger-not-centered":
            show(.error, swipe ? "Your finger was not centered, try swiping your finger again"
                               : "Your finger was not centered, try again")
        case "verify-remove-and-retry":
            show(.error, swipe ? "Remove your finger, and try swiping your finger again"
                               : "Remove your finger, and try again")
        default:
            break
        }
    }
}
