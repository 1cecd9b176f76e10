// Keystone's C boundary to fprintd (net.reactivated.Fprint) over GDBus. Plain C types only: GLib stays here.
//
// One handle = one private connection to the bus (never the process-wide g_bus_get singleton, which can exit the
// process when the bus closes) and one GMainContext of its own, on which the verification's signals arrive. A handle
// is used by one thread at a time; only ks_fprint_cancel may be called from another thread. Every D-Bus call has a
// deadline (the handle's call timeout), and so has the wait for a verification's result.
#ifndef KEYSTONE_CFPRINTD_H
#define KEYSTONE_CFPRINTD_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Why a call failed.
typedef enum {
    KS_FPRINT_OK = 0,
    /// No bus at the address (no socket, refused, not a D-Bus bus, or the connection timed out).
    KS_FPRINT_NO_BUS,
    /// Nothing serves net.reactivated.Fprint on the bus, and it cannot be activated (or it went away).
    KS_FPRINT_NO_DAEMON,
    /// A D-Bus call got no reply within the call timeout.
    KS_FPRINT_NO_REPLY,
    /// The verification's deadline passed without a result.
    KS_FPRINT_VERIFY_TIMED_OUT,
    /// ks_fprint_cancel was called.
    KS_FPRINT_CANCELLED,
    /// The daemon answered with a D-Bus error: `name` holds it (net.reactivated.Fprint.Error.AlreadyInUse, ...).
    KS_FPRINT_DAEMON_ERROR,
    /// Anything else (`message` says what).
    KS_FPRINT_OTHER,
} ks_fprint_status;

/// A failure: its kind, the D-Bus error name when the daemon or the bus sent one (else NULL), and a message.
/// Owned strings; free with ks_fprint_error_clear.
typedef struct {
    ks_fprint_status status;
    char *name;
    char *message;
} ks_fprint_error;

void ks_fprint_error_clear(ks_fprint_error *error);

/// A connection to fprintd's bus.
typedef struct ks_fprint ks_fprint;

/// Connects to `bus_address` (NULL: the system bus, from DBUS_SYSTEM_BUS_ADDRESS or
/// unix:path=/var/run/dbus/system_bus_socket). `timeout_ms` bounds the connection and each later D-Bus call.
/// Returns NULL with `error` set (KS_FPRINT_NO_BUS) when no bus answers.
ks_fprint *ks_fprint_open(const char *bus_address, int timeout_ms, ks_fprint_error *error);

/// Closes the connection and frees the handle. Not while another thread may call ks_fprint_cancel on it.
void ks_fprint_close(ks_fprint *handle);

/// Wakes a waiting ks_fprint_verify (and aborts a D-Bus call in flight) at once. Callable from any thread; final:
/// every later operation on the handle ends with KS_FPRINT_CANCELLED.
void ks_fprint_cancel(ks_fprint *handle);

/// Manager.GetDefaultDevice, then the device's `name` and `scan-type` ("press" or "swipe") properties.
/// On success returns 0 and sets the three strings (free with ks_fprint_free); else -1 and `error`
/// (net.reactivated.Fprint.Error.NoSuchDevice: no reader).
int ks_fprint_default_device(ks_fprint *handle, char **device_path, char **name, char **scan_type,
                             ks_fprint_error *error);

/// Device.ListEnrolledFingers(username): the enrolled finger names ("right-index-finger", ...), a NULL-terminated
/// array (free with ks_fprint_strv_free) and their count. fprintd's NoEnrolledPrints is success with none.
int ks_fprint_list_enrolled(ks_fprint *handle, const char *device_path, const char *username, char ***fingers,
                            size_t *count, ks_fprint_error *error);

/// Called once the device is claimed, right before VerifyStart: the time to tell the person to place their finger.
typedef void (*ks_fprint_claimed_fn)(void *context);
/// Called for each VerifyStatus signal (result string, whether it is the last), outside any GLib dispatch.
typedef void (*ks_fprint_status_fn)(const char *result, int done, void *context);

/// One verification: Claim(username) → VerifyStart(finger) → the VerifyStatus signals until one says done, the
/// handle is cancelled, the daemon goes away or `verify_timeout_ms` passes → VerifyStop → Release. A claimed device
/// is always released.
///
/// Returns 0 with `*final_result` (free with ks_fprint_free) set to the last VerifyStatus result ("verify-match",
/// "verify-no-match", "verify-disconnected", "verify-unknown-error"); else -1 and `error` (KS_FPRINT_CANCELLED,
/// KS_FPRINT_VERIFY_TIMED_OUT, KS_FPRINT_NO_DAEMON, KS_FPRINT_DAEMON_ERROR with AlreadyInUse / PermissionDenied /
/// NoEnrolledPrints / ...). `claimed` and `status` may be NULL.
int ks_fprint_verify(ks_fprint *handle, const char *device_path, const char *username, const char *finger,
                     int verify_timeout_ms, ks_fprint_claimed_fn claimed, ks_fprint_status_fn status, void *context,
                     char **final_result, ks_fprint_error *error);

void ks_fprint_free(void *pointer);
void ks_fprint_strv_free(char **strings);

#ifdef __cplusplus
}
#endif

#endif
