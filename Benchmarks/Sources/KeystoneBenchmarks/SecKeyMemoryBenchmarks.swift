import Crypto
import Foundation
import KeychainServices

/// `keystone-benchmarks seckey-memory [--calls N]`: resident memory while `SecKeyCreateWithData` makes EC keys from
/// their external representation N times, against swift-crypto making the same keys directly in the same run. A
/// leak shows as resident memory growing with the number of calls; allocator retention as a plateau.
func runSecKeyMemoryBenchmarks(_ arguments: [String]) -> Int32 {
    #if canImport(Darwin)
    print("seckey-memory: Linux only")
    return 0
    #else
    var calls = 100_000
    if let index = arguments.firstIndex(of: "--calls"), index + 1 < arguments.count, let n = Int(arguments[index + 1]), n > 0 {
        calls = n
    }
    var error: Unmanaged<CFError>?
    let parameters: [String: Any] = [kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256]
    guard let privateKey = SecKeyCreateRandomKey(parameters as CFDictionary, &error), let publicKey = SecKeyCopyPublicKey(privateKey),
          let privateData = SecKeyCopyExternalRepresentation(privateKey, &error),
          let publicData = SecKeyCopyExternalRepresentation(publicKey, &error) else {
        print("seckey-memory: failed to create a key")
        return 1
    }
    let privateAttributes: [String: Any] = [kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom,
                                            kSecAttrKeyClass as String: kSecAttrKeyClassPrivate]
    let publicAttributes: [String: Any] = [kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom,
                                           kSecAttrKeyClass as String: kSecAttrKeyClassPublic]
    let privateBytes = Data(referencing: privateData)
    let publicBytes = Data(referencing: publicData)

    /// Resident memory (MiB) after each tenth of the calls.
    func track(_ name: String, _ body: () -> Void) -> [Double] {
        var samples: [Double] = []
        let step = max(1, calls / 10)
        for i in 1...calls {
            body()
            if i % step == 0 { samples.append(Double(residentBytes()) / 1_048_576) }
        }
        print(String(format: "%@: %@ MiB", name, samples.map { String(format: "%.1f", $0) }.joined(separator: " ")))
        return samples
    }
    print("resident memory after each tenth of \(calls) calls\n")
    let baseline = track("swift-crypto P256 private+public from x963 (baseline)") {
        _ = try? P256.Signing.PrivateKey(x963Representation: privateBytes)
        _ = try? P256.Signing.PublicKey(x963Representation: publicBytes)
    }
    let measured = track("SecKeyCreateWithData EC private+public") {
        _ = SecKeyCreateWithData(privateData, privateAttributes as CFDictionary, nil)
        _ = SecKeyCreateWithData(publicData, publicAttributes as CFDictionary, nil)
    }
    // Distinct keys of every curve, with a size and an error pointer, as Apple-style code passes them.
    var distinct: [(CFData, CFData, Int)] = []
    for bits in [256, 384, 521] {
        for _ in 0..<100 {
            let parameters: [String: Any] = [kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: bits]
            guard let key = SecKeyCreateRandomKey(parameters as CFDictionary, nil), let pub = SecKeyCopyPublicKey(key),
                  let priv = SecKeyCopyExternalRepresentation(key, nil), let pubData = SecKeyCopyExternalRepresentation(pub, nil) else { continue }
            distinct.append((priv, pubData, bits))
        }
    }
    var index = 0
    let curves = track("SecKeyCreateWithData, 300 distinct keys of P-256/384/521 with kSecAttrKeySizeInBits") {
        let (priv, pub, bits) = distinct[index % distinct.count]
        index += 1
        var error: Unmanaged<CFError>?
        let privAttributes = [kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeyClass: kSecAttrKeyClassPrivate,
                              kSecAttrKeySizeInBits: bits] as CFDictionary
        let pubAttributes = [kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeyClass: kSecAttrKeyClassPublic,
                             kSecAttrKeySizeInBits: bits] as CFDictionary
        if let key = SecKeyCreateWithData(priv, privAttributes, &error) { _ = SecKeyCopyPublicKey(key) }
        _ = SecKeyCreateWithData(pub, pubAttributes, &error)
    }
    print(String(format: "growth, distinct keys: %.1f MiB", (curves.last ?? 0) - (curves.first ?? 0)))
    let failing = track("SecKeyCreateWithData, malformed data (errors)") {
        var error: Unmanaged<CFError>?
        _ = SecKeyCreateWithData(Data([0x04, 1, 2, 3]) as CFData, publicAttributes as CFDictionary, &error)
        error?.release()
    }
    func growth(_ samples: [Double]) -> Double { (samples.last ?? 0) - (samples.first ?? 0) }
    print(String(format: "\ngrowth from the first tenth to the last: baseline %.1f MiB, SecKeyCreateWithData %.1f MiB, errors %.1f MiB",
                 growth(baseline), growth(measured), growth(failing)))
    return 0
    #endif
}
