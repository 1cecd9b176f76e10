import Foundation
import PassStore
import Testing

@Suite("keystone CLI: import --from (CSV, JSON, pass, library layouts): dry runs, no overwrite without --replace")
struct ImportFromCLITests {
    static let header = "class,service,account,server,protocol,port,path,label,comment,password\n"

    func write(_ text: String, in box: Sandbox, name: String = "export.csv") throws -> String {
        try FileManager.default.createDirectory(at: box.root, withIntermediateDirectories: true)
        let url = box.root.appendingPathComponent(name)
        try text.write(to: url, atomically: true, encoding: .utf8)
        return url.path
    }

    @Test("--dry-run prints the plan (add, unchanged, skip (exists)) and changes nothing; no secret is printed")
    func dryRun() throws {
        let box = Sandbox()
        try box.run("add-generic-password", "-s", "svc", "-a", "same", "-w", "s-one")
        try box.run("add-generic-password", "-s", "svc", "-a", "other", "-w", "old-pw")
        let file = try write(Self.header + "genp,svc,same,,,,,,,s-one\ngenp,svc,other,,,,,,,new-pw\ngenp,svc,fresh,,,,,,,fresh-pw\n", in: box)
        let dry = try box.run("import", "--from", "csv:" + file, "--dry-run")
        #expect(dry.status == 0, "\(dry.stderr)")
        let lines = dry.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 4)
        #expect(lines[0].hasPrefix("unchanged genp service=\"svc\" account=\"same\""))
        #expect(lines[1].hasPrefix("skip (exists) genp service=\"svc\" account=\"other\""))
        #expect(lines[2].hasPrefix("add genp service=\"svc\" account=\"fresh\""))
        #expect(lines[3] == "1 added, 1 unchanged, 1 conflict, 0 replaced, 0 not imported (dry run: nothing was changed)")
        for secret in ["s-one", "old-pw", "new-pw", "fresh-pw"] { #expect(!dry.stdout.contains(secret) && !dry.stderr.contains(secret)) }
        #expect(try box.run("find-generic-password", "-s", "svc", "-a", "fresh").status == 44)
        #expect(try box.run("find-generic-password", "-s", "svc", "-a", "other", "-w").stdout == "old-pw\n")
    }

