import Foundation

/// What identifies one password item: its class and the primary-key attributes that tell it apart.
///
/// Keystone's two item types, ``GenericPassword`` and ``InternetPassword``, are the only conformers
/// it needs; the protocol is public so code can be generic over both.
public protocol KeychainItem: Sendable, Hashable, CustomStringConvertible {
    /// The item's class (`kSecClass`).
    static var itemClass: ItemClass { get }
    /// The access group the item lives in, or nil for the keychain's default (``ItemOptions/accessGroup``).
    var accessGroup: String? { get }
    /// Whether the item is the synchronizable one (`kSecAttrSynchronizable`), or nil for the keychain's default
    /// (``ItemOptions/synchronizable``).
    ///
    /// The default implementation returns nil.
    var synchronizable: Bool? { get }
    /// The account (`kSecAttrAccount`).
    var account: String { get }
    /// The class and primary-key attributes identifying this item (without access group and sync, which
    /// ``Keychain`` adds from the item, or from its own ``ItemOptions`` when the item leaves them nil).
    var identifyingAttributes: KeychainQuery { get }
    /// The identity compiled once for the engine's fast path, or nil when the item has no such form.
    ///
    /// The default compiles ``identifyingAttributes``.
    var compiledKey: CompiledItemKey? { get }
}

extension KeychainItem {
    /// nil: the keychain's ``ItemOptions/synchronizable``.
    public var synchronizable: Bool? { nil }

    public var compiledKey: CompiledItemKey? { CompiledItemKey(identifyingAttributes) }
}

/// A generic password (`kSecClassGenericPassword`): a secret stored under a service and an account.
///
/// Built only with a non-empty service, so it can never be confused with "every item". It has no
/// server, protocol or port: those belong to ``InternetPassword``, a separate type.
///
/// ```swift
/// let item = try GenericPassword(service: "com.example.api", account: "alice@example.com")
/// ```
public struct GenericPassword: KeychainItem {
    /// `kSecClassGenericPassword` (`genp`).
    public static var itemClass: ItemClass { .genericPassword }

    /// The service (`kSecAttrService`), never empty.
    public let service: String
    /// The account (`kSecAttrAccount`); may be empty.
    public let account: String
    /// The access group (`kSecAttrAccessGroup`), or nil for the keychain's default group.
    public let accessGroup: String?
    /// Whether this is the synchronizable item (`kSecAttrSynchronizable`), or nil for the keychain's default.
    public let synchronizable: Bool?

    /// Describes a generic password.
    ///
    /// Every attribute of the item's identity is here or in the keychain's ``ItemOptions``: save, read, update and
    /// delete of this value on one ``Keychain`` address the same item.
    ///
    /// - Parameters:
    ///   - service: the service, usually a reverse-DNS name; must not be empty.
    ///   - account: the account (user name, key name); may be empty.
    ///   - accessGroup: an access group the app is entitled to, or nil for the keychain's default group.
    ///   - synchronizable: true for the item that synchronizes through iCloud Keychain, false for the local one,
    ///     nil for the keychain's ``ItemOptions/synchronizable``.
    /// - Throws: ``KeychainError/invalidItem`` when `service` is empty or `accessGroup` is an empty string.
    public init(service: String, account: String, accessGroup: String? = nil, synchronizable: Bool? = nil) throws(KeychainError) {
        guard !service.isEmpty else { throw KeychainError(code: .invalidItem, reason: "a generic password needs a non-empty service") }
        if let accessGroup, accessGroup.isEmpty {
            throw KeychainError(code: .invalidItem, reason: "the access group must not be empty; pass nil for the default group")
        }
        self.service = service
        self.account = account
        self.accessGroup = accessGroup
        self.synchronizable = synchronizable
    }

    /// `genp` with service and account.
    public var identifyingAttributes: KeychainQuery {
        [Key.class: .string(ItemClass.genericPassword.rawValue), Key.service: .string(service), Key.account: .string(account)]
    }

    /// Service and account, compiled without building ``identifyingAttributes``.
    public var compiledKey: CompiledItemKey? { CompiledItemKey(genericPasswordService: service, account: account) }

    /// The item with another account, same service, access group and synchronizable.
    public func withAccount(_ account: String) -> GenericPassword {
        // Cannot fail: the service was validated already.
        GenericPassword(unchecked: service, account: account, accessGroup: accessGroup, synchronizable: synchronizable)
    }

