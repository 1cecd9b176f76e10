#if !canImport(Darwin)
import Foundation

// The CoreFoundation names keychain code uses, as Swift types on platforms without CoreFoundation's
// bridging. What differs from Apple platforms:
// - `CFDictionary` is `[AnyHashable: Any]`, so `[String: Any] as CFDictionary` compiles; it is not
//   `CoreFoundation.CFDictionary` (swift-corelibs' opaque type, which SecItem calls do not take).
// - `CFString` is `String`: `kSecClass as String`, `String(kSecClass)` and `kSecClass as CFString` all work.
// - Results are Foundation objects (`NSData`, `NSDictionary`, `NSArray`, `NSString`, `NSNumber`, `NSDate`),
//   so `result as? Data`, `as? [String: Any]`, `as? [[String: Any]]` and `as? [Data]` work as on Apple platforms.

/// A keychain result or value: any object (`CFTypeRef`).
public typealias CFTypeRef = AnyObject
/// A SecItem dictionary.
public typealias CFDictionary = [AnyHashable: Any]
/// A string constant such as `kSecClass`.
public typealias CFString = String
/// Bytes.
public typealias CFData = NSData
/// A Boolean object (`kCFBooleanTrue`).
public typealias CFBoolean = NSNumber
/// A number object.
public typealias CFNumber = NSNumber
/// An array object.
public typealias CFArray = NSArray
/// A date object.
public typealias CFDate = NSDate
/// An error object, as `SecAccessControlCreateWithFlags` reports through `Unmanaged<CFError>`.
public typealias CFError = NSError
/// Apple's status code type.
public typealias OSStatus = Int32
/// An allocator; Keystone ignores it (Apple's code passes `nil` or `kCFAllocatorDefault`).
public final class CFAllocator: Sendable {
    private init() {}  // never instantiated: `kCFAllocatorDefault` is nil
}
/// A type identifier (unused on this platform; present so declarations compile).
public typealias CFTypeID = UInt
/// A count or an index, such as `CFErrorGetCode`'s result.
public typealias CFIndex = Int
/// A bit field of options.
public typealias CFOptionFlags = UInt

/// The default allocator: nil here, as every allocator argument is ignored.
public let kCFAllocatorDefault: CFAllocator? = nil

/// The Boolean true object.
public let kCFBooleanTrue: CFBoolean! = NSNumber(value: true)
/// The Boolean false object.
public let kCFBooleanFalse: CFBoolean! = NSNumber(value: false)
#endif
