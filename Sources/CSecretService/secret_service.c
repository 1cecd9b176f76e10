// The Secret Service through libsecret (sessions, secret transfer, prompts) and GDBus (searches, properties).
#define SECRET_API_SUBJECT_TO_CHANGE 1
#include <libsecret/secret.h>
#include <string.h>
#include "keystone_secret_service.h"

#define KS_BUS_NAME "org.freedesktop.secrets"
#define KS_SERVICE_PATH "/org/freedesktop/secrets"

struct ks_service {
    GDBusConnection *connection;
    SecretService *service;
    int timeout_ms;
};

struct ks_cancel {
    GCancellable *cancellable;
};

// MARK: - Errors

static ks_error_kind classify(const GError *gerror) {
    if (gerror == NULL) return KS_OTHER;
    if (g_error_matches(gerror, G_IO_ERROR, G_IO_ERROR_CANCELLED)) return KS_CANCELLED;
    if (g_error_matches(gerror, G_IO_ERROR, G_IO_ERROR_TIMED_OUT)) return KS_TIMEOUT;
    if (g_error_matches(gerror, G_IO_ERROR, G_IO_ERROR_CLOSED)) return KS_NO_SERVICE;
    if (g_error_matches(gerror, G_DBUS_ERROR, G_DBUS_ERROR_TIMEOUT) ||
        g_error_matches(gerror, G_DBUS_ERROR, G_DBUS_ERROR_TIMED_OUT)) return KS_TIMEOUT;
    if (g_error_matches(gerror, G_DBUS_ERROR, G_DBUS_ERROR_SERVICE_UNKNOWN) ||
        g_error_matches(gerror, G_DBUS_ERROR, G_DBUS_ERROR_NAME_HAS_NO_OWNER) ||
        g_error_matches(gerror, G_DBUS_ERROR, G_DBUS_ERROR_NO_REPLY) ||
        g_error_matches(gerror, G_DBUS_ERROR, G_DBUS_ERROR_DISCONNECTED)) return KS_NO_SERVICE;
    if (g_error_matches(gerror, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_OBJECT) ||
        g_error_matches(gerror, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_METHOD)) return KS_NO_SUCH_OBJECT;
    if (g_error_matches(gerror, G_DBUS_ERROR, G_DBUS_ERROR_ACCESS_DENIED)) return KS_DENIED;
    if (g_error_matches(gerror, SECRET_ERROR, SECRET_ERROR_IS_LOCKED)) return KS_LOCKED;
    if (g_error_matches(gerror, SECRET_ERROR, SECRET_ERROR_NO_SUCH_OBJECT)) return KS_NO_SUCH_OBJECT;
    // libsecret strips the D-Bus error name of errors it has no GError for (G_IO_ERROR_DBUS_ERROR): gnome-keyring's
    // NoSession ("The session does not exist") arrives that way after the daemon restarted.
    if (g_error_matches(gerror, G_IO_ERROR, G_IO_ERROR_DBUS_ERROR) && !g_dbus_error_is_remote_error(gerror) &&
        gerror->message != NULL && strstr(gerror->message, "session") != NULL) return KS_NO_SESSION;
    if (g_dbus_error_is_remote_error(gerror)) {
        gchar *name = g_dbus_error_get_remote_error(gerror);
        ks_error_kind kind = KS_OTHER;
        if (name != NULL) {
            if (strcmp(name, "org.freedesktop.Secret.Error.IsLocked") == 0) kind = KS_LOCKED;
            else if (strcmp(name, "org.freedesktop.Secret.Error.NoSuchObject") == 0) kind = KS_NO_SUCH_OBJECT;
            else if (strcmp(name, "org.freedesktop.Secret.Error.NoSession") == 0) kind = KS_NO_SESSION;
            else if (strcmp(name, "org.freedesktop.DBus.Error.UnknownObject") == 0) kind = KS_NO_SUCH_OBJECT;
            else if (strcmp(name, "org.freedesktop.DBus.Error.UnknownMethod") == 0) kind = KS_NO_SUCH_OBJECT;
            else if (strcmp(name, "org.freedesktop.DBus.Error.ServiceUnknown") == 0) kind = KS_NO_SERVICE;
            else if (strcmp(name, "org.freedesktop.DBus.Error.NoReply") == 0) kind = KS_NO_SERVICE;
            else if (strcmp(name, "org.freedesktop.DBus.Error.AccessDenied") == 0) kind = KS_DENIED;
            g_free(name);
        }
        return kind;
    }
    return KS_OTHER;
}

