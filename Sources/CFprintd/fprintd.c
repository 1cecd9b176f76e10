// fprintd (net.reactivated.Fprint) over GDBus: a private connection, a main context of our own for the verification's
// signals, a deadline on every call and on every wait.
#include "cfprintd.h"
#include "handle.h"
#include <gio/gio.h>
#include <string.h>

#define FPRINT_NAME "net.reactivated.Fprint"
#define FPRINT_MANAGER_PATH "/net/reactivated/Fprint/Manager"
#define FPRINT_MANAGER_IFACE "net.reactivated.Fprint.Manager"
#define FPRINT_DEVICE_IFACE "net.reactivated.Fprint.Device"

// MARK: - Errors

void ks_fprint_error_clear(ks_fprint_error *error) {
    if (error == NULL) return;
    g_free(error->name);
    g_free(error->message);
    error->name = NULL;
    error->message = NULL;
    error->status = KS_FPRINT_OK;
}

void ks_internal_set_message(ks_fprint_error *error, ks_fprint_status status, const char *name, const char *message) {
    if (error == NULL) return;
    ks_fprint_error_clear(error);
    error->status = status;
    error->name = g_strdup(name);
    error->message = g_strdup(message);
}

// Takes `gerror`. `no_bus`: a failure to connect (anything but a cancellation is "no bus").
void ks_internal_set_error(ks_fprint_error *error, GError *gerror, gboolean no_bus) {
    if (gerror == NULL) { ks_internal_set_message(error, KS_FPRINT_OTHER, NULL, "unknown error"); return; }
    gchar *name = g_dbus_error_is_remote_error(gerror) ? g_dbus_error_get_remote_error(gerror) : NULL;
    if (name != NULL) g_dbus_error_strip_remote_error(gerror);
    ks_fprint_status status = KS_FPRINT_OTHER;
    if (g_error_matches(gerror, G_IO_ERROR, G_IO_ERROR_CANCELLED)) status = KS_FPRINT_CANCELLED;
    else if (no_bus) status = KS_FPRINT_NO_BUS;
    else if (g_error_matches(gerror, G_IO_ERROR, G_IO_ERROR_TIMED_OUT) ||
             g_error_matches(gerror, G_DBUS_ERROR, G_DBUS_ERROR_TIMEOUT) ||
             g_error_matches(gerror, G_DBUS_ERROR, G_DBUS_ERROR_TIMED_OUT) ||
             g_error_matches(gerror, G_DBUS_ERROR, G_DBUS_ERROR_NO_REPLY)) status = KS_FPRINT_NO_REPLY;
    else if (g_error_matches(gerror, G_IO_ERROR, G_IO_ERROR_CLOSED) ||
             g_error_matches(gerror, G_DBUS_ERROR, G_DBUS_ERROR_DISCONNECTED)) status = KS_FPRINT_NO_BUS;
    else if (name != NULL && (strcmp(name, "org.freedesktop.DBus.Error.ServiceUnknown") == 0 ||
                              strcmp(name, "org.freedesktop.DBus.Error.NameHasNoOwner") == 0 ||
                              g_str_has_prefix(name, "org.freedesktop.DBus.Error.Spawn."))) status = KS_FPRINT_NO_DAEMON;
    else if (name != NULL) status = KS_FPRINT_DAEMON_ERROR;
    if (error != NULL) {
        ks_fprint_error_clear(error);
        error->status = status;
        error->name = name;
        name = NULL;
        error->message = g_strdup(gerror->message);
    }
    g_free(name);
    g_error_free(gerror);
}

void ks_fprint_free(void *pointer) { g_free(pointer); }
void ks_fprint_strv_free(char **strings) { g_strfreev(strings); }

static gboolean is_cancelled(ks_fprint *handle) { return g_atomic_int_get(&handle->cancelled) != 0; }

// Runs the pending sources of our context (signal deliveries, subscription clean-ups) without blocking.
void ks_internal_drain(GMainContext *context) {
    while (g_main_context_iteration(context, FALSE)) {}
}

// MARK: - The connection

typedef struct {
    GDBusConnection *connection;
    GError *error;
    gboolean finished;
    gboolean timed_out;
} connect_state;

static void connected(GObject *source, GAsyncResult *result, gpointer data) {
    (void)source;
    connect_state *state = data;
    state->connection = g_dbus_connection_new_for_address_finish(result, &state->error);
    state->finished = TRUE;
}

gboolean ks_internal_flag_timeout(gpointer data) {
    *(gboolean *)data = TRUE;
    return G_SOURCE_REMOVE;
}

