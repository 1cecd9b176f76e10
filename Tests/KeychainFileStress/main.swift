import Foundation
import KeychainEngine
import KeychainFile

// keychain-file-stress PATH PASSWORD MODE ARGS…: a child process for KeychainFileTests.
//   write-loop PREFIX           add PREFIX-0, PREFIX-1, … forever; print "done N" after each add returns
//   mixed PREFIX SEED COUNT     COUNT seeded add/update/delete operations on PREFIX-0…PREFIX-19;
//                               print "ok OP ACCOUNT VALUE" for each that succeeded
//   group-write-loop PREFIX T   T threads sharing one instance (group commit) add PREFIX-t-0, PREFIX-t-1, … forever;
//                               print "done t i" after each add returns
/// Writes a line straight to standard output (one write(2): nothing is buffered when the process is killed).
func emit(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }
func fail(_ message: String) -> Never { FileHandle.standardError.write(Data((message + "\n").utf8)); exit(2) }
let args = CommandLine.arguments
guard args.count >= 4 else { fail("usage: keychain-file-stress PATH PASSWORD MODE ARGS") }

//   create-loop                 create PATH-0, PATH-1, … (password PASSWORD) forever; print "created N" after each
//   hold-commit-lock            hold the flush lock of PATH-commit (flock) forever; print "held" once it is held
//   default-add ACCOUNT         first use of the default keychain ($KEYSTONE_KEYCHAIN): add ACCOUNT, read it back,
//                               print "ok"; on failure print "status S" and exit 1
switch args[3] {
case "create-loop":
    var i = 0
    while true {
        _ = try KeychainFile.create(at: "\(args[1])-\(i)", password: args[2])
        emit("created \(i)")
        i += 1
    }
case "hold-commit-lock":
    // Holds the flush lock of the keychain's commit file (as a process inside its flush would) until killed.
    let fd = open(args[1] + "-commit", O_RDONLY | O_CLOEXEC)
    guard fd >= 0, flock(fd, LOCK_EX) == 0 else { fail("cannot lock \(args[1])-commit") }
    emit("held")
    while true { sleep(1000) }
case "default-add":
    do {
        let (file, _) = try KeychainFile.openDefault()
        let engine = KeychainEngine(storage: file)
        let q: KeychainQuery = [Key.class: .string("genp"), Key.service: .string("first-use"), Key.account: .string(args[4])]
        try engine.add(q.merging([Key.valueData: .data(Data(args[4].utf8))]) { $1 })
        guard try engine.copyMatching(q.merging([Key.returnData: .bool(true)]) { $1 })?.data == Data(args[4].utf8) else {
            emit("status wrong-secret"); exit(1)
        }
        emit("ok")
        exit(0)
    } catch let error as EngineError {
        emit("status \(error.status) \(error.reason)")
        exit(1)
    }
default:
    break
}

let file = try KeychainFile.open(at: args[1])
if file.lockState != .unlocked { try file.unlock(password: args[2]) }
let engine = KeychainEngine(storage: file)

func query(_ account: String) -> KeychainQuery {
    [Key.class: .string("genp"), Key.service: .string("stress"), Key.account: .string(account)]
}

switch args[3] {
case "write-loop":
    let prefix = args[4]
    var i = 0
    while true {
        var q = query("\(prefix)-\(i)")
        q[Key.valueData] = .data(Data("value-\(i)".utf8))
        try engine.add(q)
        emit("done \(i)")
        i += 1
    }
case "mixed":
    let prefix = args[4]
    var state = UInt64(args[5])! | 1
    let count = Int(args[6])!
    func next() -> UInt64 { state ^= state << 13; state ^= state >> 7; state ^= state << 17; return state }
    for step in 0..<count {
        let account = "\(prefix)-\(next() % 20)"
        let value = "v\(step)"
        var ok = true
        var op = ""
        do {
            switch next() % 3 {
            case 0:
                op = "add"
                var q = query(account); q[Key.valueData] = .data(Data(value.utf8))
                try engine.add(q)
            case 1:
                op = "update"
                try engine.update(query(account), with: [Key.valueData: .data(Data(value.utf8))])
            default:
                op = "delete"
                try engine.delete(query(account))
            }
        } catch let error as EngineError where error.status == Status.duplicateItem || error.status == Status.itemNotFound {
            ok = false
        }
        if ok { emit("ok \(op) \(account) \(value)") }
    }
case "group-write-loop":
    let prefix = args[4]
    let threads = Int(args[5])!
    for t in 0..<threads {
        Thread.detachNewThread { [engine] in
            var i = 0
            while true {
                var q: KeychainQuery = [Key.class: .string("genp"), Key.service: .string("stress"), Key.account: .string("\(prefix)-\(t)-\(i)")]
                q[Key.valueData] = .data(Data("value-\(t)-\(i)".utf8))
                do { try engine.add(q) } catch { fail("add failed: \(error)") }
                emit("done \(t) \(i)")
                i += 1
            }
        }
    }
    while true { sleep(1000) }
default:
    fail("unknown mode")
}