static void set_error(ks_error *error, GError *gerror, ks_error_kind forced) {
    if (error != NULL) {
        error->kind = forced != KS_OK ? forced : classify(gerror);
        if (gerror == NULL) error->message = g_strdup("unknown error");
        else if (error->kind == KS_OTHER)
            error->message = g_strdup_printf("%s [%s %d]", gerror->message, g_quark_to_string(gerror->domain), gerror->code);
        else error->message = g_strdup(gerror->message);
    }
    if (gerror != NULL) g_error_free(gerror);
}

static void set_message(ks_error *error, ks_error_kind kind, const char *message) {
    if (error == NULL) return;
    error->kind = kind;
    error->message = g_strdup(message);
}

void ks_error_clear(ks_error *error) {
    if (error == NULL) return;
    g_free(error->message);
    error->message = NULL;
    error->kind = KS_OK;
}

static GCancellable *cancellable_of(ks_cancel *cancel) { return cancel != NULL ? cancel->cancellable : NULL; }

ks_cancel *ks_cancel_new(void) {
    ks_cancel *cancel = g_new0(ks_cancel, 1);
    cancel->cancellable = g_cancellable_new();
    return cancel;
}

void ks_cancel_fire(ks_cancel *cancel) {
    if (cancel != NULL) g_cancellable_cancel(cancel->cancellable);
}

void ks_cancel_free(ks_cancel *cancel) {
    if (cancel == NULL) return;
    g_object_unref(cancel->cancellable);
    g_free(cancel);
}

// MARK: - The service

ks_service *ks_service_open(const char *address, int timeout_ms, ks_cancel *cancel, ks_error *error) {
    GError *gerror = NULL;
    // A connection of our own, never the process-wide session singleton: it does not exit the process when the bus
    // goes away, and each storage may name its own bus.
    GDBusConnection *connection = g_dbus_connection_new_for_address_sync(
        address, G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT | G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION,
        NULL, cancellable_of(cancel), &gerror);
    if (connection == NULL) {
        ks_error_kind kind = classify(gerror);
        set_error(error, gerror, kind == KS_CANCELLED || kind == KS_TIMEOUT ? kind : KS_NO_BUS);
        return NULL;
    }
    g_dbus_connection_set_exit_on_close(connection, FALSE);

    // Is anyone serving the Secret Service? (No activation: a missing daemon is reported, not started.)
    GVariant *owner = g_dbus_connection_call_sync(connection, "org.freedesktop.DBus", "/org/freedesktop/DBus",
        "org.freedesktop.DBus", "NameHasOwner", g_variant_new("(s)", KS_BUS_NAME), G_VARIANT_TYPE("(b)"),
        G_DBUS_CALL_FLAGS_NONE, timeout_ms, cancellable_of(cancel), &gerror);
    if (owner == NULL) {
        set_error(error, gerror, KS_OK);
        g_object_unref(connection);
        return NULL;
    }
    gboolean has_owner = FALSE;
    g_variant_get(owner, "(b)", &has_owner);
    g_variant_unref(owner);
    if (!has_owner) {
        set_message(error, KS_NO_SERVICE, "nothing owns org.freedesktop.secrets on the bus");
        g_object_unref(connection);
        return NULL;
    }

    // The proxy is made on our connection and used without GInitable's initialization: libsecret's SecretService
    // initializes through the process-wide session bus (its init asserts when given a connection). Keystone needs
    // no cached properties or signals from it, only its method calls, session and prompts, which work uninitialized
    // (prompts are proxies of their own, made on this connection).
    SecretService *service = g_object_new(SECRET_TYPE_SERVICE,
        "g-flags", G_DBUS_PROXY_FLAGS_DO_NOT_LOAD_PROPERTIES | G_DBUS_PROXY_FLAGS_DO_NOT_AUTO_START,
        "g-connection", connection,
        "g-name", KS_BUS_NAME,
        "g-object-path", KS_SERVICE_PATH,
        "g-interface-name", "org.freedesktop.Secret.Service",
        NULL);
    if (service == NULL) {
        set_message(error, KS_OTHER, "cannot make a Secret Service proxy");
        g_object_unref(connection);
        return NULL;
    }
    g_dbus_proxy_set_default_timeout(G_DBUS_PROXY(service), timeout_ms);
    if (!secret_service_ensure_session_sync(service, cancellable_of(cancel), &gerror)) {
        set_error(error, gerror, KS_OK);
        g_object_unref(service);
        g_object_unref(connection);
        return NULL;
    }
    ks_service *result = g_new0(ks_service, 1);
    result->connection = connection;
    result->service = service;
    result->timeout_ms = timeout_ms;
    return result;
}

