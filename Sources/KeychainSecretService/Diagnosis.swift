import Foundation
import KeychainEngine
#if canImport(Glibc)
import Glibc
#endif

/// What `keystone doctor` reports about the Secret Service: the session bus and where its address came from, the
/// daemon owning `org.freedesktop.secrets`, its collections, the `default` alias, the collection a storage would use
/// and its lock state, and the session's transfer algorithm; for each problem, one sentence a user can act on.
///
/// ``examine(collection:busAddress:environment:timeout:)`` never throws, never shows a prompt (nothing is unlocked,
/// nothing is D-Bus-activated) and never reads a secret or an item: it asks the bus and the service for names,
/// labels and lock states only, each call under a short deadline.
public struct SecretServiceDiagnosis: Sendable {
    /// How a finding weighs: `problem` means the storage cannot be used as it is.
    public typealias Severity = DiagnosisSeverity
    /// One check's outcome.
    public typealias Finding = DiagnosisFinding

    /// Where the bus address came from.
    public enum AddressSource: String, Sendable, Hashable {
        /// Given by the caller (``SecretServiceStorage/Options/busAddress``).
        case given
        /// `$DBUS_SESSION_BUS_ADDRESS`.
        case environment = "DBUS_SESSION_BUS_ADDRESS"
        /// The socket `$XDG_RUNTIME_DIR/bus` (systemd's user bus).
        case runtimeDirectory = "$XDG_RUNTIME_DIR/bus"
        /// No address: neither is set.
        case none
    }

    /// The process that owns `org.freedesktop.secrets`.
    public struct Daemon: Sendable, Hashable {
        /// Its unique bus name (`:1.5`).
        public let name: String
        /// Its process id, when the bus tells.
        public let pid: UInt32?
        /// Its process name (`/proc/PID/comm`, e.g. `gnome-keyring-d`), when readable.
        public let process: String?
    }

    /// A collection of the service.
    public struct CollectionInfo: Sendable, Hashable {
        public let path: String
        public let label: String
        public let locked: Bool
    }

    /// The bus address used (nil when there is none).
    public let busAddress: String?
    public let addressSource: AddressSource
    /// The owner of `org.freedesktop.secrets` (nil when none was found).
    public let daemon: Daemon?
    /// Every collection, in the service's order.
    public let collections: [CollectionInfo]
    /// The object path the `default` alias names (nil when unset or unknown).
    public let defaultCollection: String?
    /// The object path of the collection examined (the one a storage with these options would use), when found.
    public let collection: String?
    /// Whether that collection is locked (nil when unknown).
    public let locked: Bool?
    /// The session's transfer algorithm: `dh-ietf1024-sha256-aes128-cbc-pkcs7` (encrypted) or `plain` (nil when no
    /// session was opened).
    public let sessionAlgorithm: String?
    /// Every check, in the order made.
    public let findings: [Finding]

    /// The worst severity found.
    public var severity: Severity { findings.map(\.severity).max() ?? .ok }
    /// Whether a ``SecretServiceStorage`` with these options can be opened (no `problem` finding). A locked
    /// collection is usable: it answers `errSecInteractionNotAllowed` until unlocked.
    public var isUsable: Bool { severity < .problem }

    /// The encrypted algorithm of the Secret Service specification.
    public static let encryptedAlgorithm = "dh-ietf1024-sha256-aes128-cbc-pkcs7"

    /// The sentence for a missing or dead session bus.
    static let busFix = "Log in to a desktop session (it starts a session bus and a Secret Service), or run the command under `dbus-run-session` with a Secret Service started inside it (`gnome-keyring-daemon --start --components=secrets --unlock`); check that DBUS_SESSION_BUS_ADDRESS names a bus that is running."
    static let daemonFix = "Start a Secret Service on this session bus: `gnome-keyring-daemon --start --components=secrets` (GNOME), or enable the Secret Service integration of KeePassXC or KWallet."

    /// Examines the Secret Service a storage with `options` would use (its collection and bus address; the
    /// environment fills in the address as `SecretServiceStorage.resolveBusAddress(_:)` does).
    public static func examine(options: SecretServiceStorage.Options,
                               environment: [String: String] = ProcessInfo.processInfo.environment,
                               timeout: Duration = .seconds(3)) -> SecretServiceDiagnosis {
        examine(collection: options.collection, busAddress: options.busAddress, environment: environment,
                timeout: min(timeout, options.callTimeout))
    }

