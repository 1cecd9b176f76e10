import Crypto
import Foundation
import KeychainServices

/// ECDSA P-256 sign and verify and ECDH P-256 through SecKey, against the same operation through swift-crypto
/// directly, measured in the same run. Goal: SecKey at least 0.8× swift-crypto's rate.
func runSecKeyBenchmarks(_ report: inout Report, n: Int) {
    #if !canImport(Darwin)
    var error: Unmanaged<CFError>?
    let parameters: [String: Any] = [kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256]
    guard let privateKey = SecKeyCreateRandomKey(parameters as CFDictionary, &error), let publicKey = SecKeyCopyPublicKey(privateKey),
          let peer = SecKeyCreateRandomKey(parameters as CFDictionary, &error), let peerPublic = SecKeyCopyPublicKey(peer),
          let privateData = SecKeyCopyExternalRepresentation(privateKey, &error),
          let peerData = SecKeyCopyExternalRepresentation(peerPublic, &error) else {
        report.add("SecKey", "failed to create keys")
        return
    }
    let cryptoSigning = try! P256.Signing.PrivateKey(x963Representation: Data(referencing: privateData))
    let cryptoAgreement = try! P256.KeyAgreement.PrivateKey(x963Representation: Data(referencing: privateData))
    let cryptoPeer = try! P256.KeyAgreement.PublicKey(x963Representation: Data(referencing: peerData))
    let message = Data(repeating: 0x5A, count: 64)
    let algorithm = SecKeyAlgorithm.ecdsaSignatureMessageX962SHA256
    let signature = SecKeyCreateSignature(privateKey, algorithm, message as CFData, &error)!
    let cryptoSignature = try! cryptoSigning.signature(for: message)

    func row(_ name: String, _ secKey: Double, _ crypto: Double) {
        let ratio = crypto / secKey  // operations per second through SecKey ÷ through swift-crypto
        report.add("SecKey \(name)", String(format: "%.0f/s", 1e9 / secKey),
                   String(format: "swift-crypto %.0f/s, ratio %.2f× (goal ≥ 0.8×)", 1e9 / crypto, ratio))
    }

    let (signSecKey, signCrypto) = interleaved(n,
        { _ = SecKeyCreateSignature(privateKey, algorithm, message as CFData, nil) },
        { _ = try? cryptoSigning.signature(for: message).derRepresentation })
    row("ECDSA P-256 sign", signSecKey, signCrypto)

    let (verifySecKey, verifyCrypto) = interleaved(n,
        { _ = SecKeyVerifySignature(publicKey, algorithm, message as CFData, signature, nil) },
        { _ = cryptoSigning.publicKey.isValidSignature(try! P256.Signing.ECDSASignature(derRepresentation: cryptoSignature.derRepresentation), for: message) })
    row("ECDSA P-256 verify", verifySecKey, verifyCrypto)

    let (ecdhSecKey, ecdhCrypto) = interleaved(n,
        { _ = SecKeyCopyKeyExchangeResult(privateKey, .ecdhKeyExchangeStandard, peerPublic, [:], nil) },
        { _ = try? cryptoAgreement.sharedSecretFromKeyAgreement(with: cryptoPeer).withUnsafeBytes { Data($0) } })
    row("ECDH P-256", ecdhSecKey, ecdhCrypto)
    #endif
}

/// Nanoseconds per call of `measured` and of `baseline`: three interleaved rounds (baseline first), the best of each,
/// so neither side gets the machine's quieter moments.
func interleaved(_ n: Int, _ measured: () -> Void, _ baseline: () -> Void) -> (Double, Double) {
    var best = (Double.infinity, Double.infinity)
    for _ in 0..<3 {
        best.1 = min(best.1, measure(n) { _ in baseline() })
        best.0 = min(best.0, measure(n) { _ in measured() })
    }
    return best
}

/// Key items against password items through the SecItem functions over an in-memory keychain, in the same run:
/// `SecItemAdd` of a SecKey (`kSecValueRef`) and `SecItemCopyMatching` giving it back (`kSecReturnRef`), against
/// `SecItemAdd` / `SecItemCopyMatching` (`kSecReturnData`) of a generic password with a secret of the same size.
func runKeyItemBenchmarks(_ report: inout Report, n: Int) {
    #if !canImport(Darwin)
    KeychainServicesDefaults.useMemoryKeychain()
    defer { KeychainServicesDefaults.useMemoryKeychain() }
    let parameters: [String: Any] = [kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256]
    let keys = (0..<(n + 100)).map { _ in SecKeyCreateRandomKey(parameters as CFDictionary, nil)! }
    let secret = Data(repeating: 7, count: 97)
    var passwordRound = 0, keyRound = 0
    let addPassword = measure(n, rounds: 1) { i in
        passwordRound = i
        _ = SecItemAdd([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "bench",
                        kSecAttrAccount as String: "a\(i)", kSecValueData as String: secret] as CFDictionary, nil)
    }
    let addKey = measure(n, rounds: 1) { i in
        keyRound = i
        _ = SecItemAdd([kSecValueRef as String: keys[i], kSecAttrApplicationTag as String: Data("k\(i)".utf8)] as CFDictionary, nil)
    }
    var result: CFTypeRef?
    let copyPassword = measure(n) { i in
        _ = SecItemCopyMatching([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "bench",
                                 kSecAttrAccount as String: "a\(i % (passwordRound + 1))", kSecReturnData as String: true] as CFDictionary, &result)
    }
    let copyKey = measure(n) { i in
        _ = SecItemCopyMatching([kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: Data("k\(i % (keyRound + 1))".utf8),
                                 kSecReturnRef as String: true] as CFDictionary, &result)
    }
    report.add("SecItemAdd of a SecKey (kSecValueRef), memory", String(format: "%.0f/s", 1e9 / addKey),
               String(format: "password item %.0f/s, ratio %.2f×", 1e9 / addPassword, addPassword / addKey))
    report.add("SecItemCopyMatching of a SecKey (kSecReturnRef), memory", String(format: "%.0f/s", 1e9 / copyKey),
               String(format: "password data %.0f/s, ratio %.2f×", 1e9 / copyPassword, copyPassword / copyKey))
    #endif
}

