// migration-child COMMAND…: a child process for the migration crash tests (Tests/KeystoneTests/MigrationCrashTests.swift).
//
// Runs against a real keychain file ($MIG_KEYCHAIN, empty password) and real UserDefaults (the suite $MIG_SUITE,
// persisted under the HOME / XDG_CONFIG_HOME the test gives). Secrets never go through the arguments: the values
// come as JSON on standard input ({"auth_token": "…", "refresh_blob": "…", "smtp_password": "…"}).
//
// Commands, run in order:
//   setup[:MB]       create the keychain file; put the values in the defaults (refresh_blob as Data), synchronize;
//                    with MB, also MB MiB of filler under "filler" (a large plist: a long write)
//   migrate[:N]      run the plan; print "checkpoint I <checkpoint>" before each checkpoint I and, at I == N, die by
//                    SIGKILL; print "outcome KEY OUTCOME" per step and "migrated FROM TO" at the end
//   migrate-xfsz:K   run the plan; at the K-th removedFromDefaults checkpoint, set RLIMIT_FSIZE to 0: the next
//                    write to a regular file (the defaults' synchronize, which truncates the plist first) dies by
//                    SIGXFSZ inside the write itself
//   inspect          print "defaults KEY absent|equal|different", "keychain KEY COUNT equal|different|absent",
//                    "other KEY present|absent" (a key the plan does not move), "version N"
//   fresh-setup      create the keychain file with the app's items and others
//   fresh[:kill]     wipe if fresh ($MIG_MARKER is the marker file); with :kill die by SIGKILL when writing the marker
//   fresh-inspect    print "app N", "other N", "inet N", "marker yes|no"
//   ud-marker        print "udmarker yes|no": the UserDefaults install marker in $MIG_SUITE
//   ud-marker-write  write that marker
import Foundation
#if canImport(Glibc)
import Glibc
#endif
#if os(Linux)
import KeychainEngine
import KeychainFile
import Keystone
import KeystoneMigrations

/// One write(2) per line: nothing is buffered when the process is killed.
func emit(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }
func fail(_ message: String) -> Never { FileHandle.standardError.write(Data((message + "\n").utf8)); exit(2) }
func environment(_ name: String) -> String {
    guard let value = ProcessInfo.processInfo.environment[name], !value.isEmpty else { fail("\(name) is not set") }
    return value
}

let app = "com.example.app"
let plan = DefaultsMigration(versionKey: "migration_version", versions: [
    .init(1, steps: [
        .init(moving: "auth_token", to: try! GenericPassword(service: app, account: "token")),
        .init(moving: "refresh_blob", to: try! GenericPassword(service: app, account: "refresh")),
    ]),
    .init(2, steps: [
        .init(moving: "smtp_password", to: try! InternetPassword(server: "mail.example.com", account: "alice", protocol: .imaps)),
    ]),
])

let input = FileHandle.standardInput.readDataToEndOfFile()
let values = (try? JSONSerialization.jsonObject(with: input)) as? [String: String] ?? [:]
func defaults() -> UserDefaults {
    guard let defaults = UserDefaults(suiteName: environment("MIG_SUITE")) else { fail("no defaults suite") }
    return defaults
}
func keychain(create: Bool = false) -> Keychain {
    let path = environment("MIG_KEYCHAIN")
    do {
        let file = create ? try KeychainFile.create(at: path, password: "") : try KeychainFile.open(at: path)
        if file.lockState != .unlocked { try file.unlock() }
        return Keychain(store: KeychainEngine(storage: file))
    } catch {
        fail("keychain file: \(error)")
    }
}

/// Dies by SIGKILL when asked to write the marker: a crash between the wipe and the marker.
struct KillingMarker: InstallMarkerStore {
    let base: FileInstallMarker
    func markerExists() throws(KeychainError) -> Bool { try base.markerExists() }
    func checkWritable() throws(KeychainError) { try base.checkWritable() }
    func writeMarker() throws(KeychainError) {
        emit("checkpoint marker")
        kill(getpid(), SIGKILL)
    }
}

func count(_ keychain: Keychain, _ item: some KeychainItem) throws -> Int {
    var query = item.identifyingAttributes
    query[Key.synchronizable] = .string(Key.synchronizableAny)
    query[Key.returnAttributes] = .bool(true)
    query[Key.matchLimit] = .string(Key.matchLimitAll)
    do {
        switch try keychain.store.copyMatching(query) {
        case .array(let rows)?: return rows.count
        case .attributes?: return 1
        default: return 0
        }
    } catch let error where KeychainError.itemNotFound ~= error {
        return 0
    }
}