    /// Examines the Secret Service on the session bus: never throws, never prompts, never reads a secret.
    ///
    /// - Parameters:
    ///   - collection: the collection a storage would use (default: the `default` alias).
    ///   - busAddress: the bus address; nil: `$DBUS_SESSION_BUS_ADDRESS`, else `$XDG_RUNTIME_DIR/bus`.
    ///   - environment: where those variables are read.
    ///   - timeout: the deadline of each call (connecting included).
    public static func examine(collection: SecretServiceStorage.Collection = .default, busAddress: String? = nil,
                               environment: [String: String] = ProcessInfo.processInfo.environment,
                               timeout: Duration = .seconds(3)) -> SecretServiceDiagnosis {
        var probe = Probe()
        probe.run(collection: collection, busAddress: busAddress, environment: environment, timeout: timeout)
        return SecretServiceDiagnosis(busAddress: probe.busAddress, addressSource: probe.addressSource, daemon: probe.daemon,
                                      collections: probe.collections, defaultCollection: probe.defaultCollection,
                                      collection: probe.collectionPath, locked: probe.locked,
                                      sessionAlgorithm: probe.sessionAlgorithm, findings: probe.findings)
    }

    /// The bus address and its source: `given`, else `$DBUS_SESSION_BUS_ADDRESS`, else `$XDG_RUNTIME_DIR/bus` when
    /// that socket exists.
    public static func busAddress(given: String?, environment: [String: String]) -> (address: String?, source: AddressSource) {
        // Options made from the environment carry its address: it still came from there.
        if let given, !given.isEmpty, given != environment["DBUS_SESSION_BUS_ADDRESS"] {
            let runtime = environment["XDG_RUNTIME_DIR"].map { "unix:path=\($0)/bus" }
            return (given, given == runtime ? .runtimeDirectory : .given)
        }
        if let address = environment["DBUS_SESSION_BUS_ADDRESS"], !address.isEmpty { return (address, .environment) }
        if let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty {
            var info = stat()
            if stat(runtime + "/bus", &info) == 0, (info.st_mode & S_IFMT) == S_IFSOCK { return ("unix:path=\(runtime)/bus", .runtimeDirectory) }
        }
        return (nil, .none)
    }