void ks_service_free(ks_service *service) {
    if (service == NULL) return;
    g_object_unref(service->service);
    g_dbus_connection_close_sync(service->connection, NULL, NULL);
    g_object_unref(service->connection);
    g_free(service);
}

const char *ks_service_session_algorithm(ks_service *service) {
    return secret_service_get_session_algorithms(service->service);
}

int ks_service_owner(ks_service *service, char **unique_name, uint32_t *pid, ks_cancel *cancel, ks_error *error) {
    GError *gerror = NULL;
    GVariant *reply = g_dbus_connection_call_sync(service->connection, "org.freedesktop.DBus", "/org/freedesktop/DBus",
        "org.freedesktop.DBus", "GetNameOwner", g_variant_new("(s)", KS_BUS_NAME), G_VARIANT_TYPE("(s)"),
        G_DBUS_CALL_FLAGS_NONE, service->timeout_ms, cancellable_of(cancel), &gerror);
    if (reply == NULL) { set_error(error, gerror, KS_OK); return -1; }
    gchar *name = NULL;
    g_variant_get(reply, "(s)", &name);
    g_variant_unref(reply);
    *pid = 0;
    GVariant *pid_reply = g_dbus_connection_call_sync(service->connection, "org.freedesktop.DBus", "/org/freedesktop/DBus",
        "org.freedesktop.DBus", "GetConnectionUnixProcessID", g_variant_new("(s)", name), G_VARIANT_TYPE("(u)"),
        G_DBUS_CALL_FLAGS_NONE, service->timeout_ms, cancellable_of(cancel), NULL);
    if (pid_reply != NULL) {
        g_variant_get(pid_reply, "(u)", pid);
        g_variant_unref(pid_reply);
    }
    *unique_name = name;
    return 0;
}

// MARK: - Properties

static GVariant *get_property(ks_service *service, const char *path, const char *interface, const char *name,
                              ks_cancel *cancel, ks_error *error) {
    GError *gerror = NULL;
    GVariant *reply = g_dbus_connection_call_sync(service->connection, KS_BUS_NAME, path,
        "org.freedesktop.DBus.Properties", "Get", g_variant_new("(ss)", interface, name), G_VARIANT_TYPE("(v)"),
        G_DBUS_CALL_FLAGS_NONE, service->timeout_ms, cancellable_of(cancel), &gerror);
    if (reply == NULL) { set_error(error, gerror, KS_OK); return NULL; }
    GVariant *value = NULL;
    g_variant_get(reply, "(v)", &value);
    g_variant_unref(reply);
    return value;
}

