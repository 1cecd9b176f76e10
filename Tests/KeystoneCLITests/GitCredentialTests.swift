import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// git-credential-keystone with Debian's real git: `git credential fill/approve/reject`, and a clone over HTTP from a
/// local server (git http-backend behind basic authentication on 127.0.0.1) that takes its password from the helper.
@Suite("git-credential-keystone: git's credential protocol with real git", .serialized)
struct GitCredentialTests {
    static let git = CredentialHome.search("git", ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin")
    static var skipReason: String? {
        if git == nil { return "git is not installed" }
        if CredentialHome.binaries == nil { return "git-credential-keystone is not built (swift build --build-tests)" }
        return nil
    }

    func home() throws -> CredentialHome {
        let home = try CredentialHome()
        let configured = try home.run("git", ["config", "--global", "credential.helper", "keystone"])
        #expect(configured.status == 0, "\(configured.stderr)")
        return home
    }

    func credential(_ lines: String...) -> String { lines.joined(separator: "\n") + "\n\n" }

    @Test("git credential approve, fill and reject round-trip through the helper", .disabled(if: skipReason != nil, Comment(rawValue: skipReason ?? "")))
    func approveFillReject() throws {
        let home = try home()
        defer { home.remove() }
        let approve = try home.run("git", ["credential", "approve"], input: credential("protocol=https", "host=git.example.com", "username=alice", "password=s3cret-one"))
        #expect(approve.status == 0, "\(approve.stderr)")
        let fill = try home.run("git", ["credential", "fill"], input: credential("protocol=https", "host=git.example.com"))
        #expect(fill.status == 0, "\(fill.stderr)")
        #expect(fill.stdout.contains("username=alice\n"))
        #expect(fill.stdout.contains("password=s3cret-one\n"))

        let reject = try home.run("git", ["credential", "reject"], input: credential("protocol=https", "host=git.example.com", "username=alice", "password=s3cret-one"))
        #expect(reject.status == 0, "\(reject.stderr)")
        // No credential left, and no terminal prompt allowed: git itself fails.
        let after = try home.run("git", ["credential", "fill"], input: credential("protocol=https", "host=git.example.com"))
        #expect(after.status != 0)
        #expect(!after.stdout.contains("s3cret-one"))
    }

    @Test("an item is an internet password as git-credential-osxkeychain stores it (server, protocol, port, path, account)",
          .disabled(if: skipReason != nil, Comment(rawValue: skipReason ?? "")))
    func itemShape() throws {
        let home = try home()
        defer { home.remove() }
        let stored = try home.gitHelper("store", ["protocol=https", "host=git.example.com:8443", "path=team/repo.git", "username=bob", "password=pw-8443"])
        #expect(stored.status == 0, "\(stored.stderr)")
        let found = try home.run("keystone", ["find-internet-password", "-s", "git.example.com", "-r", "htps", "-P", "8443", "-p", "team/repo.git", "-a", "bob", "-w"])
        #expect(found.status == 0, "\(found.stderr)")
        #expect(found.stdout == "pw-8443\n")
        // Another port is another item: nothing for 9443.
        let other = try home.gitHelper("get", ["protocol=https", "host=git.example.com:9443", "path=team/repo.git"])
        #expect(other.status == 0 && other.stdout.isEmpty)
        // An unhandled protocol is not stored nor found (osxkeychain's rule).
        _ = try home.gitHelper("store", ["protocol=gopher", "host=git.example.com", "username=bob", "password=pw"])
        #expect(try home.gitHelper("get", ["protocol=gopher", "host=git.example.com"]).stdout.isEmpty)
    }

    @Test("an expired password_expiry_utc is not returned; a later one is, with the oauth_refresh_token kept out of the attributes",
          .disabled(if: skipReason != nil, Comment(rawValue: skipReason ?? "")))
    func expiryAndRefreshToken() throws {
        let home = try home()
        defer { home.remove() }
        _ = try home.gitHelper("store", ["protocol=https", "host=old.example.com", "username=u", "password=expired-pw", "password_expiry_utc=1"])
        let expired = try home.gitHelper("get", ["protocol=https", "host=old.example.com"])
        #expect(expired.status == 0 && expired.stdout.isEmpty)

        _ = try home.gitHelper("store", ["protocol=https", "host=new.example.com", "username=u", "password=fresh-pw",
                                         "password_expiry_utc=4102444800", "oauth_refresh_token=refresh-tok-77"])
        let fresh = try home.gitHelper("get", ["protocol=https", "host=new.example.com"])
        #expect(fresh.stdout == "username=u\npassword=fresh-pw\npassword_expiry_utc=4102444800\noauth_refresh_token=refresh-tok-77\n")
        let dump = try home.run("keystone", ["dump-keychain"])
        #expect(dump.status == 0, "\(dump.stderr)")
        #expect(!dump.stdout.contains("refresh-tok-77"))
    }

    @Test("erase removes only the matching item, and only when it holds git's password", .disabled(if: skipReason != nil, Comment(rawValue: skipReason ?? "")))
    func eraseOnlyMatching() throws {
        let home = try home()
        defer { home.remove() }
        _ = try home.gitHelper("store", ["protocol=https", "host=h.example.com", "username=ann", "password=ann-pw"])
        _ = try home.gitHelper("store", ["protocol=https", "host=h.example.com", "username=ben", "password=ben-pw"])
        // A password that was replaced since (git sends the one it used): the item is kept.
        _ = try home.gitHelper("erase", ["protocol=https", "host=h.example.com", "username=ann", "password=older-pw"])
        #expect(try home.gitHelper("get", ["protocol=https", "host=h.example.com", "username=ann"]).stdout.contains("password=ann-pw"))
        _ = try home.gitHelper("erase", ["protocol=https", "host=h.example.com", "username=ann", "password=ann-pw"])
        #expect(try home.gitHelper("get", ["protocol=https", "host=h.example.com", "username=ann"]).stdout.isEmpty)
        #expect(try home.gitHelper("get", ["protocol=https", "host=h.example.com", "username=ben"]).stdout.contains("password=ben-pw"))
    }

    @Test("unknown attributes, capability[] and wwwauth[] are ignored; quit=1 does nothing; store replaces in place",
          .disabled(if: skipReason != nil, Comment(rawValue: skipReason ?? "")))
    func protocolDetails() throws {
        let home = try home()
        defer { home.remove() }
        let stored = try home.gitHelper("store", ["capability[]=authtype", "protocol=https", "host=q.example.com", "username=u",
                                                  "password=first", "future_attribute=x", "wwwauth[]=Basic realm=\"x\""])
        #expect(stored.status == 0, "\(stored.stderr)")
        _ = try home.gitHelper("store", ["protocol=https", "host=q.example.com", "username=u", "password=second"])
        #expect(try home.gitHelper("get", ["protocol=https", "host=q.example.com", "wwwauth[]=Basic realm=\"x\"", "capability[]=authtype"]).stdout
                == "username=u\npassword=second\n")
        // quit=1: nothing is erased.
        _ = try home.gitHelper("erase", ["protocol=https", "host=q.example.com", "username=u", "password=second", "quit=1"])
        #expect(try home.gitHelper("get", ["protocol=https", "host=q.example.com"]).stdout.contains("password=second"))
        // A line without '=' is refused, and nothing is printed.
        let bad = try home.run("git-credential-keystone", ["get"], input: "protocol=https\nnonsense\n\n")
        #expect(bad.stdout.isEmpty)
        #expect(bad.stderr.contains("bad input"))
    }

