import Foundation
import Keystone
import KeychainEngine

/// An `Authenticator` with scripted outcomes: a queue consumed in order, then a default. Counts prompts.
///
/// It also plays the device's biometry and passcode, which decide whether a prompt can be shown at all:
/// ``biometryKind`` (default `BiometryKind.face`), ``enrolled``, ``lockedOut`` and ``passcodeSet``. When they rule
/// a prompt out, ``availability(for:)`` says why and ``authenticate(_:)`` ends with that outcome without prompting
/// (nothing is counted, the queue is not consumed):
///
/// | State                       | biometry-only flags | passcode flags    | biometry or passcode |
/// |-----------------------------|---------------------|-------------------|----------------------|
/// | `passcodeSet == false`      | `.passcodeNotSet`   | `.passcodeNotSet` | `.passcodeNotSet`    |
/// | `biometryKind == .none`     | `.notAvailable`     | prompts           | prompts (passcode)   |
/// | `enrolled == false`         | `.notEnrolled`      | prompts           | prompts (passcode)   |
/// | `lockedOut == true`         | `.lockout`          | prompts           | prompts (passcode)   |
///
/// ``biometryDomainState`` changes with ``changeEnrollment()`` (and when ``enrolled`` or ``biometryKind`` change):
/// the engine binds `.biometryCurrentSet` items to it, so they become unreadable after a change.
///
/// A request whose `AuthenticationRequest.cancellation` is cancelled ends with
/// `AuthenticationOutcome.appCancel`.
public final class ScriptedAuthenticator: Authenticator {
    private struct State {
        var queue: [AuthenticationOutcome]
        var defaultOutcome: AuthenticationOutcome
        var requests: [AuthenticationRequest] = []
        var biometryKind: BiometryKind = .face
        var enrolled = true
        var lockedOut = false
        var passcodeSet = true
        var enrollmentGeneration: UInt64 = 1
    }

    private let state: Locked<State>
    /// Tells this authenticator's domain states apart from another's.
    private let identity = UUID()

    /// Creates an authenticator answering `outcomes` in order, then `defaultOutcome`.
    ///
    /// - Parameters:
    ///   - outcomes: the first prompts' outcomes, in order.
    ///   - defaultOutcome: the outcome once the queue is empty. Default: success.
    ///   - biometryKind: the device's biometry. Default: `BiometryKind.face`, an iPhone with Face ID, the device
    ///     most apps are tested for; `BiometryKind.none` plays a device without biometry.
    public init(_ outcomes: [AuthenticationOutcome] = [], defaultOutcome: AuthenticationOutcome = .success,
                biometryKind: BiometryKind = .face) {
        state = Locked(State(queue: outcomes, defaultOutcome: defaultOutcome, biometryKind: biometryKind))
    }

    /// Appends outcomes to the queue.
    public func enqueue(_ outcomes: [AuthenticationOutcome]) { state.withLock { $0.queue += outcomes } }

    /// The outcome when the queue is empty.
    public var defaultOutcome: AuthenticationOutcome {
        get { state.current.defaultOutcome }
        set { state.withLock { $0.defaultOutcome = newValue } }
    }

    /// The outcomes still queued.
    public var pendingOutcomes: [AuthenticationOutcome] { state.current.queue }

    /// How many prompts were shown.
    public var promptCount: Int { state.current.requests.count }

    /// The prompts shown, in order.
    public var requests: [AuthenticationRequest] { state.current.requests }

    // MARK: Device state

    /// The device's biometry (`BiometryKind.none`: biometry-only requests are `AuthenticationOutcome.notAvailable`).
    /// Changing it changes the enrollment (``biometryDomainState``).
    public var biometryKind: BiometryKind {
        get { state.current.biometryKind }
        set {
            state.withLock { s in
                if s.biometryKind != newValue { s.biometryKind = newValue; s.enrollmentGeneration += 1 }
            }
        }
    }

    /// Whether a biometric identity is enrolled (false: biometry-only requests are
    /// `AuthenticationOutcome.notEnrolled`). Changing it changes the enrollment (``biometryDomainState``).
    public var enrolled: Bool {
        get { state.current.enrolled }
        set {
            state.withLock { s in
                if s.enrolled != newValue { s.enrolled = newValue; s.enrollmentGeneration += 1 }
            }
        }
    }

