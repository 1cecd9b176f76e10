// The TPM benchmark's baseline: plain tpm2-tss ESAPI calls, as a C program signs with a TPM key (create the primary
// key and load the key once, then Esys_Sign for each signature). Not part of Keystone: `keystone-benchmarks tpm`
// measures Keystone's TPMDevice against it on the same swtpm.
#ifndef KEYSTONE_TPM_BASELINE_H
#define KEYSTONE_TPM_BASELINE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// An ESAPI context with a loaded signing key (opaque).
typedef struct ks_baseline_tpm ks_baseline_tpm;

/// Opens an ESAPI context on `tcti_conf` through tctildr (tpm2-tss's own TCTIs), creates the owner hierarchy's
/// primary key from the TCG ECC "SRK" template and loads the key whose marshalled TPM2B_PUBLIC and TPM2B_PRIVATE
/// follow each other in `key` (the two files `tpm2_create -u -r` writes, concatenated). Returns 0 and sets *out, or
/// -1 with a message in `error` (at most `error_size` bytes).
int ks_baseline_tpm_open(const char *tcti_conf, const uint8_t *key, size_t key_len, ks_baseline_tpm **out,
                         char *error, int error_size);

/// Signs `digest` (SHA-256) `count` times with Esys_Sign (ECDSA, SHA-256). Returns how many signatures the TPM
/// made; the last one is in `sig_rs` (r || s, each left-padded to 32 bytes). Stops at the first failure, its
/// message in `error`.
int ks_baseline_tpm_sign(ks_baseline_tpm *tpm, const uint8_t digest[32], int count, uint8_t sig_rs[64], char *error,
                         int error_size);

/// Signs `digest` `count` times the way Keystone did before it kept keys loaded: for each signature Esys_Load the
/// key, Esys_Sign, Esys_FlushContext (the primary key stays loaded). Returns how many signatures the TPM made, the
/// last one in `sig_rs`.
int ks_baseline_tpm_sign_reloading(ks_baseline_tpm *tpm, const uint8_t digest[32], int count, uint8_t sig_rs[64],
                                   char *error, int error_size);

/// Flushes the key and the primary key and finalizes the context and the TCTI. NULL is allowed.
void ks_baseline_tpm_close(ks_baseline_tpm *tpm);

#ifdef __cplusplus
}
#endif

#endif