do {
    for command in CommandLine.arguments.dropFirst() {
        let parts = command.split(separator: ":", maxSplits: 1).map(String.init)
        switch parts[0] {
        case "setup":
            _ = keychain(create: true)
            let defaults = defaults()
            for (key, value) in values {
                defaults.set(key == "refresh_blob" ? Data(value.utf8) as Any : value as Any, forKey: key)
            }
            if parts.count > 1, let megabytes = Int(parts[1]) {
                defaults.set(Data(repeating: 0x5A, count: megabytes << 20), forKey: "filler")
            }
            defaults.set("dark", forKey: "theme")
            guard defaults.synchronize() else { fail("synchronize failed") }
            emit("setup done")
        case "migrate":
            let killAt = parts.count > 1 ? Int(parts[1]) : nil
            var index = 0
            let report = try keychain().migrate(plan, from: defaults()) { checkpoint in
                emit("checkpoint \(index) \(checkpoint)")
                if index == killAt { kill(getpid(), SIGKILL) }
                index += 1
            }
            for entry in report.entries { emit("outcome \(entry.defaultsKey) \(entry.outcome.rawValue)") }
            emit("migrated \(report.startVersion) \(report.finalVersion)")
        case "migrate-xfsz":
            guard parts.count > 1, let target = Int(parts[1]) else { fail("migrate-xfsz needs K") }
            var removals = 0
            let report = try keychain().migrate(plan, from: defaults()) { checkpoint in
                emit("checkpoint \(checkpoint)")
                guard checkpoint.phase == .removedFromDefaults else { return }
                removals += 1
                guard removals == target else { return }
                // No core file; then no regular file may grow: the next write(2) to one raises SIGXFSZ, whose default
                // action ends the process. open(O_TRUNC) is not a write: a plist rewritten in place is left empty.
                // A parent may have ignored or blocked it (exec keeps both): default action, unblocked.
                signal(SIGXFSZ, SIG_DFL)
                var xfsz = sigset_t()
                sigemptyset(&xfsz)
                sigaddset(&xfsz, SIGXFSZ)
                pthread_sigmask(SIG_UNBLOCK, &xfsz, nil)
                var none = rlimit(rlim_cur: 0, rlim_max: 0)
                setrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &none)
                var zero = rlimit(rlim_cur: 0, rlim_max: rlim_t.max)
                setrlimit(__rlimit_resource_t(RLIMIT_FSIZE.rawValue), &zero)
                emit("limit set")
            }
            emit("migrated \(report.startVersion) \(report.finalVersion)")
        case "inspect":
            emit("inspect")
            let keychain = keychain()
            let defaults = defaults()
            for version in plan.versions {
                for step in version.steps {
                    let expected = Data((values[step.defaultsKey] ?? "").utf8)
                    let legacy: String
                    switch defaults.object(forKey: step.defaultsKey) {
                    case nil: legacy = "absent"
                    case let data as Data: legacy = data == expected ? "equal" : "different"
                    case let text as String: legacy = Data(text.utf8) == expected ? "equal" : "different"
                    default: legacy = "different"
                    }
                    emit("defaults \(step.defaultsKey) \(legacy)")
                    let stored = try keychain.data(for: step.item)
                    let state = stored == nil ? "absent" : stored == expected ? "equal" : "different"
                    emit("keychain \(step.defaultsKey) \(try count(keychain, step.item)) \(state)")
                }
            }
            emit("other theme \(defaults.object(forKey: "theme") == nil ? "absent" : "present")")
            emit("version \(defaults.object(forKey: plan.versionKey).map { "\($0)" } ?? "0")")
        case "fresh-setup":
            let keychain = keychain(create: true)
            for account in ["a", "b"] { try keychain.save("app-\(account)", for: GenericPassword(service: app, account: account)) }
            try keychain.save("other", for: GenericPassword(service: "com.example.other", account: "x"))
            try keychain.save("inet", for: InternetPassword(server: app, account: "a"))
            emit("setup done")
        case "fresh":
            let marker = FileInstallMarker(url: URL(fileURLWithPath: environment("MIG_MARKER")))
            let result = parts.count > 1
                ? try keychain().wipeIfFreshInstall(FreshInstallScope(services: [app]), marker: KillingMarker(base: marker))
                : try keychain().wipeIfFreshInstall(FreshInstallScope(services: [app]), marker: marker)
            emit("result \(result)")
        case "fresh-inspect":
            let keychain = keychain()
            emit("app \(try keychain.accounts(service: app).count)")
            emit("other \(try keychain.accounts(service: "com.example.other").count)")
            emit("inet \(try count(keychain, InternetPassword(server: app, account: "a")))")
            emit("marker \(FileManager.default.fileExists(atPath: environment("MIG_MARKER")) ? "yes" : "no")")
        case "ud-marker":
            emit("udmarker \(try UserDefaultsInstallMarker(suiteName: environment("MIG_SUITE")).markerExists() ? "yes" : "no")")
        case "ud-marker-write":
            try UserDefaultsInstallMarker(suiteName: environment("MIG_SUITE")).writeMarker()
        default:
            fail("unknown command \(command)")
        }
    }
} catch {
    emit("error \(error)")
    exit(1)
}
#else
FileHandle.standardError.write(Data("migration-child runs on Linux only\n".utf8))
exit(3)
#endif