    /// Whether biometry is locked out after too many failures (biometry-only requests are
    /// `AuthenticationOutcome.lockout`; requests that allow the passcode still prompt).
    public var lockedOut: Bool {
        get { state.current.lockedOut }
        set { state.withLock { $0.lockedOut = newValue } }
    }

    /// Whether the device has a passcode (false: every request is `AuthenticationOutcome.passcodeNotSet`, as
    /// biometry cannot be used without one).
    public var passcodeSet: Bool {
        get { state.current.passcodeSet }
        set { state.withLock { $0.passcodeSet = newValue } }
    }

    /// Simulates adding or removing a finger or face: ``biometryDomainState`` changes, so `.biometryCurrentSet`
    /// items added before become unreadable while `.biometryAny` items still read.
    public func changeEnrollment() { state.withLock { $0.enrollmentGeneration += 1 } }

    /// An opaque digest of the enrollment: nil without biometry or without an enrolled identity; otherwise a value
    /// that changes with every ``changeEnrollment()``.
    public var biometryDomainState: Data? {
        let s = state.current
        guard s.biometryKind != .none, s.enrolled, s.passcodeSet else { return nil }
        var bytes = withUnsafeBytes(of: identity.uuid) { Data($0) }
        withUnsafeBytes(of: s.enrollmentGeneration.bigEndian) { bytes.append(contentsOf: $0) }
        return bytes
    }

    /// Why a request for `flags` cannot be attempted now (see the table above), or nil.
    public func availability(for flags: AccessControlFlags) -> AuthenticationOutcome? {
        Self.availability(for: flags, in: state.current)
    }

    private static func availability(for flags: AccessControlFlags, in s: State) -> AuthenticationOutcome? {
        let needed = flags.intersection(.authenticationFlags)
        let biometry: AccessControlFlags = [.biometryAny, .biometryCurrentSet]
        let alternatives: AccessControlFlags = [.userPresence, .devicePasscode, .watch]
        // An application password alone needs neither biometry nor the passcode.
        if needed.intersection(biometry.union(alternatives)).isEmpty { return nil }
        if !s.passcodeSet { return .passcodeNotSet }
        // Biometry is required when no alternative is allowed, or when every listed factor is required (.and).
        let biometryRequired = !needed.intersection(biometry).isEmpty
            && (needed.intersection(alternatives).isEmpty || flags.contains(.and))
        guard biometryRequired else { return nil }
        if s.biometryKind == .none { return .notAvailable }
        if !s.enrolled { return .notEnrolled }
        if s.lockedOut { return .lockout }
        return nil
    }

    /// Answers `request`: `AuthenticationOutcome.appCancel` when its cancellation is cancelled, the reason of
    /// ``availability(for:)`` when a prompt cannot be shown (no prompt counted), else records the prompt and answers
    /// with the next queued outcome, or the default.
    public func authenticate(_ request: AuthenticationRequest) -> AuthenticationOutcome {
        if request.cancellation?.isCancelled == true { return .appCancel }
        return state.withLock { s in
            if let unavailable = Self.availability(for: request.flags, in: s) { return unavailable }
            s.requests.append(request)
            return s.queue.isEmpty ? s.defaultOutcome : s.queue.removeFirst()
        }
    }
}

/// When an injected failure fires, counting the calls it applies to (its operation, or all).
public enum FailureSchedule: Sendable, Hashable {
    /// The next matching call only.
    case once
    /// The Nth matching call from now (1 is the next), once.
    case onCall(Int)
    /// Every matching call until removed.
    case always
}

/// Fails engine operations on schedule (an ``EngineHook``).
final class FailureInjector: EngineHook {
    private struct Failure {
        let id: Int
        let status: Int32
        let operation: KeychainOperation?
        let schedule: FailureSchedule
        var seen = 0
        var spent = false
    }

    private let failures = Locked<(next: Int, list: [Failure])>((1, []))

    func add(status: Int32, operation: KeychainOperation?, schedule: FailureSchedule) -> Int {
        failures.withLock { state in
            let id = state.next
            state.next += 1
            state.list.append(Failure(id: id, status: status, operation: operation, schedule: schedule))
            return id
        }
    }

    func remove(_ id: Int) { failures.withLock { $0.list.removeAll { $0.id == id } } }
    func removeAll() { failures.withLock { $0.list.removeAll() } }

