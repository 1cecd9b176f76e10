// polkit's Authority.CheckAuthorization over GDBus, on a ks_fprint connection: the call is made asynchronously on the
// handle's own main context, so a cancellation (from any thread) or the deadline can withdraw it with
// CancelCheckAuthorization, which closes the authentication agent's dialog.
#include "cpolkit.h"
#include "handle.h"
#include <string.h>

#define POLKIT_NAME "org.freedesktop.PolicyKit1"
#define POLKIT_PATH "/org/freedesktop/PolicyKit1/Authority"
#define POLKIT_IFACE "org.freedesktop.PolicyKit1.Authority"

typedef struct {
    GVariant *reply;
    GError *error;
    gboolean finished;
    gboolean timed_out;
} check_state;

static void checked(GObject *source, GAsyncResult *result, gpointer data) {
    check_state *state = data;
    state->reply = g_dbus_connection_call_finish(G_DBUS_CONNECTION(source), result, &state->error);
    state->finished = TRUE;
}

int ks_polkit_check(ks_fprint *handle, const char *action_id, uint32_t pid, uint64_t start_time, int32_t uid,
                    const char *const *keys, const char *const *values, size_t count, int allow_interaction,
                    int timeout_ms, ks_polkit_result *result, ks_fprint_error *error) {
    memset(result, 0, sizeof *result);
    if (g_atomic_int_get(&handle->cancelled)) {
        ks_internal_set_message(error, KS_FPRINT_CANCELLED, NULL, "cancelled");
        return -1;
    }

    GVariantBuilder subject_details;
    g_variant_builder_init(&subject_details, G_VARIANT_TYPE("a{sv}"));
    g_variant_builder_add(&subject_details, "{sv}", "pid", g_variant_new_uint32(pid));
    g_variant_builder_add(&subject_details, "{sv}", "start-time", g_variant_new_uint64(start_time));
    g_variant_builder_add(&subject_details, "{sv}", "uid", g_variant_new_int32(uid));
    GVariantBuilder details;
    g_variant_builder_init(&details, G_VARIANT_TYPE("a{ss}"));
    for (size_t i = 0; i < count; i++) {
        if (keys[i] != NULL && values[i] != NULL) g_variant_builder_add(&details, "{ss}", keys[i], values[i]);
    }
    static gint serial = 0;
    gchar *cancellation_id = g_strdup_printf("keystone-%d-%d", (int)pid, g_atomic_int_add(&serial, 1));
    GVariant *parameters = g_variant_new("((sa{sv})sa{ss}us)", "unix-process", &subject_details, action_id, &details,
                                         (guint32)(allow_interaction ? 1 : 0), cancellation_id);

    g_main_context_push_thread_default(handle->context);
    check_state state = {0};
    GSource *timer = g_timeout_source_new((guint)(timeout_ms > 0 ? timeout_ms : 300000));
    g_source_set_callback(timer, ks_internal_flag_timeout, &state.timed_out, NULL);
    g_source_attach(timer, handle->context);
    // No D-Bus deadline on the call itself (G_MAXINT): the person may take their time; ours is the timer above.
    g_dbus_connection_call(handle->connection, POLKIT_NAME, POLKIT_PATH, POLKIT_IFACE, "CheckAuthorization",
                           parameters, G_VARIANT_TYPE("((bba{ss}))"), G_DBUS_CALL_FLAGS_NONE, G_MAXINT,
                           handle->cancellable, checked, &state);
    while (!state.finished && !state.timed_out && !g_atomic_int_get(&handle->cancelled))
        g_main_context_iteration(handle->context, TRUE);
    g_source_destroy(timer);
    g_source_unref(timer);

    int rc = -1;
    if (!state.finished) {
        // Cancelled or timed out: polkit withdraws the dialog on CancelCheckAuthorization (sent from this same
        // connection, as polkit requires). Its answer does not matter; the pending call is then abandoned.
        GVariant *cancelled = g_dbus_connection_call_sync(handle->connection, POLKIT_NAME, POLKIT_PATH, POLKIT_IFACE,
                                                          "CancelCheckAuthorization",
                                                          g_variant_new("(s)", cancellation_id), NULL,
                                                          G_DBUS_CALL_FLAGS_NONE, handle->timeout_ms, NULL, NULL);
        if (cancelled != NULL) g_variant_unref(cancelled);
        g_cancellable_cancel(handle->cancellable);
        while (!state.finished) g_main_context_iteration(handle->context, TRUE);
        g_clear_error(&state.error);
        if (state.reply != NULL) g_variant_unref(state.reply);
        if (g_atomic_int_get(&handle->cancelled))
            ks_internal_set_message(error, KS_FPRINT_CANCELLED, NULL, "cancelled");
        else
            ks_internal_set_message(error, KS_FPRINT_VERIFY_TIMED_OUT, NULL, "no answer from the authentication agent before the deadline");
    } else if (state.reply == NULL) {
        ks_internal_set_error(error, state.error, FALSE);
        state.error = NULL;
    } else {
        gboolean authorized = FALSE, challenge = FALSE;
        GVariant *result_details = NULL;
        g_variant_get(state.reply, "((bb@a{ss}))", &authorized, &challenge, &result_details);
        const gchar *dismissed = NULL;
        if (result_details != NULL && g_variant_lookup(result_details, "polkit.dismissed", "&s", &dismissed))
            result->dismissed = dismissed != NULL && dismissed[0] != '\0' && strcmp(dismissed, "false") != 0;
        if (result_details != NULL) g_variant_unref(result_details);
        result->authorized = authorized ? 1 : 0;
        result->challenge = challenge ? 1 : 0;
        g_variant_unref(state.reply);
        rc = 0;
    }
    ks_internal_drain(handle->context);
    g_main_context_pop_thread_default(handle->context);
    g_free(cancellation_id);
    return rc;
}
