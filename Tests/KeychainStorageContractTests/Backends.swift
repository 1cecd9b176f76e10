import Foundation
import KeychainEngine
import KeychainFile

/// A storage under test, made fresh for each test.
struct Backend: Sendable, CustomTestStringConvertible {
    let name: String
    let make: @Sendable () throws -> any KeychainStorage
    var testDescription: String { name }

    /// Every storage Keystone ships. Each runs the whole contract suite.
    static let all: [Backend] = [
        Backend(name: "memory") { MemoryStorage() },
        Backend(name: "keychain file") {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-contract-\(UUID().uuidString)")
            return try KeychainFile.create(at: directory.appendingPathComponent("test.keychain-db").path, password: "pw")
        },
    ]
}

import Testing
