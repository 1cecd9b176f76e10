#if NIO
import Foundation

// The JSON shapes of etcd's v3 gateway (grpc-gateway over etcdserverpb), as Debian's etcd 3.4 writes and reads them:
// bytes fields are base64 (JSONEncoder/JSONDecoder's default for `Data`), int64/uint64 fields are JSON strings, and
// fields whose value is zero, false or empty are omitted (so every response field here is optional).

/// An int64 on the wire: written as a JSON string, read from a string or a number.
struct WireInt64: Codable, Hashable, Sendable {
    var value: Int64
    init(_ value: Int64) { self.value = value }
    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let string = try? container.decode(String.self) {
            guard let value = Int64(string) else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "not an int64: \(string)")
            }
            self.value = value
        } else {
            self.value = try container.decode(Int64.self)
        }
    }
    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(String(value))
    }
}

/// A uint64 on the wire (member IDs): written as a JSON string, read from a string or a number.
struct WireUInt64: Codable, Hashable, Sendable {
    var value: UInt64
    init(_ value: UInt64) { self.value = value }
    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let string = try? container.decode(String.self) {
            guard let value = UInt64(string) else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "not a uint64: \(string)")
            }
            self.value = value
        } else {
            self.value = try container.decode(UInt64.self)
        }
    }
    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(String(value))
    }
}

/// etcd's v3 gateway messages (etcdserverpb), only the fields Keystone uses.
enum Wire {
    struct ResponseHeader: Codable, Sendable {
        var clusterID: WireUInt64?
        var memberID: WireUInt64?
        var revision: WireInt64?
        var raftTerm: WireInt64?
        enum CodingKeys: String, CodingKey {
            case clusterID = "cluster_id", memberID = "member_id", revision, raftTerm = "raft_term"
        }
    }

    struct KeyValue: Codable, Sendable {
        var key: Data?
        var createRevision: WireInt64?
        var modRevision: WireInt64?
        var version: WireInt64?
        var value: Data?
        var lease: WireInt64?
        enum CodingKeys: String, CodingKey {
            case key, createRevision = "create_revision", modRevision = "mod_revision", version, value, lease
        }
    }

    struct RangeRequest: Codable, Sendable, Hashable {
        var key: Data
        var rangeEnd: Data?
        var limit: WireInt64?
        var revision: WireInt64?
        enum CodingKeys: String, CodingKey { case key, rangeEnd = "range_end", limit, revision }
    }

    struct RangeResponse: Codable, Sendable {
        var header: ResponseHeader?
        var kvs: [KeyValue]?
        var more: Bool?
        var count: WireInt64?
    }

    struct PutRequest: Codable, Sendable, Hashable {
        var key: Data
        var value: Data
    }

    struct PutResponse: Codable, Sendable {
        var header: ResponseHeader?
    }

    struct DeleteRangeRequest: Codable, Sendable, Hashable {
        var key: Data
        var rangeEnd: Data?
        enum CodingKeys: String, CodingKey { case key, rangeEnd = "range_end" }
    }

    struct DeleteRangeResponse: Codable, Sendable {
        var header: ResponseHeader?
        var deleted: WireInt64?
    }

    struct Compare: Codable, Sendable, Hashable {
        var key: Data
        /// "VERSION", "CREATE", "MOD" or "VALUE".
        var target: String
        /// "EQUAL", "GREATER", "LESS" or "NOT_EQUAL".
        var result: String
        var createRevision: WireInt64?
        var modRevision: WireInt64?
        var value: Data?
        /// A compare over [key, rangeEnd): it must hold for every key there.
        var rangeEnd: Data? = nil
        enum CodingKeys: String, CodingKey {
            case key, target, result, createRevision = "create_revision", modRevision = "mod_revision", value, rangeEnd = "range_end"
        }
    }

    struct RequestOp: Codable, Sendable, Hashable {
        var requestRange: RangeRequest?
        var requestPut: PutRequest?
        var requestDeleteRange: DeleteRangeRequest?
        enum CodingKeys: String, CodingKey {
            case requestRange = "request_range", requestPut = "request_put", requestDeleteRange = "request_delete_range"
        }
    }

