import Foundation
import KeychainEngine

extension StorageContract {
    /// Row ids, isolation of keychains, concurrent writers, damaged rows.
    static let robustnessClauses: [Clause] = [
        Clause("a row id is never reused after a delete, not even the highest one's") { factory, c in
            let storage = try factory.makeStorage()
            let a = try storage.write { try $0.insert(row("svc", "a")) }
            let b = try storage.write { try $0.insert(row("svc", "b")) }
            let highest = try storage.write { try $0.insert(row("svc", "c")) }
            try storage.write { tx in
                try tx.delete(in: .genericPassword, rowID: highest)
                try tx.delete(in: .genericPassword, rowID: b)
            }
            // The same primary key again, in another transaction, and one more in the same transaction as a delete.
            let again = try storage.write { try $0.insert(row("svc", "c")) }
            let sameTransaction = try storage.write { tx in
                try tx.delete(in: .genericPassword, rowID: again)
                return try tx.insert(row("svc", "d"))
            }
            let used: Set<Int64> = [a, b, highest]
            c.check(Set([a, b, highest]).count == 3, "three inserts got the row ids \([a, b, highest])")
            c.check(!used.contains(again), "a new row got row id \(again), which a deleted row had (a persistent reference to the deleted item would find it)")
            c.check(!used.contains(sameTransaction) && sameTransaction != again,
                    "a row inserted after a delete in one transaction got a used row id \(sameTransaction)")
        },
        Clause("two keychains on one backend are isolated: the same primary key in each, reads and deletes see only their own",
               requires: [.secondKeychain]) { factory, c in
            let first = try factory.makeStorage()
            let second = try factory.makeSecondKeychain!(first)
            try c.require(first !== second, "the second keychain is the same object as the first")
            let one = try first.write { try $0.insert(row("svc", "a", secret: "first")) }
            let status = c.status { _ = try second.write { try $0.insert(row("svc", "a", secret: "second")) } }
            c.check(status == 0, "the same primary key in the second keychain failed with \(status): the keychains share a table")
            _ = try second.write { try $0.insert(row("svc", "only-second")) }
            let inFirst = try first.read { items(try $0.candidates(in: .genericPassword, matching: [:])) }
            let inSecond = try second.read { items(try $0.candidates(in: .genericPassword, matching: [:])) }
            c.check(inFirst.map(\.secret) == [Data("first".utf8)], "the first keychain sees \(inFirst.count) rows, not its own one")
            c.check(Set(inSecond.compactMap { $0.attributes[Key.account]?.stringValue }) == ["a", "only-second"] &&
                    inSecond.first { $0.attributes[Key.account]?.stringValue == "a" }?.secret == Data("second".utf8),
                    "the second keychain does not see exactly its own two rows")
            try first.write { try $0.delete(in: .genericPassword, rowID: one) }
            let left = try second.read { items(try $0.candidates(in: .genericPassword, matching: [Key.account: .string("a")])) }
            c.check(left.map(\.secret) == [Data("second".utf8)], "a delete in the first keychain removed the second keychain's row")
        },
        Clause("concurrent writers: distinct items from 8 threads are all present, none lost or doubled") { factory, c in
            let storage = try factory.makeStorage()
            let failures = Locked<[Int32]>([])
            let threads = 8, perThread = 10
            DispatchQueue.concurrentPerform(iterations: threads) { t in
                for i in 0..<perThread {
                    do { _ = try storage.write { try $0.insert(row("concurrent", "t\(t)-\(i)", secret: "\(t)-\(i)")) } }
                    catch let error as EngineError { failures.withLock { $0.append(error.status) } }
                    catch { failures.withLock { $0.append(Int32.min) } }
                }
            }
            c.check(failures.current.isEmpty, "\(failures.current.count) concurrent inserts of distinct items failed: \(failures.current)")
            let rows = try storage.read { items(try $0.candidates(in: .genericPassword, matching: [Key.service: .string("concurrent")])) }
            let accounts = Set(rows.compactMap { $0.attributes[Key.account]?.stringValue })
            c.check(rows.count == threads * perThread && accounts.count == threads * perThread,
                    "\(threads * perThread) inserts left \(rows.count) rows with \(accounts.count) distinct accounts")
            c.check(Set(rows.map(\.rowID)).count == rows.count, "two rows share a row id")
            c.check(rows.allSatisfy { row in
                row.secret.map { String(decoding: $0, as: UTF8.self) } == row.attributes[Key.account]?.stringValue.map { String($0.dropFirst()) }
            }, "a row holds another row's secret")
        },
        Clause("concurrent writers: of 4 threads adding one primary key, exactly one succeeds, the others get errSecDuplicateItem") { factory, c in
            let storage = try factory.makeStorage()
            for round in 0..<5 {
                let outcomes = Locked<[Int32]>([])
                DispatchQueue.concurrentPerform(iterations: 4) { t in
                    let status: Int32
                    do { _ = try storage.write { try $0.insert(row("race", "key-\(round)", secret: "writer \(t)")) }; status = 0 }
                    catch let error as EngineError { status = error.status }
                    catch { status = Int32.min }
                    outcomes.withLock { $0.append(status) }
                }
                let statuses = outcomes.current
                c.check(statuses.filter { $0 == 0 }.count == 1 && statuses.filter { $0 == Status.duplicateItem }.count == 3,
                        "round \(round): the 4 adds ended with \(statuses.sorted()), not one success and three errSecDuplicateItem")
                let rows = try storage.read { items(try $0.candidates(in: .genericPassword, matching: [Key.account: .string("key-\(round)")])) }
                c.check(rows.count == 1, "round \(round): \(rows.count) rows hold one primary key")
            }
        },
        Clause("a damaged row is reported, never deleted, and never returned as another item's", requires: [.damageRow]) { factory, c in
            let storage = try factory.makeStorage()
            let damaged = try storage.write { try $0.insert(row("svc", "a", secret: "A")) }
            let intact = try storage.write { try $0.insert(row("svc", "b", secret: "B")) }
            try factory.damageRow!(storage, .genericPassword, damaged)
            let direct = try storage.read { try $0.candidate(in: .genericPassword, rowID: damaged) }
            switch direct {
            case .unreadable?: break
            case .item(let item)?:
                // Decision: the factory promises damage, so a row still readable means the storage did not authenticate it.
                c.check(false, item.secret == Data("A".utf8) ? "the damaged row was returned as readable (not authenticated)"
                                                             : "the damaged row was returned readable with another row's contents")
            case nil: c.check(false, "the damaged row is not reported (candidate(in:rowID:) gave nil)")
            }
            let all = try storage.read { try $0.candidates(in: .genericPassword, matching: [:]) }
            c.check(all.contains { if case .unreadable(_, let id, _) = $0 { id == damaged } else { false } },
                    "a search over the table does not report the damaged row")
            let asB = try storage.read { items(try $0.candidates(in: .genericPassword, matching: [Key.account: .string("b")])) }
            c.check(asB.map(\.rowID) == [intact] && asB.first?.secret == Data("B".utf8), "a search for b returned \(asB.map(\.rowID)), not b's row alone")
            // The engine goes over the table (search, update, delete of others): the damaged row stays.
            let engine = KeychainEngine(storage: storage)
            _ = try? engine.copyMatching([Key.class: .string("genp"), Key.matchLimit: .string(Key.matchLimitAll), Key.returnData: .bool(true)])
            _ = try? engine.update([Key.class: .string("genp"), Key.service: .string("svc")], with: [Key.label: .string("touched")])
            _ = try? engine.delete([Key.class: .string("genp"), Key.account: .string("b")])
            c.check(try storage.read { try $0.candidate(in: .genericPassword, rowID: damaged) } != nil,
                    "the damaged row was deleted by a search, update or delete of the engine")
        },
    ]
}
