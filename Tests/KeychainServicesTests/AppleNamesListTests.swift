import Foundation
import Testing

// Docs/AppleNames.md lists every Apple name KeychainServices declares on Linux. These tests read the list and
// the module's sources and check both directions, so that the two never drift apart. Only files are read:
// the tests run on every platform.

/// The repository's files, found from this file's path.
private enum Repository {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let list = root.appendingPathComponent("Docs/AppleNames.md")
    static let sources = root.appendingPathComponent("Sources/KeychainServices")

    /// The text of every Swift file of KeychainServices.
    static func sourceTexts() throws -> [String: String] {
        let files = try FileManager.default.contentsOfDirectory(atPath: sources.path).filter { $0.hasSuffix(".swift") }
        var texts: [String: String] = [:]
        for file in files { texts[file] = try String(contentsOf: sources.appendingPathComponent(file), encoding: .utf8) }
        return texts
    }
}

/// The names of Docs/AppleNames.md: lines inside ```` ```names ```` fences (Apple's) and ```` ```keystone ````
/// fences (Keystone's own names of Apple form), one name per line.
struct AppleNamesList {
    var apple: [String] = []
    var keystone: [String] = []

    init(markdown: String) {
        var fence: String?
        for line in markdown.components(separatedBy: "\n") {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("```") {
                fence = fence == nil ? String(trimmed.dropFirst(3)) : nil
            } else if !trimmed.isEmpty {
                switch fence {
                case "names": apple.append(trimmed)
                case "keystone": keystone.append(trimmed)
                default: break
                }
            }
        }
    }

    /// Whether a declared name has Apple's form: its first component starts with `kSec`, `errSec`, `Sec`,
    /// `kCF`, `CF`, `kLA`, `LA` or `NS`, or is `noErr` or `OSStatus` (members of such types count too).
    static func hasAppleForm(_ name: String) -> Bool {
        let root = name.split(separator: ".").first.map(String.init) ?? name
        return ["noErr", "OSStatus"].contains(root)
            || ["kSec", "errSec", "Sec", "kCF", "CF", "kLA", "LA", "NS"].contains { root.hasPrefix($0) }
    }
}

/// The public declarations of Swift sources: top-level names bare, members qualified by their type
/// (`LAError.Code.userCancel`).
///
/// A line scanner, enough for this module's style: one declaration per line, a type's `{` on its declaration's
/// line. It counts braces outside string literals and comments to know the enclosing type, and keeps
/// declarations made directly in a type's body (not locals of functions). Initializers, subscripts, operators
/// and `override`s are left out; enum cases of public enums are public.
struct PublicDeclarations {
    private(set) var names: Set<String> = []

