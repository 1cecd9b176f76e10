import Foundation
import Keystone

// environment-probe ACCOUNT: the library round trip of the environment matrix (EnvironmentMatrixTests), run as a
// child process in the environment a cell makes (another user, no home, no terminal, a seccomp filter, …).
//   `Keychain()`, the default keychain an app gets with no setup, saves ACCOUNT's secret ("probe-" + ACCOUNT) and
//   reads it back. Prints "ok" and exits 0; on a failure prints "failed STATUS: DESCRIPTION" on standard output and
//   exits 1: the KeychainError exactly as an app would log it (on Linux its reason carries the engine's, which names
//   the fix), nothing added.
let arguments = CommandLine.arguments
guard arguments.count == 2 else {
    FileHandle.standardError.write(Data("usage: environment-probe ACCOUNT\n".utf8))
    exit(2)
}
let account = arguments[1]
let secret = "probe-" + account
do {
    let keychain = Keychain()
    let item = try GenericPassword(service: "keystone.environment-probe", account: account)
    try keychain.save(secret, for: item)
    guard try keychain.string(for: item) == secret else {
        print("failed wrong-secret: the secret read back is not the one saved")
        exit(1)
    }
    print("ok")
    exit(0)
} catch let error as KeychainError {
    print("failed \(error.status): \(error.description)")
    exit(1)
}
