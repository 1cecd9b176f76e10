import Foundation
import SecretServiceDaemon
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The environment matrix (issue 27): every place Linux runs Keystone, each made for real by the test (a seccomp
/// filter, another user, a read-only home, no terminal, no bus, a locked Secret Service, a full disk, non-UTF-8 names,
/// a systemd service), running the built `keystone` and `EnvironmentProbe` (the library's `Keychain()`).
///
/// Each cell passes, or fails within 1 s with a message naming the fix, and writes its line to the matrix file
/// (``MatrixFile``); CI prints it with `scripts/print-environment-matrix.sh`. Every command runs under a 60 s watchdog
/// (``cellWatchdogSeconds``): a hang fails the cell, it never stalls the suite.
@Suite("Environment matrix: containers, daemons, no terminal, no bus, full disks, non-UTF-8 names", .serialized)
struct EnvironmentMatrixTests {
    /// The uid of the cells run as another user (nobody).
    static let otherUser: uid_t = 65534

    func tools(_ cell: Cell) throws -> (keystone: String, probe: String)? {
        guard let keystone = Sandbox.binary, let probe = builtExecutable("EnvironmentProbe") else {
            cell.skip("keystone or EnvironmentProbe is not built (swift build --build-tests --traits NIO)")
            Issue.record("keystone and EnvironmentProbe are built by `swift build --build-tests`")
            return nil
        }
        return (keystone, probe)
    }

    /// Why cells that switch user cannot run, or nil.
    static var otherUserUnavailable: String? {
        if geteuid() != 0 { return "needs root to run as uid 65534 (setpriv)" }
        if systemTool("setpriv") == nil { return "setpriv not installed (util-linux)" }
        return nil
    }

    func asOtherUser() -> [String] {
        [systemTool("setpriv")!, "--reuid=\(Self.otherUser)", "--regid=\(Self.otherUser)", "--clear-groups"]
    }

    // MARK: - A container's seccomp profile

    @Test("container seccomp (keyctl, add_key, request_key refused): the CLI round trip and Keychain() pass")
    func containerSeccomp() throws {
        let cell = Cell("container seccomp, no kernel keyring (no-keyring-exec)")
        guard let (keystone, probe) = try tools(cell) else { return }
        guard let noKeyring = builtExecutable("no-keyring-exec") else {
            cell.skip("no-keyring-exec is not built (swift build --build-tests --traits NIO)")
            return
        }
        let check = try cellRun([noKeyring, "--check"], environment: bareEnvironment())
        guard check.status == 0 else {
            cell.skip("the seccomp filter cannot be installed here: \(check.message)")
            return
        }
        let box = try CellDirectory()
        defer { box.remove() }
        let agent = try box.directory("agent")
        let environment = bareEnvironment([
            "HOME": try box.directory("home"),
            "KEYSTONE_KEYCHAIN_DIR": try box.directory("keychains"),
            "KEYSTONE_PASSWORD_FILE": try box.file("secret", "container-pw\n"),
            "KEYSTONE_AGENT_SOCKET": agent + "/agent.sock",
        ])
        try cliRoundTrip(cell, keystone: keystone, prefix: [noKeyring], environment: environment, keychain: "ci.keychain-db")
        try libraryRoundTrip(cell, probe: probe, prefix: [noKeyring], environment: environment)
        cell.finish()
    }

    // MARK: - A daemon's user

    @Test("a non-root user whose HOME is /nonexistent fails within 1 s naming KEYSTONE_KEYCHAIN_DIR (CLI and Keychain())",
          .enabled(if: otherUserUnavailable == nil, Comment(rawValue: otherUserUnavailable ?? "")))
    func noHome() throws {
        let cell = Cell("non-root user, HOME=/nonexistent")
        guard let (keystone, probe) = try tools(cell) else { return }
        guard !FileManager.default.fileExists(atPath: "/nonexistent") else {
            cell.skip("/nonexistent exists on this machine: the cell needs a home that does not exist")
            return
        }
        let environment = bareEnvironment(["HOME": "/nonexistent"])
        let find = try cellRun(asOtherUser() + [keystone, "find-generic-password", "-s", "matrix", "-w"], environment: environment)
        cell.expectFastFailure(find, naming: ["KEYSTONE_KEYCHAIN_DIR", "StateDirectory="])
        let create = try cellRun(asOtherUser() + [keystone, "create-keychain", "-p", "pw", "ci"], environment: environment)
        cell.expectFastFailure(create, naming: ["KEYSTONE_KEYCHAIN_DIR"])
        let library = try cellRun(asOtherUser() + [probe, "cell"], environment: environment)
        cell.expectFastFailure(library, naming: ["KEYSTONE_KEYCHAIN_DIR", "-61"])  // errSecWrPerm
        cell.finish()
    }

    @Test("a non-root user whose HOME is /nonexistent, with KEYSTONE_KEYCHAIN_DIR set: the CLI round trip and Keychain() pass",
          .enabled(if: otherUserUnavailable == nil, Comment(rawValue: otherUserUnavailable ?? "")))
    func noHomeWithKeychainDirectory() throws {
        let cell = Cell("non-root user, HOME=/nonexistent, KEYSTONE_KEYCHAIN_DIR set")
        guard let (keystone, probe) = try tools(cell) else { return }
        let box = try CellDirectory()
        defer { box.remove() }
        let environment = bareEnvironment([
            "HOME": "/nonexistent",
            "KEYSTONE_KEYCHAIN_DIR": try box.directory("state", owner: Self.otherUser),
            "KEYSTONE_PASSWORD_FILE": try box.file("secret", "daemon-pw\n", owner: Self.otherUser),
        ])
        try cliRoundTrip(cell, keystone: keystone, prefix: asOtherUser(), environment: environment, keychain: "daemon.keychain-db")
        try libraryRoundTrip(cell, probe: probe, prefix: asOtherUser(), environment: environment)
        cell.check(FileManager.default.fileExists(atPath: environment["KEYSTONE_KEYCHAIN_DIR"]! + "/daemon.keychain-db"),
                   "the keychain is in KEYSTONE_KEYCHAIN_DIR")
        cell.finish()
    }

    @Test("a read-only home (another uid's directory) fails within 1 s naming KEYSTONE_KEYCHAIN_DIR (CLI and Keychain())",
          .enabled(if: otherUserUnavailable == nil, Comment(rawValue: otherUserUnavailable ?? "")))
    func readOnlyHome() throws {
        let cell = Cell("read-only home (a directory of another uid)")
        guard let (keystone, probe) = try tools(cell) else { return }
        let box = try CellDirectory()
        defer { box.remove() }
        let environment = bareEnvironment(["HOME": try box.directory("home", mode: 0o755)])  // root's, 0755
        let add = try cellRun(asOtherUser() + [keystone, "add-generic-password", "-s", "matrix", "-a", "a", "-w", "v"], environment: environment)
        cell.expectFastFailure(add, naming: ["KEYSTONE_KEYCHAIN_DIR", "StateDirectory="])
        let library = try cellRun(asOtherUser() + [probe, "cell"], environment: environment)
        cell.expectFastFailure(library, naming: ["KEYSTONE_KEYCHAIN_DIR"])
        cell.finish()
    }

    @Test("a read-only home (a read-only bind mount, as root) fails within 1 s naming KEYSTONE_KEYCHAIN_DIR")
    func readOnlyMount() throws {
        let cell = Cell("read-only home (a read-only bind mount)")
        guard let (keystone, probe) = try tools(cell) else { return }
        guard let unshare = systemTool("unshare"), geteuid() == 0 else {
            cell.skip("needs root and unshare (util-linux) for a private read-only bind mount")
            return
        }
        let box = try CellDirectory()
        defer { box.remove() }
        let home = try box.directory("home")
        let prefix = [unshare, "-m", "--propagation", "private", "/bin/sh", "-c", "mount --bind -o ro \"$0\" \"$0\" && exec \"$@\"", home]
        let environment = bareEnvironment(["HOME": home])
        let add = try cellRun(prefix + [keystone, "add-generic-password", "-s", "matrix", "-a", "a", "-w", "v"], environment: environment)
        if add.stderr.contains("mount:") {
            cell.skip("a private mount namespace cannot be made here: \(add.message)")
            return
        }
        cell.expectFastFailure(add, naming: ["KEYSTONE_KEYCHAIN_DIR", "StateDirectory="])
        let library = try cellRun(prefix + [probe, "cell"], environment: environment)
        cell.expectFastFailure(library, naming: ["KEYSTONE_KEYCHAIN_DIR"])
        cell.finish()
    }

    // MARK: - No terminal

    @Test("no terminal and standard input closed: the password from a systemd credential; the CLI round trip and Keychain() pass")
    func noTerminalWithCredential() throws {
        let cell = Cell("no terminal, stdin closed, password from a systemd credential")
        guard let (keystone, probe) = try tools(cell) else { return }
        guard let setsid = systemTool("setsid") else {
            cell.skip("setsid not installed (util-linux)")
            return
        }
        let box = try CellDirectory()
        defer { box.remove() }
        let credentials = try box.directory("credentials")
        _ = try box.file("credentials/keystone.keychain-password", "credential-pw")
        let environment = bareEnvironment([
            "KEYSTONE_KEYCHAIN_DIR": try box.directory("state"), "CREDENTIALS_DIRECTORY": credentials,
            "XDG_CONFIG_HOME": try box.directory("config"),  // root has a home: its settings stay untouched
        ])
        try cliRoundTrip(cell, keystone: keystone, prefix: [setsid, "-w"], environment: environment,
                         keychain: "service.keychain-db", input: .closed)
        // The credential is the keychain's password: a wrong one is refused (51), so the round trip used it.
        _ = try box.file("credentials/keystone.keychain-password", "another-pw")
        let wrong = try cellRun([setsid, "-w", keystone, "unlock-keychain", "service.keychain-db"], environment: environment, input: .closed)
        cell.check(wrong.status == 51, "unlock with another credential is refused with 51 (errSecAuthFailed): \(wrong)")
        try libraryRoundTrip(cell, probe: probe, prefix: [setsid, "-w"], environment: environment, input: .closed)
        cell.finish()
    }

    @Test("no terminal, no password source (standard input /dev/null or closed): create and unlock fail within 1 s naming the sources")
    func noTerminalNoPassword() throws {
        let cell = Cell("no terminal, stdin /dev/null or closed, no password source")
        guard let (keystone, _) = try tools(cell) else { return }
        guard let setsid = systemTool("setsid") else {
            cell.skip("setsid not installed (util-linux)")
            return
        }
        let box = try CellDirectory()
        defer { box.remove() }
        let environment = bareEnvironment(["KEYSTONE_KEYCHAIN_DIR": try box.directory("state"),
                                           "XDG_CONFIG_HOME": try box.directory("config")])
        for input in [CellInput.devNull, .closed] {
            let create = try cellRun([setsid, "-w", keystone, "create-keychain", "ci"], environment: environment, input: input)
            cell.expectFastFailure(create, naming: ["KEYSTONE_PASSWORD_FILE", "keystone.keychain-password", "-p"])
            cell.check(!FileManager.default.fileExists(atPath: box.path("state/ci.keychain-db")), "nothing was created: \(create)")
        }
        cell.expectSuccess(try cellRun([keystone, "create-keychain", "-p", "pw", "ci"], environment: environment), "create-keychain -p")
        let unlock = try cellRun([setsid, "-w", keystone, "unlock-keychain", "ci"], environment: environment, input: .closed)
        cell.expectFastFailure(unlock, naming: ["KEYSTONE_PASSWORD_FILE", "keystone.keychain-password"])
        cell.finish()
    }

    // MARK: - No session bus

    @Test("no session bus (unset or bogus DBUS_SESSION_BUS_ADDRESS): the default keychain's round trip and Keychain() pass")
    func noBusDefaultKeychain() throws {
        let cell = Cell("no session bus, the default keychain file")
        guard let (keystone, probe) = try tools(cell) else { return }
        let box = try CellDirectory()
        defer { box.remove() }
        for (index, bus) in [nil, "unix:path=/nonexistent/bus"].enumerated() {
            var environment = bareEnvironment([
                "KEYSTONE_KEYCHAIN_DIR": try box.directory("state-\(index)"),
                "KEYSTONE_PASSWORD_FILE": try box.file("secret", "bus-pw\n"),
                "XDG_CONFIG_HOME": try box.directory("config"),
            ])
            environment["DBUS_SESSION_BUS_ADDRESS"] = bus
            try cliRoundTrip(cell, keystone: keystone, environment: environment, keychain: "nobus-\(index).keychain-db")
            try libraryRoundTrip(cell, probe: probe, environment: environment)
        }
        cell.finish()
    }

    @Test("no session bus: secret-service: fails within 1 s naming the fix")
    func noBusSecretService() throws {
        let cell = Cell("no session bus, secret-service:")
        guard let (keystone, _) = try tools(cell) else { return }
        for bus in [nil, "unix:path=/nonexistent/bus"] {
            var environment = bareEnvironment()
            environment["DBUS_SESSION_BUS_ADDRESS"] = bus
            let find = try cellRun([keystone, "find-generic-password", "-s", "matrix", "-w", "secret-service:"], environment: environment)
            cell.expectFastFailure(find, naming: ["dbus-run-session"])
        }
        cell.finish()
    }

    // MARK: - A locked Secret Service collection

    @Test("a locked Secret Service collection: find and add fail within 1 s naming unlock-keychain, no hang",
          .enabled(if: SecretServiceDaemon.unavailableReason == nil, Comment(rawValue: SecretServiceDaemon.unavailableReason ?? "")))
    func lockedCollection() throws {
        let cell = Cell("locked Secret Service collection")
        guard let (keystone, _) = try tools(cell) else { return }
        let daemon = try SecretServiceDaemon.start()
        defer { daemon.stop() }
        var environment = daemon.environment
        for key in environment.keys where key.hasPrefix("KEYSTONE_") { environment[key] = nil }
        // An item stored while the collection is unlocked: once locked, a read must not say it does not exist.
        cell.expectSuccess(try cellRun([keystone, "add-generic-password", "-s", "matrix", "-a", "kept", "-w", "kept-secret", "secret-service:"],
                                       environment: environment), "add while unlocked")
        try daemon.lockDefaultCollection()
        let find = try cellRun([keystone, "find-generic-password", "-s", "matrix", "-a", "kept", "-w", "secret-service:"], environment: environment)
        cell.expectFastFailure(find, naming: ["unlock-keychain"])
        cell.check(find.status == 36, "a locked collection's item is reported locked (36), not missing: \(find)")
        let add = try cellRun([keystone, "add-generic-password", "-s", "matrix", "-a", "a", "-w", "v", "secret-service:"], environment: environment)
        cell.expectFastFailure(add, naming: ["unlock-keychain"])
        cell.finish()
    }

    // MARK: - A full disk

    @Test("a tiny full disk in a private mount namespace: add fails with errSecDiskFull within 1 s, earlier items still read")
    func fullDisk() throws {
        let cell = Cell("tiny full disk (private mount namespace)")
        guard let (keystone, probe) = try tools(cell) else { return }
        guard let unshare = systemTool("unshare"), geteuid() == 0 else {
            cell.skip("needs root and unshare (util-linux) for a private tmpfs")
            return
        }
        let box = try CellDirectory()
        defer { box.remove() }
        let disk = try box.directory("disk")
        let out = try box.directory("out")
        // Everything runs inside the namespace (the tmpfs is gone when it ends); each step's status, output and time
        // are written to `out`, outside the tmpfs.
        let script = """
            set -u
            disk=$1; out=$2; ks=$3; probe=$4
            mount -t tmpfs -o size=2m,mode=0700 keystone-matrix "$disk" || { echo "cannot mount a tmpfs" > "$out/mount"; exit 3; }
            export KEYSTONE_KEYCHAIN_DIR="$disk" XDG_CONFIG_HOME="$out/config"
            step() { name=$1; shift; start=$(date +%s.%N); "$@" > "$out/$name.out" 2> "$out/$name.err" < /dev/null; echo $? > "$out/$name.status"; end=$(date +%s.%N); echo "$start $end" > "$out/$name.time"; }
            step create "$ks" create-keychain -p pw full.keychain-db
            step add1 "$ks" add-generic-password -s matrix -a kept -w kept-secret full.keychain-db
            step probe1 "$probe" before
            dd if=/dev/zero of="$disk/filler" bs=4096 > /dev/null 2>&1
            big=$(head -c 100000 /dev/zero | tr '\\0' x)
            # The keychain file keeps room in its log for writes (ensureLogCapacity): adds go on until that is used up.
            i=0; while [ $i -lt 60 ]; do step add2 "$ks" add-generic-password -s matrix -a "big-$i" -w "$big" full.keychain-db; [ "$(cat "$out/add2.status")" = 0 ] || break; i=$((i+1)); done; echo $i > "$out/add2.count"
            step find1 "$ks" find-generic-password -s matrix -a kept -w full.keychain-db
            step find2 "$ks" find-generic-password -s matrix -a big-0 full.keychain-db
            i=0; while [ $i -lt 60 ]; do step probe2 "$probe" "$i-$big"; [ "$(cat "$out/probe2.status")" = 0 ] || break; i=$((i+1)); done
            """
        let run = try cellRun([unshare, "-m", "--propagation", "private", "/bin/sh", "-c", script, "sh", disk, out, keystone, probe],
                              environment: bareEnvironment())
        if FileManager.default.fileExists(atPath: out + "/mount") || run.status == 3 {
            cell.skip("a private tmpfs cannot be mounted here: \(run.message)")
            return
        }
        cell.check(!run.hung, "the steps hung: \(run)")
        func step(_ name: String) -> CellRun {
            let read = { (suffix: String) in (try? String(contentsOfFile: "\(out)/\(name).\(suffix)", encoding: .utf8)) ?? "" }
            let times = read("time").split(separator: " ").compactMap { Double($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
            return CellRun(status: Int32(read("status").trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1, stdout: read("out"),
                           stderr: read("err"), seconds: times.count == 2 ? times[1] - times[0] : .infinity, hung: false)
        }
        cell.expectSuccess(step("create"), "create-keychain")
        cell.expectSuccess(step("add1"), "the first add")
        cell.check(step("probe1").stdout == "ok\n", "Keychain() before the disk fills: \(step("probe1"))")
        let full = step("add2")
        cell.expectFastFailure(full, naming: ["disk is full"])
        cell.check(full.status == 222, "add on a full disk exits 222 (errSecDiskFull, -34): \(full)")
        let kept = step("find1")
        cell.check(kept.status == 0 && kept.stdout == "kept-secret\n", "the earlier item still reads after the failed add: \(kept)")
        let stored = Int(((try? String(contentsOfFile: out + "/add2.count", encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        if stored > 0 {
            cell.check(step("find2").status == 0, "the adds that succeeded before the disk filled are kept: \(step("find2"))")
        }
        let library = step("probe2")
        cell.check(library.status == 1 && library.stdout.contains("-34") && library.stdout.contains("disk is full"),
                   "Keychain() save on a full disk throws errSecDiskFull (-34) naming the full disk: \(library)")
        cell.finish()
    }

    // MARK: - Names that are not UTF-8

    @Test("LANG=C: UTF-8 names pass; names with bytes that are not UTF-8 fail within 1 s naming UTF-8, creating nothing")
    func nonUTF8Names() throws {
        let cell = Cell("LANG=C, non-UTF-8 names")
        guard let (keystone, probe) = try tools(cell) else { return }
        let box = try CellDirectory()
        defer { box.remove() }
        let state = try box.directory("state")
        let environment = bareEnvironment(["LANG": "C", "LC_ALL": "C", "KEYSTONE_KEYCHAIN_DIR": state,
                                           "KEYSTONE_PASSWORD_FILE": try box.file("secret", "c-pw\n"),
                                           "XDG_CONFIG_HOME": try box.directory("config")])
        // A UTF-8 name that is not ASCII works under LANG=C.
        try cliRoundTrip(cell, keystone: keystone, environment: environment, keychain: "clé-\u{00E9}t\u{00E9}.keychain-db")
        // Keychain() with a keychain directory whose UTF-8 name is not ASCII.
        var utf8Directory = environment
        utf8Directory["KEYSTONE_KEYCHAIN_DIR"] = try box.directory("r\u{00E9}pertoire")
        try libraryRoundTrip(cell, probe: probe, environment: utf8Directory)
        func shell(_ script: String) throws -> CellRun {
            try cellRun(["/bin/sh", "-c", script, "sh", keystone, probe], environment: environment)
        }
        let keychain = try shell(#"exec "$1" create-keychain -p pw "$(printf 'kc-\377')""#)
        cell.expectFastFailure(keychain, naming: ["not valid UTF-8", "rename"])
        let account = try shell(#"exec "$1" add-generic-password -s matrix -a "$(printf 'x\376')" -w v "clé-été.keychain-db""#)
        cell.expectFastFailure(account, naming: ["not valid UTF-8"])
        let directory = try shell(#"KEYSTONE_KEYCHAIN_DIR="$KEYSTONE_KEYCHAIN_DIR/$(printf 'd\377')" exec "$2" cell"#)
        cell.expectFastFailure(directory, naming: ["KEYSTONE_KEYCHAIN_DIR", "UTF-8"])
        let created = (try? FileManager.default.contentsOfDirectory(atPath: state)) ?? []
        cell.check(!created.contains { $0.contains("\u{FFFD}") || $0.hasPrefix("kc-") || $0.hasPrefix("d") },
                   "nothing was created under a replaced name: \(created)")
        cell.finish()
    }

    // MARK: - A systemd service

    /// Why `systemd-run` cannot start a transient service here, or nil.
    static var systemdUnavailable: String? {
        if !FileManager.default.fileExists(atPath: "/run/systemd/system") {
            return "systemd is not PID 1 here (/run/systemd/system is missing): systemd-run cannot start a transient service"
        }
        if systemTool("systemd-run") == nil { return "systemd-run not installed" }
        if geteuid() != 0 { return "needs root for a system transient service" }
        return nil
    }

    @Test("a systemd transient service (DynamicUser, StateDirectory, LoadCredential): the CLI round trip and Keychain() pass")
    func systemdTransientService() throws {
        let cell = Cell("systemd transient service (systemd-run)")
        if let reason = Self.systemdUnavailable {
            cell.skip(reason)
            return
        }
        guard let (keystone, probe) = try tools(cell) else { return }
        let box = try CellDirectory()
        defer { box.remove() }
        let password = try box.file("password", "service-pw")
        let state = "keystone-matrix-\(UUID().uuidString.prefix(8).lowercased())"
        let script = """
            set -e
            ks=$1; probe=$2
            "$ks" create-keychain service.keychain-db
            "$ks" unlock-keychain service.keychain-db
            "$ks" add-generic-password -s matrix -a cell -w cell-secret service.keychain-db
            "$ks" find-generic-password -s matrix -a cell -w service.keychain-db
            "$ks" lock-keychain service.keychain-db
            if "$ks" find-generic-password -s matrix -a cell -w service.keychain-db; then echo "found after lock"; exit 9; else echo "refused $?"; fi
            "$probe" cell
            """
        let run = try cellRun([systemTool("systemd-run")!, "--wait", "--pipe", "--quiet", "--collect",
                               "-p", "DynamicUser=yes", "-p", "StateDirectory=\(state)",
                               "-p", "Environment=KEYSTONE_KEYCHAIN_DIR=%S/\(state)",
                               "-p", "LoadCredential=keystone.keychain-password:\(password)",
                               "/bin/sh", "-c", script, "sh", keystone, probe], environment: bareEnvironment())
        cell.check(!run.hung && run.status == 0 && run.stdout == "cell-secret\nrefused 36\nok\n",
                   "the round trip in a transient service: \(run)")
        try? FileManager.default.removeItem(atPath: "/var/lib/private/\(state)")
        cell.finish()
    }
}
