#if NIO && os(Linux)
import Foundation
@testable import KeychainEtcd
import Testing

@Suite("etcd watch stream framing")
struct EtcdWatchStreamTests {
    @Test("concatenated JSON messages cut at every byte boundary come out whole, braces inside strings included")
    func splitterAcrossChunks() throws {
        let messages = [#"{"result":{"header":{"revision":"7"},"created":true}}"#,
                        #"{"result":{"events":[{"kv":{"key":"a2V5","mod_revision":"8"}}],"note":"a } and a { and \" quote"}}"#,
                        #"{"error":{"code":14,"message":"etcdserver: no leader"}}"#]
        let stream = Array((messages.joined(separator: "\n") + "\n").utf8)
        for cut in 1..<stream.count {
            var splitter = JSONObjectSplitter()
            var objects = splitter.feed(stream[..<cut])
            objects += splitter.feed(stream[cut...])
            #expect(objects.map { String(decoding: $0, as: UTF8.self) } == messages, "cut at \(cut)")
        }
        // Each decodes as a watch message.
        var splitter = JSONObjectSplitter()
        let decoded = try splitter.feed(stream).map { try JSONDecoder().decode(Wire.WatchMessage.self, from: $0) }
        #expect(decoded[0].result?.created == true)
        #expect(decoded[1].result?.events?.first?.kv?.modRevision?.value == 8)
        #expect(decoded[2].error?.message == "etcdserver: no leader")
    }
}
#endif
