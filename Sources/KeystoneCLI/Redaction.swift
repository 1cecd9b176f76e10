import Foundation

/// Credentials hidden in what the tool shows: every diagnostic, error and description of a keychain argument.
///
/// A keychain argument is a URL the user typed (`etcd://…`); a mistaken one may carry a password
/// (`etcd://user:PASSWORD@host/NAME`, `…?password=PASSWORD`). The etcd client refuses such URLs, but the refusal, `doctor`
/// and the settings verbs used to print the URL as given. Everything they show goes through ``redacted(_:)``.
///
/// Decision: the password of a URL's user information becomes `***` (`etcd://user:***@host/NAME`): the user name
/// and the host stay, so the URL can still be recognised. The `@` taken as the end of the user information is the
/// last one before the URL's first `?` or `#`, so a password holding `/` or `@` is hidden whole; a password holding
/// an unencoded `?` or `#` is not valid URL syntax and may be shown in part. The values of the query parameters
/// `password`, `passwd`, `pwd`, `pass`, `token` and `secret` become `***` too.
enum Redaction {
    static let mask = "***"
    private static let secretParameters: Set<String> = ["password", "passwd", "pwd", "pass", "token", "secret"]
    private static let delimiters: Set<Character> = [" ", "\t", "\n", "\r", "\"", "'", "<", ">", "`"]

    /// `text` with the password of every URL's user information and every credential query parameter masked.
    static func redacted(_ text: String) -> String {
        guard text.contains("://") else { return text }
        var characters = Array(text)
        var index = 0
        while index + 2 < characters.count {
            guard characters[index] == ":", characters[index + 1] == "/", characters[index + 2] == "/" else {
                index += 1
                continue
            }
            let start = index + 3
            var end = start
            while end < characters.count, !delimiters.contains(characters[end]) { end += 1 }
            let token = Array(characters[start..<end])
            let masked = maskURL(token)
            characters.replaceSubrange(start..<end, with: masked)
            index = start + masked.count
        }
        return String(characters)
    }

    /// Whether `text` holds a credential ``redacted(_:)`` would hide.
    static func holdsCredential(_ text: String) -> Bool { redacted(text) != text }

    /// What follows a URL's `://`, masked.
    private static func maskURL(_ token: [Character]) -> [Character] {
        var result = token
        let queryStart = token.firstIndex { $0 == "?" || $0 == "#" } ?? token.count
        if let at = token[..<queryStart].lastIndex(of: "@"), let colon = token[..<at].firstIndex(of: ":") {
            result = Array(token[...colon]) + Array(mask) + Array(token[at...])
        }
        // Query parameters, in what is left.
        guard let question = result.firstIndex(of: "?") else { return result }
        var output = Array(result[...question])
        let query = result[(question + 1)...]
        var first = true
        for parameter in query.split(separator: "&", omittingEmptySubsequences: false) {
            if !first { output.append("&") }
            first = false
            if let equals = parameter.firstIndex(of: "="),
               secretParameters.contains(String(parameter[..<equals]).lowercased()) {
                let valueEnd = parameter[equals...].firstIndex(of: "#") ?? parameter.endIndex
                output += Array(parameter[...equals]) + Array(mask) + Array(parameter[valueEnd...])
            } else {
                output += Array(parameter)
            }
        }
        return output
    }

    /// A JSON value (dictionaries, arrays, strings) with every string passed through ``redacted(_:)``.
    static func redactedJSON(_ value: Any) -> Any {
        switch value {
        case let text as String: return redacted(text)
        case let dictionary as [String: Any]: return dictionary.mapValues(redactedJSON)
        case let array as [Any]: return array.map(redactedJSON)
        default: return value
        }
    }
}
