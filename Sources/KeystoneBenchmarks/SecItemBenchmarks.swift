import Foundation

/// SecItem calls: filled in when KeychainServices lands.
func runSecItemBenchmarks(_ report: inout Report, n: Int, payload: Data, baseline: Double) {}
