// Glue (not copied code): the app's Swift Testing suite (KeychainTests.swift) uses `ProcessInfo` and
// `String.data(using:)` while importing only Testing and MyApp, neither of which re-exports Foundation, on Apple
// platforms or on Linux: where it was written, another file of the test target must have made Foundation visible to
// the whole target. This file does that, so that the copied file keeps its two `import` lines.
// The other test files import XCTest, which re-exports Foundation on both platforms, so this hides no missing import
// of theirs.
@_exported import Foundation
