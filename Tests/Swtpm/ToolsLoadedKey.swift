#if os(Linux)
import Foundation

extension SwtpmFixture {
    /// Runs a tpm2-tools command on this swtpm (its tss2 logging off).
    public func tpm2(_ tool: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        var environment = ProcessInfo.processInfo.environment
        environment["TPM2TOOLS_TCTI"] = tcti
        environment["TSS2_LOG"] = "all+NONE"
        return try run("/usr/bin/\(tool)", arguments, environment: environment)
    }

    /// Loads a "TSS2 PRIVATE KEY" PEM with tpm2-tools alone, as an attacker holding a copy of it would: its pubkey and
    /// privkey OCTET STRINGs (the TPM2B_PUBLIC and TPM2B_PRIVATE `tpm2_load` takes, cut out with `openssl asn1parse`)
    /// under tpm2-openssl's primary key for parent 0x40000001. No Keystone code runs.
    ///
    /// - Throws: ``Failure`` naming the step and the tool's output when parsing, the primary key or the load fails.
    public func loadWithTools(pem: String, digest: Data) throws -> ToolsLoadedKey {
        try pem.write(toFile: "\(directory)/key.pem", atomically: true, encoding: .utf8)
        let parsed = try run(Self.opensslPath, ["asn1parse", "-in", "\(directory)/key.pem"])
        let offsets = parsed.output.split(separator: "\n").filter { $0.contains("OCTET STRING") }
            .compactMap { Int($0.split(separator: ":").first?.trimmingCharacters(in: .whitespaces) ?? "") }
        guard offsets.count == 2 else { throw Failure(description: "the PEM has no pubkey and privkey: \(parsed.output)") }
        for (offset, name) in zip(offsets, ["pub", "priv"]) {
            let out = try run(Self.opensslPath, ["asn1parse", "-in", "\(directory)/key.pem", "-strparse", "\(offset)",
                                                  "-noout", "-out", "\(directory)/\(name).bin"])
            guard out.status == 0 else { throw Failure(description: "asn1parse of the \(name) part: \(out.output)") }
        }
        try digest.write(to: URL(fileURLWithPath: "\(directory)/digest"))
        let primary = try tpm2("tpm2_createprimary", [
            "-C", "o", "-G", "ecc256:aes128cfb", "-g", "sha256", "-c", "\(directory)/primary.ctx", "-a",
            "restricted|decrypt|fixedtpm|fixedparent|sensitivedataorigin|userwithauth|noda",
        ])
        guard primary.status == 0 else { throw Failure(description: "tpm2_createprimary: \(primary.output)") }
        let loaded = try tpm2("tpm2_load", ["-C", "\(directory)/primary.ctx", "-u", "\(directory)/pub.bin",
                                            "-r", "\(directory)/priv.bin", "-c", "\(directory)/key.ctx"])
        guard loaded.status == 0 else { throw Failure(description: "tpm2_load: \(loaded.output)") }
        _ = try tpm2("tpm2_flushcontext", ["-t"])
        return ToolsLoadedKey(fixture: self)
    }
}

/// A key loaded by ``SwtpmFixture/loadWithTools(pem:digest:)``: a context file tpm2-tools sign with.
public struct ToolsLoadedKey {
    let fixture: SwtpmFixture

    /// Signs the digest with `tpm2_sign` (which loads the key from its context file: transient objects are flushed
    /// between tools), with `-p auth` when given; the signature goes to `sig.bin` in the fixture's directory.
    public func sign(auth: String?) throws -> (status: Int32, output: String) {
        let directory = fixture.directory
        return try fixture.tpm2("tpm2_sign", ["-c", "\(directory)/key.ctx", "-g", "sha256", "-d", "-f", "plain",
                                              "-o", "\(directory)/sig.bin", "\(directory)/digest"]
                                    + (auth.map { ["-p", $0] } ?? []))
    }
}
#endif
