import Foundation
import Testing
import Keystone
@testable import KeystoneProtectedFiles
import KeychainEngine
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@Suite("Protected files: the background writer")
struct BackgroundWriterTests {
    func temporaryFile() throws -> (Int32, String) {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-bgwriter-\(UUID().uuidString)").path
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        try #require(fd >= 0)
        return (fd, path)
    }

    @Test("buffers queued to the writer land in order, flushed along the way, and finish waits for the last")
    func order() throws {
        let (fd, path) = try temporaryFile()
        defer { close(fd); unlink(path) }
        // A queue of 2 and a flush every 1,000 bytes: the caller waits on a full queue and the thread flushes often.
        let writer = BackgroundWriter(descriptor: fd, path: path, capacity: 2, flushInterval: 1_000)
        var expected = Data()
        for index in 0..<200 {
            let chunk = Data(repeating: UInt8(index % 251), count: 100 + index)
            expected.append(chunk)
            try writer.enqueue(chunk)
        }
        try writer.finish()
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == expected)
    }

    @Test("a write that fails on the writer's thread is thrown by finish as a typed error, and later buffers are refused")
    func failure() throws {
        let fd = open("/dev/null", O_RDONLY)   // write(2) fails with EBADF
        try #require(fd >= 0)
        defer { close(fd) }
        let writer = BackgroundWriter(descriptor: fd, path: "/dev/null", capacity: 1, flushInterval: 0)
        try writer.enqueue(Data(count: 16))
        let error = #expect(throws: KeychainError.self) { try writer.finish() }
        #expect(error?.status == Status.io)
        #expect(throws: KeychainError.self) { try writer.enqueue(Data(count: 16)) }
    }

    @Test("a cancelled writer drops what is queued and its thread ends")
    func cancel() throws {
        let (fd, path) = try temporaryFile()
        defer { close(fd); unlink(path) }
        let writer = BackgroundWriter(descriptor: fd, path: path, capacity: 64, flushInterval: 0)
        for _ in 0..<64 { try writer.enqueue(Data(count: 4096)) }
        writer.cancel()   // returns only once the thread has ended
        let size = try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int ?? -1
        #expect(size >= 0 && size <= 64 * 4096 && size % 4096 == 0)
    }
}
