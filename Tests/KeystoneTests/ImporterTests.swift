import Foundation
import Keystone
import KeystoneImporters
import KeychainEngine
import KeystoneTesting
import Testing

/// A CSV export as a source.
func csv(_ text: String, name: String = "export.csv") -> ExportFileImportSource {
    ExportFileImportSource(contents: Data(text.utf8), fileName: name, format: .csv)
}

@Suite("Importers: the plan (add, unchanged, conflict, replace), dry runs, invalid entries")
struct ImporterModelTests {
    let chrome = "name,url,username,password,note\r\n"
        + "github.com,https://github.com/login,alice,gh-secret,\r\n"
        + "\"Bank, \"\"main\"\"\",https://bank.example:8443/,bob,\"multi\nline\",\"note with, comma\"\r\n"
        + "intranet,,carol,intra-pw,\r\n"

    @Test("a Chrome export: URLs become internet passwords (server, protocol, port), others generic; quotes, commas and newlines parse")
    func chromeMapping() throws {
        let batch = try csv(chrome).read()
        #expect(batch.problems.isEmpty)
        #expect(batch.candidates.count == 3)
        #expect(batch.candidates[0].item == .internet(try InternetPassword(server: "github.com", account: "alice", protocol: .https)))
        #expect(batch.candidates[1].item == .internet(try InternetPassword(server: "bank.example", account: "bob", protocol: .https, port: 8443)))
        #expect(batch.candidates[1].secret == Data("multi\nline".utf8))
        #expect(batch.candidates[1].label == "Bank, \"main\"")
        #expect(batch.candidates[1].notes == ["a note"])
        #expect(batch.candidates[1].origin == "export.csv line 3")
        #expect(batch.candidates[2].item == .generic(try GenericPassword(service: "intranet", account: "carol")))
    }

    @Test("recognised CSV headers", arguments: [
        ("\u{FEFF}url,username,password,httpRealm,formActionOrigin,guid,timeCreated,timeLastUsed,timePasswordChanged\n\"https://ftp.example\",\"u\",\"p\",\"Realm\",,\"{1}\",\"1\",\"1\",\"1\"\n", "inet server=\"ftp.example\" account=\"u\" protocol=https authenticationType=httpBasic securityDomain=\"Realm\""),
        ("folder,favorite,type,name,notes,fields,reprompt,login_uri,login_username,login_password,login_totp\n,,login,Mail,,,0,\"imaps://mail.example:993,https://x\",me,pw,otpseed\n", "inet server=\"mail.example\" account=\"me\" protocol=imaps port=993"),
        ("class,service,account,server,protocol,port,path,label,comment,password\ngenp,com.example.api,alice,,,,,API,,tok\n", "genp service=\"com.example.api\" account=\"alice\""),
        ("class,service,account,server,protocol,port,path,label,comment,password\ninet,,bob,host.example,ssh,2222,/x,,,pw\n", "inet server=\"host.example\" account=\"bob\" protocol=ssh port=2222 path=\"/x\""),
    ])
    func headers(text: String, expected: String) throws {
        let batch = try csv(text).read()
        #expect(batch.problems.isEmpty)
        #expect(batch.candidates.map(\.item.description) == [expected])
    }

    @Test("malformed CSV is a typed error naming the file and line", arguments: [
        ("name,url,username,password\na,b,\"c,d\n", "line 2: a quoted field is not closed"),
        ("name,url,username,password\na,b\"x\",c,d\n", "line 2: a quote inside an unquoted field"),
        ("site,login,secret\na,b,c\n", "line 1: unknown header"),
    ])
    func malformedCSV(text: String, expected: String) throws {
        let error = try #require(throws: KeychainError.self) { try csv(text, name: "bad.csv").read() }
        #expect(error == .decodingFailed)
        #expect(error.reason.contains("bad.csv \(expected)"))
    }