ks_fprint *ks_fprint_open(const char *bus_address, int timeout_ms, ks_fprint_error *error) {
    GError *gerror = NULL;
    gchar *address = NULL;
    if (bus_address != NULL) address = g_strdup(bus_address);
    else {
        // DBUS_SYSTEM_BUS_ADDRESS, else unix:path=/var/run/dbus/system_bus_socket.
        address = g_dbus_address_get_for_bus_sync(G_BUS_TYPE_SYSTEM, NULL, &gerror);
        if (address == NULL) { ks_internal_set_error(error, gerror, TRUE); return NULL; }
    }

    ks_fprint *handle = g_new0(ks_fprint, 1);
    handle->context = g_main_context_new();
    handle->cancellable = g_cancellable_new();
    handle->timeout_ms = timeout_ms > 0 ? timeout_ms : 10000;

    // A connection of our own, made asynchronously on our context so the connection (and its authentication) has a
    // deadline too.
    g_main_context_push_thread_default(handle->context);
    connect_state state = {0};
    GSource *timer = g_timeout_source_new((guint)handle->timeout_ms);
    g_source_set_callback(timer, ks_internal_flag_timeout, &state.timed_out, NULL);
    g_source_attach(timer, handle->context);
    g_dbus_connection_new_for_address(address,
        G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT | G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION,
        NULL, handle->cancellable, connected, &state);
    gboolean timed_out = FALSE;
    while (!state.finished) {
        if (state.timed_out && !timed_out) {
            timed_out = TRUE;
            g_cancellable_cancel(handle->cancellable);  // the operation then finishes with CANCELLED
        }
        g_main_context_iteration(handle->context, TRUE);
    }
    g_source_destroy(timer);
    g_source_unref(timer);
    ks_internal_drain(handle->context);
    g_main_context_pop_thread_default(handle->context);

    if (state.connection == NULL) {
        if (timed_out) {
            g_clear_error(&state.error);
            gchar *message = g_strdup_printf("no answer from the bus at %s within %d ms", address, handle->timeout_ms);
            ks_internal_set_message(error, KS_FPRINT_NO_BUS, NULL, message);
            g_free(message);
        } else {
            ks_internal_set_error(error, state.error, TRUE);
        }
        g_free(address);
        g_object_unref(handle->cancellable);
        g_main_context_unref(handle->context);
        g_free(handle);
        return NULL;
    }
    g_free(address);
    g_clear_error(&state.error);
    g_dbus_connection_set_exit_on_close(state.connection, FALSE);
    // A cancellable that already fired cannot be reused: only a timed-out connect cancels it, and that returned above.
    handle->connection = state.connection;
    return handle;
}

void ks_fprint_close(ks_fprint *handle) {
    if (handle == NULL) return;
    g_main_context_push_thread_default(handle->context);
    if (!g_dbus_connection_is_closed(handle->connection))
        g_dbus_connection_close_sync(handle->connection, NULL, NULL);
    g_object_unref(handle->connection);
    ks_internal_drain(handle->context);
    g_main_context_pop_thread_default(handle->context);
    g_object_unref(handle->cancellable);
    g_main_context_unref(handle->context);
    g_free(handle);
}

void ks_fprint_cancel(ks_fprint *handle) {
    if (handle == NULL) return;
    g_atomic_int_set(&handle->cancelled, 1);
    g_cancellable_cancel(handle->cancellable);
    g_main_context_wakeup(handle->context);
}

// A method call with the handle's deadline. `cancellable`: FALSE for the clean-up calls (VerifyStop, Release), which
// must run even after a cancellation.
static GVariant *call(ks_fprint *handle, const char *path, const char *interface, const char *method,
                      GVariant *parameters, const GVariantType *reply_type, gboolean cancellable, GError **gerror) {
    return g_dbus_connection_call_sync(handle->connection, FPRINT_NAME, path, interface, method, parameters,
                                       reply_type, G_DBUS_CALL_FLAGS_NONE, handle->timeout_ms,
                                       cancellable ? handle->cancellable : NULL, gerror);
}

static int fail_cancelled(ks_fprint_error *error) {
    ks_internal_set_message(error, KS_FPRINT_CANCELLED, NULL, "cancelled");
    return -1;
}

// MARK: - Devices

