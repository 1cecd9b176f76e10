#if canImport(Glibc)
import Dispatch
import Foundation
import Glibc
import KeychainEngine
import SystemAuthentication
import Testing

/// TerminalPrompter on a real pseudo-terminal: the test types on the master side.
@Suite("Terminal prompter")
struct TerminalPrompterTests {
    @Test("a secret is read without echo and returned without its newline")
    func secretWithoutEcho() async throws {
        let terminal = try PseudoTerminal()
        #expect(terminal.echoes)
        let prompter = TerminalPrompter(path: terminal.slavePath)
        let cancellation = AuthenticationCancellation()
        let answer = PAMFixture.started {
            prompter.prompt(AuthenticationMessage(.secret, "Password: "), cancellation: cancellation)
        }
        // The prompt is written after echo is switched off: once it shows, the terminal must not echo.
        let echoedWhileAsking = await PAMFixture.onThread { () -> Bool? in
            // Never shown: end the prompt rather than type into a terminal that may echo, and fail below.
            guard terminal.read(until: "Password: ") != nil else { cancellation.cancel(); return nil }
            let echoes = terminal.echoes
            terminal.type("secret\n")
            return echoes
        }
        #expect(echoedWhileAsking == false)
        #expect(await answer.value == "secret")
        let shownAfter = terminal.drain()
        #expect(!shownAfter.contains("secret"))
        #expect(shownAfter.contains("\n"))  // the newline the prompter writes after a secret
        #expect(terminal.echoes, "echo is switched back on after the prompt")
    }

    @Test("a visible answer keeps the echo on")
    func visibleKeepsEcho() async throws {
        let terminal = try PseudoTerminal()
        let prompter = TerminalPrompter(path: terminal.slavePath)
        let cancellation = AuthenticationCancellation()
        let answer = PAMFixture.started {
            prompter.prompt(AuthenticationMessage(.visible, "Code: "), cancellation: cancellation)
        }
        let echoedWhileAsking = await PAMFixture.onThread { () -> Bool? in
            guard terminal.read(until: "Code: ") != nil else { cancellation.cancel(); return nil }
            let echoes = terminal.echoes
            terminal.type("123456\n")
            return echoes
        }
        #expect(echoedWhileAsking == true)
        #expect(await answer.value == "123456")
    }

    @Test("info and error messages are shown and answer nil")
    func infoAndError() async throws {
        let terminal = try PseudoTerminal()
        let prompter = TerminalPrompter(path: terminal.slavePath)
        let cancellation = AuthenticationCancellation()
        #expect(prompter.prompt(AuthenticationMessage(.info, "Touch the reader"), cancellation: cancellation) == nil)
        #expect(prompter.prompt(AuthenticationMessage(.error, "Wrong password"), cancellation: cancellation) == nil)
        let shown = await PAMFixture.onThread { terminal.read(until: "Wrong password") }
        #expect(shown?.contains("Touch the reader") == true)
    }

    @Test("cancelling wakes a blocked read, which returns nil with echo restored")
    func cancelWakesRead() async throws {
        let terminal = try PseudoTerminal()
        let prompter = TerminalPrompter(path: terminal.slavePath)
        let cancellation = AuthenticationCancellation()
        let answer = PAMFixture.started {
            prompter.prompt(AuthenticationMessage(.secret, "Password: "), cancellation: cancellation)
        }
        let prompted = await PAMFixture.onThread { () -> Bool in
            let shown = terminal.read(until: "Password: ")
            cancellation.cancel()
            return shown != nil
        }
        #expect(prompted)
        #expect(await answer.value == nil)
        #expect(terminal.echoes)
    }

    @Test("end of input is a cancel")
    func endOfInput() async throws {
        let terminal = try PseudoTerminal()
        let prompter = TerminalPrompter(path: terminal.slavePath)
        let cancellation = AuthenticationCancellation()
        let answer = PAMFixture.started {
            prompter.prompt(AuthenticationMessage(.secret, "Password: "), cancellation: cancellation)
        }
        await PAMFixture.onThread {
            guard terminal.read(until: "Password: ") != nil else { cancellation.cancel(); return }
            terminal.type("\u{04}")  // Ctrl-D on an empty line: end of input
        }
        #expect(await answer.value == nil)
        #expect(terminal.echoes)
    }

    @Test("a pseudo-terminal is interactive; /dev/null and a missing path are not")
    func interactive() throws {
        let terminal = try PseudoTerminal()
        #expect(TerminalPrompter(path: terminal.slavePath).isInteractive)
        #expect(!TerminalPrompter(path: "/dev/null").isInteractive)
        #expect(!TerminalPrompter(path: "/nonexistent/tty").isInteractive)
        #expect(TerminalPrompter().path == "/dev/tty")
    }
}
#endif
