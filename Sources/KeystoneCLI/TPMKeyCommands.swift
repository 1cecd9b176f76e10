#if os(Linux)
import ArgumentParser
import Foundation
import KeychainEngine
import KeychainServices
import KeychainTPM

// `keystone export-tpm-key` / `keystone import-tpm-key`: Keystone's TPM keys as "TSS2 PRIVATE KEY" PEM, the format of
// tpm2-openssl (`openssl pkeyutl -provider tpm2 -inkey key.pem`), the kernel's trusted keys and go-tpm-keyfiles.
//
// Decisions: the key file Keystone reads and writes is a key's data representation: the TPM key blob (what
// TPMDevice, TPMSecureEnclaveToken and a Secure Enclave SecKey's kSecAttrTokenOID hold) or, for export, a CryptoKit
// `SecureEnclave.P256.*.PrivateKey.dataRepresentation` (its Keystone envelope around the same blob; the access
// control it records is not carried into the PEM, as the TSS2 format has no place for it). Files written hold the
// key (TPM-wrapped, useless on another TPM): they are created with mode 0600, replaced atomically.

/// The TPM key blob in a key file: a blob as it is, or the blob inside a CryptoKit envelope (`KSSE`, version 1).
func tpmKeyBlob(fromKeyFile data: Data) throws -> Data {
    let bytes = [UInt8](data)
    guard bytes.starts(with: Array("KSSE".utf8)) else { return data }
    // KSSE v1: magic(4) version(1) kind(1) accessibility(1 + n) flags(8) domain state(2 + n) blob(4 + n).
    func fail() -> MessageFailure {
        MessageFailure(message: "keystone: export-tpm-key: the CryptoKit key data is damaged or of an unknown version", exitCode: 1)
    }
    guard bytes.count > 7, bytes[4] == 1 else { throw fail() }
    var offset = 6
    func take(_ count: Int) throws -> ArraySlice<UInt8> {
        guard count >= 0, offset + count <= bytes.count else { throw fail() }
        defer { offset += count }
        return bytes[offset..<(offset + count)]
    }
    let accessibility = Int(try take(1).first!)
    _ = try take(accessibility)
    _ = try take(8)
    let state = try take(2)
    _ = try take(Int(state.first!) << 8 | Int(state.last!))
    let length = try take(4).reduce(0) { $0 << 8 | Int($1) }
    let blob = try take(length)
    guard offset == bytes.count else { throw fail() }
    return Data(blob)
}

/// Writes `data` to `path` atomically with mode 0600 (a key file).
func writeKeyFile(_ data: Data, to path: String, function: String) throws {
    let temporary = path + ".keystone-\(UUID().uuidString).tmp"
    guard FileManager.default.createFile(atPath: temporary, contents: data, attributes: [.posixPermissions: 0o600]) else {
        throw MessageFailure(message: "keystone: \(function): cannot write \(temporary)", exitCode: 1)
    }
    if rename(temporary, path) != 0 {
        let reason = String(cString: strerror(errno))
        unlink(temporary)
        throw MessageFailure(message: "keystone: \(function): cannot write \(path): \(reason)", exitCode: 1)
    }
}

struct ExportTPMKey: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export-tpm-key",
        abstract: "Write a Keystone TPM key as a \"TSS2 PRIVATE KEY\" PEM (tpm2-openssl, the kernel, go-tpm-keyfiles).",
        discussion: """
        KEYFILE holds the key's data representation: a TPM key blob (a Secure Enclave SecKey's kSecAttrTokenOID) or a \
        CryptoKit SecureEnclave key's dataRepresentation. The PEM names parent 0x40000001 (the owner hierarchy's ECC \
        P-256 storage key, which tpm2-openssl derives too) and emptyAuth unless the key has a TPM PIN. Use it with \
        `TPM2OPENSSL_TCTI=... openssl pkeyutl -provider tpm2 -provider default -sign -inkey key.pem`. Nothing is \
        sent to the TPM. The PEM is the key (usable only with this TPM): OUTPUT is created with mode 0600.
        """)
    @Option(name: .customShort("o"), help: "The PEM file to write (default: standard output).") var output: String?
    @Argument(help: "The key file: a TPM key blob or a CryptoKit SecureEnclave dataRepresentation.") var keyFile: String

    mutating func run() throws {
        guard let data = FileManager.default.contents(atPath: keyFile) else {
            throw MessageFailure(message: "keystone: export-tpm-key: cannot read \(keyFile)", exitCode: 1)
        }
        let pem: String
        do {
            pem = try TPMKey(dataRepresentation: try tpmKeyBlob(fromKeyFile: data)).tss2PEMRepresentation()
        } catch let error as TPMError {
            throw ToolFailure(function: "export-tpm-key", status: Status.decode, reason: "\(keyFile): \(error.description)")
        }
        if let output {
            try writeKeyFile(Data((pem + "\n").utf8), to: output, function: "export-tpm-key")
        } else {
            print(pem)
        }
    }
}

