import Foundation

/// The keychain file against raw SQLite: filled in when KeychainFile lands.
func runFileBenchmarks(_ report: inout Report, scale: Int) {}
