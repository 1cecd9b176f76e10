// Keystone's C boundary to a TPM 2.0 through tpm2-tss's ESAPI. Plain C types only: no TSS2 type appears here.
//
// A handle (ks_tpm) is one ESAPI context on one TCTI connection. ESAPI contexts are not thread-safe: a handle is
// used by one thread at a time (the Swift layer serializes with a lock). Every call blocks until the TPM answers,
// each TPM command at most the handle's timeout: a TPM that never answers fails the call with KS_TPM_ERR_TIMED_OUT
// (ESAPI's asynchronous calls with Esys_SetTimeout; for swtpm, whose tpm2-tss TCTI ignores that timeout, Keystone's
// own transport).
//
// Keys: P-256 keys created under the owner hierarchy's primary ECC storage key (the TCG "SRK" ECC template, created
// again with TPM2_CreatePrimary when a handle first needs it: the same TPM and template always give the same key, so
// no persistent handle is used). A key's private part leaves the TPM only wrapped by that storage key, and the key is
// fixedTPM and fixedParent: it can never be duplicated. Its "blob" (a Keystone envelope around the TPM's marshalled
// TPM2B_PUBLIC and TPM2B_PRIVATE) is useless on another TPM.
//
// Loaded keys: the primary key stays loaded while the handle is open, and so do the last KS_TPM_KEY_CACHE_SIZE keys
// used (keyed by the blob's bytes): signing again with the same blob is one TPM command (TPM2_Sign), as in a program
// that loads its key once. A key is cached only after an operation with it succeeded; a refusal flushes a key it
// loaded. When the TPM is out of object slots (TPM2_RC_OBJECT_MEMORY: a TPM without a resource manager, such as
// swtpm or /dev/tpm0, has 3 or so for all its clients), the cached keys are flushed and the command retried once;
// when it reports a cached key or the primary key gone, they are loaded again, once. ks_tpm_close flushes
// everything the handle loaded.
#ifndef KEYSTONE_CTPM_H
#define KEYSTONE_CTPM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// An open TPM (opaque).
typedef struct ks_tpm ks_tpm;

/// Kinds of failure (ks_tpm_error.kind).
#define KS_TPM_OK 0
/// No TPM, or the connection to it could not be made (no /dev/tpmrm0, nothing listening, TCTI library missing).
#define KS_TPM_ERR_UNAVAILABLE 1
/// The blob is not a Keystone TPM key envelope, or it is truncated or corrupted.
#define KS_TPM_ERR_MALFORMED_BLOB 2
/// The blob is well formed but this TPM cannot load it: it was made by another TPM (or this TPM was cleared).
#define KS_TPM_ERR_WRONG_TPM 3
/// The peer's public key is not a point on P-256.
#define KS_TPM_ERR_INVALID_PEER_KEY 4
/// The TPM went away in the middle of the operation (the connection broke). The handle stays unusable.
#define KS_TPM_ERR_CONNECTION_LOST 5
/// Anything else: the message says what.
#define KS_TPM_ERR_OTHER 6
/// The key cannot do this: a signing key asked for ECDH, or a key-agreement key asked to sign.
#define KS_TPM_ERR_WRONG_USAGE 7
/// The TPM did not answer a command within the handle's timeout (it keeps the connection open but does not
/// respond). The handle stays unusable (every later call fails at once with this kind): open the TPM again.
#define KS_TPM_ERR_TIMED_OUT 8
/// The TPM refused the key's authorization value (a wrong PIN: TPM_RC_AUTH_FAIL / TPM_RC_BAD_AUTH). For a key subject
/// to dictionary-attack protection the TPM counted the failure; `lockout` says how many more it accepts.
#define KS_TPM_ERR_AUTH_FAILED 9
/// The TPM is in dictionary-attack lockout (TPM_RC_LOCKOUT): it refuses every authorization of keys subject to
/// dictionary-attack protection until it forgets a failure; `lockout` says when.
#define KS_TPM_ERR_LOCKOUT 10
/// The key is in a format Keystone understands but cannot use (a TSS2 key with a policy, a parent other than the
/// owner hierarchy, a curve other than P-256, ...): the message says what.
#define KS_TPM_ERR_UNSUPPORTED 11

/// How many keys a handle keeps loaded after use, besides the primary key.
#define KS_TPM_KEY_CACHE_SIZE 1
/// The default deadline of each TPM command (ks_tpm_open), in milliseconds.
#define KS_TPM_DEFAULT_TIMEOUT_MS 30000

/// Key usages for ks_tpm_create_key.
#define KS_TPM_USAGE_SIGN 1
#define KS_TPM_USAGE_KEY_AGREEMENT 2
#define KS_TPM_USAGE_GENERAL 3

