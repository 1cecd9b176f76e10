#if canImport(Glibc)
import Foundation
import Glibc

/// What a stopped server has been sent and has not read, from the kernel's socket tables.
///
/// A process stopped with SIGSTOP (a paused etcd member, a suspended swtpm) accepts and reads nothing, while the
/// kernel still completes connections to its port and queues what clients send. The bytes waiting on the server's
/// side of every connection to that port (`/proc/net/tcp` and `tcp6`, column `rx_queue`, connections not yet
/// accepted included) therefore grow exactly when a client sends it something: a deterministic witness that a client
/// did or did not go to that server, where a stopwatch would only guess it from how long a call took.
///
/// What it cannot see: bytes of a connection the kernel did not complete because the server's accept queue was full
/// (swtpm's is one deep), so tests watch a client's established connection or a server with room in its queue.
///
/// A request or a TPM command is tens of bytes at least; a client closing its connection adds one (the FIN takes a
/// sequence number), so tests compare growth with ``requestFloor``, not with zero.
public enum PendingInput {
    /// Growth below this many bytes is no request (at most a few closed connections); a TPM command over the
    /// simulator protocol is at least 19 bytes, an HTTP request far more.
    public static let requestFloor = 16

    /// The bytes received and not read on the server side of the connections to 127.0.0.1:`port` (or ::1), or nil
    /// when the tables cannot be read.
    public static func bytes(port: UInt16) -> Int? {
        var total = 0
        var readAny = false
        for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
            guard let text = readProcFile(table) else { continue }
            readAny = true
            for line in text.split(separator: "\n").dropFirst() {
                let fields = line.split(separator: " ", omittingEmptySubsequences: true)
                guard fields.count > 4,
                      let local = fields[1].split(separator: ":").last, UInt16(local, radix: 16) == port,
                      fields[3] != "0A",  // the listening socket: its column counts connections, not bytes
                      let received = fields[4].split(separator: ":").last, let bytes = Int(received, radix: 16)
                else { continue }
                total += bytes
            }
        }
        return readAny ? total : nil
    }

    /// A /proc file read to its end with read(2) (its size says 0, which readers that trust the size take literally).
    private static func readProcFile(_ path: String) -> String? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { return nil }
            if count == 0 { break }
            data.append(contentsOf: buffer[0..<count])
        }
        return String(decoding: data, as: UTF8.self)
    }
}
#endif
