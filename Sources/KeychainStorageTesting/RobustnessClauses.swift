import Foundation
import KeychainEngine

extension StorageContract {
    /// Row ids, isolation of keychains, concurrent writers, damaged rows.
    static let robustnessClauses: [Clause] = []
}
