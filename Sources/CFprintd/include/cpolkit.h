// Keystone's C boundary to polkit (org.freedesktop.PolicyKit1 on the system bus) over GDBus, on a connection made with
// ks_fprint_open (a private connection with a deadline on every call, cancellable from any thread).
#ifndef KEYSTONE_CPOLKIT_H
#define KEYSTONE_CPOLKIT_H

#include <stddef.h>
#include <stdint.h>
#include "cfprintd.h"

#ifdef __cplusplus
extern "C" {
#endif

/// What polkit answered.
typedef struct {
    /// The subject is authorized (the person authenticated in the agent).
    int authorized;
    /// Authorization would need a challenge (no agent could ask, or interaction was not allowed).
    int challenge;
    /// The person dismissed the agent's dialog (polkit's `polkit.dismissed` result detail).
    int dismissed;
} ks_polkit_result;

/// Authority.CheckAuthorization for the subject ('unix-process', {pid, start-time, uid}) and `action_id`, with the
/// details `keys[i]` = `values[i]` (`count` pairs; polkit accepts details only from uid 0 or the action's owner),
/// AllowUserInteraction when `allow_interaction`, and a fresh cancellation id.
///
/// Waits for the answer at most `timeout_ms` (the person's time to answer the dialog). When the handle is cancelled
/// (ks_fprint_cancel) or the deadline passes, polkit is told with CancelCheckAuthorization (which withdraws the
/// agent's dialog) and the call ends with KS_FPRINT_CANCELLED or KS_FPRINT_VERIFY_TIMED_OUT.
///
/// Returns 0 and fills `result`; else -1 and `error` (KS_FPRINT_NO_DAEMON: no polkit on the bus;
/// KS_FPRINT_DAEMON_ERROR with polkit's error name, e.g. org.freedesktop.PolicyKit1.Error.Failed for an action that
/// is not registered, ...NotAuthorized for details from an untrusted caller).
int ks_polkit_check(ks_fprint *handle, const char *action_id, uint32_t pid, uint64_t start_time, int32_t uid,
                    const char *const *keys, const char *const *values, size_t count, int allow_interaction,
                    int timeout_ms, ks_polkit_result *result, ks_fprint_error *error);

#ifdef __cplusplus
}
#endif

#endif
