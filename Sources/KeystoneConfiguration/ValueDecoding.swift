#if NIO
import Configuration
import Foundation

/// How an item's bytes become a value of a swift-configuration type.
///
/// Decision (the rules of swift-configuration's `DirectoryFilesProvider`, the other provider of secrets kept as
/// bytes, so an app that moves its secret files into a keychain keeps its values):
/// - `.string`: the bytes as UTF-8, exactly, but for one trailing newline (`\n` or `\r\n`, what `echo` and editors
///   add). Unlike `DirectoryFilesProvider`, bytes that are not UTF-8 are an error, not replaced: a secret silently
///   changed would fail far from its cause.
/// - `.int`, `.double`, `.bool`: the text with surrounding whitespace ignored; `Bool` takes `true` / `false`.
/// - `.bytes`: the bytes as they are.
/// - arrays: the text split at commas, each element trimmed; `.byteChunkArray`: each element base64.
enum ValueDecoding {
    /// The value of `bytes` as `type`, or nil when they are not one (the caller throws `.notConvertible`).
    static func decode(_ bytes: ArraySlice<UInt8>, as type: ConfigType) -> ConfigContent? {
        switch type {
        case .bytes:
            return .bytes(Array(bytes))
        case .string:
            guard let text = string(bytes) else { return nil }
            return .string(text)
        case .int:
            return trimmedText(bytes).flatMap { Int($0) }.map(ConfigContent.int)
        case .double:
            return trimmedText(bytes).flatMap { Double($0) }.map(ConfigContent.double)
        case .bool:
            return trimmedText(bytes).flatMap { Bool($0) }.map(ConfigContent.bool)
        case .stringArray:
            return elements(bytes).map(ConfigContent.stringArray)
        case .intArray:
            return elements(bytes).flatMap { all($0, Int.init) }.map(ConfigContent.intArray)
        case .doubleArray:
            return elements(bytes).flatMap { all($0, Double.init) }.map(ConfigContent.doubleArray)
        case .boolArray:
            return elements(bytes).flatMap { all($0, Bool.init) }.map(ConfigContent.boolArray)
        case .byteChunkArray:
            return elements(bytes).flatMap { all($0) { Data(base64Encoded: $0).map { Array($0) } } }.map(ConfigContent.byteChunkArray)
        }
    }

    /// The bytes of `content` as the provider reads them back (tests and tools that store values).
    static func encode(_ content: ConfigContent) -> [UInt8] {
        switch content {
        case .string(let s): return Array(s.utf8)
        case .int(let i): return Array(String(i).utf8)
        case .double(let d): return Array(String(d).utf8)
        case .bool(let b): return Array(String(b).utf8)
        case .bytes(let b): return b
        case .stringArray(let a): return Array(a.joined(separator: ",").utf8)
        case .intArray(let a): return Array(a.map(String.init).joined(separator: ",").utf8)
        case .doubleArray(let a): return Array(a.map { String($0) }.joined(separator: ",").utf8)
        case .boolArray(let a): return Array(a.map { String($0) }.joined(separator: ",").utf8)
        case .byteChunkArray(let a): return Array(a.map { Data($0).base64EncodedString() }.joined(separator: ",").utf8)
        }
    }

    private static func string(_ bytes: ArraySlice<UInt8>) -> String? {
        var end = bytes.endIndex
        if end > bytes.startIndex, bytes[end - 1] == UInt8(ascii: "\n") {
            end -= 1
            if end > bytes.startIndex, bytes[end - 1] == UInt8(ascii: "\r") { end -= 1 }
        }
        return String(validating: bytes[bytes.startIndex..<end], as: UTF8.self)
    }

    private static func trimmedText(_ bytes: ArraySlice<UInt8>) -> String? {
        String(validating: bytes, as: UTF8.self)?.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    private static func elements(_ bytes: ArraySlice<UInt8>) -> [String]? {
        guard let text = trimmedText(bytes) else { return nil }
        if text.isEmpty { return [] }
        return text.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
    }

    private static func all<T>(_ texts: [String], _ parse: (String) -> T?) -> [T]? {
        var values: [T] = []
        values.reserveCapacity(texts.count)
        for text in texts {
            guard let value = parse(text) else { return nil }
            values.append(value)
        }
        return values
    }
}
#endif
