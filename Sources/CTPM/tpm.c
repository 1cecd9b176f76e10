// Keystone's C boundary to a TPM 2.0 through tpm2-tss's ESAPI (see include/ctpm.h).
#define _GNU_SOURCE
#include "ctpm.h"

// Linux only: elsewhere the target compiles to nothing (the Swift layer is Linux only too).
#if defined(__linux__)

#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tss2/tss2_esys.h>
#include <tss2/tss2_mu.h>
#include <tss2/tss2_rc.h>
#include <tss2/tss2_tctildr.h>

struct ks_tpm {
    TSS2_TCTI_CONTEXT *tcti;
    ESYS_CONTEXT *esys;
    /// The primary storage key, ESYS_TR_NONE until first needed.
    ESYS_TR primary;
    /// Set once the connection broke: every later call fails at once with KS_TPM_ERR_CONNECTION_LOST.
    int lost;
};

// MARK: - Errors

static void set_error(ks_tpm_error *err, int kind, uint32_t rc, const char *fmt, ...) {
    if (!err) return;
    err->kind = kind;
    err->rc = rc;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
}

static void clear_error(ks_tpm_error *err) {
    if (!err) return;
    err->kind = KS_TPM_OK;
    err->rc = 0;
    err->message[0] = 0;
}

/// The layer-free, parameter-free code of a TPM response code (format one: the error number without the
/// parameter/handle/session number; format zero: the whole code).
static uint32_t tpm_base(TSS2_RC rc) {
    if ((rc & TSS2_RC_LAYER_MASK) != TSS2_TPM_RC_LAYER) return 0;
    if (rc & TPM2_RC_FMT1) return rc & (TPM2_RC_FMT1 | 0x3F);
    return rc & 0xFFFF;
}

/// True when the TCTI (or ESAPI on its behalf) reports that the TPM is no longer reachable.
static int is_connection_failure(TSS2_RC rc) {
    if ((rc & TSS2_RC_LAYER_MASK) == TSS2_TPM_RC_LAYER) return 0;
    uint32_t base = rc & 0xFFFF;
    return base == TSS2_BASE_RC_IO_ERROR || base == TSS2_BASE_RC_NO_CONNECTION ||
           base == TSS2_BASE_RC_INSUFFICIENT_RESPONSE ||
           ((rc & TSS2_RC_LAYER_MASK) == TSS2_TCTI_RC_LAYER && base == TSS2_BASE_RC_MALFORMED_RESPONSE);
}

/// Fills *err for a failed TSS call: the connection-lost kind when the TCTI failed (and marks the handle), else
/// `kind`. The message is "<what>: <Tss2_RC_Decode(rc)> (0x<rc>)".
static void tss_error(ks_tpm *tpm, ks_tpm_error *err, int kind, TSS2_RC rc, const char *what) {
    if (is_connection_failure(rc)) {
        if (tpm) tpm->lost = 1;
        kind = KS_TPM_ERR_CONNECTION_LOST;
    }
    const char *decoded = Tss2_RC_Decode(rc);
    set_error(err, kind, rc, "%s: %s (0x%x)", what, decoded ? decoded : "unknown response code", rc);
}

// MARK: - SIGPIPE

// A TPM behind a socket (swtpm, mssim) that went away makes write() raise SIGPIPE, whose default action ends the
// process. The signal is blocked on the calling thread for the duration of a TPM call, and one raised by it is
// consumed before unblocking: the process's signal dispositions are never changed.
typedef struct {
    sigset_t old;
    int was_pending;
} sigpipe_guard;

static void sigpipe_block(sigpipe_guard *g) {
    sigset_t set, pending;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    sigemptyset(&pending);
    sigpending(&pending);
    g->was_pending = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &set, &g->old);
}

