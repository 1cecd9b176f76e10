// Keystone's own TCTI for swtpm's TPM socket (private to CTPM).
//
// Why not tpm2-tss's swtpm TCTI: up to tpm2-tss 3.2 (Debian 12's) its receive ignores the timeout ESAPI passes
// (`Esys_SetTimeout`) and blocks in read(2) until swtpm answers, so a swtpm that keeps the connection open but never
// answers (stopped, wedged) would block a Keystone call forever; its initialization also blocks on swtpm's control
// channel. This transport speaks the same protocol (raw TPM 2.0 commands on swtpm's `--server` socket, one
// connection per command so that other clients, such as tpm2-tools, can use the TPM between commands, as
// tpm2-tss's does) and honours every deadline: connect, write and each receive (ESAPI's timeout: TRY_AGAIN when it
// passes, the response kept for the next call).
#ifndef KEYSTONE_SWTPM_TRANSPORT_H
#define KEYSTONE_SWTPM_TRANSPORT_H
#if defined(__linux__)

#include <stdint.h>
#include <tss2/tss2_tcti.h>

/// True when `conf` names swtpm's TCTI the way tctildr does ("swtpm" or "swtpm:<options>").
int ks_swtpm_conf_matches(const char *conf);

/// Makes a TCTI for `conf` ("swtpm", "swtpm:host=H,port=P" (defaults localhost and 2321) or "swtpm:path=SOCKET")
/// whose connect and writes wait at most `io_timeout_ms` (ESAPI's timeout governs receives), and checks that
/// something accepts connections there. On success returns TSS2_RC_SUCCESS and *out (release with
/// ks_swtpm_transport_free); else a TCTI response code and a message in `message`.
TSS2_RC ks_swtpm_transport_new(const char *conf, int32_t io_timeout_ms, TSS2_TCTI_CONTEXT **out, char *message,
                               size_t message_size);

/// Finalizes and frees a transport made by ks_swtpm_transport_new. NULL is allowed.
void ks_swtpm_transport_free(TSS2_TCTI_CONTEXT *tcti);

#endif
#endif