char *ks_read_alias(ks_service *service, const char *alias, ks_cancel *cancel, ks_error *error) {
    GError *gerror = NULL;
    GVariant *reply = g_dbus_connection_call_sync(service->connection, KS_BUS_NAME, KS_SERVICE_PATH,
        "org.freedesktop.Secret.Service", "ReadAlias", g_variant_new("(s)", alias), G_VARIANT_TYPE("(o)"),
        G_DBUS_CALL_FLAGS_NONE, service->timeout_ms, cancellable_of(cancel), &gerror);
    if (reply == NULL) { set_error(error, gerror, KS_OK); return NULL; }
    gchar *path = NULL;
    g_variant_get(reply, "(o)", &path);
    g_variant_unref(reply);
    if (path != NULL && strcmp(path, "/") == 0) { g_free(path); return NULL; }
    return path;
}

char **ks_collections(ks_service *service, ks_cancel *cancel, ks_error *error) {
    GVariant *value = get_property(service, KS_SERVICE_PATH, "org.freedesktop.Secret.Service", "Collections", cancel, error);
    if (value == NULL) return NULL;
    gchar **paths = g_variant_is_of_type(value, G_VARIANT_TYPE("ao")) ? g_variant_dup_objv(value, NULL) : g_new0(gchar *, 1);
    g_variant_unref(value);
    return paths;
}

int ks_collection_info(ks_service *service, const char *path, char **label, int *locked, ks_cancel *cancel, ks_error *error) {
    GError *gerror = NULL;
    GVariant *reply = g_dbus_connection_call_sync(service->connection, KS_BUS_NAME, path,
        "org.freedesktop.DBus.Properties", "GetAll", g_variant_new("(s)", "org.freedesktop.Secret.Collection"),
        G_VARIANT_TYPE("(a{sv})"), G_DBUS_CALL_FLAGS_NONE, service->timeout_ms, cancellable_of(cancel), &gerror);
    if (reply == NULL) { set_error(error, gerror, KS_OK); return -1; }
    GVariant *dict = g_variant_get_child_value(reply, 0);
    gchar *found_label = NULL;
    gboolean found_locked = FALSE;
    if (!g_variant_lookup(dict, "Label", "s", &found_label)) found_label = g_strdup("");
    if (!g_variant_lookup(dict, "Locked", "b", &found_locked)) found_locked = FALSE;
    g_variant_unref(dict);
    g_variant_unref(reply);
    *label = found_label;
    *locked = found_locked ? 1 : 0;
    return 0;
}

int ks_collection_locked(ks_service *service, const char *path, int *locked, ks_cancel *cancel, ks_error *error) {
    GVariant *value = get_property(service, path, "org.freedesktop.Secret.Collection", "Locked", cancel, error);
    if (value == NULL) return -1;
    *locked = g_variant_is_of_type(value, G_VARIANT_TYPE_BOOLEAN) && g_variant_get_boolean(value) ? 1 : 0;
    g_variant_unref(value);
    return 0;
}

// MARK: - Items

static GVariant *attributes_variant(const char *const *keys, const char *const *values, size_t count) {
    GVariantBuilder builder;
    g_variant_builder_init(&builder, G_VARIANT_TYPE("a{ss}"));
    for (size_t i = 0; i < count; i++) g_variant_builder_add(&builder, "{ss}", keys[i], values[i]);
    return g_variant_builder_end(&builder);
}

char **ks_search(ks_service *service, const char *collection, const char *const *keys, const char *const *values,
                 size_t count, ks_cancel *cancel, ks_error *error) {
    GError *gerror = NULL;
    GVariant *reply = g_dbus_connection_call_sync(service->connection, KS_BUS_NAME, collection,
        "org.freedesktop.Secret.Collection", "SearchItems", g_variant_new("(@a{ss})", attributes_variant(keys, values, count)),
        G_VARIANT_TYPE("(ao)"), G_DBUS_CALL_FLAGS_NONE, service->timeout_ms, cancellable_of(cancel), &gerror);
    if (reply == NULL) { set_error(error, gerror, KS_OK); return NULL; }
    GVariant *paths = g_variant_get_child_value(reply, 0);
    gchar **result = g_variant_dup_objv(paths, NULL);
    g_variant_unref(paths);
    g_variant_unref(reply);
    return result;
}

