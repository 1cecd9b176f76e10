// The benchmarks' baseline: plain libsecret, as a C program uses it (the "simple" password API with a schema of
// service and account). Not part of Keystone: the Secret Service benchmark of keystone-benchmarks measures Keystone's
// storage against it.
//
// libsecret's simple API talks over the process-wide session bus (GDBus's singleton): set DBUS_SESSION_BUS_ADDRESS
// before the first call, before anything in the process touches GDBus's session bus.
#ifndef KEYSTONE_LIBSECRET_BASELINE_H
#define KEYSTONE_LIBSECRET_BASELINE_H

#ifdef __cplusplus
extern "C" {
#endif

/// Stores `count` passwords in the default collection and looks each one up right after storing it:
/// `secret_password_store_sync` then `secret_password_lookup_sync` with the schema `dev.keystone.BenchmarkBaseline`
/// {service, account}, service `service`, account `account_prefix` + index (from `first`), secret `secret_prefix` +
/// index. Returns how many pairs stored and read back the same secret. On a failure, `error` (when not NULL, at most
/// `error_size` bytes) receives the first error's message.
int ks_baseline_store_lookup(const char *service, const char *account_prefix, const char *secret_prefix, int first,
                             int count, char *error, int error_size);

/// Deletes every unlocked item of the default collection whose `service` attribute is `service`, whichever program
/// stored it (any schema): `secret_password_clear_sync`. Returns 1 when something was deleted, 0 when nothing matched,
/// -1 on an error (its message in `error`).
int ks_baseline_clear(const char *service, char *error, int error_size);

/// How many items of the default collection have `service` = `service` (any schema), or -1 on an error.
int ks_baseline_count(const char *service, char *error, int error_size);

/// Releases libsecret's process-wide service connection (secret_service_disconnect).
void ks_baseline_disconnect(void);

#ifdef __cplusplus
}
#endif

#endif
