#if !NIO
// Without the package's NIO trait this module has no etcd client (AsyncHTTPClient is not resolved): its names are
// declared unavailable, so that code using them fails to build with a message that says what to change.

/// Unavailable: KeychainEtcd needs the Keystone package's `NIO` trait.
@available(*, unavailable, message: "KeychainEtcd needs the Keystone package's NIO trait: .package(url: …, from: …, traits: [\"NIO\"])")
public enum EtcdKeychain {}

/// Unavailable: KeychainEtcd needs the Keystone package's `NIO` trait.
@available(*, unavailable, message: "KeychainEtcd needs the Keystone package's NIO trait: .package(url: …, from: …, traits: [\"NIO\"])")
public struct EtcdConfiguration {}
#endif
