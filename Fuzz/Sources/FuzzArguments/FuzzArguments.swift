import CFuzzer
// The CLI's argument normaliser: arbitrary argument lists never crash it, and it never loses or reorders
// an argument that is not an option (a keychain path, a value).

public func fuzzArguments(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let bytes = Array(UnsafeRawBufferPointer(start: start, count: count))
    guard let first = bytes.first else { return 0 }
    let arguments = bytes.dropFirst().split(separator: 0, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
    let letters: [Character] = ["a", "s", "w", "p", "t", "l", "u", "X", "d", "o"]
    var values: Set<Character> = []
    var prompts: Set<Character> = []
    for (i, letter) in letters.enumerated() {
        if first & (1 << (i % 8)) != 0 { values.insert(letter) }
        if i % 3 == 0, first & (1 << ((i + 3) % 8)) != 0 { prompts.insert(letter) }
    }
    let out = normalize(arguments, valueOptions: values, promptOptions: prompts)
    // Every argument that is not an option survives, in order.
    let positional = arguments.prefix { $0 != "--" }.filter { !$0.hasPrefix("-") }
    var cursor = out.makeIterator()
    for argument in positional {
        var found = false
        while let next = cursor.next() { if next == argument || next.hasSuffix(argument) { found = true; break } }
        precondition(found, "normalize lost the argument \(argument.debugDescription)")
    }
    return 0
}

/// `main`, as SwiftPM names it for this executable: hands the command line to libFuzzer's driver.
@_cdecl("FuzzArguments_main")
public func FuzzArgumentsMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var count = argc
    var arguments = argv
    return LLVMFuzzerRunDriver(&count, &arguments) { data, size in
        guard let data else { return 0 }
        return fuzzArguments(UnsafeRawPointer(data), size)
    }
}
