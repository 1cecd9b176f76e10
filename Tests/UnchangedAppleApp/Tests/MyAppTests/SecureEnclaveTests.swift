// Code written for Apple platforms: part of an iOS app's keychain layer, copied unchanged, `import` lines included.
// This package exists to prove that such code builds and its tests pass on Linux against Keystone's `Security`,
// `LocalAuthentication` and `CryptoKit` products (scripts/check-unchanged-apple-code.sh). Never edit the copied code
// to make it build here: a failure is a Keystone bug.
//
// Secure Enclave signing, skipped where there is no Secure Enclave, and the software fallback that runs everywhere.
//
// Glue (not part of the copied code):
// - the copied code shows no `import` lines: the imports below are the ones it needs on Apple platforms too.
// - the copied code is test methods shown without their XCTestCase class: the class declaration around them.
import XCTest
import CryptoKit
@testable import MyApp

final class SecureEnclaveTests: XCTestCase {
// ---- copied unchanged from here ----
// ✅ CORRECT: Skip gracefully when SE unavailable
func testSecureEnclaveSigning_withGuard() throws {
    try XCTSkipUnless(SecureEnclave.isAvailable,
                      "Secure Enclave not available — skipping on simulator")
    let key = try SecureEnclave.P256.Signing.PrivateKey()
    let data = "authenticated payload".data(using: .utf8)!
    let sig = try key.signature(for: data)
    XCTAssertTrue(key.publicKey.isValidSignature(sig, for: data))
}

// ✅ CORRECT: Protocol-based test runs everywhere
func testSigningWithFallback() throws {
    let signer = SigningKeyFactory.make()
    let data = "payload".data(using: .utf8)!
    let sigBytes = try signer.sign(data)
    XCTAssertFalse(sigBytes.isEmpty)

    let publicKey = try P256.Signing.PublicKey(derRepresentation: signer.publicKeyData())
    let signature = try P256.Signing.ECDSASignature(derRepresentation: sigBytes)
    XCTAssertTrue(publicKey.isValidSignature(signature, for: data))
}
// ---- end of the copied code ----
}