    /// The socket paths of a D-Bus address's `unix:path=` entries, or nil when any entry is of another kind (an
    /// abstract socket, tcp, a directory to listen in): then only connecting tells whether the bus is there.
    static func socketPaths(of address: String) -> [String]? {
        var paths: [String] = []
        for entry in address.split(separator: ";") where !entry.isEmpty {
            guard entry.hasPrefix("unix:") else { return nil }
            var path: String?
            for pair in entry.dropFirst("unix:".count).split(separator: ",") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                guard parts.count == 2 else { continue }
                if parts[0] == "path" { path = String(parts[1]).removingPercentEncoding ?? String(parts[1]) }
                if parts[0] == "abstract" || parts[0] == "tmpdir" || parts[0] == "dir" || parts[0] == "runtime" { return nil }
            }
            guard let path else { return nil }
            paths.append(path)
        }
        return paths.isEmpty ? nil : paths
    }

    /// The examination, one step after another; each step records what it learnt and its finding.
    private struct Probe {
        var busAddress: String?
        var addressSource: AddressSource = .none
        var daemon: Daemon?
        var collections: [CollectionInfo] = []
        var defaultCollection: String?
        var collectionPath: String?
        var locked: Bool?
        var sessionAlgorithm: String?
        var findings: [Finding] = []

        mutating func add(_ severity: Severity, _ check: String, _ detail: String, fix: String? = nil) {
            findings.append(Finding(severity: severity, check: check, detail: detail, fix: fix))
        }

        mutating func run(collection: SecretServiceStorage.Collection, busAddress given: String?,
                          environment: [String: String], timeout: Duration) {
            // The bus.
            (busAddress, addressSource) = SecretServiceDiagnosis.busAddress(given: given, environment: environment)
            guard let address = busAddress else {
                add(.problem, "bus", "no D-Bus session bus: DBUS_SESSION_BUS_ADDRESS is not set and $XDG_RUNTIME_DIR/bus does not exist",
                    fix: SecretServiceDiagnosis.busFix)
                return
            }
            let from = addressSource == .given ? "given" : "from \(addressSource.rawValue)"
            if let sockets = SecretServiceDiagnosis.socketPaths(of: address), !sockets.contains(where: Self.isSocket) {
                add(.problem, "bus", "\(address) (\(from)): no bus socket at \(sockets.joined(separator: ", "))",
                    fix: SecretServiceDiagnosis.busFix)
                return
            }

            // The service, and a session with it (no prompt: opening a session never asks the user anything).
            let client: SecretServiceClient
            do {
                client = try SecretServiceClient.connect(address: address, callTimeout: timeout)
            } catch let error as EngineError {
                if error.reason.contains("no D-Bus session bus") {
                    add(.problem, "bus", "\(address) (\(from)): no bus answers there", fix: SecretServiceDiagnosis.busFix)
                } else if error.reason.contains("no Secret Service is running") {
                    add(.ok, "bus", "\(address) (\(from))")
                    add(.problem, "daemon", "nothing owns org.freedesktop.secrets on the session bus", fix: SecretServiceDiagnosis.daemonFix)
                } else if error.reason.contains("did not answer within") {
                    add(.problem, "daemon", "the bus or the Secret Service did not answer within \(timeout)",
                        fix: "Check that the Secret Service daemon is not stuck (restart it, e.g. log out and in), then run doctor again.")
                } else {
                    add(.problem, "daemon", error.reason,
                        fix: "Restart the Secret Service daemon (log out and in, or restart gnome-keyring-daemon), then run doctor again.")
                }
                return
            } catch {
                add(.problem, "daemon", "\(error)")
                return
            }
            add(.ok, "bus", "\(address) (\(from))")

            // Who serves it.
            if let owner = try? client.owner() {
                let process = owner.pid.flatMap(Self.processName)
                daemon = Daemon(name: owner.name, pid: owner.pid, process: process)
                var detail = "org.freedesktop.secrets is owned by \(owner.name)"
                if let pid = owner.pid { detail += ", pid \(pid)" + (process.map { " (\($0))" } ?? "") }
                add(.ok, "daemon", detail)
            } else {
                add(.ok, "daemon", "org.freedesktop.secrets has an owner (the bus does not say which process)")
            }

            // How secrets travel.
            let algorithm = client.sessionAlgorithm
            sessionAlgorithm = algorithm == "none" ? nil : algorithm
            if algorithm == SecretServiceDiagnosis.encryptedAlgorithm {
                add(.ok, "session", "secrets travel encrypted (\(algorithm))")
            } else if algorithm == "plain" {
                add(.warning, "session", "the session is plain: secrets cross the bus unencrypted, visible to any program that can watch it",
                    fix: "Use a Secret Service that offers \(SecretServiceDiagnosis.encryptedAlgorithm) (gnome-keyring does), or accept that the bus must be trusted.")
            } else {
                add(.warning, "session", "unknown session algorithm '\(algorithm)'")
            }

            // The collections (labels and lock states only: nothing is unlocked, no item is read).
            do {
                for path in try client.collections() {
                    if let info = try? client.collectionInfo(path) {
                        collections.append(CollectionInfo(path: path, label: info.label, locked: info.locked))
                    } else {
                        collections.append(CollectionInfo(path: path, label: "", locked: true))
                    }
                }
                if collections.isEmpty {
                    add(.problem, "collections", "the Secret Service has no collection",
                        fix: "Create one: Seahorse (Passwords and Keys) > File > New > Password Keyring, and make it the default.")
                } else {
                    let list = collections.map { "\($0.label.isEmpty ? "(no label)" : "'\($0.label)'") \($0.path) (\($0.locked ? "locked" : "unlocked"))" }
                    add(.ok, "collections", list.joined(separator: ", "))
                }
            } catch let error as EngineError {
                add(.warning, "collections", "cannot list the collections: \(error.reason)")
            } catch {
                add(.warning, "collections", "cannot list the collections: \(error)")
            }

            // The default alias.
            do {
                defaultCollection = try client.readAlias("default")
                if let target = defaultCollection {
                    add(.ok, "default alias", target)
                } else {
                    let severity: Severity = collection == .default ? .problem : .note
                    add(severity, "default alias", "the alias 'default' names no collection",
                        fix: "Make a keyring the default (Seahorse: right-click it > Set as Default), or name one: secret-service:login.")
                }
            } catch let error as EngineError {
                add(.warning, "default alias", "cannot read the alias 'default': \(error.reason)")
            } catch {
                add(.warning, "default alias", "cannot read the alias 'default': \(error)")
            }

            // The collection a storage would use, and whether it is locked.
            if collection == .default && defaultCollection == nil { return }
            do {
                let path = try SecretServiceStorage.resolveCollection(collection, client: client)
                collectionPath = path
                let info = collections.first { $0.path == path }.map { ($0.label, $0.locked) }
                    ?? (try? client.collectionInfo(path)).map { ($0.label, $0.locked) }
                add(.ok, "collection", "\(collection): \(path)" + (info.map { " '\($0.0)'" } ?? ""))
                if let info {
                    locked = info.1
                    let argument = collection == .default ? "secret-service:" : SecretServiceStorage.Options(collection: collection).argument
                    if info.1 {
                        add(.warning, "lock", "locked: reads and writes answer errSecInteractionNotAllowed (-25308) until it is unlocked",
                            fix: "Unlock it: `keystone unlock-keychain \(argument)` (the Secret Service shows its own prompt), Seahorse, or a desktop login.")
                    } else {
                        add(.ok, "lock", "unlocked")
                    }
                }
            } catch let error as EngineError {
                add(.problem, "collection", error.reason,
                    fix: "Name an existing collection (`secret-service:login`; the list is above), or create it in Seahorse.")
            } catch {
                add(.problem, "collection", "\(error)")
            }
        }

        static func isSocket(_ path: String) -> Bool {
            var info = stat()
            return stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFSOCK
        }

        static func processName(_ pid: UInt32) -> String? {
            guard let text = try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8) else { return nil }
            let name = text.trimmingCharacters(in: .whitespacesAndNewlines)
            return name.isEmpty ? nil : name
        }
    }
}
