import Foundation
import Testing
@testable import Keystone
import KeychainEngine

@Suite("SystemKeychain's conversions between typed queries and Apple dictionaries")
struct SystemKeychainConversionTests {
    @Test("Typed values become the Foundation values SecItem dictionaries hold")
    func toDictionary() throws {
        let query: KeychainQuery = [
            Key.class: .string("genp"), Key.service: .string("s"), Key.valueData: .data(Data([1, 2, 3])),
            Key.returnData: .bool(true), Key.port: .number(443), Key.creationDate: .date(Date(timeIntervalSince1970: 5)),
        ]
        let dictionary = try SystemKeychain.dictionary(query)
        #expect(dictionary.count == query.count)
        #expect(dictionary["class"] as? String == "genp")
        #expect(dictionary["v_Data"] as? Data == Data([1, 2, 3]))
        #expect(dictionary["r_Data"] as? Bool == true)
        #expect((dictionary["port"] as? NSNumber)?.int64Value == 443)
        #expect(dictionary["cdat"] as? Date == Date(timeIntervalSince1970: 5))
    }

    @Test("An authentication context maps to one LAContext for as long as it lives")
    func contexts() throws {
        let context = AuthenticationContext(reuseDuration: 30)
        let first = try SystemKeychain.dictionary([Key.useAuthenticationContext: .authenticationContext(context)])
        let second = try SystemKeychain.dictionary([Key.useAuthenticationContext: .authenticationContext(context)])
        let a: AnyObject = try #require(first[Key.useAuthenticationContext]) as AnyObject
        let b: AnyObject = try #require(second[Key.useAuthenticationContext]) as AnyObject
        #expect(ObjectIdentifier(a) == ObjectIdentifier(b))
        let other = try SystemKeychain.dictionary([Key.useAuthenticationContext: .authenticationContext(AuthenticationContext())])
        let c: AnyObject = try #require(other[Key.useAuthenticationContext]) as AnyObject
        #expect(ObjectIdentifier(c) != ObjectIdentifier(a))
    }

    @Test("Results come back in SecItem's shapes: bare data, dictionary, array")
    func fromResults() throws {
        #expect(try SystemKeychain.itemResult(nil, itemClass: .genericPassword) == nil)
        #expect(try SystemKeychain.itemResult(NSData(data: Data([9])), itemClass: .genericPassword) == .data(Data([9])))

        let attributes: NSDictionary = ["class": "genp", "acct": "alice", "sync": NSNumber(value: 0), "cdat": Date(timeIntervalSince1970: 1),
                                        "v_Data": NSData(data: Data([7])), "port": NSNumber(value: 0)]
        let converted = try #require(try SystemKeychain.itemResult(attributes, itemClass: .genericPassword)?.attributes)
        #expect(converted[Key.account] == .string("alice"))
        #expect(converted[Key.synchronizable] == .bool(false))
        #expect(converted[Key.creationDate] == .date(Date(timeIntervalSince1970: 1)))
        #expect(converted[Key.valueData] == .data(Data([7])))
        #expect(ItemAttributes(converted).synchronizable == false)

        let array: NSArray = [attributes, attributes]
        let rows = try #require(try SystemKeychain.itemResult(array, itemClass: .genericPassword)?.array)
        #expect(rows.count == 2)
    }
}
