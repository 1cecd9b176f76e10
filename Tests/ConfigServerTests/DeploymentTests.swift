import Foundation
import Testing

private let example = Binaries.repository.appendingPathComponent("Examples/ConfigServer")
private let systemdAnalyze = "/usr/bin/systemd-analyze"

/// Why `systemd-analyze verify` cannot check the unit here, or nil. It works without systemd as PID 1 (it loads the
/// unit offline), so only a missing binary or a build without ConfigServer skips.
private let verifySkipReason: String? = {
    if !FileManager.default.isExecutableFile(atPath: systemdAnalyze) { return "systemd-analyze is not installed (apt-get install systemd)" }
    if Binaries.configServer == nil { return "the ConfigServer binary is missing (swift build --build-tests --traits NIO)" }
    return nil
}()

/// The unit's text with ExecStart's program replaced by the built binary (verify checks that it exists and is
/// executable), in a fresh directory.
private func unitForVerification() throws -> URL {
    let text = try String(contentsOf: example.appendingPathComponent("config-server.service"), encoding: .utf8)
    let binary = try Binaries.configServer.orThrow("ConfigServer is built")
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("config-server-unit-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    let unit = directory.appendingPathComponent("config-server.service")
    try text.replacingOccurrences(of: "ExecStart=/usr/local/bin/config-server ", with: "ExecStart=\(binary) ")
        .write(to: unit, atomically: true, encoding: .utf8)
    return unit
}

/// The unit's directives (`Key=value` lines outside comments), in order.
private func directives(_ text: String) -> [(key: String, value: String)] {
    text.split(separator: "\n").compactMap { line in
        let trimmed = line.trimmingCharacters(in: .whitespaces)
        guard !trimmed.hasPrefix("#"), !trimmed.hasPrefix("["), let equals = trimmed.firstIndex(of: "=") else { return nil }
        return (String(trimmed[..<equals]), String(trimmed[trimmed.index(after: equals)...]))
    }
}

/// The command lines the recipes run ConfigServer with.
enum Recipes {
    struct Failure: Error, CustomStringConvertible { let description: String }

    /// The unit's ExecStart arguments (without the program).
    static func unitArguments() throws -> [String] {
        let text = try String(contentsOf: example.appendingPathComponent("config-server.service"), encoding: .utf8)
        guard let execStart = directives(text).first(where: { $0.key == "ExecStart" })?.value else {
            throw Failure(description: "config-server.service has no ExecStart")
        }
        return Array(execStart.split(separator: " ").map(String.init).dropFirst())
    }

    /// The Dockerfile's ENTRYPOINT (without the program) followed by its CMD (both exec-form JSON arrays).
    static func dockerArguments() throws -> [String] {
        let text = try String(contentsOf: example.appendingPathComponent("Dockerfile"), encoding: .utf8)
        func array(_ instruction: String) throws -> [String] {
            guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(instruction + " ") }),
                  let parsed = try JSONSerialization.jsonObject(with: Data(line.dropFirst(instruction.count + 1).utf8)) as? [String] else {
                throw Failure(description: "the Dockerfile has no exec-form \(instruction)")
            }
            return parsed
        }
        return try Array(array("ENTRYPOINT").dropFirst()) + array("CMD")
    }

    /// `arguments` with the value after each option of `values` replaced; options it does not have are appended.
    static func replacing(_ arguments: [String], _ values: [String: String]) throws -> [String] {
        var result = arguments
        for (option, value) in values.sorted(by: { $0.key < $1.key }) {
            if let index = result.firstIndex(of: option) {
                guard index + 1 < result.count else { throw Failure(description: "\(option) has no value in \(arguments)") }
                result[index + 1] = value
            } else {
                result += [option, value]
            }
        }
        return result
    }
}