    @Test("without --replace an existing item is never overwritten; with --replace it is updated in place")
    func replace() throws {
        let box = Sandbox()
        try box.run("add-generic-password", "-s", "svc", "-a", "other", "-w", "old-pw")
        let file = try write(Self.header + "genp,svc,other,,,,,,,new-pw\ninet,,u,host.example,https,8443,,,,web-pw\n", in: box)
        let first = try box.run("import", "--from", "csv", file)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout.contains("skip (exists) genp service=\"svc\" account=\"other\""))
        #expect(first.stdout.contains("add inet server=\"host.example\" account=\"u\" protocol=https port=8443"))
        #expect(try box.run("find-generic-password", "-s", "svc", "-a", "other", "-w").stdout == "old-pw\n")
        #expect(try box.run("find-internet-password", "-s", "host.example", "-a", "u", "-w").stdout == "web-pw\n")
        let second = try box.run("import", "--from", "csv:" + file, "--replace")
        #expect(second.status == 0, "\(second.stderr)")
        #expect(second.stdout.contains("replace genp service=\"svc\" account=\"other\""))
        #expect(second.stdout.contains("unchanged inet server=\"host.example\""))
        #expect(try box.run("find-generic-password", "-s", "svc", "-a", "other", "-w").stdout == "new-pw\n")
    }

    @Test("a malformed file or an invalid entry fails with the file and line, writes nothing; certificate import still needs FILE")
    func failures() throws {
        let box = Sandbox()
        let bad = try write("name,url,username,password\nx,\"https://a.example,u,p\n", in: box, name: "bad.csv")
        let malformed = try box.run("import", "--from", "csv:" + bad)
        #expect(malformed.status != 0)
        #expect(malformed.stderr.contains("bad.csv line 2: a quoted field is not closed"))
        let invalid = try write(Self.header + "genp,svc,a,,,,,,,pw-a\ngenp,,b,,,,,,,pw-b\n", in: box, name: "invalid.csv")
        let aborted = try box.run("import", "--from", "csv:" + invalid)
        #expect(aborted.status == 206)  // errSecParam's low byte
        #expect(aborted.stderr.contains("invalid.csv line 3"))
        #expect(!aborted.stderr.contains("pw-a") && !aborted.stderr.contains("pw-b"))
        #expect(try box.run("find-generic-password", "-s", "svc", "-a", "a").status == 44)
        let skipped = try box.run("import", "--from", "csv:" + invalid, "--skip-invalid")
        #expect(skipped.status == 0)
        #expect(skipped.stdout.contains("skip (invalid) invalid.csv line 3"))
        #expect(try box.run("import").status == 2)
        #expect(try box.run("import", "--from", "nosuch").status == 2)
    }

    @Test("import --from pass: a real gpg and pass store in a temporary GNUPGHOME", .enabled(if: PassStore.unavailableReason == nil, "\(PassStore.unavailableReason ?? "")"))
    func pass() throws {
        let box = Sandbox()
        let pass = try PassStore()
        try pass.insert("web/example.org", "ex-pass\nusername: bob\n")
        var environment = box.environment
        environment.merge(pass.environment.filter { ["GNUPGHOME", "PASSWORD_STORE_DIR"].contains($0.key) }) { $1 }
        let binary = try #require(Sandbox.binary)
        let run = try Run.launch(binary, ["import", "--from", "pass:" + pass.store.path], environment: environment)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.hasPrefix("add genp service=\"web\" account=\"bob\" (from pass entry web/example.org)"))
        #expect(!run.stdout.contains("ex-pass") && !run.stderr.contains("ex-pass"))
        let find = try Run.launch(binary, ["find-generic-password", "-s", "web", "-a", "bob", "-w"], environment: environment)
        #expect(find.stdout == "ex-pass\n")
        let again = try Run.launch(binary, ["import", "--from", "pass", pass.store.path], environment: environment)
        #expect(again.stdout.hasPrefix("unchanged genp service=\"web\" account=\"bob\""))
    }

    @Test("names with terminal escapes and newlines print escaped: one line per entry, no raw control character")
    func escapedOutput() throws {
        let box = Sandbox()
        let file = try write("name,url,username,password\n"
                             + "\"evil\u{1B}[2J\",,\"bob\n9 added, 0 unchanged, 0 conflicts, 0 replaced, 0 not imported\",pw-1\n"
                             + "x\u{1B}]0;t\u{07},,y,\n", in: box, name: "evil.csv")
        let run = try box.run("import", "--from", "csv:" + file, "--dry-run")
        #expect(run.status == 0, "\(run.stderr)")
        #expect(!run.stdout.contains("\u{1B}") && !run.stdout.contains("\u{07}"))
        let lines = run.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 3)
        #expect(lines[0].hasPrefix(#"add genp service="evil\033[2J" account="bob\0129 added"#))
        #expect(lines[1].hasPrefix(#"skip (unsupported) evil.csv line 4: "#))
        #expect(lines[2].hasPrefix("1 added, 0 unchanged"))
        // The JSON report keeps the exact names, with JSON's own escapes: no raw control character either.
        let json = try box.run("import", "--from", "csv:" + file, "--dry-run", "--json-report")
        #expect(json.status == 0 && !json.stdout.contains("\u{1B}") && !json.stdout.contains("\u{07}"))
        #expect(json.stdout.contains(#"evil\u001b[2J"#) || json.stdout.contains(#"evil\u001B[2J"#))
    }

    @Test("import --from pass: a non-UTF-8 file name is reported escaped; --skip-invalid imports the others",
          .enabled(if: PassStore.unavailableReason == nil, "\(PassStore.unavailableReason ?? "")"))
    func passNonUTF8Name() throws {
        let box = Sandbox()
        let pass = try PassStore()
        try pass.insert("good", "g-pass\n")
        try pass.insert("cafe", "c-pass\n")
        let to = Array(pass.store.path.utf8) + Array("/caf".utf8) + [0xE9] + Array(".gpg".utf8)
        #expect(rename(pass.store.appendingPathComponent("cafe.gpg").path, to.map { CChar(bitPattern: $0) } + [0]) == 0)
        var environment = box.environment
        environment.merge(pass.environment.filter { ["GNUPGHOME", "PASSWORD_STORE_DIR"].contains($0.key) }) { $1 }
        let binary = try #require(Sandbox.binary)
        let refused = try Run.launch(binary, ["import", "--from", "pass"], environment: environment)
        #expect(refused.status != 0)
        #expect(refused.stderr.contains(#"pass entry caf\351"#) && refused.stderr.contains("not UTF-8"))
        let run = try Run.launch(binary, ["import", "--from", "pass", "--skip-invalid"], environment: environment)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.contains(#"add genp service="good" account="good" (from pass entry good)"#))
        #expect(run.stdout.contains(#"skip (invalid) pass entry caf\351: "#))
        #expect(!run.stdout.contains("pass-") && !run.stderr.contains("-pass"))
    }

    @Test("--max-field-size: a field over it fails with errSecDataTooLarge naming the line, never the value; a larger limit imports it")
    func fieldSizeOption() throws {
        let box = Sandbox()
        let file = try write(Self.header + "genp,svc,big,,,,,,,\(String(repeating: "v", count: 2048))\n", in: box, name: "big.csv")
        let refused = try box.run("import", "--from", "csv:" + file, "--max-field-size", "1K")
        #expect(refused.status == 42)  // errSecDataTooLarge's low byte
        #expect(refused.stderr.contains("big.csv line 2: the \"password\" field is over the 1 KiB limit"))
        #expect(!refused.stderr.contains("vvvv") && !refused.stdout.contains("vvvv"))
        #expect(try box.run("import", "--from", "csv:" + file, "--max-field-size", "nonsense").status == 2)
        let imported = try box.run("import", "--from", "csv:" + file, "--max-field-size", "4K")
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(try box.run("find-generic-password", "-s", "svc", "-a", "big", "-w").stdout == String(repeating: "v", count: 2048) + "\n")
    }

    @Test("import --from pass: a link outside the store is refused; --follow-symlinks-outside-store imports it",
          .enabled(if: PassStore.unavailableReason == nil, "\(PassStore.unavailableReason ?? "")"))
    func passLinkOutside() throws {
        let box = Sandbox()
        let pass = try PassStore()
        try pass.insert("good", "g-pass\n")
        try pass.insert("moved", "o-pass\n")
        let outside = pass.root.appendingPathComponent("elsewhere.gpg")
        try FileManager.default.moveItem(at: pass.store.appendingPathComponent("moved.gpg"), to: outside)
        try FileManager.default.createSymbolicLink(atPath: pass.store.appendingPathComponent("bank.gpg").path, withDestinationPath: outside.path)
        var environment = box.environment
        environment.merge(pass.environment.filter { ["GNUPGHOME", "PASSWORD_STORE_DIR"].contains($0.key) }) { $1 }
        let binary = try #require(Sandbox.binary)
        let refused = try Run.launch(binary, ["import", "--from", "pass"], environment: environment)
        #expect(refused.status == 206)  // errSecParam's low byte: an invalid entry
        #expect(refused.stderr.contains("pass entry bank: a symbolic link to ") && refused.stderr.contains("outside the store"))
        let followed = try Run.launch(binary, ["import", "--from", "pass", "--follow-symlinks-outside-store"], environment: environment)
        #expect(followed.status == 0, "\(followed.stderr)")
        #expect(followed.stdout.contains(#"add genp service="bank" account="bank" (from pass entry bank)"#))
    }

    /// Why a tmpfs cannot be mounted here (not root, no permission in this container), or nil.
    static let tmpfsUnavailable: String? = {
        guard getuid() == 0 else { return "mounting a tmpfs needs root" }
        let probe = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-tmpfs-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: probe, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: probe) }
        guard let mount = try? Run.launch("/bin/mount", ["-t", "tmpfs", "-o", "size=64k", "tmpfs", probe.path]), mount.status == 0 else {
            return "cannot mount a tmpfs here"
        }
        _ = try? Run.launch("/bin/umount", [probe.path])
        return nil
    }()

    @Test("a full disk (a real 384 KiB tmpfs) midway: the written entries and the others are listed; a rerun completes the import",
          .enabled(if: tmpfsUnavailable == nil, "\(tmpfsUnavailable ?? "")"))
    func fullDisk() throws {
        let box = Sandbox()
        let data = box.root.appendingPathComponent("data")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        let mount = try Run.launch("/bin/mount", ["-t", "tmpfs", "-o", "size=384k", "tmpfs", data.path])
        try #require(mount.status == 0, "\(mount.stderr)")
        defer { _ = try? Run.launch("/bin/umount", ["-l", data.path]) }
        var text = Self.header
        let count = 40
        for index in 1...count { text += "genp,svc,user\(index),,,,,,,\(String(repeating: "s", count: 16_384))\(index)\n" }
        let file = try write(text, in: box, name: "many.csv")
        let first = try box.run("import", "--from", "csv:" + file)
        #expect(first.status != 0)
        let written = first.stdout.split(separator: "\n").filter { $0.hasPrefix("add genp") }
        #expect(written.count > 0 && written.count < count, "\(first.stdout)\n\(first.stderr)")
        #expect(first.stderr.contains("not written"))
        let notWritten = first.stderr.split(separator: "\n").filter { $0.hasPrefix("not written: genp service=\"svc\"") }
        #expect(written.count + notWritten.count == count, "\(first.stderr)")
        #expect(first.stderr.contains("run the same import again"))
        #expect(!first.stdout.contains("ssssssss") && !first.stderr.contains("ssssssss"))
        // Every entry listed as written is there.
        #expect(try box.run("find-generic-password", "-s", "svc", "-a", "user\(written.count)").status == 0)
        #expect(try box.run("find-generic-password", "-s", "svc", "-a", "user\(written.count + 1)").status == 44)
        // More room, the same import: the written ones are unchanged, the rest added.
        #expect(try Run.launch("/bin/mount", ["-o", "remount,size=16m", data.path]).status == 0)
        let rerun = try box.run("import", "--from", "csv:" + file)
        #expect(rerun.status == 0, "\(rerun.stderr)")
        #expect(rerun.stdout.contains("\(count - written.count) added, \(written.count) unchanged"))
    }
}