    func willPerform(_ operation: KeychainOperation, query: KeychainQuery, attributesToUpdate: KeychainQuery?) throws {
        let status: Int32? = failures.withLock { state in
            var fired: Int32?
            for index in state.list.indices {
                var failure = state.list[index]
                guard !failure.spent, failure.operation == nil || failure.operation == operation else { continue }
                failure.seen += 1
                let fires: Bool
                switch failure.schedule {
                case .once: fires = true; failure.spent = true
                case .onCall(let n): fires = failure.seen == n; if fires { failure.spent = true }
                case .always: fires = true
                }
                state.list[index] = failure
                if fires && fired == nil { fired = failure.status }
            }
            state.list.removeAll { $0.spent }
            return fired
        }
        if let status { throw EngineError(status, "injected failure") }
    }

    func didPerform(_ operation: KeychainOperation, query: KeychainQuery, attributesToUpdate: KeychainQuery?, status: Int32) {}
}

/// One logged keychain operation: which, its query and attributes (secret removed), and its status.
///
/// The secret (`v_Data`) is never kept: ``secretByteCount`` says how many bytes were written.
public struct KeychainCall: Sendable, Hashable, CustomStringConvertible {
    /// The operation.
    public let operation: KeychainOperation
    /// The query (for add: the attributes), without `v_Data`.
    public let query: KeychainQuery
    /// The attributes to update (update only), without `v_Data`.
    public let attributesToUpdate: KeychainQuery?
    /// The size of the secret the call carried, if any (add or update).
    public let secretByteCount: Int?
    /// The `OSStatus` the operation ended with (0 for success).
    public let status: Int32

    /// Whether the operation succeeded.
    public var succeeded: Bool { status == Status.success }

    /// Whether the call asked for the secret (`kSecReturnData`).
    public var readsSecret: Bool { query[Key.returnData]?.boolValue == true }

    /// The service of the query, if any.
    public var service: String? { query[Key.service]?.textValue }
    /// The account of the query, if any.
    public var account: String? { query[Key.account]?.textValue }

    init(operation: KeychainOperation, query: KeychainQuery, attributesToUpdate: KeychainQuery?, status: Int32) {
        self.operation = operation
        var query = query
        var attributes = attributesToUpdate
        let secret = query.removeValue(forKey: Key.valueData) ?? attributes?.removeValue(forKey: Key.valueData)
        self.query = query
        self.attributesToUpdate = attributes
        self.secretByteCount = secret?.dataValue?.count
        self.status = status
    }

    /// `copy [class=genp, svce="s", …] → errSecItemNotFound (-25300)`: keys and values, never the secret.
    public var description: String {
        func render(_ q: KeychainQuery) -> String {
            q.keys.sorted().map { key in
                let value: String
                switch q[key]! {
                case .string(let s): value = "\"\(s)\""
                case .data(let d): value = "<\(d.count) bytes>"
                case .number(let n): value = String(n)
                case .double(let d): value = String(d)
                case .bool(let b): value = String(b)
                case .date(let d): value = d.description
                case .accessControl(let ac): value = "<access control \(ac.accessibility.rawValue) flags=\(ac.flags.rawValue)>"
                case .authenticationContext: value = "<authentication context>"
                }
                return "\(key)=\(value)"
            }.joined(separator: ", ")
        }
        var text = "\(operation.rawValue) [\(render(query))]"
        if let attributesToUpdate { text += " with [\(render(attributesToUpdate))]" }
        if let secretByteCount { text += " secret=<\(secretByteCount) bytes>" }
        let name = Status.name(for: status) ?? "OSStatus"
        text += " → \(name) (\(status))"
        return text
    }
}

/// Records every operation (an ``EngineHook``).
final class CallLog: EngineHook {
    private let entries = Locked<[KeychainCall]>([])

    var calls: [KeychainCall] { entries.current }
    func clear() { entries.withLock { $0.removeAll() } }

    func willPerform(_ operation: KeychainOperation, query: KeychainQuery, attributesToUpdate: KeychainQuery?) throws {}

    func didPerform(_ operation: KeychainOperation, query: KeychainQuery, attributesToUpdate: KeychainQuery?, status: Int32) {
        let call = KeychainCall(operation: operation, query: query, attributesToUpdate: attributesToUpdate, status: status)
        entries.withLock { $0.append(call) }
    }
}
