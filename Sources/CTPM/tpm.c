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
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <tss2/tss2_esys.h>
#include <tss2/tss2_mu.h>
#include <tss2/tss2_rc.h>
#include <tss2/tss2_tctildr.h>

#include "swtpm_transport.h"

/// A key kept loaded in the TPM (see ks_tpm's `cache`).
typedef struct {
    /// ESYS_TR_NONE when the entry is empty.
    ESYS_TR handle;
    /// A copy of the blob the key was loaded from: the cache's key (the blob's exact bytes).
    uint8_t *blob;
    size_t blob_len;
    /// When the entry was last used (ks_tpm's `uses` then): the least recently used entry is evicted first.
    uint64_t used;
} cached_key;

struct ks_tpm {
    TSS2_TCTI_CONTEXT *tcti;
    /// `tcti` is Keystone's swtpm transport (else tctildr's).
    int own_transport;
    ESYS_CONTEXT *esys;
    /// The primary storage key, ESYS_TR_NONE until first needed.
    ESYS_TR primary;
    /// Set once the connection broke: every later call fails at once with KS_TPM_ERR_CONNECTION_LOST.
    int lost;
    /// Set once a command went unanswered past the deadline: every later call fails at once with
    /// KS_TPM_ERR_TIMED_OUT (the ESAPI context is in the middle of that command).
    int timed_out;
    /// The most each TPM command may take, in milliseconds (-1: no deadline).
    int32_t timeout_ms;
    /// Keys kept loaded after use, so that the next operation with the same blob skips TPM2_Load (and the flush).
    cached_key cache[KS_TPM_KEY_CACHE_SIZE];
    uint64_t uses;
    /// Held by every operation on this handle (uncontended: the Swift side serializes them), so the process-exit
    /// flush never talks to the TPM in the middle of another thread's command.
    pthread_mutex_t op_lock;
    /// The registry of open handles (see `exit_flush`).
    struct ks_tpm *prev, *next;
    /// The TCTI configuration it was opened with ("" for tctildr's default): whose orphans it may reclaim.
    char tcti_conf[256];
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

/// True for a TCTI's or ESAPI's "not done yet" (TSS2_BASE_RC_TRY_AGAIN): the deadline passed, or the TPM asked for
/// the command to be sent again.
static int is_try_again(TSS2_RC rc) {
    return (rc & TSS2_RC_LAYER_MASK) != TSS2_TPM_RC_LAYER && (rc & 0xFFFF) == TSS2_BASE_RC_TRY_AGAIN;
}

/// True when the TPM says the transient object a command names is not loaded (any more): flushed by another
/// client of a TPM without a resource manager, or the TPM was restarted.
static int is_stale_handle(TSS2_RC rc) {
    uint32_t base = tpm_base(rc);
    return base == TPM2_RC_REFERENCE_H0 || base == TPM2_RC_HANDLE;
}

/// Fills *err for a failed TSS call: the connection-lost kind when the TCTI failed (and marks the handle), the
/// timed-out kind when the deadline passed, else `kind`. The message is "<what>: <Tss2_RC_Decode(rc)> (0x<rc>)".
static void tss_error(ks_tpm *tpm, ks_tpm_error *err, int kind, TSS2_RC rc, const char *what) {
    if (tpm && tpm->timed_out && is_try_again(rc)) {
        set_error(err, KS_TPM_ERR_TIMED_OUT, rc,
                  "%s: the TPM did not answer within %d ms (it accepted the command but never responded)", what,
                  (int)tpm->timeout_ms);
        return;
    }
    if (is_connection_failure(rc)) {
        if (tpm) tpm->lost = 1;
        kind = KS_TPM_ERR_CONNECTION_LOST;
    }
    const char *decoded = Tss2_RC_Decode(rc);
    set_error(err, kind, rc, "%s: %s (0x%x)", what, decoded ? decoded : "unknown response code", rc);
}

// MARK: - Deadlines

static int64_t now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/// The moment `timeout_ms` from now (-1, no deadline, when `timeout_ms` is negative).
static int64_t deadline_after(int32_t timeout_ms) { return timeout_ms < 0 ? -1 : now_ms() + timeout_ms; }

/// Milliseconds left until `deadline` (0 once it passed; -1, block, when there is no deadline).
static int32_t remaining_ms(int64_t deadline) {
    if (deadline < 0) return -1;
    int64_t left = deadline - now_ms();
    if (left <= 0) return 0;
    return left > INT32_MAX ? INT32_MAX : (int32_t)left;
}

/// Runs one TPM command: `async` (an Esys_*_Async call) sends it, then `finish` (the matching Esys_*_Finish) is
/// called with ESAPI's timeout set to what is left of the handle's deadline, again while it says TRY_AGAIN and
/// time is left (TRY_AGAIN also means that ESAPI resent a command the TPM asked to retry). When the deadline
/// passes, `rc` is the TRY_AGAIN code and the handle is marked timed out: its ESAPI context is left in the middle
/// of the command, so nothing else is ever sent on it. Every command Keystone sends goes through here: ESAPI's
/// synchronous calls wait for ever.
#define TPM_COMMAND(tpm, rc, async, finish)                                                                           \
    do {                                                                                                             \
        int64_t deadline_ = deadline_after((tpm)->timeout_ms);                                                       \
        (rc) = (async);                                                                                              \
        if ((rc) == TSS2_RC_SUCCESS) {                                                                               \
            for (;;) {                                                                                               \
                Esys_SetTimeout((tpm)->esys, remaining_ms(deadline_));                                               \
                (rc) = (finish);                                                                                     \
                if (!is_try_again(rc) || remaining_ms(deadline_) == 0) break;                                        \
            }                                                                                                        \
        }                                                                                                            \
        if (is_try_again(rc)) (tpm)->timed_out = 1;                                                                  \
    } while (0)

static int usable(const ks_tpm *tpm) { return !tpm->lost && !tpm->timed_out; }

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

// MARK: - Open handles, flushed at process exit

// A TPM without a resource manager (swtpm, /dev/tpm0) keeps a process's transient objects after the process has
// gone: the primary key and the cached key of a handle that was never closed (a global token alive at exit(3))
// would fill its few object slots after a couple of runs. Every open handle is registered, and an atexit handler
// flushes what each one holds (a handle in the middle of an operation on another thread is skipped). A process that
// is killed or crashes cannot do this; /dev/tpmrm0 flushes for it.
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static ks_tpm *registry_head = NULL;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
static void flush_held(ks_tpm *tpm);

static void exit_flush(void) {
    pthread_mutex_lock(&registry_lock);
    for (ks_tpm *tpm = registry_head; tpm; tpm = tpm->next) {
        if (pthread_mutex_trylock(&tpm->op_lock) != 0) continue;
        flush_held(tpm);
        pthread_mutex_unlock(&tpm->op_lock);
    }
    pthread_mutex_unlock(&registry_lock);
}

static void register_exit_flush(void) { atexit(exit_flush); }

static void registry_add(ks_tpm *tpm) {
    pthread_once(&exit_once, register_exit_flush);
    pthread_mutex_lock(&registry_lock);
    tpm->prev = NULL;
    tpm->next = registry_head;
    if (registry_head) registry_head->prev = tpm;
    registry_head = tpm;
    pthread_mutex_unlock(&registry_lock);
}

static void registry_remove(ks_tpm *tpm) {
    pthread_mutex_lock(&registry_lock);
    if (tpm->prev) tpm->prev->next = tpm->next; else registry_head = tpm->next;
    if (tpm->next) tpm->next->prev = tpm->prev;
    pthread_mutex_unlock(&registry_lock);
}

// MARK: - Objects a handle left behind

// A handle whose command timed out (or whose connection broke) cannot flush what it loaded: its ESAPI context is in
// the middle of a command. On a TPM without a resource manager (swtpm, /dev/tpm0) those objects keep two or three of
// its few object slots until it restarts, and every later handle would fail with TPM_RC_OBJECT_MEMORY. So the
// closing handle records them (TPM handle and name, read from ESAPI's metadata without a command), and a later
// handle on the same TCTI that runs out of object slots flushes each one whose TPM handle still holds an object of
// that exact name (TPM2_ReadPublic): the same key, never another client's object that took the handle since (the
// TPM restarted meanwhile, or someone flushed it). /dev/tpmrm0 flushes a closed connection's objects itself; there
// the reclaim finds nothing. An object the timed-out command itself was loading is not known, and stays.
#define KS_TPM_MAX_ORPHANS 32

typedef struct {
    char tcti_conf[256];
    TPM2_HANDLE handle;
    TPM2B_NAME name;
} orphan;

static pthread_mutex_t orphans_lock = PTHREAD_MUTEX_INITIALIZER;
static orphan orphans[KS_TPM_MAX_ORPHANS];
static int orphan_count = 0;

/// Records one object of `tpm` as an orphan (ESAPI metadata only: nothing is sent).
static void remember_orphan(ks_tpm *tpm, ESYS_TR object) {
    if (object == ESYS_TR_NONE) return;
    TPM2_HANDLE handle = 0;
    TPM2B_NAME *name = NULL;
    if (Esys_TR_GetTpmHandle(tpm->esys, object, &handle) != TSS2_RC_SUCCESS ||
        Esys_TR_GetName(tpm->esys, object, &name) != TSS2_RC_SUCCESS || !name) {
        Esys_Free(name);
        return;
    }
    pthread_mutex_lock(&orphans_lock);
    if (orphan_count < KS_TPM_MAX_ORPHANS) {
        orphan *entry = &orphans[orphan_count++];
        snprintf(entry->tcti_conf, sizeof entry->tcti_conf, "%s", tpm->tcti_conf);
        entry->handle = handle;
        entry->name = *name;
    }
    pthread_mutex_unlock(&orphans_lock);
    Esys_Free(name);
}

/// Records what a handle that timed out or lost its connection still holds.
static void remember_orphans(ks_tpm *tpm) {
    remember_orphan(tpm, tpm->primary);
    for (int i = 0; i < KS_TPM_KEY_CACHE_SIZE; i++) remember_orphan(tpm, tpm->cache[i].handle);
}

static void forget_handle(ks_tpm *tpm, ESYS_TR *handle);
static void cache_clear(ks_tpm *tpm);

/// Adds the TPM handles of the objects `tpm` holds to `live` (at most `capacity`); returns the new count.
static int live_handles(ks_tpm *tpm, TPM2_HANDLE *live, int count, int capacity) {
    ESYS_TR objects[1 + KS_TPM_KEY_CACHE_SIZE];
    objects[0] = tpm->primary;
    for (int i = 0; i < KS_TPM_KEY_CACHE_SIZE; i++) objects[1 + i] = tpm->cache[i].handle;
    for (int i = 0; i < 1 + KS_TPM_KEY_CACHE_SIZE && count < capacity; i++) {
        TPM2_HANDLE handle = 0;
        if (objects[i] != ESYS_TR_NONE && Esys_TR_GetTpmHandle(tpm->esys, objects[i], &handle) == TSS2_RC_SUCCESS)
            live[count++] = handle;
    }
    return count;
}

/// Flushes the orphans of this handle's TCTI that are still loaded (see above); returns how many were flushed.
/// Orphans the TPM reported gone or replaced are dropped; those it did not answer about are kept for later.
static int reclaim_orphans(ks_tpm *tpm) {
    orphan mine[KS_TPM_MAX_ORPHANS];
    int count = 0;
    pthread_mutex_lock(&orphans_lock);
    for (int i = 0; i < orphan_count;) {
        if (strcmp(orphans[i].tcti_conf, tpm->tcti_conf) == 0) {
            mine[count++] = orphans[i];
            orphans[i] = orphans[--orphan_count];
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&orphans_lock);
    // The TPM handles this process's open handles on the same TPM hold now: an orphan at one of them is not an orphan
    // any more (the TPM restarted and gave the handle to the same deterministic primary key again): never flush it.
    // Such a handle busy on another thread cannot be asked: then nothing is reclaimed this time.
    TPM2_HANDLE live[64];
    int live_count = live_handles(tpm, live, 0, 64);
    int busy = 0;
    pthread_mutex_lock(&registry_lock);
    for (ks_tpm *other = registry_head; other; other = other->next) {
        if (other == tpm || strcmp(other->tcti_conf, tpm->tcti_conf) != 0) continue;
        if (pthread_mutex_trylock(&other->op_lock) != 0) {
            busy = 1;
            break;
        }
        live_count = live_handles(other, live, live_count, 64);
        pthread_mutex_unlock(&other->op_lock);
    }
    pthread_mutex_unlock(&registry_lock);
    int flushed = 0;
    for (int i = 0; i < count; i++) {
        int in_use = 0;
        for (int j = 0; j < live_count; j++) in_use |= live[j] == mine[i].handle;
        if (in_use) continue;  // dropped: the object at that handle is a live one's
        if (busy || !usable(tpm)) {
            // Another handle is busy, or the TPM stopped answering: keep it for later.
            pthread_mutex_lock(&orphans_lock);
            if (orphan_count < KS_TPM_MAX_ORPHANS) orphans[orphan_count++] = mine[i];
            pthread_mutex_unlock(&orphans_lock);
            continue;
        }
        ESYS_TR object = ESYS_TR_NONE;
        TSS2_RC rc;
        TPM_COMMAND(tpm, rc,
                    Esys_TR_FromTPMPublic_Async(tpm->esys, mine[i].handle, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE),
                    Esys_TR_FromTPMPublic_Finish(tpm->esys, &object));
        if (rc != TSS2_RC_SUCCESS) {
            if (is_connection_failure(rc)) tpm->lost = 1;
            continue;  // gone (or the TPM stopped answering: then the loop keeps the rest)
        }
        TPM2B_NAME *name = NULL;
        int same = Esys_TR_GetName(tpm->esys, object, &name) == TSS2_RC_SUCCESS && name &&
                   name->size == mine[i].name.size && memcmp(name->name, mine[i].name.name, name->size) == 0;
        Esys_Free(name);
        if (same) {
            forget_handle(tpm, &object);
            flushed++;
        } else {
            Esys_TR_Close(tpm->esys, &object);
        }
    }
    return flushed;
}

/// Makes room in a TPM whose object slots are full: flushes this handle's cached keys and the orphans of earlier
/// handles on the same TCTI.
static void make_room(ks_tpm *tpm) {
    cache_clear(tpm);
    if (usable(tpm)) reclaim_orphans(tpm);
}

// MARK: - Open and close

static void cache_clear(ks_tpm *tpm);

// tpm2-tss logs every failure to standard error (ERROR:tcti:…, 44 lines on a machine without a TPM), including the
// ones Keystone reports as typed errors. Decision: quiet unless asked: TSS2_LOG set by the user is kept as it is;
// KEYSTONE_LOG_LEVEL=debug or trace keeps tpm2-tss's default logging; otherwise TSS2_LOG=all+NONE. tpm2-tss reads
// TSS2_LOG when a module logs for the first time, so this runs once, before the first TCTI or ESAPI call.
static pthread_once_t quiet_once = PTHREAD_ONCE_INIT;
static void quiet_tss2_logging_once(void) {
    if (getenv("TSS2_LOG") != NULL) return;
    const char *level = getenv("KEYSTONE_LOG_LEVEL");
    if (level && (strcasecmp(level, "debug") == 0 || strcasecmp(level, "trace") == 0)) return;
    setenv("TSS2_LOG", "all+NONE", 0);
}
void ks_tpm_quiet_logging(void) { pthread_once(&quiet_once, quiet_tss2_logging_once); }

int ks_tpm_open(const char *tcti_conf, ks_tpm **out, ks_tpm_error *err) {
    return ks_tpm_open_with_timeout(tcti_conf, KS_TPM_DEFAULT_TIMEOUT_MS, out, err);
}

/// The TCTI Keystone uses when none is configured: the kernel's resource manager, else the raw device; NULL when the
/// machine has neither.
///
/// Decision: not tctildr's default search. tctildr tries the tabrmd TCTI first, whose GLib code prints a CRITICAL
/// line to standard error when no D-Bus broker answers (libtss2-tcti-tabrmd0 is installed with tpm2-abrmd, common on
/// desktops), then mssim and swtpm on localhost ports: on a machine without a TPM that is noise and time for nothing,
/// and the access broker or a simulator is something one configures (KEYSTONE_TPM_TCTI=tabrmd, swtpm:...) anyway.
static const char *default_tcti(void) {
    if (access("/dev/tpmrm0", F_OK) == 0) return "device:/dev/tpmrm0";
    if (access("/dev/tpm0", F_OK) == 0) return "device:/dev/tpm0";
    return NULL;
}

int ks_tpm_open_with_timeout(const char *tcti_conf, int32_t timeout_ms, ks_tpm **out, ks_tpm_error *err) {
    ks_tpm_quiet_logging();
    clear_error(err);
    *out = NULL;
    if (!tcti_conf || !*tcti_conf) {
        tcti_conf = default_tcti();
        if (!tcti_conf) {
            set_error(err, KS_TPM_ERR_UNAVAILABLE, 0,
                      "no TPM at the default TCTI: no /dev/tpmrm0 or /dev/tpm0, and no TCTI configured");
            return -1;
        }
    }
    ks_tpm *tpm = calloc(1, sizeof *tpm);
    if (!tpm) {
        set_error(err, KS_TPM_ERR_OTHER, 0, "out of memory");
        return -1;
    }
    tpm->primary = ESYS_TR_NONE;
    for (int i = 0; i < KS_TPM_KEY_CACHE_SIZE; i++) tpm->cache[i].handle = ESYS_TR_NONE;
    tpm->timeout_ms = timeout_ms > 0 ? timeout_ms : -1;
    snprintf(tpm->tcti_conf, sizeof tpm->tcti_conf, "%s", tcti_conf ? tcti_conf : "");
    sigpipe_guard g;
    sigpipe_block(&g);
    TSS2_RC rc;
    char message[160] = "";
    if (ks_swtpm_conf_matches(tcti_conf)) {
        // tpm2-tss's own swtpm TCTI ignores ESAPI's timeout: Keystone's transport keeps the deadline.
        rc = ks_swtpm_transport_new(tcti_conf, tpm->timeout_ms, &tpm->tcti, message, sizeof message);
        tpm->own_transport = 1;
    } else {
        rc = Tss2_TctiLdr_Initialize(tcti_conf, &tpm->tcti);
        const char *decoded = Tss2_RC_Decode(rc);
        snprintf(message, sizeof message, "%s", decoded ? decoded : "unknown response code");
    }
    if (rc != TSS2_RC_SUCCESS) {
        sigpipe_unblock(&g);
        set_error(err, KS_TPM_ERR_UNAVAILABLE, rc, "no TPM at %s: %s (0x%x)",
                  tcti_conf ? tcti_conf : "the default TCTI (/dev/tpmrm0, /dev/tpm0, ...)", message, rc);
        free(tpm);
        return -1;
    }
    rc = Esys_Initialize(&tpm->esys, tpm->tcti, NULL);
    sigpipe_unblock(&g);
    if (rc != TSS2_RC_SUCCESS) {
        tss_error(NULL, err, KS_TPM_ERR_UNAVAILABLE, rc, "ESAPI initialization failed");
        if (err && err->kind == KS_TPM_ERR_CONNECTION_LOST) err->kind = KS_TPM_ERR_UNAVAILABLE;
        if (tpm->own_transport) {
            ks_swtpm_transport_free(tpm->tcti);
        } else {
            Tss2_TctiLdr_Finalize(&tpm->tcti);
        }
        free(tpm);
        return -1;
    }
    pthread_mutex_init(&tpm->op_lock, NULL);
    registry_add(tpm);
    *out = tpm;
    return 0;
}

/// Flushes the cached keys and the primary key (what `ks_tpm_close` and the exit flush release in the TPM).
static void flush_held(ks_tpm *tpm) {
    sigpipe_guard g;
    sigpipe_block(&g);
    // Flushes what this handle loaded, while the TPM answers (after a lost connection or a timeout nothing more is
    // sent: /dev/tpmrm0 flushes a closed connection's objects itself; a TPM without a resource manager keeps them
    // until it restarts).
    cache_clear(tpm);
    forget_handle(tpm, &tpm->primary);
    sigpipe_unblock(&g);
}

void ks_tpm_close(ks_tpm *tpm) {
    if (!tpm) return;
    registry_remove(tpm);
    pthread_mutex_lock(&tpm->op_lock);
    if (tpm->timed_out || tpm->lost) remember_orphans(tpm);
    flush_held(tpm);
    pthread_mutex_unlock(&tpm->op_lock);
    pthread_mutex_destroy(&tpm->op_lock);
    sigpipe_guard g;
    sigpipe_block(&g);
    Esys_Finalize(&tpm->esys);
    if (tpm->own_transport) {
        ks_swtpm_transport_free(tpm->tcti);
    } else {
        Tss2_TctiLdr_Finalize(&tpm->tcti);
    }
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
///
/// Decision: a key with an authorization value (a PIN) is subject to dictionary-attack protection (no noDA: every
/// wrong value counts toward the TPM's lockout, which is the point); a key without one is noDA, so that someone
/// guessing another key's PIN until the TPM locks out cannot also block the keys that need no PIN (in lockout the TPM
/// refuses every DA-protected object, even with an empty authorization value). Keys made before had no noDA: they keep
/// working, and are blocked during a lockout.
///
/// Decision: a key whose authorization value is a secret the keychain releases after evaluating the person
/// (KS_TPM_BINDING_RELEASED_SECRET) is noDA too: the value is 32 random bytes, which no one guesses in the TPM's
/// lifetime, so dictionary-attack protection adds nothing against guessing, and without noDA a lockout caused by
/// someone guessing a PIN key would also block every `.userPresence` key. With an application password in the value
/// as well (KS_TPM_BINDING_RELEASED_SECRET_AND_PASSWORD) the key is DA-protected, as a PIN key: whoever has the
/// secret (read from the keychain) must not guess the password at the TPM's speed without a lockout.
static void key_template(TPM2B_PUBLIC *pub, int usage, int with_da) {
    memset(pub, 0, sizeof *pub);
    pub->publicArea.type = TPM2_ALG_ECC;
    pub->publicArea.nameAlg = TPM2_ALG_SHA256;
    pub->publicArea.objectAttributes = (with_da ? 0 : TPMA_OBJECT_NODA) | TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT |
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

// MARK: - Loaded objects

/// Flushes a loaded object (when the TPM still answers) and forgets its ESAPI handle either way; *handle becomes
/// ESYS_TR_NONE. A failed flush (the object was already gone) is not an error: the goal, nothing loaded, holds.
static void forget_handle(ks_tpm *tpm, ESYS_TR *handle) {
    if (*handle == ESYS_TR_NONE) return;
    TSS2_RC rc = TSS2_ESYS_RC_BAD_SEQUENCE;
    if (usable(tpm)) {
        TPM_COMMAND(tpm, rc, Esys_FlushContext_Async(tpm->esys, *handle), Esys_FlushContext_Finish(tpm->esys));
        if (is_connection_failure(rc)) tpm->lost = 1;
    }
    // A successful flush released ESAPI's handle; otherwise release it here (not after a timeout: the context is
    // mid-command, and Esys_Finalize releases every handle anyway).
    if (rc != TSS2_RC_SUCCESS && !tpm->timed_out) Esys_TR_Close(tpm->esys, handle);
    *handle = ESYS_TR_NONE;
}

/// Forgets ESAPI's handle of an object the TPM reported gone, without a command: on a TPM without a resource
/// manager another client's object may have the same TPM handle by now, and flushing it would destroy theirs.
static void forget_stale_handle(ks_tpm *tpm, ESYS_TR *handle) {
    if (*handle != ESYS_TR_NONE && !tpm->timed_out) Esys_TR_Close(tpm->esys, handle);
    *handle = ESYS_TR_NONE;
}

/// Empties a cache entry, flushing its key (`flush`) or only forgetting it (the TPM reported it gone).
static void cache_drop_entry(ks_tpm *tpm, int i, int flush) {
    cached_key *entry = &tpm->cache[i];
    if (flush) {
        forget_handle(tpm, &entry->handle);
    } else {
        forget_stale_handle(tpm, &entry->handle);
    }
    if (entry->blob) {
        memset(entry->blob, 0, entry->blob_len);
        free(entry->blob);
    }
    entry->blob = NULL;
    entry->blob_len = 0;
    entry->used = 0;
}

static void cache_drop(ks_tpm *tpm, int i) { cache_drop_entry(tpm, i, 1); }

/// Flushes every cached key.
static void cache_clear(ks_tpm *tpm) {
    for (int i = 0; i < KS_TPM_KEY_CACHE_SIZE; i++) cache_drop(tpm, i);
}

/// The cache entry holding `blob`, or -1.
static int cache_find(ks_tpm *tpm, const uint8_t *blob, size_t blob_len) {
    for (int i = 0; i < KS_TPM_KEY_CACHE_SIZE; i++) {
        cached_key *entry = &tpm->cache[i];
        if (entry->handle != ESYS_TR_NONE && entry->blob_len == blob_len && memcmp(entry->blob, blob, blob_len) == 0)
            return i;
    }
    return -1;
}

/// An empty cache entry, made by flushing the least recently used key when every entry is taken.
static int cache_make_room(ks_tpm *tpm) {
    int victim = 0;
    for (int i = 0; i < KS_TPM_KEY_CACHE_SIZE; i++) {
        if (tpm->cache[i].handle == ESYS_TR_NONE) return i;
        if (tpm->cache[i].used < tpm->cache[victim].used) victim = i;
    }
    cache_drop(tpm, victim);
    return victim;
}

static int create_primary(ks_tpm *tpm, TSS2_RC *out_rc) {
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
    TSS2_RC rc;
    TPM_COMMAND(tpm, rc,
                Esys_CreatePrimary_Async(tpm->esys, ESYS_TR_RH_OWNER, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE,
                                         &sensitive, &template, &outside_info, &pcrs),
                Esys_CreatePrimary_Finish(tpm->esys, &handle, &out_public, &creation_data, &creation_hash,
                                          &creation_ticket));
    Esys_Free(out_public);
    Esys_Free(creation_data);
    Esys_Free(creation_hash);
    Esys_Free(creation_ticket);
    *out_rc = rc;
    if (rc == TSS2_RC_SUCCESS) tpm->primary = handle;
    return rc == TSS2_RC_SUCCESS ? 0 : -1;
}

static int ensure_primary(ks_tpm *tpm, ks_tpm_error *err) {
    if (tpm->primary != ESYS_TR_NONE) return 0;
    TSS2_RC rc;
    if (create_primary(tpm, &rc) != 0 && tpm_base(rc) == TPM2_RC_OBJECT_MEMORY && usable(tpm)) {
        // The TPM's object slots are full (a TPM without a resource manager shares them with every client): make
        // room with this handle's cached keys and earlier handles' orphans, and try once more.
        make_room(tpm);
        if (usable(tpm)) create_primary(tpm, &rc);
    }
    if (rc != TSS2_RC_SUCCESS) {
        tss_error(tpm, err, KS_TPM_ERR_OTHER, rc,
                  tpm_base(rc) == TPM2_RC_OBJECT_MEMORY
                      ? "creating the owner hierarchy's primary storage key failed: the TPM holds as many objects "
                        "as it can (other programs use it without a resource manager; use /dev/tpmrm0)"
                      : "creating the owner hierarchy's primary storage key failed (is the owner authorization set?)");
        return -1;
    }
    return 0;
}

/// The primary key was reported gone (flushed by another client of a TPM without a resource manager, or the TPM
/// restarted): forget it and the keys loaded under it, which are most likely gone too (see forget_stale_handle).
static void primary_gone(ks_tpm *tpm) {
    for (int i = 0; i < KS_TPM_KEY_CACHE_SIZE; i++) cache_drop_entry(tpm, i, 0);
    forget_stale_handle(tpm, &tpm->primary);
}

// MARK: - The envelope

// A key's blob, version 1:
//   "KSTK" | version (1) | usage (1: sign, 2: key agreement, 3: both) | 0 | 0
//   | TPM2B_PUBLIC (Tss2_MU marshalled) | TPM2B_PRIVATE (Tss2_MU marshalled)
//   | CRC-32 (IEEE, big-endian) of everything before it.
// Version 2 (written only for keys that need an authorization value, so keys without one keep version 1 and older
// Keystone versions still read them): the same, byte 6 holding flags, bit 0 (KS_FLAG_AUTH) set: the key needs its
// authorization value (a PIN) for every use. Other bits are refused. Version 1 blobs have flags 0.
// Version 3 (keys whose authorization value is a secret the keychain releases after evaluating the person, issue 31):
// the same, with KS_FLAG_AUTH and KS_FLAG_RELEASED_SECRET (bit 1) set, and KS_FLAG_WITH_PASSWORD (bit 2) when the
// value also derives from the application password. Older Keystone versions refuse it (it reads versions 1 and 2),
// which is right: they would send no secret. Versions 1 and 2 are read and written as before.
// Version 1 in full:
//   "KSTK" | version (1) | usage (1: sign, 2: key agreement, 3: both) | 0 | 0
//   | TPM2B_PUBLIC (Tss2_MU marshalled) | TPM2B_PRIVATE (Tss2_MU marshalled)
//   | CRC-32 (IEEE, big-endian) of everything before it.
// The CRC tells a corrupted blob (malformed) from another TPM's blob (which loads with an integrity failure); it
// protects nothing: the TPM's own integrity HMAC in the private part does.
static const uint8_t kMagic[4] = {'K', 'S', 'T', 'K'};
#define KS_ENVELOPE_VERSION 1
#define KS_ENVELOPE_VERSION_FLAGS 2
#define KS_ENVELOPE_VERSION_BINDING 3
#define KS_FLAG_AUTH 0x01
#define KS_FLAG_RELEASED_SECRET 0x02
#define KS_FLAG_WITH_PASSWORD 0x04
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

static int wrap_blob(int usage, int flags, const TPM2B_PUBLIC *pub, const TPM2B_PRIVATE *priv, uint8_t **blob,
                     size_t *blob_len, ks_tpm_error *err) {
    size_t cap = KS_HEADER_LEN + sizeof(TPM2B_PUBLIC) + sizeof(TPM2B_PRIVATE) + 4;
    uint8_t *buf = malloc(cap);
    if (!buf) {
        set_error(err, KS_TPM_ERR_OTHER, 0, "out of memory");
        return -1;
    }
    memcpy(buf, kMagic, 4);
    buf[4] = (flags & ~KS_FLAG_AUTH) ? KS_ENVELOPE_VERSION_BINDING : flags ? KS_ENVELOPE_VERSION_FLAGS : KS_ENVELOPE_VERSION;
    buf[5] = (uint8_t)usage;
    buf[6] = (uint8_t)flags;
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

static int unwrap_blob(const uint8_t *blob, size_t len, int *usage, int *flags, TPM2B_PUBLIC *pub,
                       TPM2B_PRIVATE *priv, ks_tpm_error *err) {
    memset(pub, 0, sizeof *pub);
    memset(priv, 0, sizeof *priv);
    if (!blob || len < KS_HEADER_LEN + 4 || memcmp(blob, kMagic, 4) != 0) {
        set_error(err, KS_TPM_ERR_MALFORMED_BLOB, 0, "not a Keystone TPM key (%zu bytes, no KSTK header)", len);
        return -1;
    }
    if (blob[4] != KS_ENVELOPE_VERSION && blob[4] != KS_ENVELOPE_VERSION_FLAGS && blob[4] != KS_ENVELOPE_VERSION_BINDING) {
        set_error(err, KS_TPM_ERR_MALFORMED_BLOB, 0,
                  "Keystone TPM key format version %u is not supported (this library reads versions 1 to 3)",
                  (unsigned)blob[4]);
        return -1;
    }
    uint32_t stored = ((uint32_t)blob[len - 4] << 24) | ((uint32_t)blob[len - 3] << 16) |
                      ((uint32_t)blob[len - 2] << 8) | (uint32_t)blob[len - 1];
    if (crc32_ieee(blob, len - 4) != stored) {
        set_error(err, KS_TPM_ERR_MALFORMED_BLOB, 0, "the TPM key is corrupted or truncated (checksum mismatch)");
        return -1;
    }
    int u = blob[5];
    int f = blob[4] == KS_ENVELOPE_VERSION ? 0 : blob[6];
    int valid_flags = blob[4] == KS_ENVELOPE_VERSION          ? 1
                      : blob[4] == KS_ENVELOPE_VERSION_FLAGS ? (f == KS_FLAG_AUTH)
                                                             : (f == (KS_FLAG_AUTH | KS_FLAG_RELEASED_SECRET) ||
                                                                f == (KS_FLAG_AUTH | KS_FLAG_RELEASED_SECRET | KS_FLAG_WITH_PASSWORD));
    if ((u != KS_TPM_USAGE_SIGN && u != KS_TPM_USAGE_KEY_AGREEMENT && u != KS_TPM_USAGE_GENERAL) ||
        (blob[4] == KS_ENVELOPE_VERSION && blob[6] != 0) || !valid_flags || blob[7] != 0) {
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
    if (flags) *flags = f;
    return 0;
}

int ks_tpm_blob_public(const uint8_t *blob, size_t blob_len, uint8_t pub_x963[65], int *usage, ks_tpm_error *err) {
    clear_error(err);
    TPM2B_PUBLIC pub;
    TPM2B_PRIVATE priv;
    if (unwrap_blob(blob, blob_len, usage, NULL, &pub, &priv, err) != 0) return -1;
    public_to_x963(&pub, pub_x963);
    return 0;
}

int ks_tpm_blob_needs_auth(const uint8_t *blob, size_t blob_len, ks_tpm_error *err) {
    clear_error(err);
    TPM2B_PUBLIC pub;
    TPM2B_PRIVATE priv;
    int flags = 0;
    if (unwrap_blob(blob, blob_len, NULL, &flags, &pub, &priv, err) != 0) return -1;
    memset(&priv, 0, sizeof priv);
    return (flags & KS_FLAG_AUTH) ? 1 : 0;
}

int ks_tpm_blob_binding(const uint8_t *blob, size_t blob_len, ks_tpm_error *err) {
    clear_error(err);
    TPM2B_PUBLIC pub;
    TPM2B_PRIVATE priv;
    int flags = 0;
    if (unwrap_blob(blob, blob_len, NULL, &flags, &pub, &priv, err) != 0) return -1;
    memset(&priv, 0, sizeof priv);
    if (flags & KS_FLAG_WITH_PASSWORD) return KS_TPM_BINDING_RELEASED_SECRET_AND_PASSWORD;
    if (flags & KS_FLAG_RELEASED_SECRET) return KS_TPM_BINDING_RELEASED_SECRET;
    return (flags & KS_FLAG_AUTH) ? KS_TPM_BINDING_PASSWORD : KS_TPM_BINDING_NONE;
}

int ks_tpm_blob_parts(const uint8_t *blob, size_t blob_len, uint8_t **pub_out, size_t *pub_len, uint8_t **priv_out,
                      size_t *priv_len, int *needs_auth, ks_tpm_error *err) {
    clear_error(err);
    *pub_out = NULL;
    *priv_out = NULL;
    TPM2B_PUBLIC pub;
    TPM2B_PRIVATE priv;
    int flags = 0;
    if (unwrap_blob(blob, blob_len, NULL, &flags, &pub, &priv, err) != 0) return -1;
    uint8_t *p = malloc(sizeof pub), *q = malloc(sizeof priv);
    size_t pn = 0, qn = 0;
    TSS2_RC rc = (p && q) ? Tss2_MU_TPM2B_PUBLIC_Marshal(&pub, p, sizeof pub, &pn) : TSS2_ESYS_RC_MEMORY;
    if (rc == TSS2_RC_SUCCESS) rc = Tss2_MU_TPM2B_PRIVATE_Marshal(&priv, q, sizeof priv, &qn);
    memset(&priv, 0, sizeof priv);
    if (rc != TSS2_RC_SUCCESS) {
        free(p);
        free(q);
        tss_error(NULL, err, KS_TPM_ERR_OTHER, rc, "marshalling the key failed");
        return -1;
    }
    *pub_out = p;
    *pub_len = pn;
    *priv_out = q;
    *priv_len = qn;
    if (needs_auth) *needs_auth = (flags & KS_FLAG_AUTH) ? 1 : 0;
    return 0;
}

int ks_tpm_blob_from_parts(const uint8_t *pub_bytes, size_t pub_len, const uint8_t *priv_bytes, size_t priv_len,
                           int needs_auth, uint8_t **blob, size_t *blob_len, uint8_t pub_x963[65], int *usage_out,
                           ks_tpm_error *err) {
    clear_error(err);
    *blob = NULL;
    *blob_len = 0;
    TPM2B_PUBLIC pub;
    TPM2B_PRIVATE priv;
    memset(&pub, 0, sizeof pub);
    memset(&priv, 0, sizeof priv);
    size_t offset = 0;
    TSS2_RC rc = Tss2_MU_TPM2B_PUBLIC_Unmarshal(pub_bytes, pub_len, &offset, &pub);
    if (rc != TSS2_RC_SUCCESS || offset != pub_len) {
        set_error(err, KS_TPM_ERR_MALFORMED_BLOB, rc, "the key's public part is not a TPM2B_PUBLIC");
        return -1;
    }
    offset = 0;
    rc = Tss2_MU_TPM2B_PRIVATE_Unmarshal(priv_bytes, priv_len, &offset, &priv);
    if (rc != TSS2_RC_SUCCESS || offset != priv_len) {
        set_error(err, KS_TPM_ERR_MALFORMED_BLOB, rc, "the key's private part is not a TPM2B_PRIVATE");
        return -1;
    }
    const TPMT_PUBLIC *area = &pub.publicArea;
    TPMA_OBJECT attrs = area->objectAttributes;
    int result = -1;
    if (area->type != TPM2_ALG_ECC || area->parameters.eccDetail.curveID != TPM2_ECC_NIST_P256) {
        set_error(err, KS_TPM_ERR_UNSUPPORTED, 0,
                  "the key is not a P-256 elliptic-curve key (Keystone's TPM keys are P-256, as the Secure Enclave's)");
        goto done;
    }
    if (attrs & TPMA_OBJECT_RESTRICTED) {
        set_error(err, KS_TPM_ERR_UNSUPPORTED, 0, "the key is restricted (a storage or attestation key), not a "
                                                  "general-purpose signing or key-agreement key");
        goto done;
    }
    if (area->authPolicy.size != 0 && !(attrs & TPMA_OBJECT_USERWITHAUTH)) {
        set_error(err, KS_TPM_ERR_UNSUPPORTED, 0, "the key can be used only through a policy, which Keystone does not "
                                                  "satisfy");
        goto done;
    }
    int sign = (attrs & TPMA_OBJECT_SIGN_ENCRYPT) != 0, decrypt = (attrs & TPMA_OBJECT_DECRYPT) != 0;
    int usage = sign && decrypt ? KS_TPM_USAGE_GENERAL : sign ? KS_TPM_USAGE_SIGN : decrypt ? KS_TPM_USAGE_KEY_AGREEMENT : 0;
    const TPMT_ECC_SCHEME *scheme = &area->parameters.eccDetail.scheme;
    if (usage == 0) {
        set_error(err, KS_TPM_ERR_UNSUPPORTED, 0, "the key may neither sign nor agree keys");
        goto done;
    }
    if (sign && !(scheme->scheme == TPM2_ALG_NULL ||
                  (scheme->scheme == TPM2_ALG_ECDSA && scheme->details.ecdsa.hashAlg == TPM2_ALG_SHA256))) {
        set_error(err, KS_TPM_ERR_UNSUPPORTED, 0,
                  "the key's fixed signing scheme is not ECDSA with SHA-256 (scheme 0x%x)", (unsigned)scheme->scheme);
        goto done;
    }
    if (!sign && decrypt && !(scheme->scheme == TPM2_ALG_NULL || scheme->scheme == TPM2_ALG_ECDH)) {
        set_error(err, KS_TPM_ERR_UNSUPPORTED, 0, "the key's fixed scheme is not ECDH (scheme 0x%x)",
                  (unsigned)scheme->scheme);
        goto done;
    }
    if (public_to_x963(&pub, pub_x963) != 0) {
        set_error(err, KS_TPM_ERR_MALFORMED_BLOB, 0, "the key's public point is not a P-256 point");
        goto done;
    }
    if (wrap_blob(usage, needs_auth ? KS_FLAG_AUTH : 0, &pub, &priv, blob, blob_len, err) != 0) goto done;
    if (usage_out) *usage_out = usage;
    result = 0;
done:
    memset(&priv, 0, sizeof priv);
    return result;
}

// MARK: - Keys

static int check_usable(ks_tpm *tpm, ks_tpm_error *err) {
    if (tpm->timed_out) {
        set_error(err, KS_TPM_ERR_TIMED_OUT, TSS2_TCTI_RC_TRY_AGAIN,
                  "the TPM did not answer an earlier command within %d ms; open the TPM again", (int)tpm->timeout_ms);
        return -1;
    }
    if (tpm->lost) {
        set_error(err, KS_TPM_ERR_CONNECTION_LOST, TSS2_TCTI_RC_IO_ERROR,
                  "the connection to the TPM was lost earlier; open the TPM again");
        return -1;
    }
    return 0;
}

static TSS2_RC create_once(ks_tpm *tpm, int usage, const uint8_t *auth, size_t auth_len, int binding,
                           TPM2B_PRIVATE **out_private, TPM2B_PUBLIC **out_public) {
    TPM2B_SENSITIVE_CREATE sensitive;
    memset(&sensitive, 0, sizeof sensitive);
    if (auth_len > 0) {
        sensitive.sensitive.userAuth.size = (UINT16)auth_len;
        memcpy(sensitive.sensitive.userAuth.buffer, auth, auth_len);
    }
    TPM2B_PUBLIC template;
    key_template(&template, usage, auth_len > 0 && binding != KS_TPM_BINDING_RELEASED_SECRET);
    TPM2B_DATA outside_info = {.size = 0};
    TPML_PCR_SELECTION pcrs = {.count = 0};
    TPM2B_CREATION_DATA *creation_data = NULL;
    TPM2B_DIGEST *creation_hash = NULL;
    TPMT_TK_CREATION *creation_ticket = NULL;
    TSS2_RC rc;
    TPM_COMMAND(tpm, rc,
                Esys_Create_Async(tpm->esys, tpm->primary, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &sensitive,
                                  &template, &outside_info, &pcrs),
                Esys_Create_Finish(tpm->esys, out_private, out_public, &creation_data, &creation_hash,
                                   &creation_ticket));
    Esys_Free(creation_data);
    Esys_Free(creation_hash);
    Esys_Free(creation_ticket);
    memset(&sensitive, 0, sizeof sensitive);
    return rc;
}

static int unlocked_create_key(ks_tpm *tpm, int usage, const uint8_t *auth, size_t auth_len, int binding,
                               uint8_t **blob, size_t *blob_len, uint8_t pub_x963[65], ks_tpm_error *err) {
    clear_error(err);
    *blob = NULL;
    *blob_len = 0;
    if (auth_len == 0) binding = KS_TPM_BINDING_NONE;
    if (binding < KS_TPM_BINDING_NONE || binding > KS_TPM_BINDING_RELEASED_SECRET_AND_PASSWORD ||
        (binding == KS_TPM_BINDING_NONE && auth_len > 0)) {
        set_error(err, KS_TPM_ERR_OTHER, 0, "unknown key authorization binding %d", binding);
        return -1;
    }
    if (auth_len > 32 || (auth_len > 0 && !auth)) {
        set_error(err, KS_TPM_ERR_OTHER, 0, "a key's authorization value has at most 32 bytes (SHA-256's size), not %zu",
                  auth_len);
        return -1;
    }
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
    if (ensure_primary(tpm, err) != 0) goto done;
    TSS2_RC rc = create_once(tpm, usage, auth, auth_len, binding, &out_private, &out_public);
    if (rc != TSS2_RC_SUCCESS && usable(tpm)) {
        if (is_stale_handle(rc)) {
            // The primary key is gone: create it again, once.
            primary_gone(tpm);
            if (ensure_primary(tpm, err) != 0) goto done;
            rc = create_once(tpm, usage, auth, auth_len, binding, &out_private, &out_public);
        } else if (tpm_base(rc) == TPM2_RC_OBJECT_MEMORY) {
            // TPM2_Create needs a free object slot: make room with the cached keys and orphans, once.
            make_room(tpm);
            if (usable(tpm)) rc = create_once(tpm, usage, auth, auth_len, binding, &out_private, &out_public);
        }
    }
    if (rc != TSS2_RC_SUCCESS) {
        tss_error(tpm, err, KS_TPM_ERR_OTHER, rc, "creating the key in the TPM failed");
        goto done;
    }
    if (public_to_x963(out_public, pub_x963) != 0) {
        set_error(err, KS_TPM_ERR_OTHER, 0, "the TPM returned a public key that is not P-256");
        goto done;
    }
    int flags = binding == KS_TPM_BINDING_RELEASED_SECRET_AND_PASSWORD
                    ? KS_FLAG_AUTH | KS_FLAG_RELEASED_SECRET | KS_FLAG_WITH_PASSWORD
                : binding == KS_TPM_BINDING_RELEASED_SECRET ? KS_FLAG_AUTH | KS_FLAG_RELEASED_SECRET
                : binding == KS_TPM_BINDING_PASSWORD        ? KS_FLAG_AUTH
                                                            : 0;
    if (wrap_blob(usage, flags, out_public, out_private, blob, blob_len, err) != 0)
        goto done;
    result = 0;
done:
    if (out_private) {
        memset(out_private, 0, sizeof *out_private);
    }
    Esys_Free(out_private);
    Esys_Free(out_public);
    sigpipe_unblock(&g);
    return result;
}

static TSS2_RC load_once(ks_tpm *tpm, const TPM2B_PRIVATE *priv, const TPM2B_PUBLIC *pub, ESYS_TR *handle) {
    TSS2_RC rc;
    TPM_COMMAND(tpm, rc,
                Esys_Load_Async(tpm->esys, tpm->primary, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, priv, pub),
                Esys_Load_Finish(tpm->esys, handle));
    return rc;
}

/// Loads a blob under the primary key. Called with SIGPIPE blocked, with a free cache entry (so that this handle
/// never holds more than the primary key and KS_TPM_KEY_CACHE_SIZE keys). On success *handle must be cached or
/// flushed.
static int load_blob(ks_tpm *tpm, const uint8_t *blob, size_t blob_len, ESYS_TR *handle, ks_tpm_error *err) {
    *handle = ESYS_TR_NONE;
    TPM2B_PUBLIC pub;
    TPM2B_PRIVATE priv;
    if (unwrap_blob(blob, blob_len, NULL, NULL, &pub, &priv, err) != 0) return -1;
    int result = -1;
    if (ensure_primary(tpm, err) != 0) goto done;
    TSS2_RC rc = load_once(tpm, &priv, &pub, handle);
    if (rc != TSS2_RC_SUCCESS && usable(tpm)) {
        if (is_stale_handle(rc)) {
            // The cached primary is gone (flushed by someone else, or the TPM restarted): create it again once.
            primary_gone(tpm);
            if (ensure_primary(tpm, err) != 0) goto done;
            rc = load_once(tpm, &priv, &pub, handle);
        } else if (tpm_base(rc) == TPM2_RC_OBJECT_MEMORY) {
            // No free object slot (other clients of a TPM without a resource manager hold them): make room with
            // this handle's cached keys and earlier handles' orphans, and try once more.
            make_room(tpm);
            if (usable(tpm)) rc = load_once(tpm, &priv, &pub, handle);
        }
    }
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
        } else if (base == TPM2_RC_OBJECT_MEMORY) {
            what = "loading the key into the TPM failed: the TPM holds as many objects as it can (other programs use "
                   "it without a resource manager; use /dev/tpmrm0)";
        }
        tss_error(tpm, err, kind, rc, what);
        goto done;
    }
    result = 0;
done:
    memset(&priv, 0, sizeof priv);
    return result;
}

/// One TPM command with a loaded key; fills its own outputs and returns the command's response code.
typedef TSS2_RC (*key_operation)(ks_tpm *tpm, ESYS_TR key, void *context);

/// Runs `operation` with the key of `blob` loaded: the cached key when this blob was used before (no TPM2_Load),
/// else loaded now (making room by flushing the least recently used cached key first) and cached when the
/// operation succeeds (flushed when it fails: a refusal leaves nothing more loaded). When the TPM reports a cached
/// key gone (see is_stale_handle), it is loaded again and the operation retried, once. Returns -1 with *err set
/// when the key could not be loaded, else 0 with the operation's response code in *op_rc. SIGPIPE blocked.
/// `auth` (NULL/0: none) is the key's authorization value: ESAPI's handle of the key holds it only for the
/// operation (a cached key never keeps a caller's value for the next caller).
static int with_key(ks_tpm *tpm, const uint8_t *blob, size_t blob_len, const uint8_t *auth, size_t auth_len,
                    key_operation operation, void *context, TSS2_RC *op_rc, ks_tpm_error *err) {
    for (int attempt = 0;; attempt++) {
        int cached = cache_find(tpm, blob, blob_len);
        ESYS_TR key;
        if (cached >= 0) {
            tpm->cache[cached].used = ++tpm->uses;
            key = tpm->cache[cached].handle;
        } else {
            cache_make_room(tpm);
            if (!usable(tpm)) return check_usable(tpm, err);
            if (load_blob(tpm, blob, blob_len, &key, err) != 0) return -1;
        }
        TPM2B_AUTH value = {.size = 0};
        if (auth && auth_len > 0 && auth_len <= sizeof value.buffer) {
            value.size = (UINT16)auth_len;
            memcpy(value.buffer, auth, auth_len);
        }
        Esys_TR_SetAuth(tpm->esys, key, &value);
        TSS2_RC rc = operation ? operation(tpm, key, context) : TSS2_RC_SUCCESS;
        memset(&value, 0, sizeof value);
        if (!tpm->timed_out) Esys_TR_SetAuth(tpm->esys, key, &value);
        if (cached >= 0) {
            if (rc != TSS2_RC_SUCCESS && is_stale_handle(rc) && attempt == 0 && usable(tpm)) {
                cache_drop_entry(tpm, cached, 0);
                continue;
            }
            *op_rc = rc;
            return 0;
        }
        int slot = -1;
        if (rc == TSS2_RC_SUCCESS && usable(tpm)) slot = cache_make_room(tpm);
        uint8_t *copy = slot >= 0 ? malloc(blob_len) : NULL;
        if (copy) {
            memcpy(copy, blob, blob_len);
            tpm->cache[slot] = (cached_key){.handle = key, .blob = copy, .blob_len = blob_len, .used = ++tpm->uses};
        } else {
            forget_handle(tpm, &key);
        }
        *op_rc = rc;
        return 0;
    }
}

/// Reads the TPM's dictionary-attack state (TPM_PT_LOCKOUT_COUNTER ... TPM_PT_LOCKOUT_RECOVERY).
static TSS2_RC read_lockout(ks_tpm *tpm, ks_tpm_lockout *out) {
    memset(out, 0, sizeof *out);
    TPMS_CAPABILITY_DATA *caps = NULL;
    TPMI_YES_NO more = 0;
    TSS2_RC rc;
    TPM_COMMAND(tpm, rc,
                Esys_GetCapability_Async(tpm->esys, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, TPM2_CAP_TPM_PROPERTIES,
                                         TPM2_PT_LOCKOUT_COUNTER, 4),
                Esys_GetCapability_Finish(tpm->esys, &more, &caps));
    if (rc == TSS2_RC_SUCCESS && caps->capability == TPM2_CAP_TPM_PROPERTIES) {
        const TPML_TAGGED_TPM_PROPERTY *props = &caps->data.tpmProperties;
        for (UINT32 i = 0; i < props->count && i < TPM2_MAX_TPM_PROPERTIES; i++) {
            uint32_t v = props->tpmProperty[i].value;
            switch (props->tpmProperty[i].property) {
            case TPM2_PT_LOCKOUT_COUNTER: out->counter = v; break;
            case TPM2_PT_MAX_AUTH_FAIL: out->max_tries = v; break;
            case TPM2_PT_LOCKOUT_INTERVAL: out->interval_s = v; break;
            case TPM2_PT_LOCKOUT_RECOVERY: out->recovery_s = v; break;
            default: break;
            }
        }
    }
    Esys_Free(caps);
    return rc;
}

/// Fills *err when `rc` is the TPM refusing the key's authorization value (TPM_RC_AUTH_FAIL, TPM_RC_BAD_AUTH) or
/// refusing it because of a dictionary-attack lockout (TPM_RC_LOCKOUT), with the TPM's lockout state read after it;
/// returns 1 then, else 0.
static int auth_error(ks_tpm *tpm, ks_tpm_error *err, TSS2_RC rc, const char *what) {
    uint32_t base = tpm_base(rc);
    if (base != TPM2_RC_AUTH_FAIL && base != TPM2_RC_BAD_AUTH && base != TPM2_RC_LOCKOUT) return 0;
    ks_tpm_lockout state;
    memset(&state, 0, sizeof state);
    if (usable(tpm)) read_lockout(tpm, &state);
    char detail[160];
    if (base == TPM2_RC_LOCKOUT) {
        if (state.interval_s > 0) {
            snprintf(detail, sizeof detail,
                     "the TPM is in dictionary-attack lockout (%u failed authorizations, at most %u): it accepts a "
                     "new attempt within %u s (it forgets one failure every %u s)",
                     state.counter, state.max_tries, state.interval_s, state.interval_s);
        } else {
            snprintf(detail, sizeof detail,
                     "the TPM is in dictionary-attack lockout: only its owner can reset it (tpm2_dictionarylockout "
                     "--clear-lockout)");
        }
        set_error(err, KS_TPM_ERR_LOCKOUT, rc, "%s with the key refused: %s (0x%x)", what, detail, rc);
    } else {
        if (state.max_tries > 0 && state.counter < state.max_tries) {
            snprintf(detail, sizeof detail, "; %u more failures lock the TPM out", state.max_tries - state.counter);
        } else {
            detail[0] = 0;
        }
        set_error(err, KS_TPM_ERR_AUTH_FAILED, rc,
                  "%s with the key refused by the TPM: wrong authorization value (PIN)%s (0x%x)", what, detail, rc);
    }
    if (err) err->lockout = state;
    return 1;
}

static void copy_padded(uint8_t out[32], const TPM2B_ECC_PARAMETER *p) {
    memset(out, 0, 32);
    size_t n = p->size > 32 ? 32 : p->size;
    memcpy(out + (32 - n), p->buffer + (p->size - n), n);
}

typedef struct {
    const uint8_t *digest;
    TPMT_SIGNATURE *signature;
} sign_context;

static TSS2_RC sign_operation(ks_tpm *tpm, ESYS_TR key, void *context) {
    sign_context *c = context;
    TPM2B_DIGEST in_digest = {.size = 32};
    memcpy(in_digest.buffer, c->digest, 32);
    TPMT_SIG_SCHEME scheme = {.scheme = TPM2_ALG_ECDSA, .details = {.ecdsa = {.hashAlg = TPM2_ALG_SHA256}}};
    TPMT_TK_HASHCHECK validation = {.tag = TPM2_ST_HASHCHECK, .hierarchy = TPM2_RH_NULL, .digest = {.size = 0}};
    Esys_Free(c->signature);
    c->signature = NULL;
    TSS2_RC rc;
    TPM_COMMAND(tpm, rc,
                Esys_Sign_Async(tpm->esys, key, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &in_digest, &scheme,
                                &validation),
                Esys_Sign_Finish(tpm->esys, &c->signature));
    return rc;
}

static int unlocked_sign_digest(ks_tpm *tpm, const uint8_t *blob, size_t blob_len, const uint8_t *auth,
                                size_t auth_len, const uint8_t digest[32], uint8_t sig_rs[64], ks_tpm_error *err) {
    clear_error(err);
    if (check_usable(tpm, err) != 0) return -1;
    sigpipe_guard g;
    sigpipe_block(&g);
    int result = -1;
    sign_context context = {.digest = digest, .signature = NULL};
    TSS2_RC rc;
    if (with_key(tpm, blob, blob_len, auth, auth_len, sign_operation, &context, &rc, err) != 0) goto done;
    if (rc != TSS2_RC_SUCCESS) {
        uint32_t base = tpm_base(rc);
        if (auth_error(tpm, err, rc, "signing")) {
        } else if (base == TPM2_RC_KEY || base == TPM2_RC_ATTRIBUTES || base == TPM2_RC_SCHEME || base == TPM2_RC_TYPE) {
            tss_error(tpm, err, KS_TPM_ERR_WRONG_USAGE, rc, "the TPM refuses to sign with this key (not a signing key)");
        } else {
            tss_error(tpm, err, KS_TPM_ERR_OTHER, rc, "signing in the TPM failed");
        }
        goto done;
    }
    const TPMT_SIGNATURE *signature = context.signature;
    if (signature->sigAlg != TPM2_ALG_ECDSA || signature->signature.ecdsa.signatureR.size > 32 ||
        signature->signature.ecdsa.signatureS.size > 32) {
        set_error(err, KS_TPM_ERR_OTHER, 0, "the TPM returned a signature that is not a P-256 ECDSA signature");
        goto done;
    }
    copy_padded(sig_rs, &signature->signature.ecdsa.signatureR);
    copy_padded(sig_rs + 32, &signature->signature.ecdsa.signatureS);
    result = 0;
done:
    Esys_Free(context.signature);
    sigpipe_unblock(&g);
    return result;
}

typedef struct {
    const TPM2B_ECC_POINT *peer;
    TPM2B_ECC_POINT *shared;
} ecdh_context;

static TSS2_RC ecdh_operation(ks_tpm *tpm, ESYS_TR key, void *context) {
    ecdh_context *c = context;
    if (c->shared) memset(c->shared, 0, sizeof *c->shared);
    Esys_Free(c->shared);
    c->shared = NULL;
    TSS2_RC rc;
    TPM_COMMAND(tpm, rc, Esys_ECDH_ZGen_Async(tpm->esys, key, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, c->peer),
                Esys_ECDH_ZGen_Finish(tpm->esys, &c->shared));
    return rc;
}

static int unlocked_ecdh(ks_tpm *tpm, const uint8_t *blob, size_t blob_len, const uint8_t *auth, size_t auth_len,
                         const uint8_t peer_x963[65], uint8_t shared_x[32], ks_tpm_error *err) {
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
    TPM2B_ECC_POINT point;
    memset(&point, 0, sizeof point);
    point.point.x.size = 32;
    memcpy(point.point.x.buffer, peer_x963 + 1, 32);
    point.point.y.size = 32;
    memcpy(point.point.y.buffer, peer_x963 + 33, 32);
    ecdh_context context = {.peer = &point, .shared = NULL};
    TSS2_RC rc;
    if (with_key(tpm, blob, blob_len, auth, auth_len, ecdh_operation, &context, &rc, err) != 0) goto done;
    if (rc != TSS2_RC_SUCCESS) {
        uint32_t base = tpm_base(rc);
        if (auth_error(tpm, err, rc, "key agreement")) {
        } else if (base == TPM2_RC_ECC_POINT || base == TPM2_RC_NO_RESULT) {
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
    if (context.shared->point.x.size > 32) {
        set_error(err, KS_TPM_ERR_OTHER, 0, "the TPM returned a shared point that is not on P-256");
        goto done;
    }
    copy_padded(shared_x, &context.shared->point.x);
    result = 0;
done:
    if (context.shared) memset(context.shared, 0, sizeof *context.shared);
    Esys_Free(context.shared);
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

static int unlocked_info(ks_tpm *tpm, ks_tpm_properties *out, ks_tpm_error *err) {
    clear_error(err);
    memset(out, 0, sizeof *out);
    if (check_usable(tpm, err) != 0) return -1;
    sigpipe_guard g;
    sigpipe_block(&g);
    int result = -1;
    TPMS_CAPABILITY_DATA *caps = NULL;
    TPMI_YES_NO more = 0;
    TSS2_RC rc;
    TPM_COMMAND(tpm, rc,
                Esys_GetCapability_Async(tpm->esys, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, TPM2_CAP_TPM_PROPERTIES,
                                         TPM2_PT_FIXED, TPM2_MAX_TPM_PROPERTIES),
                Esys_GetCapability_Finish(tpm->esys, &more, &caps));
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

// MARK: - Public entry points (each under the handle's operation lock)

int ks_tpm_create_key(ks_tpm *tpm, int usage, uint8_t **blob, size_t *blob_len, uint8_t pub_x963[65],
                      ks_tpm_error *err) {
    pthread_mutex_lock(&tpm->op_lock);
    int result = unlocked_create_key(tpm, usage, NULL, 0, KS_TPM_BINDING_NONE, blob, blob_len, pub_x963, err);
    pthread_mutex_unlock(&tpm->op_lock);
    return result;
}

int ks_tpm_sign_digest(ks_tpm *tpm, const uint8_t *blob, size_t blob_len, const uint8_t digest[32],
                       uint8_t sig_rs[64], ks_tpm_error *err) {
    pthread_mutex_lock(&tpm->op_lock);
    int result = unlocked_sign_digest(tpm, blob, blob_len, NULL, 0, digest, sig_rs, err);
    pthread_mutex_unlock(&tpm->op_lock);
    return result;
}

int ks_tpm_ecdh(ks_tpm *tpm, const uint8_t *blob, size_t blob_len, const uint8_t peer_x963[65],
                uint8_t shared_x[32], ks_tpm_error *err) {
    pthread_mutex_lock(&tpm->op_lock);
    int result = unlocked_ecdh(tpm, blob, blob_len, NULL, 0, peer_x963, shared_x, err);
    pthread_mutex_unlock(&tpm->op_lock);
    return result;
}

int ks_tpm_create_key_with_auth(ks_tpm *tpm, int usage, const uint8_t *auth, size_t auth_len, uint8_t **blob,
                                size_t *blob_len, uint8_t pub_x963[65], ks_tpm_error *err) {
    pthread_mutex_lock(&tpm->op_lock);
    int result = unlocked_create_key(tpm, usage, auth, auth_len, KS_TPM_BINDING_PASSWORD, blob, blob_len, pub_x963, err);
    pthread_mutex_unlock(&tpm->op_lock);
    return result;
}

int ks_tpm_create_key_bound(ks_tpm *tpm, int usage, const uint8_t *auth, size_t auth_len, int binding, uint8_t **blob,
                            size_t *blob_len, uint8_t pub_x963[65], ks_tpm_error *err) {
    pthread_mutex_lock(&tpm->op_lock);
    int result = unlocked_create_key(tpm, usage, auth, auth_len, binding, blob, blob_len, pub_x963, err);
    pthread_mutex_unlock(&tpm->op_lock);
    return result;
}

int ks_tpm_sign_digest_with_auth(ks_tpm *tpm, const uint8_t *blob, size_t blob_len, const uint8_t *auth,
                                 size_t auth_len, const uint8_t digest[32], uint8_t sig_rs[64], ks_tpm_error *err) {
    pthread_mutex_lock(&tpm->op_lock);
    int result = unlocked_sign_digest(tpm, blob, blob_len, auth, auth_len, digest, sig_rs, err);
    pthread_mutex_unlock(&tpm->op_lock);
    return result;
}

int ks_tpm_ecdh_with_auth(ks_tpm *tpm, const uint8_t *blob, size_t blob_len, const uint8_t *auth, size_t auth_len,
                          const uint8_t peer_x963[65], uint8_t shared_x[32], ks_tpm_error *err) {
    pthread_mutex_lock(&tpm->op_lock);
    int result = unlocked_ecdh(tpm, blob, blob_len, auth, auth_len, peer_x963, shared_x, err);
    pthread_mutex_unlock(&tpm->op_lock);
    return result;
}

int ks_tpm_check_key(ks_tpm *tpm, const uint8_t *blob, size_t blob_len, ks_tpm_error *err) {
    pthread_mutex_lock(&tpm->op_lock);
    clear_error(err);
    int result = check_usable(tpm, err);
    if (result == 0) {
        sigpipe_guard g;
        sigpipe_block(&g);
        TSS2_RC rc;
        result = with_key(tpm, blob, blob_len, NULL, 0, NULL, NULL, &rc, err);
        sigpipe_unblock(&g);
    }
    pthread_mutex_unlock(&tpm->op_lock);
    return result;
}

int ks_tpm_lockout_state(ks_tpm *tpm, ks_tpm_lockout *out, ks_tpm_error *err) {
    pthread_mutex_lock(&tpm->op_lock);
    clear_error(err);
    memset(out, 0, sizeof *out);
    int result = check_usable(tpm, err);
    if (result == 0) {
        sigpipe_guard g;
        sigpipe_block(&g);
        TSS2_RC rc = read_lockout(tpm, out);
        sigpipe_unblock(&g);
        if (rc != TSS2_RC_SUCCESS) {
            tss_error(tpm, err, KS_TPM_ERR_OTHER, rc, "reading the TPM's dictionary-attack state failed");
            result = -1;
        }
    }
    pthread_mutex_unlock(&tpm->op_lock);
    return result;
}

int ks_tpm_info(ks_tpm *tpm, ks_tpm_properties *out, ks_tpm_error *err) {
    pthread_mutex_lock(&tpm->op_lock);
    int result = unlocked_info(tpm, out, err);
    pthread_mutex_unlock(&tpm->op_lock);
    return result;
}

#endif // __linux__