@Suite("ConfigServer deployment: its systemd unit and container image as users deploy them")
struct DeploymentTests {
    @Test("systemd-analyze verify accepts config-server.service with no warning, and its offline security exposure is at most 2.0",
          .enabled(if: verifySkipReason == nil, Comment(rawValue: verifySkipReason ?? "")))
    func systemdVerify() throws {
        let unit = try unitForVerification()
        defer { try? FileManager.default.removeItem(at: unit.deletingLastPathComponent()) }
        let verified = try runToEnd(systemdAnalyze, ["verify", unit.path], environment: ["PATH": "/usr/bin:/bin", "SYSTEMD_LOG_COLOR": "0"])
        #expect(verified.status == 0, "\(verified.stderr)")
        // An unknown or misspelled directive is only a warning (exit status 0): none is allowed.
        #expect(verified.stderr.isEmpty && verified.stdout.isEmpty, "systemd-analyze verify: \(verified.stdout)\(verified.stderr)")
        let security = try runToEnd(systemdAnalyze, ["security", "--offline=yes", "--threshold=20", "--no-pager", unit.path],
                                    environment: ["PATH": "/usr/bin:/bin", "SYSTEMD_LOG_COLOR": "0", "SYSTEMD_COLORS": "0"])
        #expect(security.status == 0, "\(security.stderr)")
        let exposure = security.stdout.split(separator: "\n").last { $0.contains("Overall exposure level") }
        // "→ Overall exposure level for config-server.service: 1.2 OK :-)"
        let level = exposure.flatMap { line in
            line.range(of: ".service: ").flatMap { line[$0.upperBound...].split(separator: " ").first.flatMap { Double($0) } }
        }
        #expect(level != nil && level! <= 2.0, "exposure: \(exposure.map(String.init) ?? security.stdout)")
    }

    @Test("the unit gives the keychain password as a credential the app reads by name, never in the environment, and runs as its own user")
    func unitPasswordIsACredential() throws {
        let text = try String(contentsOf: example.appendingPathComponent("config-server.service"), encoding: .utf8)
        let lines = directives(text)
        let execStart = try #require(lines.first { $0.key == "ExecStart" }?.value)
        let arguments = execStart.split(separator: " ").map(String.init)
        let credentialName = try #require(arguments.firstIndex(of: "--password-credential").map { arguments[$0 + 1] })
        #expect(lines.contains { ($0.key == "LoadCredentialEncrypted" || $0.key == "LoadCredential") && $0.value.hasPrefix(credentialName + ":") })
        #expect(!lines.contains { $0.key == "Environment" || $0.key == "EnvironmentFile" || $0.key == "PassEnvironment" })
        #expect(!arguments.contains("--password") && !arguments.contains("-w"))
        #expect(lines.contains { $0.key == "DynamicUser" && $0.value == "yes" })
        #expect(lines.contains { $0.key == "StateDirectory" && $0.value == "config-server" })
        #expect(lines.contains { $0.key == "LimitCORE" && $0.value == "0" })
    }

    @Test("the Dockerfile is multi-stage, runs unprivileged, and gives the password as a /run/secrets file, never as ENV or ARG")
    func dockerfile() throws {
        let text = try String(contentsOf: example.appendingPathComponent("Dockerfile"), encoding: .utf8)
        let instructions = text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.hasPrefix("#") && !$0.isEmpty }
        #expect(instructions.filter { $0.hasPrefix("FROM ") }.count >= 2)
        #expect(instructions.contains { $0.hasPrefix("COPY --from=build ") })
        #expect(instructions.contains { $0.hasPrefix("USER ") && !$0.hasSuffix(" root") && !$0.hasSuffix(" 0") })
        #expect(!instructions.contains { $0.hasPrefix("ENV ") || $0.hasPrefix("ARG ") })
        #expect(!text.contains("--privileged") && !text.contains("dbus") && !text.contains("gnome-keyring"))
        let entrypoint = try #require(instructions.first { $0.hasPrefix("ENTRYPOINT ") })
        #expect(entrypoint.contains("\"--password-file\", \"/run/secrets/"))
    }

    @Test("every option the unit and the Dockerfile pass is one ConfigServer documents in --help", .enabled(if: Binaries.configServer != nil, "ConfigServer is not built"))
    func optionsExist() throws {
        let help = try runToEnd(try Binaries.configServer.orThrow("built"), ["--help"], environment: ["PATH": "/usr/bin:/bin"])
        #expect(help.status == 0)
        let unit = try String(contentsOf: example.appendingPathComponent("config-server.service"), encoding: .utf8)
        let docker = try String(contentsOf: example.appendingPathComponent("Dockerfile"), encoding: .utf8)
        let execStart = directives(unit).first { $0.key == "ExecStart" }?.value ?? ""
        let dockerLines = docker.split(separator: "\n").filter { $0.hasPrefix("ENTRYPOINT ") || $0.hasPrefix("CMD ") }.joined(separator: " ")
        let options = (execStart + " " + dockerLines).split(whereSeparator: { " \",[]".contains($0) }).filter { $0.hasPrefix("--") }
        #expect(options.count >= 5)
        for option in Set(options) { #expect(help.stdout.contains(String(option)), "\(option) is not in ConfigServer --help") }
    }
}
