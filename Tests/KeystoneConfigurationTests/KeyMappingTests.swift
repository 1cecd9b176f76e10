#if NIO
import Configuration
import KeystoneConfiguration
import Testing

@Suite("Key mapping")
struct KeyMappingTests {
    @Test("the default rule maps db.password to service com.example.app, account db.password")
    func defaultRule() {
        let mapping = KeychainKeyMapping.service("com.example.app")
        #expect(mapping.item(AbsoluteConfigKey(["db", "password"])) == KeychainItemName(service: "com.example.app", account: "db.password"))
        #expect(mapping.services == ["com.example.app"])
    }

    @Test("an empty key or an empty component maps to no item")
    func emptyKeys() {
        let mapping = KeychainKeyMapping.service("com.example.app")
        #expect(mapping.item(AbsoluteConfigKey([])) == nil)
        #expect(mapping.item(AbsoluteConfigKey(["db", "", "password"])) == nil)
    }

    @Test("the separator is overridable")
    func separator() {
        let mapping = KeychainKeyMapping.service("svc", separator: "/")
        #expect(mapping.item(AbsoluteConfigKey(["db", "password"]))?.account == "db/password")
    }
}
#endif
