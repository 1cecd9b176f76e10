import CSecretService
import Dispatch
import Foundation
import KeychainEngine

/// One connection to a Secret Service: the C boundary (`CSecretService`) with deadlines and `OSStatus` errors.
///
/// Every call runs under a deadline: D-Bus calls carry the call timeout, and a timer fires the call's cancel handle,
/// which also ends a prompt nobody answers. Not thread-safe on its own: ``SecretServiceStorage`` serializes its use.
///
/// `@unchecked Sendable`: its properties are constants, and the C handle they hold is used by one thread at a time:
/// ``SecretServiceStorage`` makes every call under its `mutex` (a client only crosses threads between two calls).
final class SecretServiceClient: @unchecked Sendable {
    private let handle: OpaquePointer
    /// The bus address connected to.
    let address: String
    let callTimeout: Duration

    private init(handle: OpaquePointer, address: String, callTimeout: Duration) {
        self.handle = handle
        self.address = address
        self.callTimeout = callTimeout
    }

    deinit { ks_service_free(handle) }

    /// Connects to the bus at `address` and opens a session with the Secret Service.
    ///
    /// - Throws: `errSecNotAvailable` when the bus or the service cannot be reached, with what to start.
    static func connect(address: String, callTimeout: Duration) throws -> SecretServiceClient {
        let milliseconds = Self.milliseconds(callTimeout)
        let handle = try call(deadline: callTimeout, what: "connect to the Secret Service") { cancel, error in
            ks_service_open(address, milliseconds, cancel, error)
        }
        return SecretServiceClient(handle: handle, address: address, callTimeout: callTimeout)
    }

    static func milliseconds(_ duration: Duration) -> Int32 {
        let (seconds, attoseconds) = duration.components
        let ms = seconds * 1000 + attoseconds / 1_000_000_000_000_000
        return Int32(clamping: max(1, ms))
    }

    /// The session's transfer algorithm: `dh-ietf1024-sha256-aes128-cbc-pkcs7` (encrypted) or `plain`.
    var sessionAlgorithm: String { ks_service_session_algorithm(handle).map { String(cString: $0) } ?? "none" }

    // MARK: - Calls under a deadline

