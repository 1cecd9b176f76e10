// Linux-only: the real openssl binary, for the interoperability tests of SecKey and SecCertificate.
#if !canImport(Darwin)
import Foundation
import Testing

/// The openssl binary the tests run (CI installs it: `.ci/run`).
enum OpenSSL {
    static let path = "/usr/bin/openssl"
    static let isAvailable = FileManager.default.isExecutableFile(atPath: path)
    static let missing: Comment = "openssl is not installed at /usr/bin/openssl (Debian: apt-get install openssl)"

    struct Failed: Error, CustomStringConvertible {
        let description: String
    }

    /// Runs openssl in `directory`: its exit status, standard output and standard error.
    static func execute(_ arguments: [String], in directory: URL) throws -> (status: Int32, output: Data, errors: Data) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        process.currentDirectoryURL = directory
        // Standard error goes to a file, so neither stream can fill a pipe and stall openssl.
        let errorFile = directory.appendingPathComponent(".openssl-stderr-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: errorFile.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: errorFile) }
        let output = Pipe()
        process.standardOutput = output
        process.standardError = try FileHandle(forWritingTo: errorFile)
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let errors = (try? Data(contentsOf: errorFile)) ?? Data()
        return (process.terminationStatus, data, errors)
    }

    /// Runs openssl in `directory`; its standard output.
    ///
    /// - Throws: ``Failed`` with what openssl printed on standard error when it exits non-zero.
    @discardableResult
    static func run(_ arguments: [String], in directory: URL) throws -> Data {
        let (status, output, errors) = try execute(arguments, in: directory)
        guard status == 0 else {
            throw Failed(description: "openssl \(arguments.joined(separator: " ")): \(String(decoding: errors, as: UTF8.self))")
        }
        return output
    }

    static func text(_ arguments: [String], in directory: URL) throws -> String {
        String(decoding: try run(arguments, in: directory), as: UTF8.self)
    }
}

/// A temporary directory to run openssl in, with the files it reads and writes.
struct OpenSSLWorkspace {
    let directory: URL

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-openssl-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    func write(_ name: String, _ data: Data) throws { try data.write(to: directory.appendingPathComponent(name)) }
    func write(_ name: String, _ text: String) throws { try write(name, Data(text.utf8)) }
    func read(_ name: String) throws -> Data { try Data(contentsOf: directory.appendingPathComponent(name)) }

    /// Runs openssl with `arguments` in the directory; returns the exit status and what it printed (both streams).
    @discardableResult
    func run(_ arguments: [String]) throws -> (status: Int32, output: String) {
        let (status, output, errors) = try OpenSSL.execute(arguments, in: directory)
        return (status, String(decoding: output + errors, as: UTF8.self))
    }

    func remove() { try? FileManager.default.removeItem(at: directory) }
}
#endif