    @Test("a locked keychain with no terminal answers at once: nothing on standard output, exit 0, the fix on standard error",
          .disabled(if: skipReason != nil, Comment(rawValue: skipReason ?? "")))
    func lockedHeadless() throws {
        let home = try home()
        defer { home.remove() }
        let keychain = try home.makeKeychain("ci.keychain-db", password: "kc-password", locked: false)
        let stored = try home.gitHelper("store", ["protocol=https", "host=l.example.com", "username=u", "password=locked-pw"], arguments: ["--keychain", keychain])
        #expect(stored.status == 0, "\(stored.stderr)")
        #expect(try home.run("keystone", ["lock-keychain", keychain]).status == 0)
        // setsid: no controlling terminal, as in CI or a service.
        let start = DispatchTime.now()
        let get = try home.run("/usr/bin/setsid", ["-w", "git-credential-keystone", "--keychain", keychain, "get"],
                               input: credential("protocol=https", "host=l.example.com"), changes: ["GIT_TERMINAL_PROMPT": nil])
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e9
        #expect(get.status == 0)
        #expect(get.stdout.isEmpty)
        #expect(get.stderr.contains("is locked and there is no terminal"))
        #expect(get.stderr.contains("keystone unlock-keychain"))
        #expect(!get.stderr.contains("locked-pw") && !get.stderr.contains("kc-password"))
        #expect(seconds < failFastLimit, "answered in \(seconds) s")
        // git itself goes on without a credential (and here, with prompts disabled, fails) rather than hanging.
        let fill = try home.run("/usr/bin/setsid", ["-w", "git", "-c", "credential.helper=keystone --keychain \(keychain)", "credential", "fill"],
                                input: credential("protocol=https", "host=l.example.com"))
        #expect(fill.status != 0)
        #expect(!fill.stdout.contains("locked-pw"))
    }