int ks_fprint_default_device(ks_fprint *handle, char **device_path, char **name, char **scan_type,
                             ks_fprint_error *error) {
    *device_path = NULL;
    *name = NULL;
    *scan_type = NULL;
    if (is_cancelled(handle)) return fail_cancelled(error);
    GError *gerror = NULL;
    GVariant *reply = call(handle, FPRINT_MANAGER_PATH, FPRINT_MANAGER_IFACE, "GetDefaultDevice", NULL,
                           G_VARIANT_TYPE("(o)"), TRUE, &gerror);
    if (reply == NULL) { ks_internal_set_error(error, gerror, FALSE); return -1; }
    gchar *path = NULL;
    g_variant_get(reply, "(o)", &path);
    g_variant_unref(reply);

    GVariant *properties = call(handle, path, "org.freedesktop.DBus.Properties", "GetAll",
                                g_variant_new("(s)", FPRINT_DEVICE_IFACE), G_VARIANT_TYPE("(a{sv})"), TRUE, &gerror);
    if (properties == NULL) { g_free(path); ks_internal_set_error(error, gerror, FALSE); return -1; }
    GVariant *dictionary = g_variant_get_child_value(properties, 0);
    gchar *device_name = NULL, *device_scan_type = NULL;
    if (!g_variant_lookup(dictionary, "name", "s", &device_name)) device_name = g_strdup("");
    if (!g_variant_lookup(dictionary, "scan-type", "s", &device_scan_type)) device_scan_type = g_strdup("press");
    g_variant_unref(dictionary);
    g_variant_unref(properties);
    *device_path = path;
    *name = device_name;
    *scan_type = device_scan_type;
    return 0;
}

int ks_fprint_list_enrolled(ks_fprint *handle, const char *device_path, const char *username, char ***fingers,
                            size_t *count, ks_fprint_error *error) {
    *fingers = NULL;
    *count = 0;
    if (is_cancelled(handle)) return fail_cancelled(error);
    GError *gerror = NULL;
    GVariant *reply = call(handle, device_path, FPRINT_DEVICE_IFACE, "ListEnrolledFingers",
                           g_variant_new("(s)", username != NULL ? username : ""), G_VARIANT_TYPE("(as)"), TRUE,
                           &gerror);
    if (reply == NULL) {
        gchar *name = g_dbus_error_get_remote_error(gerror);
        gboolean none = name != NULL && strcmp(name, "net.reactivated.Fprint.Error.NoEnrolledPrints") == 0;
        g_free(name);
        if (none) {
            g_error_free(gerror);
            *fingers = g_new0(char *, 1);
            return 0;
        }
        ks_internal_set_error(error, gerror, FALSE);
        return -1;
    }
    gchar **list = NULL;
    g_variant_get(reply, "(^as)", &list);
    g_variant_unref(reply);
    *fingers = list;
    *count = g_strv_length(list);
    return 0;
}

// MARK: - Verification

typedef struct {
    GPtrArray *results;   // the VerifyStatus results not yet reported, in order
    gboolean done;
    gchar *final_result;
    gboolean vanished;    // the daemon left the bus, or the connection closed
    gboolean timed_out;
} verify_state;

static void on_verify_status(GDBusConnection *connection, const gchar *sender, const gchar *path,
                             const gchar *interface, const gchar *signal, GVariant *parameters, gpointer data) {
    (void)connection; (void)sender; (void)path; (void)interface; (void)signal;
    verify_state *state = data;
    if (state->done || !g_variant_is_of_type(parameters, G_VARIANT_TYPE("(sb)"))) return;
    const gchar *result = NULL;
    gboolean done = FALSE;
    g_variant_get(parameters, "(&sb)", &result, &done);
    g_ptr_array_add(state->results, g_strdup(result));
    if (done) {
        state->done = TRUE;
        state->final_result = g_strdup(result);
    }
}

static void on_name_owner_changed(GDBusConnection *connection, const gchar *sender, const gchar *path,
                                  const gchar *interface, const gchar *signal, GVariant *parameters, gpointer data) {
    (void)connection; (void)sender; (void)path; (void)interface; (void)signal;
    verify_state *state = data;
    if (!g_variant_is_of_type(parameters, G_VARIANT_TYPE("(sss)"))) return;
    const gchar *name = NULL, *old_owner = NULL, *new_owner = NULL;
    g_variant_get(parameters, "(&s&s&s)", &name, &old_owner, &new_owner);
    if (strcmp(name, FPRINT_NAME) == 0 && new_owner[0] == '\0') state->vanished = TRUE;
}

static void on_closed(GDBusConnection *connection, gboolean remote_peer_vanished, GError *gerror, gpointer data) {
    (void)connection; (void)remote_peer_vanished; (void)gerror;
    ((verify_state *)data)->vanished = TRUE;
}

// Reports the collected VerifyStatus results, outside any GLib dispatch.
static void report(verify_state *state, ks_fprint_status_fn status, void *context) {
    while (state->results->len > 0) {
        gchar *result = g_ptr_array_steal_index(state->results, 0);
        gboolean last = state->done && state->results->len == 0;
        if (status != NULL) status(result, last ? 1 : 0, context);
        g_free(result);
    }
}