int ks_item_info_get(ks_service *service, const char *path, ks_item_info *info, ks_cancel *cancel, ks_error *error) {
    memset(info, 0, sizeof *info);
    GError *gerror = NULL;
    GVariant *reply = g_dbus_connection_call_sync(service->connection, KS_BUS_NAME, path,
        "org.freedesktop.DBus.Properties", "GetAll", g_variant_new("(s)", "org.freedesktop.Secret.Item"),
        G_VARIANT_TYPE("(a{sv})"), G_DBUS_CALL_FLAGS_NONE, service->timeout_ms, cancellable_of(cancel), &gerror);
    if (reply == NULL) { set_error(error, gerror, KS_OK); return -1; }
    GVariant *dict = g_variant_get_child_value(reply, 0);
    GVariant *attributes = g_variant_lookup_value(dict, "Attributes", G_VARIANT_TYPE("a{ss}"));
    if (attributes != NULL) {
        size_t n = g_variant_n_children(attributes);
        info->keys = g_new0(char *, n + 1);
        info->values = g_new0(char *, n + 1);
        GVariantIter iter;
        g_variant_iter_init(&iter, attributes);
        const gchar *key, *value;
        size_t i = 0;
        while (i < n && g_variant_iter_next(&iter, "{&s&s}", &key, &value)) {
            info->keys[i] = g_strdup(key);
            info->values[i] = g_strdup(value);
            i++;
        }
        info->count = i;
        g_variant_unref(attributes);
    } else {
        info->keys = g_new0(char *, 1);
        info->values = g_new0(char *, 1);
    }
    gboolean locked = FALSE;
    if (!g_variant_lookup(dict, "Locked", "b", &locked)) locked = FALSE;
    info->locked = locked ? 1 : 0;
    if (!g_variant_lookup(dict, "Label", "s", &info->label)) info->label = g_strdup("");
    guint64 created = 0, modified = 0;
    if (g_variant_lookup(dict, "Created", "t", &created)) info->created = created;
    if (g_variant_lookup(dict, "Modified", "t", &modified)) info->modified = modified;
    g_variant_unref(dict);
    g_variant_unref(reply);
    return 0;
}

void ks_item_info_clear(ks_item_info *info) {
    if (info == NULL) return;
    g_strfreev(info->keys);
    g_strfreev(info->values);
    g_free(info->label);
    memset(info, 0, sizeof *info);
}

int ks_get_secrets(ks_service *service, const char *const *paths, size_t count, uint8_t **secrets, size_t *lengths,
                   ks_cancel *cancel, ks_error *error) {
    for (size_t i = 0; i < count; i++) { secrets[i] = NULL; lengths[i] = 0; }
    if (count == 0) return 0;
    const gchar **list = g_new0(const gchar *, count + 1);
    for (size_t i = 0; i < count; i++) list[i] = paths[i];
    GError *gerror = NULL;
    GHashTable *values = secret_service_get_secrets_for_dbus_paths_sync(service->service, list, cancellable_of(cancel), &gerror);
    g_free(list);
    if (values == NULL) { set_error(error, gerror, KS_OK); return -1; }
    for (size_t i = 0; i < count; i++) {
        SecretValue *value = g_hash_table_lookup(values, paths[i]);
        if (value == NULL) continue;
        gsize length = 0;
        const gchar *bytes = secret_value_get(value, &length);
        secrets[i] = g_malloc(length > 0 ? length : 1);
        if (length > 0) memcpy(secrets[i], bytes, length);
        lengths[i] = length;
    }
    g_hash_table_unref(values);
    return 0;
}

