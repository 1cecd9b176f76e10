// The TPM benchmark's baseline: plain ESAPI (see include/tpm_baseline.h).
#include "tpm_baseline.h"

#if defined(__linux__)

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tss2/tss2_esys.h>
#include <tss2/tss2_mu.h>
#include <tss2/tss2_rc.h>
#include <tss2/tss2_tctildr.h>

struct ks_baseline_tpm {
    TSS2_TCTI_CONTEXT *tcti;
    ESYS_CONTEXT *esys;
    ESYS_TR primary;
    ESYS_TR key;
    /// The key's parts, for ks_baseline_tpm_sign_reloading.
    TPM2B_PUBLIC pub;
    TPM2B_PRIVATE priv;
};

static void fail(char *error, int size, const char *what, TSS2_RC rc) {
    if (!error || size <= 0) return;
    const char *decoded = Tss2_RC_Decode(rc);
    snprintf(error, (size_t)size, "%s: %s (0x%x)", what, decoded ? decoded : "?", rc);
}

int ks_baseline_tpm_open(const char *tcti_conf, const uint8_t *key, size_t key_len, ks_baseline_tpm **out,
                         char *error, int error_size) {
    *out = NULL;
    ks_baseline_tpm *tpm = calloc(1, sizeof *tpm);
    if (!tpm) return -1;
    tpm->primary = ESYS_TR_NONE;
    tpm->key = ESYS_TR_NONE;
    TSS2_RC rc = Tss2_TctiLdr_Initialize(tcti_conf, &tpm->tcti);
    if (rc != TSS2_RC_SUCCESS) {
        fail(error, error_size, "Tss2_TctiLdr_Initialize", rc);
        free(tpm);
        return -1;
    }
    rc = Esys_Initialize(&tpm->esys, tpm->tcti, NULL);
    if (rc != TSS2_RC_SUCCESS) {
        fail(error, error_size, "Esys_Initialize", rc);
        Tss2_TctiLdr_Finalize(&tpm->tcti);
        free(tpm);
        return -1;
    }

    // The TCG ECC "SRK" template: ECC P-256, AES-128-CFB, restricted decryption, no authorization value.
    TPM2B_PUBLIC template;
    memset(&template, 0, sizeof template);
    template.publicArea.type = TPM2_ALG_ECC;
    template.publicArea.nameAlg = TPM2_ALG_SHA256;
    template.publicArea.objectAttributes = TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT | TPMA_OBJECT_FIXEDTPM |
                                           TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN |
                                           TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_NODA;
    template.publicArea.parameters.eccDetail.symmetric.algorithm = TPM2_ALG_AES;
    template.publicArea.parameters.eccDetail.symmetric.keyBits.aes = 128;
    template.publicArea.parameters.eccDetail.symmetric.mode.aes = TPM2_ALG_CFB;
    template.publicArea.parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL;
    template.publicArea.parameters.eccDetail.curveID = TPM2_ECC_NIST_P256;
    template.publicArea.parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
    TPM2B_SENSITIVE_CREATE sensitive;
    memset(&sensitive, 0, sizeof sensitive);
    TPM2B_DATA outside_info = {.size = 0};
    TPML_PCR_SELECTION pcrs = {.count = 0};
    TPM2B_PUBLIC *out_public = NULL;
    TPM2B_CREATION_DATA *creation_data = NULL;
    TPM2B_DIGEST *creation_hash = NULL;
    TPMT_TK_CREATION *creation_ticket = NULL;
    rc = Esys_CreatePrimary(tpm->esys, ESYS_TR_RH_OWNER, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &sensitive,
                            &template, &outside_info, &pcrs, &tpm->primary, &out_public, &creation_data,
                            &creation_hash, &creation_ticket);
    Esys_Free(out_public);
    Esys_Free(creation_data);
    Esys_Free(creation_hash);
    Esys_Free(creation_ticket);
    if (rc != TSS2_RC_SUCCESS) {
        fail(error, error_size, "Esys_CreatePrimary", rc);
        ks_baseline_tpm_close(tpm);
        return -1;
    }

    TPM2B_PUBLIC pub;
    TPM2B_PRIVATE priv;
    memset(&pub, 0, sizeof pub);
    memset(&priv, 0, sizeof priv);
    size_t offset = 0;
    rc = Tss2_MU_TPM2B_PUBLIC_Unmarshal(key, key_len, &offset, &pub);
    if (rc == TSS2_RC_SUCCESS) rc = Tss2_MU_TPM2B_PRIVATE_Unmarshal(key, key_len, &offset, &priv);
    if (rc != TSS2_RC_SUCCESS) {
        fail(error, error_size, "unmarshalling the key", rc);
        ks_baseline_tpm_close(tpm);
        return -1;
    }
    tpm->pub = pub;
    tpm->priv = priv;
    rc = Esys_Load(tpm->esys, tpm->primary, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &priv, &pub, &tpm->key);
    if (rc != TSS2_RC_SUCCESS) {
        tpm->key = ESYS_TR_NONE;
        fail(error, error_size, "Esys_Load", rc);
        ks_baseline_tpm_close(tpm);
        return -1;
    }
    *out = tpm;
    return 0;
}