    private init(unchecked service: String, account: String, accessGroup: String?, synchronizable: Bool?) {
        self.service = service
        self.account = account
        self.accessGroup = accessGroup
        self.synchronizable = synchronizable
    }

    /// `genp service=… account=…`: names only, no secret.
    public var description: String {
        "genp service=\"\(service)\" account=\"\(account)\"" + (accessGroup.map { " group=\"\($0)\"" } ?? "")
            + (synchronizable.map { " synchronizable=\($0)" } ?? "")
    }
}

/// An internet password (`kSecClassInternetPassword`): a secret for an account on a server.
///
/// The server must not be empty; the port must be in 0…65535. Attributes left nil are stored and
/// matched as unset (empty), so an `InternetPassword` identifies exactly one item: the HTTPS item and
/// the FTP item for the same server and account are different items.
///
/// ```swift
/// let item = try InternetPassword(server: "api.example.com", account: "alice", protocol: .https, port: 443)
/// ```
public struct InternetPassword: KeychainItem {
    /// `kSecClassInternetPassword` (`inet`).
    public static var itemClass: ItemClass { .internetPassword }

    /// The server (`kSecAttrServer`), never empty.
    public let server: String
    /// The account (`kSecAttrAccount`); may be empty.
    public let account: String
    /// The protocol (`kSecAttrProtocol`), or nil for unset.
    public let `protocol`: InternetProtocol?
    /// The authentication type (`kSecAttrAuthenticationType`), or nil for unset.
    public let authenticationType: AuthenticationType?
    /// The port (`kSecAttrPort`), or nil for unset (stored as 0).
    public let port: Int?
    /// The path (`kSecAttrPath`), or nil for unset.
    public let path: String?
    /// The security domain (`kSecAttrSecurityDomain`, an HTTP realm), or nil for unset.
    public let securityDomain: String?
    /// The access group (`kSecAttrAccessGroup`), or nil for the keychain's default group.
    public let accessGroup: String?
    /// Whether this is the synchronizable item (`kSecAttrSynchronizable`), or nil for the keychain's default.
    public let synchronizable: Bool?

    /// Describes an internet password.
    ///
    /// Every attribute of the item's identity is here or in the keychain's ``ItemOptions``: save, read, update and
    /// delete of this value on one ``Keychain`` address the same item. `synchronizable` nil takes the keychain's
    /// ``ItemOptions/synchronizable``, `accessGroup` nil its ``ItemOptions/accessGroup``.
    ///
    /// - Throws: ``KeychainError/invalidItem`` when `server` is empty, `port` is outside 0…65535, or
    ///   `accessGroup` is an empty string.
    public init(server: String, account: String, protocol: InternetProtocol? = nil,
                authenticationType: AuthenticationType? = nil, port: Int? = nil, path: String? = nil,
                securityDomain: String? = nil, accessGroup: String? = nil, synchronizable: Bool? = nil) throws(KeychainError) {
        guard !server.isEmpty else { throw KeychainError(code: .invalidItem, reason: "an internet password needs a non-empty server") }
        if let port, !(0...65535).contains(port) {
            throw KeychainError(code: .invalidItem, reason: "the port must be in 0...65535")
        }
        if let accessGroup, accessGroup.isEmpty {
            throw KeychainError(code: .invalidItem, reason: "the access group must not be empty; pass nil for the default group")
        }
        self.server = server
        self.account = account
        self.protocol = `protocol`
        self.authenticationType = authenticationType
        self.port = port
        self.path = path
        self.securityDomain = securityDomain
        self.accessGroup = accessGroup
        self.synchronizable = synchronizable
    }

    /// `inet` with every primary-key attribute; unset ones as their empty values.
    public var identifyingAttributes: KeychainQuery {
        [
            Key.class: .string(ItemClass.internetPassword.rawValue),
            Key.server: .string(server),
            Key.account: .string(account),
            Key.protocol: .string(`protocol`?.rawValue ?? ""),
            Key.authenticationType: .string(authenticationType?.rawValue ?? ""),
            Key.port: .number(Int64(port ?? 0)),
            Key.path: .string(path ?? ""),
            Key.securityDomain: .string(securityDomain ?? ""),
        ]
    }