    @Test("an invalid entry aborts before anything is written; skipInvalid imports the others and reports it")
    func invalidAborts() throws {
        let store = InMemoryKeychain()
        let keychain = Keychain(store: store)
        let text = "class,service,account,server,protocol,port,path,label,comment,password\n"
            + "genp,svc,a,,,,,,,sekret1\n" + "genp,,b,,,,,,,sekret2\n" + "inet,,c,h.example,https,99999,,,,sekret3\n"
        let error = try #require(throws: KeychainError.self) { try keychain.importItems(from: csv(text, name: "k.csv")) }
        #expect(error == .invalidItem)
        #expect(error.reason.contains("2 invalid entries") && error.reason.contains("k.csv line 3"))
        #expect(!error.reason.contains("sekret"))
        #expect(try keychain.exists(GenericPassword(service: "svc", account: "a")) == false)
        let report = try keychain.importItems(from: csv(text, name: "k.csv"), options: ImportOptions(skipInvalid: true))
        #expect(report.results.map(\.action) == [.add])
        #expect(report.problems.map(\.origin) == ["k.csv line 3", "k.csv line 4"])
        #expect(try keychain.string(for: GenericPassword(service: "svc", account: "a")) == "sekret1")
    }

    @Test("a dry run plans add / unchanged / conflict and changes nothing; a real run never overwrites; replace updates in place")
    func planAndReplace() throws {
        let store = InMemoryKeychain()
        let keychain = Keychain(store: store)
        let same = try GenericPassword(service: "svc", account: "same")
        let other = try GenericPassword(service: "svc", account: "other")
        try keychain.save("s1", for: same)
        try keychain.save("old", for: other)
        let created = try #require(try keychain.attributes(for: other)?.creationDate)
        let text = "class,service,account,server,protocol,port,path,label,comment,password\n"
            + "genp,svc,same,,,,,,,s1\n" + "genp,svc,other,,,,,,,new\n" + "genp,svc,fresh,,,,,,,f\n"

        let dry = try keychain.importItems(from: csv(text), options: ImportOptions(dryRun: true))
        #expect(dry.results.map(\.action) == [.unchanged, .conflict, .add])
        #expect(dry.dryRun && dry.summary.contains("dry run"))
        #expect(try keychain.exists(GenericPassword(service: "svc", account: "fresh")) == false)
        #expect(try keychain.string(for: other) == "old")
        #expect(!dry.description.contains("s1") && !dry.description.contains("old"))

        let run = try keychain.importItems(from: csv(text))
        #expect(run.results.map(\.action) == [.unchanged, .conflict, .add])
        #expect(try keychain.string(for: other) == "old")
        #expect(try keychain.string(for: GenericPassword(service: "svc", account: "fresh")) == "f")

        store.clearCalls()
        let replaced = try keychain.importItems(from: csv(text), options: ImportOptions(replace: true))
        #expect(replaced.results.map(\.action) == [.unchanged, .replace, .unchanged])
        #expect(try keychain.string(for: other) == "new")
        #expect(try keychain.attributes(for: other)?.creationDate == created)
        #expect(store.calls(.delete).isEmpty)
    }

    @Test("a locked keychain is never taken as absent: the import fails with -25308 and writes nothing")
    func lockedKeychain() throws {
        let store = InMemoryKeychain()
        let keychain = Keychain(store: store, options: ItemOptions(accessibility: .whenUnlocked))
        try keychain.save("old", for: GenericPassword(service: "svc", account: "a"))
        store.lockState = .locked
        let text = "class,service,account,server,protocol,port,path,label,comment,password\ngenp,svc,a,,,,,,,new\n"
        let error = try #require(throws: KeychainError.self) { try keychain.importItems(from: csv(text), options: ImportOptions(replace: true)) }
        #expect(error == .interactionNotAllowed)
        store.lockState = .unlocked
        #expect(try keychain.string(for: GenericPassword(service: "svc", account: "a")) == "old")
    }

    @Test("two entries for the same item in one source are invalid, naming the first")
    func duplicateInSource() throws {
        let text = "name,url,username,password\na,https://x.example,u,p1\nb,https://x.example/other,u,p2\n"
        let error = try #require(throws: KeychainError.self) { try Keychain(store: InMemoryKeychain()).importItems(from: csv(text)) }
        #expect(error.reason.contains("export.csv line 3") && error.reason.contains("the same item as export.csv line 2"))
    }