    private let declaration = try! NSRegularExpression(pattern:
        #"^((?:(?:@[A-Za-z_]+(?:\([^)]*\))?|public|open|internal|private|fileprivate|package|nonisolated(?:\(unsafe\))?|static|class|final|override|mutating|indirect|convenience|required|lazy|weak|unowned|dynamic)\s+)*)(let|var|func|typealias|struct|class|enum|protocol|actor|extension|case|init|subscript)\b\s*([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)?"#)
    private let stringLiteral = try! NSRegularExpression(pattern: #""(?:[^"\\]|\\.)*""#)

    private struct Scope {
        let name: String
        let depth: Int
        let isPublic: Bool
        let isEnum: Bool
    }

    mutating func add(source: String) {
        var depth = 0
        var scopes: [Scope] = []
        for rawLine in source.components(separatedBy: "\n") {
            var line = stringLiteral.stringByReplacingMatches(
                in: rawLine, range: NSRange(location: 0, length: (rawLine as NSString).length), withTemplate: "\"\"")
            if let comment = line.range(of: "//") { line = String(line[..<comment.lowerBound]) }
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            let enclosing = scopes.last
            let inTypeBody = enclosing.map { depth == $0.depth + 1 } ?? (depth == 0)
            let text = trimmed as NSString
            if inTypeBody, let match = declaration.firstMatch(in: trimmed, range: NSRange(location: 0, length: text.length)) {
                let modifiers = text.substring(with: match.range(at: 1)).split(separator: " ").map(String.init)
                let keyword = text.substring(with: match.range(at: 2))
                let name = match.range(at: 3).location == NSNotFound ? nil : text.substring(with: match.range(at: 3))
                let isPublic = modifiers.contains("public") || modifiers.contains("open")
                let visibleScope = enclosing?.isPublic ?? true
                let qualified = { (member: String) in enclosing.map { "\($0.name).\(member)" } ?? member }
                switch keyword {
                case "extension":
                    if let name { scopes.append(Scope(name: name, depth: depth, isPublic: true, isEnum: false)) }
                case "struct", "class", "enum", "protocol", "actor":
                    if let name {
                        if isPublic && visibleScope { names.insert(qualified(name)) }
                        scopes.append(Scope(name: qualified(name), depth: depth, isPublic: isPublic && visibleScope,
                                            isEnum: keyword == "enum"))
                    }
                case "case":
                    if let enclosing, enclosing.isEnum, enclosing.isPublic {
                        for item in trimmed.dropFirst("case".count).split(separator: ",") {
                            let caseName = item.trimmingCharacters(in: .whitespaces).prefix { $0.isLetter || $0.isNumber || $0 == "_" }
                            if !caseName.isEmpty { names.insert(qualified(String(caseName))) }
                        }
                    }
                case "init", "subscript":
                    break
                default:
                    if let name, isPublic, visibleScope, !modifiers.contains("override") { names.insert(qualified(name)) }
                }
            }
            for character in line {
                if character == "{" { depth += 1 } else if character == "}" { depth -= 1 }
            }
            while let last = scopes.last, depth <= last.depth { scopes.removeLast() }
        }
    }
}

@Suite("Docs/AppleNames.md lists exactly the Apple names KeychainServices declares")
struct AppleNamesListTests {
    let list: AppleNamesList
    let declared: Set<String>

    init() throws {
        list = AppleNamesList(markdown: try String(contentsOf: Repository.list, encoding: .utf8))
        var declarations = PublicDeclarations()
        for (_, text) in try Repository.sourceTexts() { declarations.add(source: text) }
        declared = declarations.names
    }

    @Test("every listed name is declared public in Sources/KeychainServices")
    func listedNamesAreDeclared() {
        let undeclared = (list.apple + list.keystone).filter { !declared.contains($0) }
        #expect(undeclared.isEmpty, "listed in Docs/AppleNames.md but not declared public: \(undeclared)")
    }

    @Test("every public declaration of Apple form is listed, as Apple's or as Keystone's own")
    func declaredNamesAreListed() {
        let listed = Set(list.apple + list.keystone)
        let unlisted = declared.filter { AppleNamesList.hasAppleForm($0) && !listed.contains($0) }.sorted()
        #expect(unlisted.isEmpty, "declared public but missing from Docs/AppleNames.md: \(unlisted)")
    }

    @Test("each name is listed once, and never both as Apple's and as Keystone's")
    func namesAreListedOnce() {
        let all = list.apple + list.keystone
        let repeated = Dictionary(grouping: all, by: { $0 }).filter { $0.value.count > 1 }.keys.sorted()
        #expect(repeated.isEmpty, "listed more than once: \(repeated)")
        #expect(list.apple.count > 400, "the names fences were not found: \(list.apple.count) names")
    }

    @Test("the scanner finds top-level names, members, nested types and enum cases, and nothing private or local")
    func scannerReadsDeclarations() {
        var scanner = PublicDeclarations()
        scanner.add(source: """
            #if !canImport(Darwin)
            /// A constant.
            public let kSecExample: CFString = "x{"  // a brace in a string is not a scope
            nonisolated(unsafe) public let kSecPointer: OpaquePointer? = nil
            let kSecInternal = 1
            public func SecExample(_ a: Int,
                                   _ b: Int) -> Int {
                let local = a + b
                switch local { case 0: return 0; default: return b }
            }
            public struct LAExample: Error {
                public enum Code: Int {
                    case one = -1, two = -2
                    @available(*, deprecated, renamed: "one")
                    public static let uno = Code.one
                }
                public static var one: Code { .one }
                public init(_ code: Code) { self.code = code }
                public let code: Code
                var hidden = 0
                public override var description: String { "" }
            }
            enum Internal { case hidden }
            extension LAExample {
                public func extra() {}
            }
            public func ~= (code: LAExample.Code, error: any Error) -> Bool { false }
            #endif
            """)
        #expect(scanner.names == [
            "kSecExample", "kSecPointer", "SecExample", "LAExample", "LAExample.Code", "LAExample.Code.one", "LAExample.Code.two",
            "LAExample.Code.uno", "LAExample.one", "LAExample.code", "LAExample.extra",
        ])
    }
}