/// A failure: its kind, the TSS2 response code (0 when the failure is not the TSS's) and a message with the
/// response code decoded by Tss2_RC_Decode. Never holds key material.
/// The TPM's dictionary-attack state (TPM_PT_LOCKOUT_COUNTER, TPM_PT_MAX_AUTH_FAIL, TPM_PT_LOCKOUT_INTERVAL,
/// TPM_PT_LOCKOUT_RECOVERY), read after an authorization failure or a lockout; all 0 when it could not be read.
typedef struct {
    /// Failed authorizations the TPM currently counts.
    uint32_t counter;
    /// The count at which it locks out.
    uint32_t max_tries;
    /// Seconds after which it forgets one failure.
    uint32_t interval_s;
    /// Seconds after a failed lockoutAuth before lockoutAuth may be tried again.
    uint32_t recovery_s;
} ks_tpm_lockout;

typedef struct {
    int kind;
    uint32_t rc;
    char message[256];
    /// For KS_TPM_ERR_AUTH_FAILED and KS_TPM_ERR_LOCKOUT: the TPM's dictionary-attack state.
    ks_tpm_lockout lockout;
} ks_tpm_error;

/// What the TPM says about itself (TPM2_GetCapability, TPM_CAP_TPM_PROPERTIES).
typedef struct {
    /// TPM_PT_MANUFACTURER as text ("IBM", "INTC", "STM ", ...), NUL-terminated, trailing NULs dropped.
    char manufacturer[5];
    /// TPM_PT_VENDOR_STRING_1..4, NUL-terminated.
    char vendor[17];
    /// TPM_PT_FIRMWARE_VERSION_1 and _2.
    uint32_t firmware_version_1;
    uint32_t firmware_version_2;
    /// TPM_PT_REVISION (e.g. 164 for 1.64) and TPM_PT_YEAR.
    uint32_t spec_revision;
    uint32_t spec_year;
} ks_tpm_properties;

/// Opens a TPM. `tcti_conf` is a tctildr configuration ("device:/dev/tpmrm0", "swtpm:host=127.0.0.1,port=2321",
/// "tabrmd", ...); NULL (or "") picks /dev/tpmrm0, else /dev/tpm0, else fails with KS_TPM_ERR_UNAVAILABLE without
/// loading any TCTI (not tctildr's own search, which tries tabrmd, mssim and swtpm too: see default_tcti). Returns 0 and sets *out,
/// or returns -1 and fills *err (KS_TPM_ERR_UNAVAILABLE when nothing answers).
/// Each TPM command may take at most KS_TPM_DEFAULT_TIMEOUT_MS.
int ks_tpm_open(const char *tcti_conf, ks_tpm **out, ks_tpm_error *err);

/// ks_tpm_open with the deadline of each TPM command, in milliseconds (<= 0: none, wait for ever). A "swtpm" or
/// "swtpm:..." configuration (host=, port=, path=) uses Keystone's own swtpm transport, which keeps the deadline
/// for connecting and sending too.
int ks_tpm_open_with_timeout(const char *tcti_conf, int32_t timeout_ms, ks_tpm **out, ks_tpm_error *err);
/// Turns tpm2-tss's logging to standard error off (TSS2_LOG=all+NONE) unless TSS2_LOG is set or KEYSTONE_LOG_LEVEL is
/// debug or trace; once per process. ks_tpm_open_with_timeout calls it; call it earlier from start-up code to make
/// sure no other thread reads the environment meanwhile.
void ks_tpm_quiet_logging(void);

/// Flushes the cached keys and the primary key (unless the connection was lost or a command timed out), finalizes
/// the ESAPI context and the TCTI. NULL is allowed.
void ks_tpm_close(ks_tpm *tpm);

/// Creates a P-256 key under the primary storage key: usage KS_TPM_USAGE_SIGN (ECDSA with SHA-256) or
/// KS_TPM_USAGE_KEY_AGREEMENT (ECDH). On success *blob (free with ks_tpm_free) holds the key's envelope and
/// pub_x963 its public key (0x04 || X || Y).
int ks_tpm_create_key(ks_tpm *tpm, int usage, uint8_t **blob, size_t *blob_len, uint8_t pub_x963[65],
                      ks_tpm_error *err);

/// ks_tpm_create_key with an authorization value (`auth`, 1...32 bytes; NULL/0: none). A key with one is subject to
/// the TPM's dictionary-attack protection (no noDA): each use with a wrong value is refused by the TPM and counted
/// toward its lockout. A key without one is made noDA (a lockout never blocks it). The blob records that the key
/// needs the value (envelope version 2).
int ks_tpm_create_key_with_auth(ks_tpm *tpm, int usage, const uint8_t *auth, size_t auth_len, uint8_t **blob,
                                size_t *blob_len, uint8_t pub_x963[65], ks_tpm_error *err);

/// Whether the blob's key needs an authorization value (1) or not (0); -1 with *err when the blob is malformed.
int ks_tpm_blob_needs_auth(const uint8_t *blob, size_t blob_len, ks_tpm_error *err);