int ks_fprint_verify(ks_fprint *handle, const char *device_path, const char *username, const char *finger,
                     int verify_timeout_ms, ks_fprint_claimed_fn claimed, ks_fprint_status_fn status, void *context,
                     char **final_result, ks_fprint_error *error) {
    *final_result = NULL;
    if (is_cancelled(handle)) return fail_cancelled(error);
    GError *gerror = NULL;
    int rc = -1;
    verify_state state = {0};
    state.results = g_ptr_array_new_with_free_func(g_free);

    // Subscriptions made while our context is the thread's default deliver there: only our wait below runs them.
    g_main_context_push_thread_default(handle->context);
    guint status_id = g_dbus_connection_signal_subscribe(handle->connection, FPRINT_NAME, FPRINT_DEVICE_IFACE,
        "VerifyStatus", device_path, NULL, G_DBUS_SIGNAL_FLAGS_NONE, on_verify_status, &state, NULL);
    guint owner_id = g_dbus_connection_signal_subscribe(handle->connection, "org.freedesktop.DBus",
        "org.freedesktop.DBus", "NameOwnerChanged", "/org/freedesktop/DBus", FPRINT_NAME, G_DBUS_SIGNAL_FLAGS_NONE,
        on_name_owner_changed, &state, NULL);
    gulong closed_id = g_signal_connect(handle->connection, "closed", G_CALLBACK(on_closed), &state);

    // Claim. A claim cancelled in flight may still have happened: it is released like a completed one.
    gboolean release = FALSE, stop = FALSE;
    GVariant *reply = call(handle, device_path, FPRINT_DEVICE_IFACE, "Claim",
                           g_variant_new("(s)", username != NULL ? username : ""), NULL, TRUE, &gerror);
    if (reply == NULL) {
        release = g_error_matches(gerror, G_IO_ERROR, G_IO_ERROR_CANCELLED);
        ks_internal_set_error(error, gerror, FALSE);
        gerror = NULL;
        goto finish;
    }
    g_variant_unref(reply);
    release = TRUE;

    if (claimed != NULL) claimed(context);
    if (is_cancelled(handle)) { fail_cancelled(error); goto finish; }

    reply = call(handle, device_path, FPRINT_DEVICE_IFACE, "VerifyStart",
                 g_variant_new("(s)", finger != NULL ? finger : "any"), NULL, TRUE, &gerror);
    if (reply == NULL) {
        stop = g_error_matches(gerror, G_IO_ERROR, G_IO_ERROR_CANCELLED);
        ks_internal_set_error(error, gerror, FALSE);
        gerror = NULL;
    } else {
        g_variant_unref(reply);
        stop = TRUE;
        GSource *timer = g_timeout_source_new((guint)(verify_timeout_ms > 0 ? verify_timeout_ms : 60000));
        g_source_set_callback(timer, ks_internal_flag_timeout, &state.timed_out, NULL);
        g_source_attach(timer, handle->context);
        for (;;) {
            ks_internal_drain(handle->context);
            report(&state, status, context);
            if (state.done || state.vanished || state.timed_out || is_cancelled(handle)) break;
            g_main_context_iteration(handle->context, TRUE);
        }
        g_source_destroy(timer);
        g_source_unref(timer);
        if (state.done) {
            *final_result = g_strdup(state.final_result);
            rc = 0;
        } else if (state.vanished) {
            ks_internal_set_message(error, KS_FPRINT_NO_DAEMON, NULL, "fprintd left the bus during the verification");
        } else if (is_cancelled(handle)) {
            fail_cancelled(error);
        } else {
            ks_internal_set_message(error, KS_FPRINT_VERIFY_TIMED_OUT, NULL, "no verification result before the deadline");
        }
    }
    // fprintd wants VerifyStop after every VerifyStart, finished or not, before the device can be released.
    if (stop && !state.vanished) {
        reply = call(handle, device_path, FPRINT_DEVICE_IFACE, "VerifyStop", NULL, NULL, FALSE, NULL);
        if (reply != NULL) g_variant_unref(reply);
    }

finish:
    if (release && !state.vanished && !g_dbus_connection_is_closed(handle->connection)) {
        reply = call(handle, device_path, FPRINT_DEVICE_IFACE, "Release", NULL, NULL, FALSE, NULL);
        if (reply != NULL) g_variant_unref(reply);
    }
    g_signal_handler_disconnect(handle->connection, closed_id);
    g_dbus_connection_signal_unsubscribe(handle->connection, status_id);
    g_dbus_connection_signal_unsubscribe(handle->connection, owner_id);
    ks_internal_drain(handle->context);
    g_main_context_pop_thread_default(handle->context);
    g_ptr_array_unref(state.results);
    g_free(state.final_result);
    return rc;
}
