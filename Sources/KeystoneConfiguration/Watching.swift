#if NIO
import Foundation
import KeychainEngine
import Logging
#if !canImport(Darwin)
import KeychainEtcd
import KeychainFile
#endif

extension KeystoneConfigProvider {
    /// Follows the keychain's changes (``changes``) until the task is cancelled, reloading after each; watchers
    /// (``watchValue(forKey:type:updatesHandler:)``, ``watchSnapshot(updatesHandler:)``) see the values that changed.
    ///
    /// ``KeystoneSecretsService`` runs it; run it yourself (in a task of your own) only without the service. A reload
    /// that fails is logged (its code and the keychain, never a value) and the watch goes on: a locked keychain makes
    /// watchers see `.locked`, an unreachable one keeps the last values until it answers again.
    ///
    /// - Throws: ``KeystoneConfigurationError`` when the change signal cannot be set up (inotify refused, etcd refusing
    ///   the credentials). Returns when cancelled.
    public func run() async throws {
        switch changes.kind {
        case .manual:
            while !Task.isCancelled {
                do { try await Task.sleep(for: .seconds(3600)) } catch { return }
            }
        case .poll(let interval):
            try await poll(every: interval)
        case .automatic:
            #if os(Linux)
            if let file = engine?.storage as? KeychainFile {
                try await watchFile(at: file.path)
                return
            }
            #endif
            #if !canImport(Darwin)
            if let etcd = engine?.storage as? EtcdKeychain {
                try await watchEtcd(etcd)
                return
            }
            #endif
            try await poll(every: KeychainChangeSource.defaultPollInterval)
        }
    }

    /// Reloads, logging a failure instead of throwing it.
    func reloadLogged(because reason: String) async {
        do {
            try await reload()
        } catch is CancellationError {
        } catch let error as KeystoneConfigurationError {
            logger.warning("KeystoneConfigProvider: reloading the keychain failed; \(error.code == .locked ? "no value is served until it is unlocked" : "the last values are kept")",
                           metadata: ["keychain": "\(keychainName)", "code": "\(error.code.rawValue)", "status": "\(error.status.map(String.init) ?? "none")", "trigger": "\(reason)"])
        } catch {
            logger.warning("KeystoneConfigProvider: reloading the keychain failed", metadata: ["keychain": "\(keychainName)", "error": "\(type(of: error))"])
        }
    }

    private func poll(every interval: Duration) async throws {
        while !Task.isCancelled {
            do { try await Task.sleep(for: interval) } catch { return }
            await reloadLogged(because: "poll")
        }
    }

    #if os(Linux)
    private func watchFile(at path: String) async throws {
        let monitor: FileChangeMonitor
        do {
            monitor = try FileChangeMonitor(path: path)
        } catch {
            throw KeystoneConfigurationError(.keychain, keychain: keychainName,
                                             message: "cannot watch \(path) with inotify (\(error)): raise fs.inotify.max_user_watches, or make the provider with changes: .poll(every:)")
        }
        defer { monitor.stop() }
        // A change made between the last reload and the watch's start.
        await reloadLogged(because: "watch started")
        await withTaskCancellationHandler {
            for await _ in monitor.changes {
                await reloadLogged(because: "inotify")
            }
        } onCancel: {
            monitor.stop()
        }
    }
    #endif

    #if !canImport(Darwin)
    /// etcd's watch on the keychain's keys; its signals are coalesced (a burst of changes causes one reload, or two).
    private func watchEtcd(_ etcd: EtcdKeychain) async throws {
        // The revision first, then a reload: every change after it is reported by the watch.
        var revision: Int64?
        var backoff: Duration = .milliseconds(50)
        while revision == nil {
            do {
                revision = try await OwnThread.run { try etcd.currentRevision() }
            } catch is CancellationError {
                return
            } catch {
                logger.warning("KeystoneConfigProvider: the etcd cluster does not answer; the watch starts when it does",
                               metadata: ["keychain": "\(keychainName)"])
                do { try await Task.sleep(for: backoff) } catch { return }
                backoff = min(backoff * 2, .seconds(2))
            }
        }
        await reloadLogged(because: "watch started")
        let (signals, signal) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let keychainName = self.keychainName
        let start = revision ?? 0
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                defer { signal.finish() }
                do {
                    for try await _ in etcd.changes(after: start) { signal.yield(()) }
                } catch let error as EngineError {
                    throw KeystoneConfigurationError.classify(error, keychain: keychainName, while: "watching its keys")
                }
            }
            for await _ in signals {
                await reloadLogged(because: "etcd watch")
            }
            try await group.next()
            group.cancelAll()
        }
    }
    #endif
}
#endif
