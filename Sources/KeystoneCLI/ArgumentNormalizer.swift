// Kept free of other dependencies: the fuzzer (Fuzz/) compiles this file on its own.

// MARK: - Argument normalisation (getopt habits that ArgumentParser does not share)

/// Rewrites `security`-style arguments for ArgumentParser:
/// - a group of short options such as `-lut 21600` becomes `-l -u -t 21600`;
/// - `-w` (or `-p` for keychain passwords) as the last argument, with no value, becomes `--prompt-password`,
///   so the secret is prompted for (or read from standard input).
func normalize(_ arguments: [String], valueOptions: Set<Character>, promptOptions: Set<Character>) -> [String] {
    var out: [String] = []
    var index = 0
    while index < arguments.count {
        let argument = arguments[index]
        if argument == "--" { out.append(contentsOf: arguments[index...]); break }
        if argument.hasPrefix("-"), !argument.hasPrefix("--"), argument.count >= 2 {
            let letters = Array(argument.dropFirst())
            if letters.count == 1, promptOptions.contains(letters[0]), index == arguments.count - 1 {
                out.append("--prompt-password")
                index += 1
                continue
            }
            // A group: letters up to its first value option (`-lu`, `-lut 21600`, `-lut21600`, `-Uw`).
            let flagsEnd = letters.firstIndex(where: { valueOptions.contains($0) }).map { $0 + 1 } ?? letters.count
            if letters.count > 1, letters[..<flagsEnd].allSatisfy({ $0.isLetter }), !valueOptions.contains(letters[0]) {
                // Split `-lut` into `-l -u -t`; a value option ends the group (its value is the rest of the group,
                // as getopt reads `-t21600`, else the next argument; a prompting option last of all prompts).
                var consumed = 1
                for (offset, letter) in letters.enumerated() {
                    guard valueOptions.contains(letter) else { out.append("-\(letter)"); continue }
                    let rest = String(letters[(offset + 1)...])
                    if !rest.isEmpty {
                        out.append(contentsOf: ["-\(letter)", rest])
                    } else if index + 1 < arguments.count {
                        out.append(contentsOf: ["-\(letter)", arguments[index + 1]])
                        consumed = 2
                    } else if promptOptions.contains(letter) {
                        out.append("--prompt-password")
                    } else {
                        out.append("-\(letter)")  // a missing value: ArgumentParser reports it
                    }
                    break
                }
                index += consumed
                continue
            }
            if letters.count > 1, valueOptions.contains(letters[0]), letters.count > 1 {
                out.append("-\(letters[0])")
                out.append(String(letters.dropFirst()))
                index += 1
                continue
            }
            out.append(argument)
            if letters.count == 1, valueOptions.contains(letters[0]), index + 1 < arguments.count {
                out.append(arguments[index + 1])
                index += 2
                continue
            }
            index += 1
            continue
        }
        out.append(argument)
        index += 1
    }
    return out
}
