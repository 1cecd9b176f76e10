// Stand-in for the CoreFoundation names the Security framework makes visible to Swift (`import Security`
// re-exports CoreFoundation). On Apple platforms the CF types are toll-free bridged to Foundation's classes;
// here they are those classes, which keeps the conversions keychain code relies on and the ones it must spell:
//
// - `kSecClass as String`, `String(kSecClass)`, `"ak" as CFString`, `[String: Any]` `as CFDictionary`,
//   `result as? Data` / `[String: Any]` / `[[String: Any]]`, `SecCopyErrorMessageString(s, nil) as String?`
//   compile, as on Apple platforms;
// - `let k: String = kSecClass` (no `as`) and passing a `[String: Any]` where a `CFDictionary` is expected
//   do not, as on Apple platforms (KeychainServices on Linux, where `CFString` is `String`, accepts both).
//
// Only compiled by Tests/AppleSDKStandIn/check.sh, never run: bodies are placeholders.
import Foundation

/// Any CoreFoundation object.
public typealias CFTypeRef = AnyObject
/// `CFString`, bridged to `NSString` and `String`.
public typealias CFString = NSString
/// `CFDictionary`, bridged to `NSDictionary` and `[AnyHashable: Any]`.
public typealias CFDictionary = NSDictionary
/// `CFData`, bridged to `NSData` and `Data`.
public typealias CFData = NSData
/// `CFArray`, bridged to `NSArray` and `[Any]`.
public typealias CFArray = NSArray
/// `CFNumber`, bridged to `NSNumber`.
public typealias CFNumber = NSNumber
/// `CFBoolean`, bridged to `NSNumber` and `Bool`.
public typealias CFBoolean = NSNumber
/// `CFDate`, bridged to `NSDate` and `Date`.
public typealias CFDate = NSDate
/// `CFError`, bridged to `NSError` and `Error`.
public typealias CFError = NSError
/// `OSStatus`.
public typealias OSStatus = Int32
/// `CFOptionFlags` (`unsigned long`).
public typealias CFOptionFlags = UInt
/// `CFIndex` (`signed long`).
public typealias CFIndex = Int
/// `CFTypeID`.
public typealias CFTypeID = UInt

/// `CFAllocator`: a CoreFoundation class without a Sendable conformance.
public final class CFAllocator {
    private init() {}
}

/// `kCFAllocatorDefault`, imported by Apple as an implicitly unwrapped optional.
public var kCFAllocatorDefault: CFAllocator! { standIn() }
/// `kCFBooleanTrue`.
public var kCFBooleanTrue: CFBoolean! { standIn() }
/// `kCFBooleanFalse`.
public var kCFBooleanFalse: CFBoolean! { standIn() }

/// `CFGetTypeID`: the CoreFoundation type of `cf` (compare with a type's `…GetTypeID()`; `as?` cannot test CF types).
public func CFGetTypeID(_ cf: CFTypeRef!) -> CFTypeID { standIn() }
/// `CFEqual`: whether two CoreFoundation objects are equal by their type's own equality.
public func CFEqual(_ cf1: CFTypeRef!, _ cf2: CFTypeRef!) -> Bool { standIn() }

/// The body of every stand-in function: the stand-in is compiled, never run.
func standIn(_ function: StaticString = #function) -> Never {
    fatalError("\(function): the Apple SDK stand-in is for compiling only")
}