struct ImportTPMKey: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import-tpm-key",
        abstract: "Adopt a \"TSS2 PRIVATE KEY\" PEM made on this TPM (e.g. openssl genpkey -provider tpm2) as a Keystone TPM key.",
        discussion: """
        Checks that this machine's TPM (KEYSTONE_TPM_TCTI, TPM2TOOLS_TCTI or TCTI, else /dev/tpmrm0) loads the key, \
        writes its Keystone data representation (a TPM key blob, for TPMDevice, TPMSecureEnclaveToken or \
        kSecAttrTokenOID) to OUTPUT with mode 0600, and prints its public key (PEM). Supported: P-256 keys without \
        a policy whose parent is the owner hierarchy (0x40000001); a key without emptyAuth needs its PIN at each use.
        """)
    @Option(name: .customShort("o"), help: "The key file to write.") var output: String
    @Argument(help: "The TSS2 PRIVATE KEY PEM file (- for standard input).") var pemFile: String

    mutating func run() throws {
        let data = pemFile == "-" ? FileHandle.standardInput.readDataToEndOfFile() : FileManager.default.contents(atPath: pemFile)
        guard let data, let pem = String(data: data, encoding: .utf8) else {
            throw MessageFailure(message: "keystone: import-tpm-key: cannot read \(pemFile) as text", exitCode: 1)
        }
        guard let token = KeychainServicesDefaults.secureEnclave as? TPMSecureEnclaveToken else {
            throw ToolFailure(function: "import-tpm-key", status: Status.unimplemented,
                              reason: "no TPM is configured (KEYSTONE_SECURE_ENCLAVE=none?)")
        }
        let key: SecureEnclaveKey
        do {
            key = try token.importTSS2PEM(pem)
        } catch {
            throw ToolFailure(function: "import-tpm-key", status: error.status, reason: error.reason)
        }
        try writeKeyFile(key.dataRepresentation, to: output, function: "import-tpm-key")
        let publicKey = try TPMKey(dataRepresentation: key.dataRepresentation).signingPublicKey.pemRepresentation
        print(publicKey)
    }
}

struct TPMStatus: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tpm-status",
        abstract: "Say whether TPM keys (the Secure Enclave) can be used now, and the TPM's dictionary-attack lockout state.",
        discussion: """
        Everything goes to standard output (tpm2-tss's own log lines stay off unless TSS2_LOG or \
        KEYSTONE_LOG_LEVEL=debug ask for them). Exit status 0 when the TPM answers, 1 otherwise. With a TPM: how many \
        wrong PINs it counts, at how many it locks out, and how long until it forgets one (TPM-enforced PINs).
        """)

    mutating func run() throws {
        guard let token = KeychainServicesDefaults.secureEnclave as? TPMSecureEnclaveToken else {
            print("tpm: none (KEYSTONE_SECURE_ENCLAVE=none)")
            throw ExitCode(1)
        }
        if let problem = token.availability() {
            print("tpm: not available: \(problem.reason)")
            throw ExitCode(1)
        }
        print("tpm: available (\(token.name))")
        do {
            let state = try token.lockoutState()
            let interval = state.lockoutInterval.components.seconds
            let recovery = state.timeToRecovery.map { " (locked out: a new attempt within \($0.components.seconds) s)" } ?? ""
            print("dictionary-attack: \(state.failedTries) of \(state.maxTries) failed authorizations counted, one forgotten every \(interval) s\(recovery)")
        } catch {
            print("dictionary-attack: unknown (\(error.reason))")
        }
    }
}

let tpmKeyVerbs: [any ParsableCommand.Type] = [ExportTPMKey.self, ImportTPMKey.self, TPMStatus.self]
#else
import ArgumentParser
let tpmKeyVerbs: [any ParsableCommand.Type] = []
#endif
