import Logging

/// Keystone's operator log (swift-log), label `keystone`.
///
/// What an operator needs to know goes here: a damaged item left out of a result, a keychain file refused
/// for its owner or mode, a cache that could not be written. Bootstrap swift-log in the app to route it;
/// without a bootstrap swift-log writes to standard error.
///
/// - Important: Nothing secret is ever logged: no secret, password, key, item value or attribute value.
///   Log lines name item classes, row ids, file paths, counts and status codes only.
package enum KeystoneLog {
    /// The logger every Keystone module writes to.
    package static let logger = Logger(label: "keystone")
}
