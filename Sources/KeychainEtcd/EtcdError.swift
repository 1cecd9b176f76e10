#if NIO
import Foundation
import KeychainEngine

/// How an etcd call failed.
///
/// ``engineError`` turns it into the keychain's `OSStatus`:
/// - ``unavailable(_:)``, ``indeterminate(_:)``, ``compacted``: `errSecNotAvailable` (-25291);
/// - ``tooManyOperations(_:)``: `errSecQuotaExceeded` (-67596): a limit of the cluster's configuration
///   (`--max-txn-ops`), not of one item;
/// - ``requestTooLarge(_:)``: `errSecDataTooLarge` (-25302): the item (or the request carrying it) exceeds the
///   cluster's `--max-request-bytes`;
/// - ``noSpace(_:)``: `errSecQuotaExceeded` (-67596): the cluster's backend quota (`--quota-backend-bytes`) is
///   reached (etcd's NOSPACE alarm); the message says how an operator recovers;
/// - ``authenticationFailed(_:)``: `errSecAuthFailed` (-25293);
/// - ``permissionDenied(_:)``: `errSecWrPerm` (-61);
/// - ``server(code:message:)``: `errSecIO` (-36);
/// - ``calledOnEventLoop(_:)``: `errSecParam` (-50): the caller's thread, not the cluster, is wrong.
package enum EtcdError: Error, CustomStringConvertible {
    /// No endpoint answered within the deadline; the message names every endpoint and what each last said.
    case unavailable(String)
    /// A write was sent and no answer came: it may or may not have been applied.
    case indeterminate(String)
    /// A read at a revision etcd has compacted away.
    case compacted
    /// "etcdserver: too many operations in txn request" (`--max-txn-ops`, default 128).
    case tooManyOperations(String)
    /// "etcdserver: request is too large" (`--max-request-bytes`, default 1.5 MiB).
    case requestTooLarge(String)
    /// "etcdserver: mvcc: database space exceeded": the backend reached `--quota-backend-bytes` (default 2 GiB) and
    /// etcd raised its NOSPACE alarm; it refuses every write (deletes too, while the alarm is raised) until an
    /// operator frees space and disarms the alarm. The write was not applied (etcd refuses it before it is applied).
    case noSpace(String)
    /// A wrong user or password, authentication not enabled while a user is given, or required while none is.
    case authenticationFailed(String)
    /// "etcdserver: permission denied" (etcd's RBAC).
    case permissionDenied(String)
    /// Anything else etcd answered: the gRPC code (or the HTTP status when etcd gave none) and its message.
    case server(code: Int, message: String)
    /// A call made on a SwiftNIO event-loop thread, refused before anything was sent: the client blocks its caller
    /// until etcd answers, which on the client's own event loop would wait for itself forever and on any other
    /// would stall every connection of that loop. The message says which, and what to do instead.
    case calledOnEventLoop(String)

    package var description: String {
        switch self {
        case .unavailable(let message): message
        case .indeterminate(let message): message
        case .compacted: "etcd: the revision read has been compacted (mvcc: required revision has been compacted)"
        case .tooManyOperations(let message): message
        case .requestTooLarge(let message): message
        case .noSpace(let message): message
        case .authenticationFailed(let message): message
        case .permissionDenied(let message): message
        case .server(let code, let message): "etcd answered with an error (code \(code)): \(message)"
        case .calledOnEventLoop(let message): message
        }
    }

    /// The keychain error for this failure, with a message that says what to do.
    package var engineError: EngineError {
        switch self {
        case .unavailable(let message):
            EngineError(Status.notAvailable, "\(message). Check that a majority of the etcd members run and that this machine reaches them.")
        case .indeterminate(let message):
            EngineError(Status.notAvailable, "\(message). The change may or may not have been applied: read the item back before retrying.")
        case .compacted:
            EngineError(Status.notAvailable, "etcd compacted the revision this read needed; retry the call.")
        case .tooManyOperations(let message):
            EngineError(Status.quotaExceeded, "\(message): the change needs more operations in one transaction than the cluster's --max-txn-ops (default 128) allows; change fewer items at once or raise --max-txn-ops on every member.")
        case .requestTooLarge(let message):
            // One request carries the whole change: the item, on an update also its previous version (history), and the
            // audit entry (about 200 bytes). So an item of more than about 0.7 MiB can be added but not updated.
            EngineError(Status.dataTooLarge, "\(message): the change is larger than the cluster's --max-request-bytes (default 1.5 MiB) allows (one request carries the item, on an update also its previous version, and the audit entry: items above about 0.7 MiB can be added but not updated); nothing was changed. Store smaller items (large blobs in a file sealed with `keystone seal`, its key in the keychain) or raise --max-request-bytes on every member.")
        case .noSpace(let message):
            // Decision: errSecQuotaExceeded (the cluster's quota, not this item's size: errSecDataTooLarge is that).
            // Nothing was written: etcd refuses a write over the quota before applying it, and a transaction is all
            // or nothing, so every item acknowledged before stays readable.
            EngineError(Status.quotaExceeded, "\(message): the etcd cluster's database reached its quota (--quota-backend-bytes, default 2 GiB) and etcd refuses every change until an operator frees space; nothing was changed and every item stays readable. Fix: raise --quota-backend-bytes on every member (restart them), or free space: `etcdctl compact REVISION` (the revision `etcdctl endpoint status -w json` shows), then `etcdctl defrag --cluster`; then `etcdctl alarm disarm`. Run members with --auto-compaction-mode=periodic --auto-compaction-retention=1h so history does not fill it again.")
        case .authenticationFailed(let message):
            EngineError(Status.authFailed, "\(message). Check ?user= and \(EtcdConfiguration.passwordEnvironmentVariable).")
        case .permissionDenied(let message):
            EngineError(Status.wrPerm, "\(message): the etcd user lacks a role granting read-write access to this keychain's keys.")
        case .server(let code, let message):
            EngineError(Status.io, "etcd answered with an error (code \(code)): \(message)")
        case .calledOnEventLoop(let message):
            // Decision: errSecParam, not errSecNotAvailable: nothing is wrong with the cluster and retrying on the same
            // thread fails the same way; the app must make the call from another thread.
            EngineError(Status.param, "\(message). Make keychain calls on an etcd keychain from a thread you own, or through Keystone's async API (which runs them on threads of its own), never on a SwiftNIO event loop.")
        }
    }
}
#endif
