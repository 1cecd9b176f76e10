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

    let signSecKey = measure(n) { _ in _ = SecKeyCreateSignature(privateKey, algorithm, message as CFData, nil) }
    let signCrypto = measure(n) { _ in _ = try? cryptoSigning.signature(for: message).derRepresentation }
    row("ECDSA P-256 sign", signSecKey, signCrypto)

    let verifySecKey = measure(n) { _ in _ = SecKeyVerifySignature(publicKey, algorithm, message as CFData, signature, nil) }
    let verifyCrypto = measure(n) { _ in
        _ = cryptoSigning.publicKey.isValidSignature(try! P256.Signing.ECDSASignature(derRepresentation: cryptoSignature.derRepresentation),
                                                     for: message)
    }
    row("ECDSA P-256 verify", verifySecKey, verifyCrypto)

    let ecdhSecKey = measure(n) { _ in _ = SecKeyCopyKeyExchangeResult(privateKey, .ecdhKeyExchangeStandard, peerPublic, [:], nil) }
    let ecdhCrypto = measure(n) { _ in
        _ = try? cryptoAgreement.sharedSecretFromKeyAgreement(with: cryptoPeer).withUnsafeBytes { Data($0) }
    }
    row("ECDH P-256", ecdhSecKey, ecdhCrypto)
    #endif
}
