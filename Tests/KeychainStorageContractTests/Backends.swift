import Foundation
import KeychainEngine

/// A storage under test, made fresh for each test.
struct Backend: Sendable, CustomTestStringConvertible {
    let name: String
    let make: @Sendable () throws -> any KeychainStorage
    var testDescription: String { name }

    /// Every storage Keystone ships. Each runs the whole contract suite.
    static let all: [Backend] = [
        Backend(name: "memory") { MemoryStorage() },
    ]
}

import Testing
