#if NIO && os(Linux)
import Configuration
import Foundation
import Hummingbird
import Logging
import ServiceLifecycle

/// The routes: each answers from values already in memory (the provider's snapshot, the verifier), so a request never
/// waits on the keychain.
///
/// - `GET /token-check` with `Authorization: Bearer TOKEN`: 200 `current` or `previous` (within the grace after a
///   rotation), 401 for any other token or none, 503 while the replica has no token (the keychain was locked).
/// - `GET /db`: 200 with the database password's fingerprint (`{"fingerprint":"…"}`), 503 without a password.
/// - `GET /healthz`: 200 `{"rotations":N}`, the rotations of the API token this replica saw since it started.
func addRoutes(to router: Router<BasicRequestContext>, secrets: ConfigReader, verifier: TokenVerifier) {
    router.get("/token-check") { request, _ -> Response in
        guard verifier.hasToken else { return text(.serviceUnavailable, "no API token: the keychain is locked or the item is missing\n") }
        guard let authorization = request.headers[.authorization], authorization.hasPrefix("Bearer ") else {
            return text(.unauthorized, "unauthorized\n")
        }
        switch verifier.check(String(authorization.dropFirst("Bearer ".count))) {
        case .current: return text(.ok, "current\n")
        case .previous: return text(.ok, "previous\n")
        case .refused: return text(.unauthorized, "unauthorized\n")
        }
    }
    router.get("/db") { _, _ -> Response in
        // The synchronous access pattern: the provider's snapshot, which its watch keeps current.
        guard let password = secrets.string(forKey: "db.password", isSecret: true) else {
            return text(.serviceUnavailable, "no database password: the keychain is locked or the item is missing\n")
        }
        return text(.ok, "{\"fingerprint\":\"\(databaseFingerprint(password))\"}\n", json: true)
    }
    router.get("/healthz") { _, _ -> Response in
        text(.ok, "{\"rotations\":\(verifier.rotations)}\n", json: true)
    }
}

private func text(_ status: HTTPResponse.Status, _ body: String, json: Bool = false) -> Response {
    var headers = HTTPFields()
    headers[.contentType] = json ? "application/json" : "text/plain; charset=utf-8"
    headers[.cacheControl] = "no-store"
    return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: body)))
}

/// Follows the API token through swift-configuration's watch (the provider's etcd watch or file notification) until
/// graceful shutdown: each new value becomes the current token, the one it replaces stays accepted for the grace.
struct TokenWatcher: Service {
    let secrets: ConfigReader
    let verifier: TokenVerifier
    let logger: Logger

    func run() async throws {
        try await secrets.watchString(forKey: "api.token", isSecret: true) { updates in
            for try await token in updates.cancelOnGracefulShutdown() {
                if let token {
                    let before = verifier.rotations
                    verifier.update(token)
                    if verifier.rotations != before { logger.info("the API token was rotated", metadata: ["rotations": "\(verifier.rotations)"]) }
                } else {
                    // Missing, locked or unreadable: refuse every request (503) rather than accept a stale token.
                    verifier.forget()
                    logger.warning("the API token is not available (the keychain is locked or the item was deleted): requests get 503")
                }
            }
        }
    }
}
#endif