static void copy_rs(const TPMT_SIGNATURE *signature, uint8_t sig_rs[64]) {
    const TPM2B_ECC_PARAMETER *r = &signature->signature.ecdsa.signatureR;
    const TPM2B_ECC_PARAMETER *s = &signature->signature.ecdsa.signatureS;
    memset(sig_rs, 0, 64);
    if (r->size <= 32) memcpy(sig_rs + (32 - r->size), r->buffer, r->size);
    if (s->size <= 32) memcpy(sig_rs + 32 + (32 - s->size), s->buffer, s->size);
}

int ks_baseline_tpm_sign(ks_baseline_tpm *tpm, const uint8_t digest[32], int count, uint8_t sig_rs[64], char *error,
                         int error_size) {
    TPM2B_DIGEST in_digest = {.size = 32};
    memcpy(in_digest.buffer, digest, 32);
    TPMT_SIG_SCHEME scheme = {.scheme = TPM2_ALG_ECDSA, .details = {.ecdsa = {.hashAlg = TPM2_ALG_SHA256}}};
    TPMT_TK_HASHCHECK validation = {.tag = TPM2_ST_HASHCHECK, .hierarchy = TPM2_RH_NULL, .digest = {.size = 0}};
    for (int i = 0; i < count; i++) {
        TPMT_SIGNATURE *signature = NULL;
        TSS2_RC rc = Esys_Sign(tpm->esys, tpm->key, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &in_digest, &scheme,
                               &validation, &signature);
        if (rc != TSS2_RC_SUCCESS) {
            fail(error, error_size, "Esys_Sign", rc);
            return i;
        }
        if (i == count - 1) copy_rs(signature, sig_rs);
        Esys_Free(signature);
    }
    return count;
}

int ks_baseline_tpm_sign_reloading(ks_baseline_tpm *tpm, const uint8_t digest[32], int count, uint8_t sig_rs[64],
                                   char *error, int error_size) {
    TPM2B_DIGEST in_digest = {.size = 32};
    memcpy(in_digest.buffer, digest, 32);
    TPMT_SIG_SCHEME scheme = {.scheme = TPM2_ALG_ECDSA, .details = {.ecdsa = {.hashAlg = TPM2_ALG_SHA256}}};
    TPMT_TK_HASHCHECK validation = {.tag = TPM2_ST_HASHCHECK, .hierarchy = TPM2_RH_NULL, .digest = {.size = 0}};
    for (int i = 0; i < count; i++) {
        ESYS_TR key = ESYS_TR_NONE;
        TSS2_RC rc = Esys_Load(tpm->esys, tpm->primary, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &tpm->priv,
                               &tpm->pub, &key);
        if (rc != TSS2_RC_SUCCESS) {
            fail(error, error_size, "Esys_Load", rc);
            return i;
        }
        TPMT_SIGNATURE *signature = NULL;
        rc = Esys_Sign(tpm->esys, key, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &in_digest, &scheme, &validation,
                       &signature);
        Esys_FlushContext(tpm->esys, key);
        if (rc != TSS2_RC_SUCCESS) {
            fail(error, error_size, "Esys_Sign", rc);
            return i;
        }
        if (i == count - 1) copy_rs(signature, sig_rs);
        Esys_Free(signature);
    }
    return count;
}

void ks_baseline_tpm_close(ks_baseline_tpm *tpm) {
    if (!tpm) return;
    if (tpm->key != ESYS_TR_NONE) Esys_FlushContext(tpm->esys, tpm->key);
    if (tpm->primary != ESYS_TR_NONE) Esys_FlushContext(tpm->esys, tpm->primary);
    Esys_Finalize(&tpm->esys);
    Tss2_TctiLdr_Finalize(&tpm->tcti);
    memset(&tpm->priv, 0, sizeof tpm->priv);
    free(tpm);
}

#endif