    struct ResponseOp: Codable, Sendable {
        var responseRange: RangeResponse?
        var responsePut: PutResponse?
        var responseDeleteRange: DeleteRangeResponse?
        enum CodingKeys: String, CodingKey {
            case responseRange = "response_range", responsePut = "response_put", responseDeleteRange = "response_delete_range"
        }
    }

    struct TxnRequest: Codable, Sendable {
        var compare: [Compare]
        var success: [RequestOp]
        var failure: [RequestOp]
    }

    struct TxnResponse: Codable, Sendable {
        var header: ResponseHeader?
        var succeeded: Bool?
        var responses: [ResponseOp]?
    }

    struct AuthenticateRequest: Codable, Sendable {
        var name: String
        var password: String
    }

    struct AuthenticateResponse: Codable, Sendable {
        var header: ResponseHeader?
        var token: String?
    }

    struct Empty: Codable, Sendable {}

    struct StatusResponse: Codable, Sendable {
        var header: ResponseHeader?
        var version: String?
        var dbSize: WireInt64?
        var leader: WireUInt64?
        var raftIndex: WireInt64?
        var raftTerm: WireInt64?
        /// The bytes of the database in use (etcd 3.4+); `dbSize` minus what a defragmentation would free.
        var dbSizeInUse: WireInt64?
        /// The member's raised alarms, e.g. "memberID:… alarm:NOSPACE ".
        var errors: [String]?
    }

    struct Member: Codable, Sendable {
        var id: WireUInt64?
        var name: String?
        var peerURLs: [String]?
        var clientURLs: [String]?
        enum CodingKeys: String, CodingKey { case id = "ID", name, peerURLs, clientURLs }
    }

    struct MemberListResponse: Codable, Sendable {
        var header: ResponseHeader?
        var members: [Member]?
    }

    /// An error answer: HTTP 4xx/5xx with `{"error": …, "message": …, "code": gRPC code}`.
    struct ErrorResponse: Codable, Sendable {
        var error: String?
        var message: String?
        var code: Int?
    }
}

extension Wire.KeyValue {
    var keyValue: EtcdKeyValue {
        EtcdKeyValue(key: key ?? Data(), value: value ?? Data(), createRevision: createRevision?.value ?? 0,
                     modRevision: modRevision?.value ?? 0, version: version?.value ?? 0)
    }
}

extension Wire.RangeResponse {
    var result: EtcdRangeResult {
        EtcdRangeResult(revision: header?.revision?.value ?? 0, kvs: (kvs ?? []).map(\.keyValue), more: more ?? false,
                        count: count?.value ?? 0)
    }
}

extension EtcdOperation {
    var wire: Wire.RequestOp {
        switch self {
        case .put(let key, let value):
            Wire.RequestOp(requestPut: Wire.PutRequest(key: key, value: value))
        case .delete(let key):
            Wire.RequestOp(requestDeleteRange: Wire.DeleteRangeRequest(key: key))
        case .deletePrefix(let prefix):
            Wire.RequestOp(requestDeleteRange: Wire.DeleteRangeRequest(key: prefix, rangeEnd: EtcdClient.prefixEnd(prefix)))
        case .range(let key):
            Wire.RequestOp(requestRange: Wire.RangeRequest(key: key))
        case .rangePrefix(let prefix, let limit):
            Wire.RequestOp(requestRange: Wire.RangeRequest(key: prefix, rangeEnd: EtcdClient.prefixEnd(prefix), limit: limit.map { WireInt64(Int64($0)) }))
        }
    }
}

extension EtcdCompare {
    var wire: Wire.Compare {
        switch self {
        case .createRevision(let key, let revision):
            Wire.Compare(key: key, target: "CREATE", result: "EQUAL", createRevision: WireInt64(revision))
        case .modRevision(let key, let revision):
            Wire.Compare(key: key, target: "MOD", result: "EQUAL", modRevision: WireInt64(revision))
        case .value(let key, let value):
            Wire.Compare(key: key, target: "VALUE", result: "EQUAL", value: value)
        case .noKeyCreated(let prefix, let revision):
            Wire.Compare(key: prefix, target: "CREATE", result: "LESS", createRevision: WireInt64(revision + 1),
                         rangeEnd: EtcdClient.prefixEnd(prefix))
        }
    }
}
#endif
