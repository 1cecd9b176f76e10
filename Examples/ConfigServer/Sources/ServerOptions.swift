import Foundation

/// ConfigServer's command line: where to listen, which keychain holds the secrets, and where its password comes from.
///
/// Decision: the keychain password has no environment-variable option. Its sources are a file (a container's secret,
/// `/run/secrets/…`), a systemd credential (`$CREDENTIALS_DIRECTORY/NAME`), standard input, or none (a keychain with an
/// empty password or already unlocked on this machine). An environment variable is readable in `/proc/PID/environ` by
/// the same user, ends up in `docker inspect` and in crash reports, and is inherited by every child.
struct ServerOptions: Sendable, Equatable {
    /// Where the keychain password comes from.
    enum PasswordSource: Sendable, Equatable {
        /// A file holding the password (one trailing newline dropped).
        case file(String)
        /// A systemd credential of this name (`LoadCredential=` / `LoadCredentialEncrypted=`).
        case systemdCredential(String)
        /// One line on standard input.
        case standardInput
        /// No password: an empty-password keychain, or one this user already unlocked on this machine.
        case none
    }

    /// The address to listen on (`--host`, default 127.0.0.1).
    var host: String?
    /// The port (`--port`, default 8080; 0 picks a free port, printed in the ready line).
    var port: Int?
    /// The keychain: an `etcd://host:port,…/NAME` URL or a keychain file's path (`--keychain`, required).
    var keychain: String?
    /// Where the keychain password comes from.
    var password: PasswordSource = .none
    /// The items' service (`--service`, default `com.example.config-server`): `db.password` is the generic password with
    /// that service and the account `db.password`.
    var service: String?
    /// How long, in seconds, a replica still accepts the previous API token after it saw a rotation
    /// (`--token-grace-seconds`, default 30; 0: the previous token is refused at once).
    var tokenGraceSeconds: Int?
    /// Whether graceful shutdown locks the keychain (default); `--no-lock-at-shutdown` only discards the values, for
    /// replicas that share a machine and a user (Keystone's lock drops that user's unlock cache on the machine).
    var lockAtShutdown = true

    static let usage = """
        usage: ConfigServer --keychain etcd://HOST:PORT[,HOST:PORT…]/NAME | --keychain PATH
                            [--password-file PATH | --password-credential NAME | --password-stdin]
                            [--host 127.0.0.1] [--port 8080] [--service com.example.config-server]
                            [--token-grace-seconds 30] [--no-lock-at-shutdown]

        Serves GET /token-check (Authorization: Bearer TOKEN: 200 when TOKEN is the API token, 401 otherwise),
        GET /db (a fingerprint proving the server holds the database password) and GET /healthz. The secrets are the
        keychain's generic passwords of the service (accounts db.password and api.token), read through
        swift-configuration; a rotation (keystone add-generic-password -U …) is followed without a restart.
        The settings may also come from the environment (HTTP_HOST, HTTP_PORT, KEYCHAIN_URL, KEYCHAIN_SERVICE,
        TOKEN_GRACE); the keychain password never does.
        """

    /// Why the command line was refused.
    struct Problem: Error, CustomStringConvertible {
        let description: String
    }

    /// Parses `arguments` (without the program's name). `--help` is returned as `nil`.
    ///
    /// - Throws: ``Problem`` for an unknown option, a missing or malformed value, or two password sources.
    static func parse(_ arguments: some Sequence<String>) throws -> ServerOptions? {
        var options = ServerOptions()
        var rest = Array(arguments)[...]
        var passwordGiven = false
        func value(_ name: String) throws -> String {
            guard let value = rest.popFirst() else { throw Problem(description: "\(name) needs a value") }
            return value
        }
        func setPassword(_ source: PasswordSource, _ name: String) throws {
            guard !passwordGiven else { throw Problem(description: "\(name): give the keychain password one way only") }
            passwordGiven = true
            options.password = source
        }
        func number(_ name: String, _ range: ClosedRange<Int>) throws -> Int {
            let text = try value(name)
            guard let number = Int(text), range.contains(number) else {
                throw Problem(description: "\(name) takes a number from \(range.lowerBound) to \(range.upperBound), not \(text)")
            }
            return number
        }
        while let argument = rest.popFirst() {
            switch argument {
            case "--help", "-h": return nil
            case "--host": options.host = try value(argument)
            case "--port": options.port = try number(argument, 0...65535)
            case "--keychain": options.keychain = try value(argument)
            case "--service": options.service = try value(argument)
            case "--token-grace-seconds": options.tokenGraceSeconds = try number(argument, 0...86_400)
            case "--no-lock-at-shutdown": options.lockAtShutdown = false
            case "--password-file": try setPassword(.file(try value(argument)), argument)
            case "--password-credential": try setPassword(.systemdCredential(try value(argument)), argument)
            case "--password-stdin": try setPassword(.standardInput, argument)
            case "--password", "-p", "-w":
                throw Problem(description: "\(argument): a password on the command line is visible to every user (ps); use --password-file, --password-credential or --password-stdin")
            default: throw Problem(description: "unknown argument \(argument)")
            }
        }
        return options
    }
}
