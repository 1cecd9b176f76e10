#if !canImport(Darwin)
import ArgumentParser
import Foundation
import KeychainEngine
import Keystone
import KeystoneImporters
#if !canImport(Darwin)
import KeychainSecretService
#endif

// `keystone import --from SOURCE`: secrets from other libraries' keychain layouts, other stores and export files,
// through Keystone's importers (the KeystoneImporters module). The certificate and key import of `keystone import FILE`
// (security's) is unchanged without --from.

/// The options `keystone import` takes for `--from`.
struct ImportSourceOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Import passwords from SOURCE instead of certificates and keys: keychain-swift, swift-keychain-wrapper, valet, keychain-access, secret-service[:COLLECTION], pass[:DIR], csv:FILE or json:FILE (FILE or DIR may also be given as the argument).", valueName: "SOURCE"))
    var from: String?
    @Flag(help: "With --from: print what would change (add, unchanged, skip (exists), replace) and change nothing.")
    var dryRun = false
    @Flag(help: "With --from: update existing items whose secret differs, in place (default: leave them and report them).")
    var replace = false
    @Flag(help: "With --from: import the valid entries when some are invalid (default: any invalid entry aborts before anything is written).")
    var skipInvalid = false
    @Flag(help: "With --from and a library layout: keep the legacy items after copying them (default: they are deleted once the copy reads back).")
    var keepOriginals = false
    @Option(help: ArgumentHelp("keychain-swift: the key prefix (KeychainSwift(keyPrefix:)).", valueName: "PREFIX"))
    var prefix: String?
    @Option(help: ArgumentHelp("Library layouts: the service the imported items get (required for keychain-swift).", valueName: "SERVICE"))
    var service: String?
    @Option(help: ArgumentHelp("swift-keychain-wrapper: its service name (default SwiftKeychainWrapper); keychain-access: the service of Keychain(service:) (default: empty).", valueName: "SERVICE"))
    var sourceService: String?
    @Option(help: ArgumentHelp("valet: only this Valet identifier.", valueName: "IDENTIFIER"))
    var identifier: String?
    @Option(help: ArgumentHelp("keychain-access: the server of Keychain(server:protocolType:) (an internet password layout), with --protocol.", valueName: "HOST"))
    var server: String?
    @Option(name: .customLong("protocol"), help: ArgumentHelp("keychain-access with --server: the protocol (https, http, ftp…).", valueName: "PROTOCOL"))
    var protocolName: String?
    @Option(help: ArgumentHelp("Library layouts: only items in this access group.", valueName: "GROUP"))
    var accessGroup: String?
    @Flag(name: .customLong("json-report"), help: "With --from: print the report as JSON (names only, never secrets).")
    var jsonReport = false
    @Option(help: ArgumentHelp("With --from csv/json/pass: the largest field (a password, a note) in bytes; K or M suffixes (default 1M). An entry over it is invalid.", valueName: "SIZE"))
    var maxFieldSize: String?
    @Option(help: ArgumentHelp("With --from csv: the largest record (a CSV line) in bytes; K or M suffixes (default 4M).", valueName: "SIZE"))
    var maxRecordSize: String?
    @Option(help: ArgumentHelp("With --from pass: the most one entry may decrypt to, in bytes; K or M suffixes (default 1M). gpg is stopped beyond it.", valueName: "SIZE"))
    var maxEntrySize: String?
    @Option(help: ArgumentHelp("With --from json: the largest JSON export, in bytes; K or M suffixes (default 64M).", valueName: "SIZE"))
    var maxDocumentSize: String?
    @Flag(help: "With --from pass: import entries that are symbolic links to files outside the store (default: refused as invalid; only for a store you wrote yourself).")
    var followSymlinksOutsideStore = false

    /// The limits these options give.
    func limits() throws -> ImportLimits {
        var limits = ImportLimits()
        func size(_ text: String?, _ option: String) throws -> Int? {
            guard let text else { return nil }
            var digits = Substring(text), scale = 1
            switch text.last {
            case "k", "K": scale = 1 << 10; digits = digits.dropLast()
            case "m", "M": scale = 1 << 20; digits = digits.dropLast()
            case "g", "G": scale = 1 << 30; digits = digits.dropLast()
            default: break
            }
            guard let value = Int(digits), value > 0, value <= Int.max / scale else {
                throw UsageFailure(message: "keystone: import: --\(option) takes a size in bytes, such as 1048576, 512K or 4M")
            }
            return value * scale
        }
        if let value = try size(maxFieldSize, "max-field-size") { limits.maxFieldBytes = value }
        if let value = try size(maxRecordSize, "max-record-size") { limits.maxRecordBytes = value }
        if let value = try size(maxEntrySize, "max-entry-size") { limits.maxDecryptedBytes = value }
        if let value = try size(maxDocumentSize, "max-document-size") { limits.maxDocumentBytes = value }
        return limits
    }
}

