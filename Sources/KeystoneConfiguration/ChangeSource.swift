#if NIO
/// How a ``KeystoneConfigProvider`` learns that the keychain changed, while its ``KeystoneConfigProvider/run()`` runs.
///
/// ``automatic`` picks the storage's own signal:
/// - a keychain file: Linux's inotify on the file's folder (the file, its `-wal` and `-journal`): a change another
///   process commits (`keystone add-generic-password -U …`) wakes the provider, which reads the keychain again;
/// - an etcd keychain: etcd's watch API, one stream per provider on the keychain's keys, resumed from the last seen
///   revision after a reconnect; a compacted revision makes the provider read everything again;
/// - any other storage (the Secret Service, memory, a store of your own): a bounded poll every 5 seconds.
///
/// Decision: the Secret Service is polled. Its `ItemChanged` / `ItemCreated` D-Bus signals are not reachable through
/// Keystone's libsecret boundary (CSecretService has no signal subscription), and depending on it would link libsecret
/// into every server that uses this module (server containers have no D-Bus). A poll reads the items of the mapping's
/// services only, and notifies only values that changed.
public struct KeychainChangeSource: Sendable, Hashable {
    enum Kind: Sendable, Hashable {
        case automatic
        case poll(Duration)
        case manual
    }

    let kind: Kind

    /// The storage's own change signal, else a poll every 5 seconds.
    public static let automatic = KeychainChangeSource(kind: .automatic)
    /// No watching: values change only when you call ``KeystoneConfigProvider/reload()``.
    public static let manual = KeychainChangeSource(kind: .manual)

    /// Reads the keychain again every `interval` (at least 100 ms).
    public static func poll(every interval: Duration) -> KeychainChangeSource {
        KeychainChangeSource(kind: .poll(max(interval, .milliseconds(100))))
    }

    /// The poll interval of ``automatic`` on storages without a change signal.
    public static let defaultPollInterval: Duration = .seconds(5)
}
#endif
