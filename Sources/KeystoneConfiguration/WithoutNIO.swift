#if !NIO
// KeystoneConfiguration is built on swift-configuration and swift-service-lifecycle, which this package resolves only
// with its `NIO` trait. Without it the module has no provider: its names are declared unavailable, so that code using
// them fails to build with a message that says what to change.

/// Unavailable: KeystoneConfiguration needs the Keystone package's `NIO` trait.
@available(*, unavailable, message: "KeystoneConfiguration needs the Keystone package's NIO trait: .package(url: …, from: …, traits: [\"NIO\"])")
public final class KeystoneConfigProvider {}

/// Unavailable: KeystoneConfiguration needs the Keystone package's `NIO` trait.
@available(*, unavailable, message: "KeystoneConfiguration needs the Keystone package's NIO trait: .package(url: …, from: …, traits: [\"NIO\"])")
public final class KeystoneSecretsService {}
#endif
