// The connection handle shared by fprintd.c and polkit.c (not part of the module's public headers).
#ifndef KEYSTONE_CFPRINTD_HANDLE_H
#define KEYSTONE_CFPRINTD_HANDLE_H

#include <gio/gio.h>
#include "cfprintd.h"

struct ks_fprint {
    GMainContext *context;      // ours: the connection's and the verification's signals are dispatched here
    GDBusConnection *connection;
    GCancellable *cancellable;  // aborts a call in flight on ks_fprint_cancel
    int timeout_ms;
    gint cancelled;             // atomic
};

/// Sets `error` to `status`, `name` (may be NULL) and `message`.
void ks_internal_set_message(ks_fprint_error *error, ks_fprint_status status, const char *name, const char *message);
/// Classifies and takes `gerror`. `no_bus`: a failure to connect (anything but a cancellation is "no bus").
void ks_internal_set_error(ks_fprint_error *error, GError *gerror, gboolean no_bus);
/// Runs the pending sources of `context` without blocking.
void ks_internal_drain(GMainContext *context);
/// A GSourceFunc that sets the gboolean `data` points to.
gboolean ks_internal_flag_timeout(gpointer data);

#endif
