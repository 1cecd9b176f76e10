// Code written for Apple platforms: part of an iOS app's keychain layer, copied unchanged, `import` lines included.
// This package exists to prove that such code builds and its tests pass on Linux against Keystone's `Security`,
// `LocalAuthentication` and `CryptoKit` products (scripts/check-unchanged-apple-code.sh). Never edit the copied code
// to make it build here: a failure is a Keystone bug.
//
// Deletes the app's keychain items on the first launch after a (re)install: keychain items outlive the app.
//
// Glue (not part of the copied code):
// - the copied code shows no `import` lines: the imports below are the ones it needs on Apple platforms too.
// - the copied code is a static function shown without its type: the enum around it.
import Foundation

enum FreshInstallDetector {
// ---- copied unchanged from here ----
static func handleFreshInstall(keychain: KeychainServiceProtocol) {
    let hasLaunched = UserDefaults.standard.bool(forKey: "has_launched")
    if !hasLaunched {
        try? keychain.deleteAll()
        UserDefaults.standard.set(true, forKey: "has_launched")
    }
}
// ---- end of the copied code ----
}