void ks_secret_free(uint8_t *secret, size_t length) {
    if (secret == NULL) return;
    volatile uint8_t *p = secret;
    for (size_t i = 0; i < length; i++) p[i] = 0;
    g_free(secret);
}

char *ks_create_item(ks_service *service, const char *collection, const char *label,
                     const char *const *keys, const char *const *values, size_t count,
                     const uint8_t *secret, size_t length, const char *content_type,
                     ks_cancel *cancel, ks_error *error) {
    GHashTable *properties = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, (GDestroyNotify)g_variant_unref);
    g_hash_table_insert(properties, "org.freedesktop.Secret.Item.Label", g_variant_ref_sink(g_variant_new_string(label)));
    g_hash_table_insert(properties, "org.freedesktop.Secret.Item.Attributes",
                        g_variant_ref_sink(attributes_variant(keys, values, count)));
    SecretValue *value = secret_value_new((const gchar *)(secret != NULL ? secret : (const uint8_t *)""), (gssize)length, content_type);
    GError *gerror = NULL;
    gchar *path = secret_service_create_item_dbus_path_sync(service->service, collection, properties, value,
                                                            SECRET_ITEM_CREATE_NONE, cancellable_of(cancel), &gerror);
    secret_value_unref(value);
    g_hash_table_unref(properties);
    if (path == NULL) { set_error(error, gerror, KS_OK); return NULL; }
    return path;
}

int ks_set_attributes(ks_service *service, const char *path, const char *const *keys, const char *const *values,
                      size_t count, ks_cancel *cancel, ks_error *error) {
    GError *gerror = NULL;
    GVariant *reply = g_dbus_connection_call_sync(service->connection, KS_BUS_NAME, path,
        "org.freedesktop.DBus.Properties", "Set",
        g_variant_new("(ssv)", "org.freedesktop.Secret.Item", "Attributes", attributes_variant(keys, values, count)),
        NULL, G_DBUS_CALL_FLAGS_NONE, service->timeout_ms, cancellable_of(cancel), &gerror);
    if (reply == NULL) { set_error(error, gerror, KS_OK); return -1; }
    g_variant_unref(reply);
    return 0;
}

int ks_delete_item(ks_service *service, const char *path, ks_cancel *cancel, ks_error *error) {
    GError *gerror = NULL;
    if (!secret_service_delete_item_dbus_path_sync(service->service, path, cancellable_of(cancel), &gerror)) {
        set_error(error, gerror, KS_OK);
        return -1;
    }
    return 0;
}

int ks_lock(ks_service *service, const char *path, ks_cancel *cancel, ks_error *error) {
    const gchar *paths[] = { path, NULL };
    GError *gerror = NULL;
    gchar **locked = NULL;
    secret_service_lock_dbus_paths_sync(service->service, paths, cancellable_of(cancel), &locked, &gerror);
    g_strfreev(locked);
    if (gerror != NULL) { set_error(error, gerror, KS_OK); return -1; }
    return 0;
}

int ks_unlock(ks_service *service, const char *path, int *unlocked, ks_cancel *cancel, ks_error *error) {
    const gchar *paths[] = { path, NULL };
    GError *gerror = NULL;
    gchar **done = NULL;
    gint count = secret_service_unlock_dbus_paths_sync(service->service, paths, cancellable_of(cancel), &done, &gerror);
    g_strfreev(done);
    if (gerror != NULL) { set_error(error, gerror, KS_OK); return -1; }
    *unlocked = count > 0 ? 1 : 0;
    return 0;
}

int ks_service_is_closed(ks_service *service) {
    return service == NULL || g_dbus_connection_is_closed(service->connection) ? 1 : 0;
}

char *ks_hmac_sha256_hex(const uint8_t *key, size_t key_length, const uint8_t *data, size_t length) {
    return g_compute_hmac_for_data(G_CHECKSUM_SHA256, key, key_length, data, length);
}

void ks_free(void *pointer) { g_free(pointer); }
void ks_strfreev(char **strings) { g_strfreev(strings); }
