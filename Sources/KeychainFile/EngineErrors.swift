import KeychainEngine

/// Runs `body` and turns whatever it throws into the one error the public API promises: an `EngineError` as it
/// is, a SQLite failure as the keychain status it surfaces as, anything else `errSecInternalError` (-67671) naming
/// the error's type only (never its contents, which could hold a value from the file).
///
/// Every public throwing entry point of the module goes through it, so callers catch `EngineError` only.
func engineErrors<T>(_ body: () throws -> T) throws(EngineError) -> T {
    do {
        return try body()
    } catch let error as EngineError {
        throw error
    } catch let error as SQLiteError {
        throw error.engineError
    } catch {
        throw EngineError(.internalError, "keychain file failure: \(type(of: error))")
    }
}
