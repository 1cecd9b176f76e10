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
}