    @Test("Bitwarden's unencrypted JSON: logins imported, other types reported unsupported; an encrypted export is refused")
    func bitwardenJSON() throws {
        let json = """
        {"encrypted": false, "folders": [], "items": [
          {"id": "1", "type": 1, "name": "GitHub", "notes": "recovery", "login": {"username": "alice", "password": "pw", "totp": null,
           "uris": [{"match": null, "uri": "https://github.com"}]}},
          {"id": "2", "type": 2, "name": "A note", "secureNote": {"type": 0}}
        ]}
        """
        let batch = try ExportFileImportSource(contents: Data(json.utf8), fileName: "bw.json", format: .json).read()
        #expect(batch.candidates.map(\.item) == [.internet(try InternetPassword(server: "github.com", account: "alice", protocol: .https))])
        #expect(batch.candidates[0].notes == ["a note"])
        #expect(batch.problems.map(\.kind) == [.unsupported])
        let encrypted = #"{"encrypted": true, "encKeyValidation_DO_NOT_EDIT": "x", "items": []}"#
        let error = try #require(throws: KeychainError.self) {
            try ExportFileImportSource(contents: Data(encrypted.utf8), fileName: "bw.json", format: .json).read()
        }
        #expect(error == .decodingFailed && error.reason.contains("encrypted Bitwarden export"))
        #expect(throws: KeychainError.decodingFailed) { try ExportFileImportSource(contents: Data("{".utf8), fileName: "x.json", format: .json).read() }
    }

    @Test("Keystone's JSON keeps accessibility, synchronizable, label, comment and binary secrets")
    func keystoneJSON() throws {
        let json = """
        {"format": "keystone-export", "version": 1, "items": [
          {"class": "genp", "service": "svc", "account": "bin", "passwordBase64": "AAEC", "accessibility": "afterFirstUnlockThisDeviceOnly",
           "label": "L", "comment": "C"},
          {"class": "inet", "server": "h.example", "account": "u", "protocol": "https", "port": 8443, "password": "p", "synchronizable": true}
        ]}
        """
        let store = InMemoryKeychain()
        let keychain = Keychain(store: store)
        let report = try keychain.importItems(from: ExportFileImportSource(contents: Data(json.utf8), fileName: "k.json", format: .json))
        #expect(report.results.map(\.action) == [.add, .add])
        let item = try GenericPassword(service: "svc", account: "bin")
        #expect(try keychain.data(for: item) == Data([0, 1, 2]))
        let attributes = try #require(try keychain.attributes(for: item))
        #expect(attributes.accessibility == .afterFirstUnlockThisDeviceOnly && attributes.label == "L" && attributes.comment == "C")
        var synced = keychain
        synced.options.synchronizable = true
        #expect(try synced.string(for: InternetPassword(server: "h.example", account: "u", protocol: .https, port: 8443)) == "p")
    }

    @Test("Secret Service entries: secret-tool's service/account and Python keyring's service/username become generic passwords")
    func secretServiceMapping() throws {
        let source = SecretServiceImportSource(entries: [
            .init(label: "L1", attributes: ["service": "s1", "account": "a1", "xdg:schema": "org.freedesktop.Secret.Generic"], secret: Data("x".utf8)),
            .init(label: "Password for 'u2' on 's2'", attributes: ["service": "s2", "username": "u2", "application": "Python keyring library"], secret: Data("y".utf8)),
            .init(label: "wifi", attributes: ["setting-name": "802-11-wireless-security"], secret: Data("z".utf8)),
        ])
        let batch = try source.read()
        #expect(batch.candidates.map(\.item) == [.generic(try GenericPassword(service: "s1", account: "a1")), .generic(try GenericPassword(service: "s2", account: "u2"))])
        #expect(batch.candidates[0].label == "L1")
        #expect(batch.problems.map(\.kind) == [.unsupported])
    }
}