static void sigpipe_unblock(sigpipe_guard *g) {
    if (!g->was_pending) {
        sigset_t set, pending;
        sigemptyset(&set);
        sigaddset(&set, SIGPIPE);
        sigemptyset(&pending);
        sigpending(&pending);
        if (sigismember(&pending, SIGPIPE) == 1) {
            struct timespec zero = {0, 0};
            sigtimedwait(&set, NULL, &zero);
        }
    }
    pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

// MARK: - Open and close

int ks_tpm_open(const char *tcti_conf, ks_tpm **out, ks_tpm_error *err) {
    clear_error(err);
    *out = NULL;
    ks_tpm *tpm = calloc(1, sizeof *tpm);
    if (!tpm) {
        set_error(err, KS_TPM_ERR_OTHER, 0, "out of memory");
        return -1;
    }
    tpm->primary = ESYS_TR_NONE;
    sigpipe_guard g;
    sigpipe_block(&g);
    TSS2_RC rc = Tss2_TctiLdr_Initialize(tcti_conf, &tpm->tcti);
    if (rc != TSS2_RC_SUCCESS) {
        sigpipe_unblock(&g);
        const char *decoded = Tss2_RC_Decode(rc);
        set_error(err, KS_TPM_ERR_UNAVAILABLE, rc, "no TPM at %s: %s (0x%x)",
                  tcti_conf ? tcti_conf : "the default TCTI (/dev/tpmrm0, /dev/tpm0, ...)",
                  decoded ? decoded : "unknown response code", rc);
        free(tpm);
        return -1;
    }
    rc = Esys_Initialize(&tpm->esys, tpm->tcti, NULL);
    sigpipe_unblock(&g);
    if (rc != TSS2_RC_SUCCESS) {
        tss_error(NULL, err, KS_TPM_ERR_UNAVAILABLE, rc, "ESAPI initialization failed");
        if (err && err->kind == KS_TPM_ERR_CONNECTION_LOST) err->kind = KS_TPM_ERR_UNAVAILABLE;
        Tss2_TctiLdr_Finalize(&tpm->tcti);
        free(tpm);
        return -1;
    }
    *out = tpm;
    return 0;
}

void ks_tpm_close(ks_tpm *tpm) {
    if (!tpm) return;
    sigpipe_guard g;
    sigpipe_block(&g);
    if (tpm->primary != ESYS_TR_NONE && !tpm->lost) Esys_FlushContext(tpm->esys, tpm->primary);
    Esys_Finalize(&tpm->esys);
    Tss2_TctiLdr_Finalize(&tpm->tcti);
    sigpipe_unblock(&g);
    free(tpm);
}

void ks_tpm_free(void *p) { free(p); }

// MARK: - Templates

/// The TCG "SRK" ECC template (TCG TPM v2.0 Provisioning Guidance): an ECC P-256 restricted decryption key with
/// AES-128-CFB, SHA-256 names, no authorization value, no dictionary-attack protection. `tpm2_createprimary -C o -G
/// ecc256:aes128cfb -g sha256 -a 'restricted|decrypt|fixedtpm|fixedparent|sensitivedataorigin|userwithauth|noda'`
/// creates the same key.
static void srk_template(TPM2B_PUBLIC *pub) {
    memset(pub, 0, sizeof *pub);
    pub->publicArea.type = TPM2_ALG_ECC;
    pub->publicArea.nameAlg = TPM2_ALG_SHA256;
    pub->publicArea.objectAttributes = TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT | TPMA_OBJECT_FIXEDTPM |
                                       TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN |
                                       TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_NODA;
    pub->publicArea.authPolicy.size = 0;
    TPMS_ECC_PARMS *ecc = &pub->publicArea.parameters.eccDetail;
    ecc->symmetric.algorithm = TPM2_ALG_AES;
    ecc->symmetric.keyBits.aes = 128;
    ecc->symmetric.mode.aes = TPM2_ALG_CFB;
    ecc->scheme.scheme = TPM2_ALG_NULL;
    ecc->curveID = TPM2_ECC_NIST_P256;
    ecc->kdf.scheme = TPM2_ALG_NULL;
    pub->publicArea.unique.ecc.x.size = 0;
    pub->publicArea.unique.ecc.y.size = 0;
}

/// An unrestricted P-256 key for ECDSA with SHA-256 (sign), for ECDH (decrypt), or for both (general: sign and
/// decrypt with a NULL scheme, the scheme given by each command, as Apple's Secure Enclave SecKeys do both), never
/// duplicable.
static void key_template(TPM2B_PUBLIC *pub, int usage) {
    memset(pub, 0, sizeof *pub);
    pub->publicArea.type = TPM2_ALG_ECC;
    pub->publicArea.nameAlg = TPM2_ALG_SHA256;
    pub->publicArea.objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT |
                                       TPMA_OBJECT_SENSITIVEDATAORIGIN | TPMA_OBJECT_USERWITHAUTH |
                                       (usage == KS_TPM_USAGE_SIGN ? TPMA_OBJECT_SIGN_ENCRYPT
                                        : usage == KS_TPM_USAGE_KEY_AGREEMENT ? TPMA_OBJECT_DECRYPT
                                                                              : TPMA_OBJECT_SIGN_ENCRYPT | TPMA_OBJECT_DECRYPT);
    TPMS_ECC_PARMS *ecc = &pub->publicArea.parameters.eccDetail;
    ecc->symmetric.algorithm = TPM2_ALG_NULL;
    if (usage == KS_TPM_USAGE_SIGN) {
        ecc->scheme.scheme = TPM2_ALG_ECDSA;
        ecc->scheme.details.ecdsa.hashAlg = TPM2_ALG_SHA256;
    } else {
        ecc->scheme.scheme = TPM2_ALG_NULL;
    }
    ecc->curveID = TPM2_ECC_NIST_P256;
    ecc->kdf.scheme = TPM2_ALG_NULL;
}

// MARK: - The primary key

static int ensure_primary(ks_tpm *tpm, ks_tpm_error *err) {
    if (tpm->primary != ESYS_TR_NONE) return 0;
    TPM2B_SENSITIVE_CREATE sensitive;
    memset(&sensitive, 0, sizeof sensitive);
    TPM2B_PUBLIC template;
    srk_template(&template);
    TPM2B_DATA outside_info = {.size = 0};
    TPML_PCR_SELECTION pcrs = {.count = 0};
    TPM2B_PUBLIC *out_public = NULL;
    TPM2B_CREATION_DATA *creation_data = NULL;
    TPM2B_DIGEST *creation_hash = NULL;
    TPMT_TK_CREATION *creation_ticket = NULL;
    ESYS_TR handle = ESYS_TR_NONE;
    TSS2_RC rc = Esys_CreatePrimary(tpm->esys, ESYS_TR_RH_OWNER, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE,
                                    &sensitive, &template, &outside_info, &pcrs, &handle, &out_public,
                                    &creation_data, &creation_hash, &creation_ticket);
    Esys_Free(out_public);
    Esys_Free(creation_data);
    Esys_Free(creation_hash);
    Esys_Free(creation_ticket);
    if (rc != TSS2_RC_SUCCESS) {
        tss_error(tpm, err, KS_TPM_ERR_OTHER, rc,
                  "creating the owner hierarchy's primary storage key failed (is the owner authorization set?)");
        return -1;
    }
    tpm->primary = handle;
    return 0;
}

// MARK: - The envelope

// A key's blob, version 1:
//   "KSTK" | version (1) | usage (1: sign, 2: key agreement, 3: both) | 0 | 0
//   | TPM2B_PUBLIC (Tss2_MU marshalled) | TPM2B_PRIVATE (Tss2_MU marshalled)
//   | CRC-32 (IEEE, big-endian) of everything before it.
// The CRC tells a corrupted blob (malformed) from another TPM's blob (which loads with an integrity failure); it
// protects nothing: the TPM's own integrity HMAC in the private part does.
static const uint8_t kMagic[4] = {'K', 'S', 'T', 'K'};
#define KS_ENVELOPE_VERSION 1
#define KS_HEADER_LEN 8

static uint32_t crc32_ieee(const uint8_t *p, size_t n) {
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}

static int public_to_x963(const TPM2B_PUBLIC *pub, uint8_t out[65]) {
    const TPMS_ECC_POINT *pt = &pub->publicArea.unique.ecc;
    if (pt->x.size > 32 || pt->y.size > 32) return -1;
    memset(out, 0, 65);
    out[0] = 0x04;
    memcpy(out + 1 + (32 - pt->x.size), pt->x.buffer, pt->x.size);
    memcpy(out + 33 + (32 - pt->y.size), pt->y.buffer, pt->y.size);
    return 0;
}

static int wrap_blob(int usage, const TPM2B_PUBLIC *pub, const TPM2B_PRIVATE *priv, uint8_t **blob,
                     size_t *blob_len, ks_tpm_error *err) {
    size_t cap = KS_HEADER_LEN + sizeof(TPM2B_PUBLIC) + sizeof(TPM2B_PRIVATE) + 4;
    uint8_t *buf = malloc(cap);
    if (!buf) {
        set_error(err, KS_TPM_ERR_OTHER, 0, "out of memory");
        return -1;
    }
    memcpy(buf, kMagic, 4);
    buf[4] = KS_ENVELOPE_VERSION;
    buf[5] = (uint8_t)usage;
    buf[6] = 0;
    buf[7] = 0;
    size_t offset = KS_HEADER_LEN;
    TSS2_RC rc = Tss2_MU_TPM2B_PUBLIC_Marshal(pub, buf, cap - 4, &offset);
    if (rc == TSS2_RC_SUCCESS) rc = Tss2_MU_TPM2B_PRIVATE_Marshal(priv, buf, cap - 4, &offset);
    if (rc != TSS2_RC_SUCCESS) {
        free(buf);
        tss_error(NULL, err, KS_TPM_ERR_OTHER, rc, "marshalling the key failed");
        return -1;
    }
    uint32_t crc = crc32_ieee(buf, offset);
    buf[offset++] = (uint8_t)(crc >> 24);
    buf[offset++] = (uint8_t)(crc >> 16);
    buf[offset++] = (uint8_t)(crc >> 8);
    buf[offset++] = (uint8_t)crc;
    *blob = buf;
    *blob_len = offset;
    return 0;
}

static int unwrap_blob(const uint8_t *blob, size_t len, int *usage, TPM2B_PUBLIC *pub, TPM2B_PRIVATE *priv,
                       ks_tpm_error *err) {
    memset(pub, 0, sizeof *pub);
    memset(priv, 0, sizeof *priv);
    if (!blob || len < KS_HEADER_LEN + 4 || memcmp(blob, kMagic, 4) != 0) {
        set_error(err, KS_TPM_ERR_MALFORMED_BLOB, 0, "not a Keystone TPM key (%zu bytes, no KSTK header)", len);
        return -1;
    }
    if (blob[4] != KS_ENVELOPE_VERSION) {
        set_error(err, KS_TPM_ERR_MALFORMED_BLOB, 0,
                  "Keystone TPM key format version %u is not supported (this library reads version %u)",
                  (unsigned)blob[4], (unsigned)KS_ENVELOPE_VERSION);
        return -1;
    }
    uint32_t stored = ((uint32_t)blob[len - 4] << 24) | ((uint32_t)blob[len - 3] << 16) |
                      ((uint32_t)blob[len - 2] << 8) | (uint32_t)blob[len - 1];
    if (crc32_ieee(blob, len - 4) != stored) {
        set_error(err, KS_TPM_ERR_MALFORMED_BLOB, 0, "the TPM key is corrupted or truncated (checksum mismatch)");
        return -1;
    }
    int u = blob[5];
    if ((u != KS_TPM_USAGE_SIGN && u != KS_TPM_USAGE_KEY_AGREEMENT && u != KS_TPM_USAGE_GENERAL) || blob[6] != 0 ||
        blob[7] != 0) {
        set_error(err, KS_TPM_ERR_MALFORMED_BLOB, 0, "the TPM key's header is invalid");
        return -1;
    }
    size_t offset = KS_HEADER_LEN;
    size_t end = len - 4;
    TSS2_RC rc = Tss2_MU_TPM2B_PUBLIC_Unmarshal(blob, end, &offset, pub);
    if (rc == TSS2_RC_SUCCESS) rc = Tss2_MU_TPM2B_PRIVATE_Unmarshal(blob, end, &offset, priv);
    if (rc != TSS2_RC_SUCCESS || offset != end) {
        set_error(err, KS_TPM_ERR_MALFORMED_BLOB, rc, "the TPM key's public or private part is malformed");
        return -1;
    }
    const TPMT_PUBLIC *area = &pub->publicArea;
    TPMA_OBJECT want = (u == KS_TPM_USAGE_SIGN)            ? TPMA_OBJECT_SIGN_ENCRYPT
                       : (u == KS_TPM_USAGE_KEY_AGREEMENT) ? TPMA_OBJECT_DECRYPT
                                                           : TPMA_OBJECT_SIGN_ENCRYPT | TPMA_OBJECT_DECRYPT;
    if (area->type != TPM2_ALG_ECC || area->parameters.eccDetail.curveID != TPM2_ECC_NIST_P256 ||
        (area->objectAttributes & want) != want || area->unique.ecc.x.size > 32 || area->unique.ecc.y.size > 32) {
        set_error(err, KS_TPM_ERR_MALFORMED_BLOB, 0, "the TPM key is not a P-256 key of the usage its header says");
        return -1;
    }
    if (usage) *usage = u;
    return 0;
}

int ks_tpm_blob_public(const uint8_t *blob, size_t blob_len, uint8_t pub_x963[65], int *usage, ks_tpm_error *err) {
    clear_error(err);
    TPM2B_PUBLIC pub;
    TPM2B_PRIVATE priv;
    if (unwrap_blob(blob, blob_len, usage, &pub, &priv, err) != 0) return -1;
    public_to_x963(&pub, pub_x963);
    return 0;
}

// MARK: - Keys

static int check_usable(ks_tpm *tpm, ks_tpm_error *err) {
    if (tpm->lost) {
        set_error(err, KS_TPM_ERR_CONNECTION_LOST, TSS2_TCTI_RC_IO_ERROR,
                  "the connection to the TPM was lost earlier; open the TPM again");
        return -1;
    }
    return 0;
}

int ks_tpm_create_key(ks_tpm *tpm, int usage, uint8_t **blob, size_t *blob_len, uint8_t pub_x963[65],
                      ks_tpm_error *err) {
    clear_error(err);
    *blob = NULL;
    *blob_len = 0;
    if (usage != KS_TPM_USAGE_SIGN && usage != KS_TPM_USAGE_KEY_AGREEMENT && usage != KS_TPM_USAGE_GENERAL) {
        set_error(err, KS_TPM_ERR_OTHER, 0, "unknown key usage %d", usage);
        return -1;
    }
    if (check_usable(tpm, err) != 0) return -1;
    sigpipe_guard g;
    sigpipe_block(&g);
    int result = -1;
    TPM2B_PRIVATE *out_private = NULL;
    TPM2B_PUBLIC *out_public = NULL;
    TPM2B_CREATION_DATA *creation_data = NULL;
    TPM2B_DIGEST *creation_hash = NULL;
    TPMT_TK_CREATION *creation_ticket = NULL;
    if (ensure_primary(tpm, err) != 0) goto done;
    TPM2B_SENSITIVE_CREATE sensitive;
    memset(&sensitive, 0, sizeof sensitive);
    TPM2B_PUBLIC template;
    key_template(&template, usage);
    TPM2B_DATA outside_info = {.size = 0};
    TPML_PCR_SELECTION pcrs = {.count = 0};
    TSS2_RC rc = Esys_Create(tpm->esys, tpm->primary, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &sensitive,
                             &template, &outside_info, &pcrs, &out_private, &out_public, &creation_data,
                             &creation_hash, &creation_ticket);
    if (rc != TSS2_RC_SUCCESS) {
        tss_error(tpm, err, KS_TPM_ERR_OTHER, rc, "creating the key in the TPM failed");
        goto done;
    }
    if (public_to_x963(out_public, pub_x963) != 0) {
        set_error(err, KS_TPM_ERR_OTHER, 0, "the TPM returned a public key that is not P-256");
        goto done;
    }
    if (wrap_blob(usage, out_public, out_private, blob, blob_len, err) != 0) goto done;
    result = 0;
done:
    if (out_private) {
        memset(out_private, 0, sizeof *out_private);
    }
    Esys_Free(out_private);
    Esys_Free(out_public);
    Esys_Free(creation_data);
    Esys_Free(creation_hash);
    Esys_Free(creation_ticket);
    sigpipe_unblock(&g);
    return result;
}

/// Loads a blob under the primary key. Called with SIGPIPE blocked. On success *handle must be flushed.
static int load_blob(ks_tpm *tpm, const uint8_t *blob, size_t blob_len, int *usage, ESYS_TR *handle,
                     ks_tpm_error *err) {
    *handle = ESYS_TR_NONE;
    TPM2B_PUBLIC pub;
    TPM2B_PRIVATE priv;
    if (unwrap_blob(blob, blob_len, usage, &pub, &priv, err) != 0) return -1;
    if (ensure_primary(tpm, err) != 0) return -1;
    TSS2_RC rc = Esys_Load(tpm->esys, tpm->primary, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &priv, &pub,
                           handle);
    if (rc != TSS2_RC_SUCCESS && tpm_base(rc) == TPM2_RC_HANDLE) {
        // The cached primary is gone (flushed by someone else, or the TPM restarted): create it again once.
        tpm->primary = ESYS_TR_NONE;
        if (ensure_primary(tpm, err) != 0) return -1;
        rc = Esys_Load(tpm->esys, tpm->primary, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &priv, &pub, handle);
    }
    memset(&priv, 0, sizeof priv);
    if (rc != TSS2_RC_SUCCESS) {
        *handle = ESYS_TR_NONE;
        uint32_t base = tpm_base(rc);
        int kind = KS_TPM_ERR_OTHER;
        const char *what = "loading the key into the TPM failed";
        if (base == TPM2_RC_INTEGRITY || base == TPM2_RC_BINDING || base == TPM2_RC_VALUE ||
            base == TPM2_RC_SENSITIVE || base == TPM2_RC_SIZE) {
            kind = KS_TPM_ERR_WRONG_TPM;
            what = "this TPM cannot load the key: it was created by another TPM, or this TPM's owner hierarchy "
                   "was cleared since";
        }
        tss_error(tpm, err, kind, rc, what);
        return -1;
    }
    return 0;
}

static void flush(ks_tpm *tpm, ESYS_TR handle) {
    if (handle != ESYS_TR_NONE && !tpm->lost) {
        TSS2_RC rc = Esys_FlushContext(tpm->esys, handle);
        if (is_connection_failure(rc)) tpm->lost = 1;
    }
}

static void copy_padded(uint8_t out[32], const TPM2B_ECC_PARAMETER *p) {
    memset(out, 0, 32);
    size_t n = p->size > 32 ? 32 : p->size;
    memcpy(out + (32 - n), p->buffer + (p->size - n), n);
}

int ks_tpm_sign_digest(ks_tpm *tpm, const uint8_t *blob, size_t blob_len, const uint8_t digest[32],
                       uint8_t sig_rs[64], ks_tpm_error *err) {
    clear_error(err);
    if (check_usable(tpm, err) != 0) return -1;
    sigpipe_guard g;
    sigpipe_block(&g);
    int result = -1;
    ESYS_TR key = ESYS_TR_NONE;
    TPMT_SIGNATURE *signature = NULL;
    int usage = 0;
    if (load_blob(tpm, blob, blob_len, &usage, &key, err) != 0) goto done;
    TPM2B_DIGEST in_digest = {.size = 32};
    memcpy(in_digest.buffer, digest, 32);
    TPMT_SIG_SCHEME scheme = {.scheme = TPM2_ALG_ECDSA, .details = {.ecdsa = {.hashAlg = TPM2_ALG_SHA256}}};
    TPMT_TK_HASHCHECK validation = {.tag = TPM2_ST_HASHCHECK, .hierarchy = TPM2_RH_NULL, .digest = {.size = 0}};
    TSS2_RC rc = Esys_Sign(tpm->esys, key, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &in_digest, &scheme,
                           &validation, &signature);
    if (rc != TSS2_RC_SUCCESS) {
        uint32_t base = tpm_base(rc);
        if (base == TPM2_RC_KEY || base == TPM2_RC_ATTRIBUTES || base == TPM2_RC_SCHEME || base == TPM2_RC_TYPE) {
            tss_error(tpm, err, KS_TPM_ERR_WRONG_USAGE, rc, "the TPM refuses to sign with this key (not a signing key)");
        } else {
            tss_error(tpm, err, KS_TPM_ERR_OTHER, rc, "signing in the TPM failed");
        }
        goto done;
    }
    if (signature->sigAlg != TPM2_ALG_ECDSA || signature->signature.ecdsa.signatureR.size > 32 ||
        signature->signature.ecdsa.signatureS.size > 32) {
        set_error(err, KS_TPM_ERR_OTHER, 0, "the TPM returned a signature that is not a P-256 ECDSA signature");
        goto done;
    }
    copy_padded(sig_rs, &signature->signature.ecdsa.signatureR);
    copy_padded(sig_rs + 32, &signature->signature.ecdsa.signatureS);
    result = 0;
done:
    Esys_Free(signature);
    flush(tpm, key);
    sigpipe_unblock(&g);
    return result;
}

int ks_tpm_ecdh(ks_tpm *tpm, const uint8_t *blob, size_t blob_len, const uint8_t peer_x963[65],
                uint8_t shared_x[32], ks_tpm_error *err) {
    clear_error(err);
    if (peer_x963[0] != 0x04) {
        set_error(err, KS_TPM_ERR_INVALID_PEER_KEY, 0,
                  "the peer's public key is not an uncompressed P-256 point (0x04 || X || Y)");
        return -1;
    }
    if (check_usable(tpm, err) != 0) return -1;
    sigpipe_guard g;
    sigpipe_block(&g);
    int result = -1;
    ESYS_TR key = ESYS_TR_NONE;
    TPM2B_ECC_POINT *out = NULL;
    int usage = 0;
    if (load_blob(tpm, blob, blob_len, &usage, &key, err) != 0) goto done;
    TPM2B_ECC_POINT point;
    memset(&point, 0, sizeof point);
    point.point.x.size = 32;
    memcpy(point.point.x.buffer, peer_x963 + 1, 32);
    point.point.y.size = 32;
    memcpy(point.point.y.buffer, peer_x963 + 33, 32);
    TSS2_RC rc = Esys_ECDH_ZGen(tpm->esys, key, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &point, &out);
    if (rc != TSS2_RC_SUCCESS) {
        uint32_t base = tpm_base(rc);
        if (base == TPM2_RC_ECC_POINT || base == TPM2_RC_NO_RESULT) {
            tss_error(tpm, err, KS_TPM_ERR_INVALID_PEER_KEY, rc, "the peer's public key is not a point on P-256");
        } else if (base == TPM2_RC_KEY || base == TPM2_RC_ATTRIBUTES || base == TPM2_RC_SCHEME ||
                   base == TPM2_RC_TYPE) {
            tss_error(tpm, err, KS_TPM_ERR_WRONG_USAGE, rc,
                      "the TPM refuses key agreement with this key (not a key-agreement key)");
        } else {
            tss_error(tpm, err, KS_TPM_ERR_OTHER, rc, "key agreement in the TPM failed");
        }
        goto done;
    }
    if (out->point.x.size > 32) {
        set_error(err, KS_TPM_ERR_OTHER, 0, "the TPM returned a shared point that is not on P-256");
        goto done;
    }
    copy_padded(shared_x, &out->point.x);
    result = 0;
done:
    if (out) memset(out, 0, sizeof *out);
    Esys_Free(out);
    flush(tpm, key);
    sigpipe_unblock(&g);
    return result;
}

// MARK: - Properties

static void u32_text(uint32_t v, char *out) {
    out[0] = (char)(v >> 24);
    out[1] = (char)(v >> 16);
    out[2] = (char)(v >> 8);
    out[3] = (char)v;
    for (int i = 0; i < 4; i++)
        if (out[i] != 0 && (out[i] < 0x20 || out[i] > 0x7e)) out[i] = '?';
}

int ks_tpm_info(ks_tpm *tpm, ks_tpm_properties *out, ks_tpm_error *err) {
    clear_error(err);
    memset(out, 0, sizeof *out);
    if (check_usable(tpm, err) != 0) return -1;
    sigpipe_guard g;
    sigpipe_block(&g);
    int result = -1;
    TPMS_CAPABILITY_DATA *caps = NULL;
    TPMI_YES_NO more = 0;
    TSS2_RC rc = Esys_GetCapability(tpm->esys, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, TPM2_CAP_TPM_PROPERTIES,
                                    TPM2_PT_FIXED, TPM2_MAX_TPM_PROPERTIES, &more, &caps);
    if (rc != TSS2_RC_SUCCESS) {
        tss_error(tpm, err, KS_TPM_ERR_OTHER, rc, "reading the TPM's properties failed");
        goto done;
    }
    if (caps->capability != TPM2_CAP_TPM_PROPERTIES) {
        set_error(err, KS_TPM_ERR_OTHER, 0, "the TPM answered with another capability");
        goto done;
    }
    char vendor[16] = {0};
    const TPML_TAGGED_TPM_PROPERTY *props = &caps->data.tpmProperties;
    for (UINT32 i = 0; i < props->count && i < TPM2_MAX_TPM_PROPERTIES; i++) {
        uint32_t v = props->tpmProperty[i].value;
        switch (props->tpmProperty[i].property) {
        case TPM2_PT_MANUFACTURER: u32_text(v, out->manufacturer); break;
        case TPM2_PT_VENDOR_STRING_1: u32_text(v, vendor); break;
        case TPM2_PT_VENDOR_STRING_2: u32_text(v, vendor + 4); break;
        case TPM2_PT_VENDOR_STRING_3: u32_text(v, vendor + 8); break;
        case TPM2_PT_VENDOR_STRING_4: u32_text(v, vendor + 12); break;
        case TPM2_PT_FIRMWARE_VERSION_1: out->firmware_version_1 = v; break;
        case TPM2_PT_FIRMWARE_VERSION_2: out->firmware_version_2 = v; break;
        case TPM2_PT_REVISION: out->spec_revision = v; break;
        case TPM2_PT_YEAR: out->spec_year = v; break;
        default: break;
        }
    }
    // Vendor strings are NUL-padded in each 4-byte group: join the non-NUL characters.
    size_t n = 0;
    for (int i = 0; i < 16; i++)
        if (vendor[i] != 0) out->vendor[n++] = vendor[i];
    out->vendor[n] = 0;
    out->manufacturer[4] = 0;
    result = 0;
done:
    Esys_Free(caps);
    sigpipe_unblock(&g);
    return result;
}

#endif // __linux__
