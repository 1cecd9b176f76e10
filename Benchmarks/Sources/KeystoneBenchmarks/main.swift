import Foundation
import KeychainEngine

// keystone-benchmarks: speed and memory of Keystone against baselines measured in the same run. A package of its own
// (Benchmarks/Package.swift); run it in release from the repository's root:
// `swift run --package-path Benchmarks -c release keystone-benchmarks [--quick]` (the `keystone` binary of the CLI
// rows is built next to it), or `Benchmarks/.build/release/keystone-benchmarks SUBCOMMAND ...` after
// `swift build --package-path Benchmarks -c release`.
// `keystone-benchmarks secret-service [--items 100,1000] [--pairs K] [--rounds R]`: the Secret Service storage against
// plain libsecret, secret-tool and Python keyring on a private daemon (SecretServiceBenchmarks.swift).
// `keystone-benchmarks tpm [--signatures N] [--rounds R] [--tool-signatures M]`: TPM signatures through Keystone
// against raw ESAPI and tpm2_sign on a private swtpm (TPMBenchmarks.swift).
// `keystone-benchmarks etcd [--operations N] [--rounds R] [--items M] [--profile]`: SecItem calls on an etcd keychain
// against raw EtcdClient puts and ranges on a private 3-member cluster (EtcdBenchmarks.swift).
// `keystone-benchmarks never-hang [--backends secret-service,etcd,tpm,file] [--calls N] [--callers 1,4] [--seed S]`:
// calls against each backend while its daemon is stopped, killed and restarted at random (NeverHangBenchmarks.swift).
// `keystone-benchmarks rotation [--rotations N]`: rotation propagation on etcd, SecItemUpdate on one machine to the new
// value seen by a watching KeystoneConfigProvider, against a raw put seen by a raw etcd watch (RotationBenchmarks.swift).

if runFileChild(CommandLine.arguments) { exit(0) }
if CommandLine.arguments.dropFirst().first == "files" { exit(runProtectedFileBenchmarks(Array(CommandLine.arguments.dropFirst(2)))) }
if CommandLine.arguments.dropFirst().first == "seckey-memory" { exit(runSecKeyMemoryBenchmarks(Array(CommandLine.arguments.dropFirst(2)))) }
if CommandLine.arguments.dropFirst().first == "tpm" {
    guard let options = TPMBenchmarkOptions.parse(CommandLine.arguments.dropFirst(2)) else { exit(2) }
    exit(runTPMBenchmarks(options))
}
if CommandLine.arguments.dropFirst().first == "tpm-concurrent" { exit(TPMConcurrencyOptions.parse(CommandLine.arguments.dropFirst(2)).map(runTPMConcurrencyBenchmarks) ?? 2) }
if CommandLine.arguments.dropFirst().first == "etcd" {
    guard let options = EtcdBenchmarkOptions.parse(CommandLine.arguments.dropFirst(2)) else { exit(2) }
    exit(runEtcdBenchmarks(options))
}
if CommandLine.arguments.dropFirst().first == "secret-service" {
    guard let options = SecretServiceBenchmarkOptions.parse(CommandLine.arguments.dropFirst(2)) else { exit(2) }
    exit(runSecretServiceBenchmarks(options))
}
if CommandLine.arguments.dropFirst().first == "never-hang" { exit(NeverHangBenchmarkOptions.parse(CommandLine.arguments.dropFirst(2)).map(runNeverHangBenchmarks) ?? 2) }
if CommandLine.arguments.dropFirst().first == "configuration" { exit(ConfigurationBenchmarkOptions.parse(CommandLine.arguments.dropFirst(2)).map(runConfigurationBenchmarks) ?? 2) }
if CommandLine.arguments.dropFirst().first == "rotation" { exit(RotationBenchmarkOptions.parse(CommandLine.arguments.dropFirst(2)).map(runRotationBenchmarks) ?? 2) }
if CommandLine.arguments.dropFirst().first == "secitem" { exit(SecItemBenchmarkOptions.parse(CommandLine.arguments.dropFirst(2)).map(runSecItemPathBenchmarks) ?? 2) }
if CommandLine.arguments.dropFirst().first == "file-scale" { exit(runFileScaleBenchmarks(Array(CommandLine.arguments.dropFirst(2)))) }
if CommandLine.arguments.dropFirst().first == "group-commit" { exit(runGroupCommitBenchmarks(Array(CommandLine.arguments.dropFirst(2)))) }
if CommandLine.arguments.contains("--profile-file-updates") { profileFileUpdates(); exit(0) }
let quick = CommandLine.arguments.contains("--quick")
let scale = quick ? 10 : 1
var report = Report()

if CommandLine.arguments.contains("--profile-typed") {
    var scratch = Report()
    runTypedBenchmarks(&scratch, n: 200_000, payload: Data(repeating: 1, count: 32), baseline: 1)
    exit(0)
}
if CommandLine.arguments.contains("--profile-typed-scale") {
    var scratch = Report()
    runTypedScaleBenchmarks(&scratch, scale: 1, payload: Data(repeating: 1, count: 32))
    scratch.print()
    exit(0)
}
if CommandLine.arguments.contains("--profile-file-misses") {
    profileFileMisses()
    exit(0)
}
if CommandLine.arguments.contains("--keys") {
    // SecKey only: ECDSA P-256 sign/verify and ECDH through SecKey against swift-crypto directly.
    print("Keystone SecKey benchmarks\n")
    runSecKeyBenchmarks(&report, n: quick ? 200 : 2_000)
    runKeyItemBenchmarks(&report, n: quick ? 200 : 2_000)
    report.print()
    exit(0)
}
print("Keystone benchmarks (\(quick ? "quick" : "full") run)\n")
if !CommandLine.arguments.contains("--file-only") {
    runFootprint(&report, scale: scale)
    runMemoryBenchmarks(&report, scale: scale)
}
runFileBenchmarks(&report, scale: scale)
if !CommandLine.arguments.contains("--file-only") {
    runSecKeyBenchmarks(&report, n: quick ? 200 : 2_000)
    runKeyItemBenchmarks(&report, n: quick ? 200 : 2_000)
}
print("")
report.print()
