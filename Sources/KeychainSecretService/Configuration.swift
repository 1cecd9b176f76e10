import Foundation

extension SecretServiceStorage.Options {
    /// The prefix of a keychain argument naming the Secret Service: `secret-service:` (the default collection) or
    /// `secret-service:COLLECTION` (an alias, a label, or an object path).
    public static let argumentPrefix = "secret-service:"

    /// Options for a keychain argument `secret-service:` or `secret-service:COLLECTION` (`secret-service` alone
    /// also names the default collection), with the environment's settings (``init(environment:)``); nil for any
    /// other argument.
    public init?(argument: String, environment: [String: String] = ProcessInfo.processInfo.environment) {
        let name: String
        if argument == "secret-service" {
            name = ""
        } else if argument.hasPrefix(Self.argumentPrefix) {
            name = String(argument.dropFirst(Self.argumentPrefix.count))
        } else {
            return nil
        }
        self.init(environment: environment)
        collection = name.isEmpty ? .default : .named(name)
    }

    /// Options from the environment:
    /// - `KEYSTONE_SECRET_SERVICE_COMPATIBILITY=1` turns on ``SecretServiceStorage/Options/compatibility`` (other
    ///   clients' generic passwords), in the access group `default`;
    /// - `KEYSTONE_SECRET_SERVICE_UNENFORCED_ACCESS_CONTROL=1` turns on
    ///   ``SecretServiceStorage/Options/allowsUnenforcedAccessControl``;
    /// - `KEYSTONE_SECRET_SERVICE_TIMEOUT=SECONDS` sets the deadline of each call (1–600, default 10).
    /// - `DBUS_SESSION_BUS_ADDRESS` (else `$XDG_RUNTIME_DIR/bus`) is the bus;
    public init(environment: [String: String]) {
        self.init()
        busAddress = try? SecretServiceStorage.resolveBusAddress(nil, environment: environment)
        if let flag = environment["KEYSTONE_SECRET_SERVICE_COMPATIBILITY"], ["1", "true", "yes", "on"].contains(flag.lowercased()) {
            compatibility = Compatibility()
        }
        if let flag = environment["KEYSTONE_SECRET_SERVICE_UNENFORCED_ACCESS_CONTROL"], ["1", "true", "yes", "on"].contains(flag.lowercased()) {
            allowsUnenforcedAccessControl = true
        }
        if let text = environment["KEYSTONE_SECRET_SERVICE_TIMEOUT"], let seconds = Int(text), (1...600).contains(seconds) {
            callTimeout = .seconds(seconds)
        }
    }

    /// The keychain argument naming these options' collection.
    public var argument: String {
        switch collection {
        case .default: Self.argumentPrefix
        case .named(let name): Self.argumentPrefix + name
        }
    }
}