    @Test("with a terminal, a locked keychain's password is asked once, never echoed, and the credential is returned",
          .disabled(if: skipReason != nil, Comment(rawValue: skipReason ?? "")))
    func lockedWithTerminal() throws {
        let home = try home()
        defer { home.remove() }
        let keychain = try home.makeKeychain("tty.keychain-db", password: "kc-typed-5521", locked: false)
        _ = try home.gitHelper("store", ["protocol=https", "host=t.example.com", "username=u", "password=tty-pw"], arguments: ["--keychain", keychain])
        #expect(try home.run("keystone", ["lock-keychain", keychain]).status == 0)
        // A pseudo-terminal as the helper's controlling terminal; its standard input is git's request on a pipe.
        let script = """
        import os, pty, sys, select
        request = b"protocol=https\\nhost=t.example.com\\n\\n"
        pid, fd = pty.fork()
        if pid == 0:
            r, w = os.pipe()
            os.write(w, request); os.close(w); os.dup2(r, 0)
            os.execvp(sys.argv[1], sys.argv[1:])
        out = b""; sent = False
        while True:
            ready, _, _ = select.select([fd], [], [], 10)
            if not ready: break
            try: chunk = os.read(fd, 4096)
            except OSError: break
            if not chunk: break
            out += chunk
            if not sent and b"password to unlock" in out:
                os.write(fd, b"kc-typed-5521\\n"); sent = True
        _, status = os.waitpid(pid, 0)
        sys.stdout.write(out.decode(errors="replace")); sys.stdout.write("\\nSTATUS=%d\\n" % os.waitstatus_to_exitcode(status))
        """
        let run = try home.run("python3", ["-c", script, "git-credential-keystone", "--keychain", keychain, "get"], changes: ["GIT_TERMINAL_PROMPT": nil])
        #expect(run.stdout.contains("password=tty-pw"), "\(run.stdout) \(run.stderr)")
        #expect(run.stdout.components(separatedBy: "password to unlock").count == 2, "asked exactly once")
        #expect(!run.stdout.contains("kc-typed-5521"), "the keychain password is never echoed")
        #expect(run.stdout.contains("STATUS=0"))
    }

    @Test("a clone over HTTP takes its password from the helper; after reject it fails, and a wrong stored password is erased by git",
          .disabled(if: skipReason != nil, Comment(rawValue: skipReason ?? "")))
    func cloneOverHTTP() throws {
        let home = try home()
        defer { home.remove() }
        let server = try GitHTTPServer(root: home.root, home: home, user: "alice", password: "clone-pw-31")
        defer { server.stop() }
        let url = "http://127.0.0.1:\(server.port)/project.git"
        let approve = try home.run("git", ["credential", "approve"], input: credential("protocol=http", "host=127.0.0.1:\(server.port)", "username=alice", "password=clone-pw-31"))
        #expect(approve.status == 0)

        let clone = try home.run("git", ["clone", "-q", url, home.root.appendingPathComponent("clone1").path])
        #expect(clone.status == 0, "\(clone.stderr)")
        #expect(FileManager.default.fileExists(atPath: home.root.appendingPathComponent("clone1/README").path))

        _ = try home.run("git", ["credential", "reject"], input: credential("protocol=http", "host=127.0.0.1:\(server.port)", "username=alice", "password=clone-pw-31"))
        let refused = try home.run("git", ["clone", "-q", url, home.root.appendingPathComponent("clone2").path])
        #expect(refused.status != 0)

        // A wrong password: the server refuses it, and git tells the helper to erase it.
        _ = try home.gitHelper("store", ["protocol=http", "host=127.0.0.1:\(server.port)", "username=alice", "password=wrong-pw"])
        let wrong = try home.run("git", ["clone", "-q", url, home.root.appendingPathComponent("clone3").path])
        #expect(wrong.status != 0)
        #expect(try home.gitHelper("get", ["protocol=http", "host=127.0.0.1:\(server.port)"]).stdout.isEmpty)
    }

