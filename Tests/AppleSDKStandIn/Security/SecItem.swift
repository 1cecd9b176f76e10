// Stand-in for SecItem.h and SecBase.h's functions, with the signatures Apple's SDK gives Swift.
// Only compiled by Tests/AppleSDKStandIn/check.sh, never run.

/// Adds an item to the keychain.
public func SecItemAdd(_ attributes: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus { standIn() }

/// Returns the items that match a query.
public func SecItemCopyMatching(_ query: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus { standIn() }

/// Modifies the items that match a query.
public func SecItemUpdate(_ query: CFDictionary, _ attributesToUpdate: CFDictionary) -> OSStatus { standIn() }

/// Deletes the items that match a query.
public func SecItemDelete(_ query: CFDictionary) -> OSStatus { standIn() }

/// A message describing a result code.
public func SecCopyErrorMessageString(_ status: OSStatus, _ reserved: UnsafeMutableRawPointer?) -> CFString? { standIn() }
