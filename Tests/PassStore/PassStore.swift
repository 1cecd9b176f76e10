import Foundation

/// A throwaway gpg key and `pass` store in a temporary directory, for the importer tests (library and CLI): never
/// the user's ~/.gnupg or ~/.password-store. Entries are inserted through `pass insert -m` with the content on
/// standard input, as a user would.
public final class PassStore: Sendable {
    /// The temporary directory holding GNUPGHOME and the store.
    public let root: URL
    /// The store (`PASSWORD_STORE_DIR`).
    public let store: URL
    /// The environment gpg and pass run with (GNUPGHOME, PASSWORD_STORE_DIR, HOME in `root`).
    public let environment: [String: String]

    /// Why the fixture cannot be made here (gpg or pass missing), or nil.
    public static var unavailableReason: String? {
        for tool in ["gpg", "pass", "gpgconf"] where which(tool) == nil { return "\(tool) is not installed (apt-get install gnupg pass)" }
        return nil
    }

    /// A failed gpg or pass run.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    static func which(_ tool: String) -> String? {
        for dir in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
        where FileManager.default.isExecutableFile(atPath: "\(dir)/\(tool)") { return "\(dir)/\(tool)" }
        return nil
    }

    /// Makes a key without a passphrase and a store encrypted to it.
    public init() throws {
        // A short path: gpg-agent's socket path must stay under the kernel's limit.
        root = URL(fileURLWithPath: "/tmp/kp-\(UUID().uuidString.prefix(8))")
        let gnupgHome = root.appendingPathComponent("g")
        store = root.appendingPathComponent("store")
        try FileManager.default.createDirectory(at: gnupgHome, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        var env = ProcessInfo.processInfo.environment
        env["GNUPGHOME"] = gnupgHome.path
        env["PASSWORD_STORE_DIR"] = store.path
        env["HOME"] = root.path
        env["PASSWORD_STORE_GPG_OPTS"] = nil
        environment = env
        try run("gpg", ["--batch", "--passphrase", "", "--quick-gen-key", "Keystone Test <keystone-test@example.invalid>", "default", "default", "never"])
        try run("pass", ["init", "keystone-test@example.invalid"])
    }

    deinit {
        _ = try? run("gpgconf", ["--kill", "gpg-agent"])
        try? FileManager.default.removeItem(at: root)
    }

    /// `pass insert -m ENTRY` with `content` on standard input (never in arguments).
    public func insert(_ entry: String, _ content: String) throws {
        try run("pass", ["insert", "-m", entry], input: content)
    }

    /// Runs `tool` with the fixture's environment; its standard output.
    @discardableResult
    public func run(_ tool: String, _ arguments: [String], input: String? = nil) throws -> String {
        guard let path = Self.which(tool) else { throw Failure(description: "\(tool) is not installed") }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        process.environment = environment
        let out = Pipe(), inPipe = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        process.standardInput = inPipe
        try process.run()
        if let input { inPipe.fileHandleForWriting.write(Data(input.utf8)) }
        try inPipe.fileHandleForWriting.close()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw Failure(description: "\(tool) \(arguments.first ?? "") exited \(process.terminationStatus)") }
        return String(decoding: data, as: UTF8.self)
    }
}