enum ImportFrom {
    static let function = "import"

    /// Runs `keystone import --from …` into the keychain `keychainArgument` (else the default keychain).
    static func run(_ options: ImportSourceOptions, file: String?, keychainArgument: String?) throws {
        guard let from = options.from else { return }
        let path = keychainArgument.map(resolveKeychain) ?? ToolConfig.defaultKeychain
        let engine = KeychainEngine(storage: try openStorage(path))
        let keychain = Keychain(store: engine)
        let (kind, argument) = split(from)
        let importOptions = ImportOptions(replace: options.replace, dryRun: options.dryRun, skipInvalid: options.skipInvalid,
                                          keepOriginals: options.keepOriginals)
        // Lines go out as the import goes (buffered), so a large export never holds its whole report in memory; the
        // JSON report needs every item, so it keeps them.
        var output = ReportOutput()
        let report: ImportReport
        do {
            let importSource = try source(kind, argument: argument ?? file, options: options, store: engine)
            if options.jsonReport {
                report = try keychain.importItems(from: importSource, options: importOptions)
            } else {
                report = try keychain.importItems(from: importSource, options: importOptions) { result in
                    output.add(line(for: result, dryRun: options.dryRun))
                }
            }
        } catch let failure as ImportFailure {
            // Stopped midway: what was handled is on standard output already; where it stopped and what was not
            // written go in the error.
            output.flush()
            let reason = withUnlockHint(failure.summary, status: failure.status, keychain: path)
            throw ToolFailure(function: function, status: failure.status,
                              reason: ([reason] + failure.notWritten.map { "not written: \($0)" }).joined(separator: "\n"))
        } catch let error as KeychainError {
            output.flush()
            throw ToolFailure(function: function, status: error.status, reason: withUnlockHint(error.reason, status: error.status, keychain: path))
        } catch let error as EngineError {
            output.flush()
            throw ToolFailure(function: function, status: error.status, reason: withUnlockHint(error.reason, status: error.status, keychain: path))
        }
        if options.jsonReport {
            printJSON([
                "keychain": path, "dryRun": report.dryRun,
                "items": report.results.map { result -> [String: Any] in
                    ["action": result.action.rawValue, "class": result.item.itemClass.rawValue, "service": result.item.serviceOrServer,
                     "account": result.item.account, "origin": result.origin, "movedOriginal": result.movedOriginal, "notImported": result.notes]
                },
                "problems": report.problems.map { ["kind": $0.kind == .invalid ? "invalid" : "unsupported", "origin": $0.origin, "reason": $0.reason] },
            ] as [String: Any])
            return
        }
        // Every name in a report line is escaped by the library (ImportTarget's description, origins, notes, reasons).
        for problem in report.problems {
            output.add("skip (\(problem.kind == .invalid ? "invalid" : "unsupported")) \(problem.origin): \(problem.reason)")
        }
        output.add(report.summary)
        output.flush()
    }

    /// Report lines written to standard output in blocks of about 64 KiB.
    struct ReportOutput {
        var buffer = ""

        mutating func add(_ line: String) {
            buffer += line
            buffer += "\n"
            if buffer.utf8.count >= 64 << 10 { flush() }
        }

        mutating func flush() {
            guard !buffer.isEmpty else { return }
            writeOut(buffer)
            buffer = ""
        }
    }