    /// `inet server=… account=… …`: names only, no secret.
    public var description: String {
        var parts = ["inet server=\"\(server)\" account=\"\(account)\""]
        if let p = `protocol` { parts.append("protocol=\(p)") }
        if let a = authenticationType { parts.append("authenticationType=\(a)") }
        if let port { parts.append("port=\(port)") }
        if let path { parts.append("path=\"\(path)\"") }
        if let securityDomain { parts.append("securityDomain=\"\(securityDomain)\"") }
        if let accessGroup { parts.append("group=\"\(accessGroup)\"") }
        if let synchronizable { parts.append("synchronizable=\(synchronizable)") }
        return parts.joined(separator: " ")
    }
}

/// The protocol of an internet password (`kSecAttrProtocol`): Apple's four-character codes.
///
/// Trailing spaces in the raw values are significant (`"ftp "`, `"ssh "`).
public enum InternetProtocol: String, Sendable, Hashable, CaseIterable, Codable {
    /// `kSecAttrProtocolFTP`.
    case ftp = "ftp "
    /// `kSecAttrProtocolFTPAccount`.
    case ftpAccount = "ftpa"
    /// `kSecAttrProtocolHTTP`.
    case http = "http"
    /// `kSecAttrProtocolIRC`.
    case irc = "irc "
    /// `kSecAttrProtocolNNTP`.
    case nntp = "nntp"
    /// `kSecAttrProtocolPOP3`.
    case pop3 = "pop3"
    /// `kSecAttrProtocolSMTP`.
    case smtp = "smtp"
    /// `kSecAttrProtocolSOCKS`.
    case socks = "sox "
    /// `kSecAttrProtocolIMAP`.
    case imap = "imap"
    /// `kSecAttrProtocolLDAP`.
    case ldap = "ldap"
    /// `kSecAttrProtocolAppleTalk`.
    case appleTalk = "atlk"
    /// `kSecAttrProtocolAFP`.
    case afp = "afp "
    /// `kSecAttrProtocolTelnet`.
    case telnet = "teln"
    /// `kSecAttrProtocolSSH`.
    case ssh = "ssh "
    /// `kSecAttrProtocolFTPS`.
    case ftps = "ftps"
    /// `kSecAttrProtocolHTTPS`.
    case https = "htps"
    /// `kSecAttrProtocolHTTPProxy`.
    case httpProxy = "htpx"
    /// `kSecAttrProtocolHTTPSProxy`.
    case httpsProxy = "htsx"
    /// `kSecAttrProtocolFTPProxy`.
    case ftpProxy = "ftpx"
    /// `kSecAttrProtocolSMB`.
    case smb = "smb "
    /// `kSecAttrProtocolRTSP`.
    case rtsp = "rtsp"
    /// `kSecAttrProtocolRTSPProxy`.
    case rtspProxy = "rtsx"
    /// `kSecAttrProtocolDAAP`.
    case daap = "daap"
    /// `kSecAttrProtocolEPPC`.
    case eppc = "eppc"
    /// `kSecAttrProtocolIPP`.
    case ipp = "ipp "
    /// `kSecAttrProtocolNNTPS`.
    case nntps = "ntps"
    /// `kSecAttrProtocolLDAPS`.
    case ldaps = "ldps"
    /// `kSecAttrProtocolTelnetS`.
    case telnetS = "tels"
    /// `kSecAttrProtocolIMAPS`.
    case imaps = "imps"
    /// `kSecAttrProtocolIRCS`.
    case ircs = "ircs"
    /// `kSecAttrProtocolPOP3S`.
    case pop3S = "pops"
}

/// The authentication type of an internet password (`kSecAttrAuthenticationType`).
public enum AuthenticationType: String, Sendable, Hashable, CaseIterable, Codable {
    /// `kSecAttrAuthenticationTypeNTLM`.
    case ntlm = "ntlm"
    /// `kSecAttrAuthenticationTypeMSN`.
    case msn = "msna"
    /// `kSecAttrAuthenticationTypeDPA`.
    case dpa = "dpaa"
    /// `kSecAttrAuthenticationTypeRPA`.
    case rpa = "rpaa"
    /// `kSecAttrAuthenticationTypeHTTPBasic`.
    case httpBasic = "http"
    /// `kSecAttrAuthenticationTypeHTTPDigest`.
    case httpDigest = "httd"
    /// `kSecAttrAuthenticationTypeHTMLForm`.
    case htmlForm = "form"
    /// `kSecAttrAuthenticationTypeDefault`.
    case `default` = "dflt"
}