    /// Runs `body` with a cancel handle that a timer fires at the deadline (which also ends a prompt nobody answers).
    private static func withDeadline<T>(_ deadline: Duration, _ body: (OpaquePointer) -> T) -> T {
        guard let cancel = ks_cancel_new() else { fatalError("cannot allocate a GCancellable") }
        let guardBox = DeadlineGuard(cancel)
        let timer = DispatchWorkItem { guardBox.fire() }
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(Int(milliseconds(deadline))), execute: timer)
        let result = body(cancel)
        timer.cancel()
        guardBox.finish()  // after this, the timer never touches the handle: it can be freed
        ks_cancel_free(cancel)
        return result
    }

    /// Runs one C call under a deadline and turns its error into an `EngineError`.
    private static func call<T>(deadline: Duration, what: String,
                                _ body: (OpaquePointer, UnsafeMutablePointer<ks_error>) -> T?) throws -> T {
        var error = ks_error(kind: KS_OK, message: nil)
        let result = withDeadline(deadline) { cancel in body(cancel, &error) }
        if let result, error.kind == KS_OK { return result }
        defer { ks_error_clear(&error) }
        if error.kind == KS_NO_SESSION { throw SessionLost(error: mapError(error, what: what, deadline: deadline)) }
        throw mapError(error, what: what, deadline: deadline)
    }

    /// A call returning a status int (0 = success).
    private func status(_ what: String, deadline: Duration? = nil,
                        _ body: (OpaquePointer, OpaquePointer, UnsafeMutablePointer<ks_error>) -> Int32) throws {
        _ = try Self.call(deadline: deadline ?? callTimeout, what: what) { cancel, error -> Bool? in
            body(handle, cancel, error) == 0 ? true : nil
        }
    }

    static func mapError(_ error: ks_error, what: String, deadline: Duration) -> EngineError {
        let detail = error.message.map { String(cString: $0) } ?? "unknown error"
        switch error.kind {
        case KS_NO_BUS:
            return EngineError(Status.notAvailable, "cannot \(what): no D-Bus session bus answers (\(detail)). Start one: log in to a desktop session, or run the program under `dbus-run-session`.")
        case KS_NO_SERVICE:
            return EngineError(Status.notAvailable, "cannot \(what): no Secret Service is running on the session bus (\(detail)). Start one: `gnome-keyring-daemon --start --components=secrets`, or KeePassXC / KWallet with its Secret Service integration enabled.")
        case KS_LOCKED:
            return EngineError(Status.interactionNotAllowed, "cannot \(what): the Secret Service collection is locked. Unlock it (log in, Seahorse, or `keystone unlock-keychain secret-service:`) and try again.")
        case KS_NO_SUCH_OBJECT:
            return EngineError(Status.itemNotFound, "cannot \(what): the Secret Service has no such object (\(detail))")
        case KS_CANCELLED, KS_TIMEOUT:
            return EngineError(Status.notAvailable, "cannot \(what): the Secret Service did not answer within \(deadline) (\(detail)). Check that the daemon is not stuck, or raise the timeout.")
        case KS_DISMISSED:
            return EngineError(Status.userCanceled, "cannot \(what): the Secret Service prompt was dismissed")
        case KS_NO_SESSION:
            return EngineError(Status.notAvailable, "cannot \(what): the Secret Service closed this program's session (it was restarted); try again")
        case KS_DENIED:
            return EngineError(Status.authFailed, "cannot \(what): the Secret Service denied access (\(detail))")
        default:
            return EngineError(Status.notAvailable, "cannot \(what): the Secret Service failed (\(detail))")
        }
    }

    // MARK: - Collections

    /// The collection an alias names, or nil when the alias is not set.
    func readAlias(_ alias: String) throws -> String? {
        var error = ks_error(kind: KS_OK, message: nil)
        let result = Self.withDeadline(callTimeout) { cancel in ks_read_alias(handle, alias, cancel, &error) }
        defer { ks_error_clear(&error) }
        if error.kind != KS_OK { throw Self.mapError(error, what: "read the alias '\(alias)'", deadline: callTimeout) }
        guard let result else { return nil }
        defer { ks_free(result) }
        return String(cString: result)
    }

    /// Every collection's object path.
    func collections() throws -> [String] {
        let list = try Self.call(deadline: callTimeout, what: "list the collections") { cancel, error in
            ks_collections(handle, cancel, error)
        }
        return Self.strings(list)
    }

    /// A collection's label and lock state.
    func collectionInfo(_ path: String) throws -> (label: String, locked: Bool) {
        var label: UnsafeMutablePointer<CChar>?
        var locked: Int32 = 0
        try status("read the collection \(path)") { service, cancel, error in
            ks_collection_info(service, path, &label, &locked, cancel, error)
        }
        defer { ks_free(label) }
        return (label.map { String(cString: $0) } ?? "", locked != 0)
    }

    /// Whether a collection is locked (its `Locked` property only: constant cost).
    func isLocked(_ path: String) throws -> Bool {
        var locked: Int32 = 0
        try status("read the collection's lock state") { service, cancel, error in
            ks_collection_locked(service, path, &locked, cancel, error)
        }
        return locked != 0
    }

    /// The unique bus name owning org.freedesktop.secrets and its process id (nil when the bus does not tell).
    func owner() throws -> (name: String, pid: UInt32?) {
        var name: UnsafeMutablePointer<CChar>?
        var pid: UInt32 = 0
        try status("ask who serves the Secret Service") { service, cancel, error in
            ks_service_owner(service, &name, &pid, cancel, error)
        }
        defer { ks_free(name) }
        return (name.map { String(cString: $0) } ?? "", pid == 0 ? nil : pid)
    }

    func lock(_ collection: String) throws {
        try status("lock the collection") { service, cancel, error in ks_lock(service, collection, cancel, error) }
    }

    /// Unlocks a collection, through the service's prompt when it shows one.
    ///
    /// - Returns: false when the prompt was dismissed.
    func unlock(_ collection: String, promptTimeout: Duration) throws -> Bool {
        var unlocked: Int32 = 0
        try status("unlock the collection", deadline: promptTimeout) { service, cancel, error in
            ks_unlock(service, collection, &unlocked, cancel, error)
        }
        return unlocked != 0
    }

    // MARK: - Items

    /// The object paths of the collection's items holding every attribute given.
    func search(_ collection: String, _ attributes: [(String, String)]) throws -> [String] {
        let list = try withCStrings(attributes) { keys, values in
            try Self.call(deadline: callTimeout, what: "search the collection") { cancel, error in
                ks_search(handle, collection, keys, values, attributes.count, cancel, error)
            }
        }
        return Self.strings(list)
    }

    /// An item's attributes, label and lock state, or nil when it no longer exists.
    struct ItemInfo {
        var attributes: [String: String]
        var label: String
        var locked: Bool
        var created: UInt64
        var modified: UInt64
    }

    func itemInfo(_ path: String) throws -> ItemInfo? {
        var info = ks_item_info()
        do {
            try status("read an item's attributes") { service, cancel, error in ks_item_info_get(service, path, &info, cancel, error) }
        } catch let error as EngineError where error.status == Status.itemNotFound {
            return nil
        }
        defer { ks_item_info_clear(&info) }
        var attributes: [String: String] = [:]
        for i in 0..<info.count {
            guard let key = info.keys[i], let value = info.values[i] else { continue }
            attributes[String(cString: key)] = String(cString: value)
        }
        return ItemInfo(attributes: attributes, label: info.label.map { String(cString: $0) } ?? "",
                        locked: info.locked != 0, created: info.created, modified: info.modified)
    }

    /// The secrets of several items in one call; an item the service returned none for (locked, gone) is absent.
    func secrets(_ paths: [String]) throws -> [String: Data] {
        guard !paths.isEmpty else { return [:] }
        var buffers = [UnsafeMutablePointer<UInt8>?](repeating: nil, count: paths.count)
        var lengths = [Int](repeating: 0, count: paths.count)
        try withCStrings(paths.map { ($0, "") }) { keys, _ in
            try status("read secrets") { service, cancel, error in
                ks_get_secrets(service, keys, paths.count, &buffers, &lengths, cancel, error)
            }
        }
        var result: [String: Data] = [:]
        for (i, path) in paths.enumerated() {
            guard let buffer = buffers[i] else { continue }
            result[path] = Data(bytes: buffer, count: lengths[i])
            ks_secret_free(buffer, lengths[i])
        }
        return result
    }

    /// Creates an item (never with the service's replace) and returns its object path.
    func createItem(in collection: String, label: String, attributes: [(String, String)], secret: Data,
                    contentType: String) throws -> String {
        let path = try withCStrings(attributes) { keys, values in
            try secret.withUnsafeBytes { bytes in
                try Self.call(deadline: callTimeout, what: "store an item") { cancel, error in
                    ks_create_item(handle, collection, label, keys, values, attributes.count,
                                   bytes.bindMemory(to: UInt8.self).baseAddress, bytes.count, contentType, cancel, error)
                }
            }
        }
        defer { ks_free(path) }
        return String(cString: path)
    }

    /// Whether a failure of a call that carried `bytes` of secret was the bus dropping the message for its size:
    /// the bus closed this connection (dbus-daemon disconnects a client whose message exceeds `max_message_size`
    /// or the protocol's 64 MiB array limit) while the Secret Service is still there for a new connection.
    func droppedForSize(_ error: EngineError) -> Bool {
        guard error.status == Status.notAvailable, isClosed else { return false }
        return (try? Self.connect(address: address, callTimeout: callTimeout)) != nil
    }

    /// Replaces an item's attributes.
    func setAttributes(_ path: String, _ attributes: [(String, String)]) throws {
        try withCStrings(attributes) { keys, values in
            try status("write an item's attributes") { service, cancel, error in
                ks_set_attributes(service, path, keys, values, attributes.count, cancel, error)
            }
        }
    }

    /// Whether the bus closed this connection (the daemon is gone, or the bus refused a message of ours): the
    /// storage then connects again.
    var isClosed: Bool { ks_service_is_closed(handle) != 0 }

    /// Deletes an item; one that is already gone is not an error.
    func deleteItem(_ path: String) throws {
        do {
            try status("delete an item") { service, cancel, error in ks_delete_item(service, path, cancel, error) }
        } catch let error as EngineError where error.status == Status.itemNotFound {
            return
        }
    }

    // MARK: - C strings

    private static func strings(_ list: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> [String] {
        defer { ks_strfreev(list) }
        var result: [String] = []
        var i = 0
        while let s = list[i] {
            result.append(String(cString: s))
            i += 1
        }
        return result
    }

    private func withCStrings<R>(_ pairs: [(String, String)],
                                 _ body: (UnsafePointer<UnsafePointer<CChar>?>, UnsafePointer<UnsafePointer<CChar>?>) throws -> R) rethrows -> R {
        let keys = pairs.map { strdup($0.0) }
        let values = pairs.map { strdup($0.1) }
        defer {
            keys.forEach { free($0) }
            values.forEach { free($0) }
        }
        let keyPointers = keys.map { UnsafePointer($0) } + [nil]
        let valuePointers = values.map { UnsafePointer($0) } + [nil]
        return try keyPointers.withUnsafeBufferPointer { k in
            try valuePointers.withUnsafeBufferPointer { v in try body(k.baseAddress!, v.baseAddress!) }
        }
    }
}

/// The service no longer knows the session secrets travel in (it restarted): the storage connects again and
/// retries the transaction once. Never escapes the storage (it becomes ``error``).
struct SessionLost: Error {
    let error: EngineError
}

/// Lets a deadline timer fire a cancel handle only while the call using it runs.
private struct DeadlineGuard: Sendable {
    /// A cancel handle as the timer's thread sees it.
    ///
    /// `@unchecked Sendable`: the only call made through it from another thread is `ks_cancel_fire`, which the C side
    /// documents as thread-safe while a call using the handle runs; it is reached under `handle`'s lock, and
    /// ``finish()`` takes it out under that lock before the handle is freed.
    private struct CancelHandle: @unchecked Sendable {
        let pointer: OpaquePointer
    }

    private let handle: Locked<CancelHandle?>

    init(_ handle: OpaquePointer) { self.handle = Locked(CancelHandle(pointer: handle)) }

    func fire() { handle.withLock { if let handle = $0 { ks_cancel_fire(handle.pointer) } } }
    func finish() { handle.withLock { $0 = nil } }
}