/// What a key's authorization value is (recorded in its blob).
enum {
    /// No authorization value (noDA).
    KS_TPM_BINDING_NONE = 0,
    /// A PIN or application password (DA-protected), envelope version 2.
    KS_TPM_BINDING_PASSWORD = 1,
    /// 32 random bytes the keychain releases after evaluating the person (`.userPresence`, biometry,
    /// `.devicePasscode`), noDA, envelope version 3.
    KS_TPM_BINDING_RELEASED_SECRET = 2,
    /// Derived from such a secret and the application password (DA-protected), envelope version 3.
    KS_TPM_BINDING_RELEASED_SECRET_AND_PASSWORD = 3,
};

/// ks_tpm_create_key_with_auth recording `binding` (a KS_TPM_BINDING_… value) in the blob; a
/// KS_TPM_BINDING_RELEASED_SECRET key is noDA, the others with a value are DA-protected.
int ks_tpm_create_key_bound(ks_tpm *tpm, int usage, const uint8_t *auth, size_t auth_len, int binding, uint8_t **blob,
                            size_t *blob_len, uint8_t pub_x963[65], ks_tpm_error *err);

/// The blob's binding (a KS_TPM_BINDING_… value); -1 with *err when the blob is malformed.
int ks_tpm_blob_binding(const uint8_t *blob, size_t blob_len, ks_tpm_error *err);

/// The blob's marshalled TPM2B_PUBLIC and TPM2B_PRIVATE (what a "TSS2 PRIVATE KEY" holds in its pubkey and privkey
/// OCTET STRINGs) and whether the key needs an authorization value. Free *pub and *priv with ks_tpm_free.
int ks_tpm_blob_parts(const uint8_t *blob, size_t blob_len, uint8_t **pub, size_t *pub_len, uint8_t **priv,
                      size_t *priv_len, int *needs_auth, ks_tpm_error *err);

/// A blob from a marshalled TPM2B_PUBLIC and TPM2B_PRIVATE (a TSS2 key's parts) of a key whose parent is the owner
/// hierarchy's primary storage key: an unrestricted P-256 key that signs (ECDSA, scheme NULL or ECDSA-SHA256),
/// agrees keys, or both (the usage follows its attributes), with no policy. KS_TPM_ERR_UNSUPPORTED otherwise,
/// KS_TPM_ERR_MALFORMED_BLOB when the bytes do not parse. Nothing is sent to a TPM (ks_tpm_check_key does).
int ks_tpm_blob_from_parts(const uint8_t *pub, size_t pub_len, const uint8_t *priv, size_t priv_len, int needs_auth,
                           uint8_t **blob, size_t *blob_len, uint8_t pub_x963[65], int *usage, ks_tpm_error *err);

/// Loads the blob's key (and keeps it cached): KS_TPM_ERR_WRONG_TPM when this TPM cannot load it.
int ks_tpm_check_key(ks_tpm *tpm, const uint8_t *blob, size_t blob_len, ks_tpm_error *err);

/// ks_tpm_sign_digest with the key's authorization value (NULL/0: none).
int ks_tpm_sign_digest_with_auth(ks_tpm *tpm, const uint8_t *blob, size_t blob_len, const uint8_t *auth,
                                 size_t auth_len, const uint8_t digest[32], uint8_t sig_rs[64], ks_tpm_error *err);

/// ks_tpm_ecdh with the key's authorization value (NULL/0: none).
int ks_tpm_ecdh_with_auth(ks_tpm *tpm, const uint8_t *blob, size_t blob_len, const uint8_t *auth, size_t auth_len,
                          const uint8_t peer_x963[65], uint8_t shared_x[32], ks_tpm_error *err);

/// Reads the TPM's dictionary-attack state.
int ks_tpm_lockout_state(ks_tpm *tpm, ks_tpm_lockout *out, ks_tpm_error *err);

/// Reads a blob's public key and usage without the TPM (nothing is loaded). *usage may be NULL.
int ks_tpm_blob_public(const uint8_t *blob, size_t blob_len, uint8_t pub_x963[65], int *usage, ks_tpm_error *err);

/// Signs the SHA-256 digest with the blob's key (TPM2_Sign, ECDSA with SHA-256, a NULL-hierarchy validation ticket),
/// loading it under the primary key unless it is cached. sig_rs = r || s, each left-padded to 32 bytes.
int ks_tpm_sign_digest(ks_tpm *tpm, const uint8_t *blob, size_t blob_len, const uint8_t digest[32],
                       uint8_t sig_rs[64], ks_tpm_error *err);

/// Computes the ECDH shared point of the blob's key (loaded unless cached) with the peer's public key (TPM2_ECDH_ZGen).
/// shared_x = the shared point's X coordinate (what CryptoKit's SharedSecret holds for P-256).
int ks_tpm_ecdh(ks_tpm *tpm, const uint8_t *blob, size_t blob_len, const uint8_t peer_x963[65],
                uint8_t shared_x[32], ks_tpm_error *err);

/// Reads the TPM's manufacturer, vendor string, firmware version and specification level.
int ks_tpm_info(ks_tpm *tpm, ks_tpm_properties *out, ks_tpm_error *err);

/// Frees memory returned by this library.
void ks_tpm_free(void *p);

#ifdef __cplusplus
}
#endif

#endif