    @Test("1,000 concurrent get/store calls from 8 processes keep every acknowledged store", .disabled(if: skipReason != nil, Comment(rawValue: skipReason ?? "")))
    func concurrentStores() throws {
        let home = try home()
        defer { home.remove() }
        // The keychain exists first (the first store would create it): the workers all open the same file.
        _ = try home.gitHelper("store", ["protocol=https", "host=seed.example.com", "username=s", "password=seed"])
        // Each of 8 workers: 63 stores of its own items, each followed (but the last) by a get of an earlier one.
        let worker = """
        w=$1
        for i in $(seq 1 63); do
          if printf 'protocol=https\\nhost=c%s.example.com\\nusername=u%s\\npassword=pw-%s-%s\\n\\n' $w $i $w $i | git-credential-keystone store; then echo "ok $i"; fi
          if [ $i -lt 63 ]; then printf 'protocol=https\\nhost=c%s.example.com\\nusername=u%s\\n\\n' $w $(( (i + 1) / 2 )) | git-credential-keystone get >/dev/null; fi
        done
        """
        let results = try (0..<8).map { index in
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/bin/bash")
            process.arguments = ["-c", worker, "worker", String(index)]
            process.environment = home.environment
            let out = Pipe()
            process.standardOutput = out
            process.standardError = FileHandle.nullDevice
            try process.run()
            return (index, process, out)
        }.map { index, process, out in
            let data = out.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return (index, String(decoding: data, as: UTF8.self).split(separator: "\n").compactMap { Int($0.split(separator: " ").last ?? "") })
        }
        var acknowledged = 0
        for (worker, stores) in results {
            for i in stores {
                acknowledged += 1
                let got = try home.gitHelper("get", ["protocol=https", "host=c\(worker).example.com", "username=u\(i)"])
                #expect(got.stdout.contains("password=pw-\(worker)-\(i)\n"), "worker \(worker) item \(i)")
            }
        }
        #expect(acknowledged == 8 * 63, "every store was acknowledged (\(acknowledged))")
    }
}

/// git http-backend behind basic authentication on 127.0.0.1 (Python's http.server, an ephemeral port), serving a
/// bare repository `project.git` with one commit.
final class GitHTTPServer {
    let process = Process()
    let port: Int

    init(root: URL, home: CredentialHome, user: String, password: String) throws {
        let repositories = root.appendingPathComponent("repositories")
        let work = root.appendingPathComponent("work")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        try Data("hello\n".utf8).write(to: work.appendingPathComponent("README"))
        for arguments in [["init", "-q", work.path], ["-C", work.path, "add", "README"],
                          ["-C", work.path, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "init"],
                          ["clone", "-q", "--bare", work.path, repositories.appendingPathComponent("project.git").path]] {
            let run = try home.run("git", arguments)
            guard run.status == 0 else { throw CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: "git \(arguments): \(run.stderr)"]) }
        }
        // The password reaches the server in a file, not on its command line.
        let passwordFile = root.appendingPathComponent("server-password")
        try Data(password.utf8).write(to: passwordFile)
        let script = """
        import base64, http.server, os, subprocess, sys
        root, user = sys.argv[1], sys.argv[2]
        expected = "Basic " + base64.b64encode((user + ":" + open(sys.argv[3]).read()).encode()).decode()
        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args): pass
            def do_GET(self): self.git()
            def do_POST(self): self.git()
            def git(self):
                if self.headers.get("Authorization", "") != expected:
                    self.send_response(401); self.send_header("WWW-Authenticate", 'Basic realm="git"')
                    self.send_header("Content-Length", "0"); self.end_headers(); return
                path, _, query = self.path.partition("?")
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                env = dict(os.environ, GIT_PROJECT_ROOT=root, GIT_HTTP_EXPORT_ALL="1", PATH_INFO=path, QUERY_STRING=query,
                           REQUEST_METHOD=self.command, CONTENT_TYPE=self.headers.get("Content-Type", ""),
                           CONTENT_LENGTH=str(len(body)), REMOTE_USER=user, REMOTE_ADDR="127.0.0.1",
                           HTTP_CONTENT_ENCODING=self.headers.get("Content-Encoding", ""), GIT_PROTOCOL=self.headers.get("Git-Protocol", ""))
                out = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True).stdout
                separator = b"\\r\\n\\r\\n" if b"\\r\\n\\r\\n" in out else b"\\n\\n"
                head, _, rest = out.partition(separator)
                status, headers = 200, []
                for line in head.decode().splitlines():
                    name, _, value = line.partition(":")
                    if name.lower() == "status": status = int(value.strip().split()[0])
                    elif name: headers.append((name, value.strip()))
                self.send_response(status)
                for name, value in headers: self.send_header(name, value)
                self.send_header("Content-Length", str(len(rest))); self.end_headers(); self.wfile.write(rest)
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        print(server.server_address[1], flush=True)
        server.serve_forever()
        """
        process.executableURL = URL(fileURLWithPath: try #require(CredentialHome.search("python3", home.environment["PATH"] ?? "")))
        process.arguments = ["-c", script, repositories.path, user, passwordFile.path]
        process.environment = home.environment
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        // The first line is the port (the server listens before printing it).
        var line = Data()
        var byte: UInt8 = 0
        while read(out.fileHandleForReading.fileDescriptor, &byte, 1) == 1, byte != UInt8(ascii: "\n") { line.append(byte) }
        port = try #require(Int(String(decoding: line, as: UTF8.self)), "the test server printed its port")
    }

    /// Ends the server with SIGKILL: it inherits the test process's blocked signals (SIGTERM among them), so
    /// `terminate()` would leave it running. Foundation reaps it.
    func stop() {
        kill(process.processIdentifier, SIGKILL)
    }
}
