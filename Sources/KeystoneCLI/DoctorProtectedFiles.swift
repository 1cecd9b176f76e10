import ArgumentParser
import Foundation
import Keystone
import KeystoneProtectedFiles
#if canImport(Glibc)
import Glibc
#endif

// `keystone doctor --protected-files DIR…`: the directories of protected files instead of the keychain storage.
// Reports the temporary files interrupted writes left (`.NAME.RANDOM.tmp`: sealed content, or plaintext of an
// interrupted unseal), a live writer's (in use), and the protected files still in sealed format 1. Changes nothing
// (each temporary file's lock is tested and released at once); exits 1 when a stale temporary file is found or a
// directory cannot be listed.

extension Doctor {
    /// Checks `directories` and prints the report (JSON with `json`).
    ///
    /// - Throws: `ExitCode(1)` when a stale temporary file was found or a directory could not be listed.
    func checkProtectedFiles(_ directories: [String], json: Bool) throws {
        if keychain != nil {
            throw UsageFailure(message: "keystone: doctor: --protected-files checks directories, not a keychain: give one or the other")
        }
        let reports = directories.map { ProtectedFilesReport.examine(URL(fileURLWithPath: $0)) }
        let ok = reports.allSatisfy { !$0.findings.contains { $0.severity == .problem } }
        if json {
            printJSON(["protectedFiles": reports.map(\.json), "ok": ok] as [String: Any])
        } else {
            var text = ""
            for report in reports {
                text += "protected files in \(shown(report.directory.path)):\n" + Self.lines(report.findings)
            }
            text += ok ? "result: ok — no temporary file of an interrupted write is left\n"
                : "result: PROBLEM — see the fixes above\n"
            writeOut(text)
        }
        if !ok { throw ExitCode(1) }
    }
}

/// A name from the file system as the terminal may show it: printable ASCII as is, anything else escaped.
private func shown(_ name: String) -> String { escaped(Data(name.utf8)) }

/// One directory of protected files.
struct ProtectedFilesReport {
    struct SealedFile {
        let url: URL
        let formatVersion: Int
    }

    let directory: URL
    var temporaryFiles: [ProtectedFiles.TemporaryFile] = []
    /// Whether each temporary file holds sealed content (it starts with the KSPF magic), by path.
    var temporarySealed: [String: Bool] = [:]
    var sealedFiles: [SealedFile] = []
    var findings: [DoctorFinding] = []

    static func examine(_ directory: URL) -> ProtectedFilesReport {
        var report = ProtectedFilesReport(directory: directory)
        do {
            report.temporaryFiles = try ProtectedFiles.temporaryFiles(in: directory)
        } catch {
            report.findings.append(DoctorFinding(severity: .problem, check: "directory", detail: "\(shown(directory.path)) cannot be listed: \(error.reason)",
                                                 fix: "give a directory of protected files you can read"))
            return report
        }
        let temporaryNames = Set(report.temporaryFiles.map(\.url.lastPathComponent))
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []).sorted()
        for name in names where !temporaryNames.contains(name) {
            let url = directory.appendingPathComponent(name)
            if let version = header(of: url)?.version { report.sealedFiles.append(SealedFile(url: url, formatVersion: version)) }
        }
        for file in report.temporaryFiles {
            let sealed = header(of: file.url) != nil
            report.temporarySealed[file.url.path] = sealed
            report.findings.append(finding(for: file, sealed: sealed))
        }
        if !report.temporaryFiles.contains(where: { $0.state == .stale }) {
            report.findings.append(DoctorFinding(severity: .ok, check: "temporary files", detail: "none left by an interrupted write", fix: nil))
        }
        let old = report.sealedFiles.filter { $0.formatVersion == 1 }
        let current = report.sealedFiles.count - old.count
        report.findings.append(DoctorFinding(severity: .ok, check: "protected files",
                                             detail: "\(current) in sealed format 2" + (old.isEmpty ? "" : ", \(old.count) in format 1"), fix: nil))
        for file in old {
            report.findings.append(DoctorFinding(
                severity: .warning, check: "format 1",
                detail: "\(shown(file.url.lastPathComponent)) is in sealed format 1: only its name is bound, so it opens only with --format-1 (ProtectedFiles(readsFormatVersion1: true))",
                fix: "upgrade it: keystone unseal --format-1 FILE PLAIN, keystone seal PLAIN FILE, then remove PLAIN (in an app: read it with readsFormatVersion1 and write it again)"))
        }
        return report
    }

    static func finding(for file: ProtectedFiles.TemporaryFile, sealed: Bool) -> DoctorFinding {
        let name = shown(file.url.lastPathComponent), target = shown(file.targetName)
        let size = file.size.map { "\($0) bytes, " } ?? ""
        let content = sealed ? "sealed content" : file.size == 0 ? "empty"
            : "not sealed: it may hold the plaintext of an interrupted unseal or read(at:to:)"
        switch file.state {
        case .stale:
            return DoctorFinding(severity: .problem, check: "temporary file",
                                 detail: "\(name) was left by an interrupted write of \(target) (\(size)\(content))",
                                 fix: "the next write of \(target) removes it (keystone seal … \(target)); or remove it now: rm -- '\(shown(file.url.path).replacingOccurrences(of: "'", with: "'\\''"))'")
        case .inUse:
            return DoctorFinding(severity: .note, check: "temporary file",
                                 detail: "\(name) is being written now by another process (it holds its lock): never removed", fix: nil)
        case .otherOwner:
            return DoctorFinding(severity: .warning, check: "temporary file",
                                 detail: "\(name) belongs to another user: Keystone never removes it", fix: "its owner (or root) can remove it")
        case .notRegularFile:
            return DoctorFinding(severity: .warning, check: "temporary file",
                                 detail: "\(name) is not a regular file (a symlink or a directory) under a temporary file's name: never followed or removed",
                                 fix: "find out what created it, and remove it by hand")
        case .undetermined:
            return DoctorFinding(severity: .warning, check: "temporary file",
                                 detail: "\(name): whether a writer holds it cannot be told (\(file.note ?? "unknown")): never removed",
                                 fix: "remove it by hand once no program writes \(target)")
        }
    }

    /// The sealed header's format version and class byte, when `url` is a regular file starting with "KSPF".
    static func header(of url: URL) -> (version: Int, protection: UInt8)? {
        let fd = open(url.path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        var bytes = [UInt8](repeating: 0, count: 6)
        guard read(fd, &bytes, 6) == 6, bytes[0..<4].elementsEqual("KSPF".utf8) else { return nil }
        return (Int(bytes[4]), bytes[5])
    }

    var json: [String: Any] {
        [
            "directory": directory.path,
            "temporaryFiles": temporaryFiles.map { file -> [String: Any] in
                ["path": file.url.path, "target": file.targetName, "state": file.state.rawValue,
                 "size": file.size.map { NSNumber(value: $0) } ?? NSNull(), "sealed": temporarySealed[file.url.path] ?? false]
            },
            "files": sealedFiles.map { ["path": $0.url.path, "formatVersion": $0.formatVersion] as [String: Any] },
            "findings": findings.map(\.json),
        ]
    }
}
