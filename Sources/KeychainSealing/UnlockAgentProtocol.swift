import Foundation
#if os(Linux)
import CKeyring
import Glibc
#endif

/// The unlock agent's wire protocol: one request and one answer per connection, each a frame of a 4-byte big-endian
/// length and a body of at most ``maximumFrame`` bytes.
///
/// Requests: `P` put (name, TTL in seconds as 4 bytes, payload), `G` get (name), `R` remove (name), `I` ping. A name
/// is 2 bytes of length and at most 256 bytes starting with `keystone:`. Answers: a status byte (``Status``), then
/// for a get the payload, for a ping the agent's pid (4 bytes). Nothing lists the names or payloads held.
package enum UnlockAgentProtocol {
    package static let maximumFrame = 8192
    package static let maximumName = 256
    package static let maximumPayload = 4096
    /// How long a call waits on the socket (connect, send, receive) before the agent counts as unavailable.
    package static let deadlineMilliseconds: Int32 = 2000

    package enum Operation: UInt8, Sendable {
        case put = 0x50      // "P"
        case get = 0x47      // "G"
        case remove = 0x52   // "R"
        case ping = 0x49     // "I"
    }

    package enum Status: UInt8, Sendable {
        case ok = 0
        case absent = 1
        case malformed = 2
        /// The peer is another user (SO_PEERCRED): nothing was done.
        case refused = 3
    }

    package enum Request: Sendable, Equatable {
        case put(name: String, ttl: UInt32, payload: [UInt8])
        case get(name: String)
        case remove(name: String)
        case ping

        package func encoded() -> [UInt8] {
            var body: [UInt8] = []
            func appendName(_ name: String) {
                let bytes = Array(name.utf8)
                body += [UInt8(bytes.count >> 8), UInt8(bytes.count & 0xff)] + bytes
            }
            switch self {
            case .put(let name, let ttl, let payload):
                body.append(Operation.put.rawValue)
                appendName(name)
                body += [UInt8(ttl >> 24), UInt8((ttl >> 16) & 0xff), UInt8((ttl >> 8) & 0xff), UInt8(ttl & 0xff)]
                body += payload
            case .get(let name):
                body.append(Operation.get.rawValue)
                appendName(name)
            case .remove(let name):
                body.append(Operation.remove.rawValue)
                appendName(name)
            case .ping:
                body.append(Operation.ping.rawValue)
            }
            return UnlockAgentProtocol.frame(body)
        }

        /// Parses a request body; nil when it is malformed (unknown operation, a bad name, a payload too large).
        package static func decode(_ body: [UInt8]) -> Request? {
            guard let first = body.first, let operation = Operation(rawValue: first) else { return nil }
            if operation == .ping { return body.count == 1 ? .ping : nil }
            guard body.count >= 3 else { return nil }
            let length = Int(body[1]) << 8 | Int(body[2])
            guard length > 0, length <= maximumName, body.count >= 3 + length,
                  let name = String(validating: body[3..<(3 + length)], as: UTF8.self), name.hasPrefix("keystone:") else { return nil }
            let rest = Array(body[(3 + length)...])
            switch operation {
            case .put:
                guard rest.count >= 4, rest.count - 4 <= maximumPayload else { return nil }
                let ttl = UInt32(rest[0]) << 24 | UInt32(rest[1]) << 16 | UInt32(rest[2]) << 8 | UInt32(rest[3])
                return .put(name: name, ttl: ttl, payload: Array(rest[4...]))
            case .get: return rest.isEmpty ? .get(name: name) : nil
            case .remove: return rest.isEmpty ? .remove(name: name) : nil
            case .ping: return nil
            }
        }
    }

    package static func frame(_ body: [UInt8]) -> [UInt8] {
        let count = UInt32(body.count)
        return [UInt8(count >> 24), UInt8((count >> 16) & 0xff), UInt8((count >> 8) & 0xff), UInt8(count & 0xff)] + body
    }

    #if os(Linux)
    /// Writes all of `bytes`; false on an error or the socket's send timeout.
    package static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL)) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { return false }
            offset += written
        }
        return true
    }

    /// Reads exactly `count` bytes; nil on an error, end of file or the socket's receive timeout (`errno` tells).
    package static func readExactly(_ fd: Int32, _ count: Int) -> [UInt8]? {
        var buffer = [UInt8](repeating: 0, count: count)
        var offset = 0
        while offset < count {
            let got = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + offset, count - offset, 0) }
            if got < 0 && errno == EINTR { continue }
            if got == 0 { errno = ECONNRESET }
            guard got > 0 else {
                ckagent_wipe(&buffer, buffer.count)
                return nil
            }
            offset += got
        }
        return buffer
    }

    /// Reads one frame's body; nil on an error, a timeout or a frame larger than ``maximumFrame``.
    package static func readFrame(_ fd: Int32) -> [UInt8]? {
        guard let header = readExactly(fd, 4) else { return nil }
        let count = Int(header[0]) << 24 | Int(header[1]) << 16 | Int(header[2]) << 8 | Int(header[3])
        guard count > 0, count <= maximumFrame else {
            errno = EMSGSIZE
            return nil
        }
        return readExactly(fd, count)
    }

    /// The `sockaddr_un` of `path`, passed to `body` with its length.
    package static func withAddress<T>(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> T) -> T {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, byte) in bytes.prefix(raw.count - 1).enumerated() { raw[i] = byte }
        }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
    }
    #endif
}