    /// One report line: `add genp service="…" account="…" (from …)`, with the move and what was not imported.
    static func line(for result: ImportResult, dryRun: Bool) -> String {
        var line = "\(word(result.action)) \(result.item) (from \(result.origin))"
        if result.movedOriginal { line += dryRun ? " [would move]" : " [moved]" }
        if !result.notes.isEmpty { line += " [not imported: \(result.notes.joined(separator: ", "))]" }
        return line
    }

    /// The word a report line starts with: `add`, `unchanged`, `skip (exists)`, `replace` (`would …` in a dry run reads the same).
    static func word(_ action: ImportAction) -> String {
        switch action {
        case .add: "add"
        case .unchanged: "unchanged"
        case .conflict: "skip (exists)"
        case .replace: "replace"
        }
    }

    /// `csv:FILE` → ("csv", "FILE"); `pass` → ("pass", nil).
    static func split(_ from: String) -> (String, String?) {
        guard let colon = from.firstIndex(of: ":") else { return (from, nil) }
        let rest = String(from[from.index(after: colon)...])
        return (String(from[..<colon]), rest.isEmpty ? nil : rest)
    }

    static func source(_ kind: String, argument: String?, options: ImportSourceOptions, store: KeychainEngine) throws -> any ImportSource {
        switch kind {
        case "csv", "json":
            guard let argument else { throw UsageFailure(message: "keystone: import: --from \(kind) needs a file: --from \(kind):FILE") }
            return try ExportFileImportSource(contentsOf: URL(fileURLWithPath: argument), format: kind == "csv" ? .csv : .json,
                                              limits: try options.limits())
        case "pass":
            var environment = ProcessInfo.processInfo.environment
            if let argument { environment["PASSWORD_STORE_DIR"] = argument }
            return PassImportSource(environment: environment, limits: try options.limits(),
                                    followsSymlinksOutsideStore: options.followSymlinksOutsideStore)
        case "keychain-swift":
            guard let service = options.service, !service.isEmpty else {
                throw UsageFailure(message: "keystone: import: keychain-swift items have no service: give the one they should get with --service SERVICE")
            }
            return KeychainSwiftImportSource(store: store, keyPrefix: options.prefix ?? "", targetService: service, accessGroup: options.accessGroup)
        case "swift-keychain-wrapper":
            return SwiftKeychainWrapperImportSource(store: store, serviceName: options.sourceService ?? "SwiftKeychainWrapper",
                                                    targetService: options.service, accessGroup: options.accessGroup)
        case "valet":
            return ValetImportSource(store: store, identifier: options.identifier, targetService: options.service)
        case "keychain-access":
            if let server = options.server {
                guard let name = options.protocolName, let ptcl = InternetProtocol(scheme: name) ?? InternetProtocol(rawValue: name) else {
                    throw UsageFailure(message: "keystone: import: keychain-access with --server needs --protocol (https, http, ftp, ssh…)")
                }
                return KeychainAccessImportSource(store: store, layout: .server(server, protocol: ptcl), accessGroup: options.accessGroup)
            }
            return KeychainAccessImportSource(store: store, layout: .service(options.sourceService ?? ""), targetService: options.service,
                                              accessGroup: options.accessGroup)
        case "secret-service":
            #if !canImport(Darwin)
            let spec = KeychainSpec.prefix + (argument ?? "")
            let storage = try openSecretService(spec, function: function)
            let items = try call(function) { try storage.foreignItems() }
            return SecretServiceImportSource(entries: items.map { .init(label: $0.label, attributes: $0.attributes, secret: $0.secret) },
                                             collection: argument ?? "default")
            #else
            throw ToolFailure(function: function, status: Status.notAvailable, reason: "this keystone was built without the Secret Service (the KeychainSecretService backend)")
            #endif
        default:
            throw UsageFailure(message: "keystone: import: unknown source '\(kind)': use keychain-swift, swift-keychain-wrapper, valet, keychain-access, secret-service[:COLLECTION], pass[:DIR], csv:FILE or json:FILE")
        }
    }
}
#endif
