import Foundation
import KeychainEngine

extension StorageContract {
    /// Lock states: what each class of item gives in each state, the engine's one rule (`Accessibility.isAvailable(in:)`):
    /// `.unlocked` serves every class; `.lockedAfterFirstUnlock` serves `afterFirstUnlock*` and `always*`; `.locked`
    /// (never unlocked since start, or locked explicitly) serves nothing, `always*` included.
    static let lockStateClauses: [Clause] = [
        Clause("locked: no row is served, always* included; each is unreadable with errSecInteractionNotAllowed through the storage and the engine, a delete deletes nothing, and every row reads back after unlocking",
               requires: [.lockState(.locked), .lockState(.unlocked)]) { factory, c in
            try checkLockState(.locked, factory, &c)
        },
        Clause("after first unlock: afterFirstUnlock* and always* rows are served with their secret, the others are unreadable with errSecInteractionNotAllowed; every row reads back after unlocking",
               requires: [.lockState(.lockedAfterFirstUnlock), .lockState(.unlocked)]) { factory, c in
            try checkLockState(.lockedAfterFirstUnlock, factory, &c)
        },
        Clause("unlocked: every class is served with its secret, through the storage and the engine",
               requires: [.lockState(.unlocked)]) { factory, c in
            try checkLockState(.unlocked, factory, &c)
        },
    ]

    /// The secret of the lock-state row of `accessibility`.
    private static func lockSecret(_ accessibility: Accessibility) -> Data { Data("secret of \(accessibility.rawValue)".utf8) }

    /// Writes one row per accessibility while unlocked, puts the storage in `state`, and checks what the storage and
    /// the engine serve; then unlocks and checks that every row is there, unchanged.
    private static func checkLockState(_ state: LockState, _ factory: StorageFactory, _ c: inout Checker) throws {
        let storage = try factory.makeStorage()
        let setLockState = factory.setLockState!
        if storage.lockState != .unlocked { try setLockState(storage, .unlocked) }
        var rows: [(accessibility: Accessibility, rowID: Int64)] = []
        try storage.write { tx in
            for accessibility in Accessibility.allCases {
                var item = row("lock", accessibility.rawValue)
                item.secret = lockSecret(accessibility)
                item.attributes[Key.accessible] = .string(accessibility.rawValue)
                rows.append((accessibility, try tx.insert(item)))
            }
        }

        try setLockState(storage, state)
        c.check(storage.lockState == state, "after setLockState(\(state)) the storage reports \(storage.lockState)")

        // The storage, by row id and by a search of the rows' service.
        let byID = try storage.read { reader in try rows.map { try reader.candidate(in: .genericPassword, rowID: $0.rowID) } }
        let search = try storage.read { try $0.candidates(in: .genericPassword, matching: [Key.service: .string("lock")]) }
        for (row, found) in zip(rows, byID) {
            checkServed(found, row, state, "by row id", factory, &c)
            let inSearch = search.filter { rowID(of: $0) == row.rowID }
            c.check(inSearch.count == 1, "\(state): a search of the service reports the \(row.accessibility) row \(inSearch.count) times, not once")
            if let first = inSearch.first { checkServed(first, row, state, "in a search", factory, &c) }
        }

        // The engine over the storage: exactly the rule, whatever the storage withholds itself.
        let engine = KeychainEngine(storage: storage)
        for row in rows {
            var data: Data?
            let status = c.status {
                data = try engine.copyMatching([Key.class: .string("genp"), Key.service: .string("lock"),
                                                Key.account: .string(row.accessibility.rawValue), Key.returnData: .bool(true)])?.data
            }
            if row.accessibility.isAvailable(in: state) {
                c.check(status == 0 && data == lockSecret(row.accessibility),
                        "\(state): the engine's lookup of the \(row.accessibility) row gave status \(status)\(status == 0 ? " and other contents" : ""), not its secret")
            } else {
                c.check(status == Status.interactionNotAllowed,
                        "\(state): the engine's lookup of the \(row.accessibility) row gave status \(status), not errSecInteractionNotAllowed")
            }
        }
        if state == .locked {
            let status = c.status { try engine.delete([Key.class: .string("genp"), Key.service: .string("lock")]) }
            c.check(status == Status.interactionNotAllowed, "locked: a delete through the engine gave status \(status), not errSecInteractionNotAllowed")
        }

        // Unlocked again: every row is there, with its secret (none deleted or rewritten while locked).
        guard state != .unlocked else { return }
        try setLockState(storage, .unlocked)
        c.check(storage.lockState == .unlocked, "after setLockState(unlocked) the storage reports \(storage.lockState)")
        let after = try storage.read { reader in try rows.map { try reader.candidate(in: .genericPassword, rowID: $0.rowID) } }
        for (row, found) in zip(rows, after) {
            guard case .item(let item)? = found else {
                c.check(false, "unlocked after \(state): the \(row.accessibility) row is \(describe(found)), not readable (lost while locked)")
                continue
            }
            c.check(item.secret == lockSecret(row.accessibility), "unlocked after \(state): the \(row.accessibility) row has other contents")
        }
    }

    /// Checks one row the storage returned in `state` against the rule.
    private static func checkServed(_ found: Candidate?, _ row: (accessibility: Accessibility, rowID: Int64), _ state: LockState,
                                    _ how: String, _ factory: StorageFactory, _ c: inout Checker) {
        let available = row.accessibility.isAvailable(in: state)
        switch found {
        case .item(let item)?:
            if available {
                c.check(item.rowID == row.rowID && item.secret == lockSecret(row.accessibility),
                        "\(state): the \(row.accessibility) row \(how) reads back other contents")
            } else {
                c.check(!factory.withholdsUnavailableRows,
                        "\(state): the \(row.accessibility) row was served \(how), but the rule makes it unavailable in this state")
            }
        case .unreadable(_, _, let error)?:
            if available {
                c.check(false, "\(state): the \(row.accessibility) row is unreadable \(how) (status \(error.status)), but the rule serves it in this state")
            } else {
                c.check(error.status == Status.interactionNotAllowed,
                        "\(state): the \(row.accessibility) row is unreadable \(how) with status \(error.status), not errSecInteractionNotAllowed")
            }
        case nil:
            c.check(false, "\(state): the \(row.accessibility) row is gone \(how)")
        }
    }
}

/// The row id of a candidate.
func rowID(of candidate: Candidate) -> Int64 {
    switch candidate {
    case .item(let item): item.rowID
    case .unreadable(_, let id, _): id
    }
}

/// A candidate in words, for a violation's message (never its contents).
func describe(_ candidate: Candidate?) -> String {
    switch candidate {
    case .item?: "readable"
    case .unreadable(_, _, let error)?: "unreadable (status \(error.status))"
    case nil: "gone"
    }
}
