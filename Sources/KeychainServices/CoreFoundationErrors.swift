#if !canImport(Darwin)
import Foundation

// CFError.h: the CFError functions keychain code calls on the errors SecAccessControlCreateWithFlags and
// wrapper libraries hand back. `CFError` is `NSError` here, so each function reads the NSError: the
// results are what Apple's toll-free bridging gives for the same error.
//
// The domain and key constants are implicitly unwrapped, as Apple's: write `kCFErrorLocalizedDescriptionKey as String`
// as on Apple platforms (used bare as an `AnyHashable` key, the value would be wrapped in an Optional).

/// An error domain (`CFErrorDomain`): a string such as ``kCFErrorDomainOSStatus``.
public typealias CFErrorDomain = CFString

/// `kCFErrorDomainPOSIX`: errno values (`NSPOSIXErrorDomain`).
public let kCFErrorDomainPOSIX: CFErrorDomain! = NSPOSIXErrorDomain
/// `kCFErrorDomainOSStatus`: `OSStatus` values such as the errSec codes (`NSOSStatusErrorDomain`).
public let kCFErrorDomainOSStatus: CFErrorDomain! = NSOSStatusErrorDomain
/// `kCFErrorDomainMach`: Mach kernel return values (`NSMachErrorDomain`).
public let kCFErrorDomainMach: CFErrorDomain! = NSMachErrorDomain
/// `kCFErrorDomainCocoa`: Foundation's error codes (`NSCocoaErrorDomain`).
public let kCFErrorDomainCocoa: CFErrorDomain! = NSCocoaErrorDomain

/// `kCFErrorLocalizedDescriptionKey`: the user-presentable description (`NSLocalizedDescriptionKey`).
public let kCFErrorLocalizedDescriptionKey: CFString! = NSLocalizedDescriptionKey
/// `kCFErrorLocalizedFailureReasonKey`: why the operation failed (`NSLocalizedFailureReasonErrorKey`).
public let kCFErrorLocalizedFailureReasonKey: CFString! = NSLocalizedFailureReasonErrorKey
/// `kCFErrorLocalizedRecoverySuggestionKey`: what the user can do (`NSLocalizedRecoverySuggestionErrorKey`).
public let kCFErrorLocalizedRecoverySuggestionKey: CFString! = NSLocalizedRecoverySuggestionErrorKey
/// `kCFErrorUnderlyingErrorKey`: the error that caused this one (`NSUnderlyingErrorKey`).
public let kCFErrorUnderlyingErrorKey: CFString! = NSUnderlyingErrorKey
/// `kCFErrorURLKey`: the URL involved (`NSURLErrorKey`).
public let kCFErrorURLKey: CFString! = NSURLErrorKey
/// `kCFErrorFilePathKey`: the file path involved (`NSFilePathErrorKey`).
public let kCFErrorFilePathKey: CFString! = NSFilePathErrorKey

/// Creates an error with a domain, a code and a user-info dictionary.
///
/// - Parameters:
///   - allocator: Ignored (pass nil or `kCFAllocatorDefault`).
///   - domain: The error's domain; must not be nil (Apple's CFError traps too).
///   - code: The error's code.
///   - userInfo: Nil, or a dictionary with string keys (CFError's keys are strings; other keys are left out,
///     as `NSError.userInfo` cannot hold them).
public func CFErrorCreate(_ allocator: CFAllocator!, _ domain: CFErrorDomain!, _ code: CFIndex,
                          _ userInfo: CFDictionary!) -> CFError! {
    var info: [String: Any] = [:]
    for (key, value) in userInfo ?? [:] {
        if let name = key.base as? String { info[name] = value }
    }
    return NSError(domain: domain, code: code, userInfo: info)
}

/// The error's domain, such as ``kCFErrorDomainOSStatus``.
public func CFErrorGetDomain(_ err: CFError!) -> CFErrorDomain! {
    err.domain
}

/// The error's code, such as `errSecParam` (-50) for an error in ``kCFErrorDomainOSStatus``.
public func CFErrorGetCode(_ err: CFError!) -> CFIndex {
    err.code
}

/// A copy of the error's user-info dictionary: empty (never nil) when it has none.
public func CFErrorCopyUserInfo(_ err: CFError!) -> CFDictionary! {
    var info: CFDictionary = [:]
    for (key, value) in err.userInfo { info[key] = value }
    return info
}

/// The user-presentable description: ``kCFErrorLocalizedDescriptionKey`` when the error has one, else one
/// built from the domain and code (and the failure reason when there is one), as `NSError.localizedDescription`.
public func CFErrorCopyDescription(_ err: CFError!) -> CFString! {
    err.localizedDescription
}

/// ``kCFErrorLocalizedFailureReasonKey``'s value, or nil when the error has none.
public func CFErrorCopyFailureReason(_ err: CFError!) -> CFString! {
    err.localizedFailureReason
}

/// ``kCFErrorLocalizedRecoverySuggestionKey``'s value, or nil when the error has none.
public func CFErrorCopyRecoverySuggestion(_ err: CFError!) -> CFString! {
    err.localizedRecoverySuggestion
}
#endif
