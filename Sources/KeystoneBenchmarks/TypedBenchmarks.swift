import Foundation

/// The typed API and SecItem calls: filled in when Keystone and KeychainServices land.
func runTypedBenchmarks(_ report: inout Report, n: Int, payload: Data, baseline: Double) {}
