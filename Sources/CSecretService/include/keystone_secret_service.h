// Keystone's boundary to the freedesktop Secret Service: libsecret and GDBus behind plain C types, so the Swift side
// never touches GLib. Every call is synchronous, takes an optional cancel handle (fired by the caller's deadline) and
// reports failures in a ks_error. Strings returned are owned by the caller (ks_free / ks_strfreev); secret bytes are
// released with ks_secret_free, which wipes them.
#ifndef KEYSTONE_SECRET_SERVICE_H
#define KEYSTONE_SECRET_SERVICE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// What went wrong, classified for the Swift side's status mapping.
typedef enum {
    KS_OK = 0,
    KS_NO_BUS = 1,          // the bus address cannot be connected to
    KS_NO_SERVICE = 2,      // nothing owns org.freedesktop.secrets (or it went away mid-call)
    KS_LOCKED = 3,          // org.freedesktop.Secret.Error.IsLocked
    KS_NO_SUCH_OBJECT = 4,  // the item or collection does not exist (any more)
    KS_CANCELLED = 5,       // the caller's deadline fired
    KS_TIMEOUT = 6,         // a D-Bus call got no reply in time
    KS_DISMISSED = 7,       // a prompt was dismissed
    KS_DENIED = 8,          // access denied by the service
    KS_OTHER = 9,
    KS_NO_SESSION = 10,     // the session was closed (the service restarted): open a new one
} ks_error_kind;

typedef struct {
    ks_error_kind kind;
    char *message;          // GError message (never holds secret bytes); free with ks_error_clear
} ks_error;

void ks_error_clear(ks_error *error);

typedef struct ks_cancel ks_cancel;
ks_cancel *ks_cancel_new(void);
/// Thread-safe: may be called from any thread while a call using the handle runs.
void ks_cancel_fire(ks_cancel *cancel);
void ks_cancel_free(ks_cancel *cancel);

typedef struct ks_service ks_service;

/// Connects to the bus at `address` (a D-Bus address string) and opens a Secret Service session (encrypted
/// transfer when the service offers it). `timeout_ms` bounds every D-Bus call made through the service.
ks_service *ks_service_open(const char *address, int timeout_ms, ks_cancel *cancel, ks_error *error);
void ks_service_free(ks_service *service);
/// "dh-ietf1024-sha256-aes128-cbc-pkcs7" or "plain"; NULL before a session is open.
const char *ks_service_session_algorithm(ks_service *service);
/// The unique bus name owning org.freedesktop.secrets and its process id (0 when unknown). Returns 0 on success.
int ks_service_owner(ks_service *service, char **unique_name, uint32_t *pid, ks_cancel *cancel, ks_error *error);

/// The collection an alias names ("default"), or NULL (no error) when the alias is not set.
char *ks_read_alias(ks_service *service, const char *alias, ks_cancel *cancel, ks_error *error);
/// Every collection's object path (NULL-terminated), or NULL with error.
char **ks_collections(ks_service *service, ks_cancel *cancel, ks_error *error);
/// A collection's label and lock state. Returns 0 on success.
int ks_collection_info(ks_service *service, const char *path, char **label, int *locked, ks_cancel *cancel, ks_error *error);

/// Whether a collection is locked, from its `Locked` property alone (constant cost, unlike GetAll, whose reply
/// lists every item). Returns 0 on success.
int ks_collection_locked(ks_service *service, const char *path, int *locked, ks_cancel *cancel, ks_error *error);

/// Object paths of the collection's items whose attributes hold every key/value given (Collection.SearchItems).
char **ks_search(ks_service *service, const char *collection, const char *const *keys, const char *const *values,
                 size_t count, ks_cancel *cancel, ks_error *error);

typedef struct {
    char **keys;
    char **values;
    size_t count;
    char *label;
    int locked;
    uint64_t created;
    uint64_t modified;
} ks_item_info;

/// An item's attributes, label, lock state and dates (Properties.GetAll). Returns 0 on success.
int ks_item_info_get(ks_service *service, const char *path, ks_item_info *info, ks_cancel *cancel, ks_error *error);
void ks_item_info_clear(ks_item_info *info);

/// The secrets of `count` items in one call (Service.GetSecrets). `secrets[i]`/`lengths[i]` receive a copy of
/// item i's secret, or NULL when the service returned none for it (locked, gone). Returns 0 on success.
int ks_get_secrets(ks_service *service, const char *const *paths, size_t count, uint8_t **secrets, size_t *lengths,
                   ks_cancel *cancel, ks_error *error);
void ks_secret_free(uint8_t *secret, size_t length);

/// Creates an item (Collection.CreateItem, never with replace) and returns its object path.
char *ks_create_item(ks_service *service, const char *collection, const char *label,
                     const char *const *keys, const char *const *values, size_t count,
                     const uint8_t *secret, size_t length, const char *content_type,
                     ks_cancel *cancel, ks_error *error);
/// Replaces an item's attributes (Properties.Set of org.freedesktop.Secret.Item.Attributes). Returns 0 on success.
int ks_set_attributes(ks_service *service, const char *path, const char *const *keys, const char *const *values,
                      size_t count, ks_cancel *cancel, ks_error *error);
/// Deletes an item. Returns 0 on success.
int ks_delete_item(ks_service *service, const char *path, ks_cancel *cancel, ks_error *error);

/// Locks a collection (no prompt). Returns 0 on success.
int ks_lock(ks_service *service, const char *path, ks_cancel *cancel, ks_error *error);
/// Unlocks a collection, showing the service's prompt when it needs one. `*unlocked` is 1 when it is unlocked
/// afterwards, 0 when the prompt was dismissed. Returns 0 on success.
int ks_unlock(ks_service *service, const char *path, int *unlocked, ks_cancel *cancel, ks_error *error);

/// Whether the connection is closed (the bus dropped it: the daemon exited, or the bus refused a message of ours).
int ks_service_is_closed(ks_service *service);

/// HMAC-SHA-256 of `data` under `key`, as 64 lowercase hex digits (free with ks_free).
char *ks_hmac_sha256_hex(const uint8_t *key, size_t key_length, const uint8_t *data, size_t length);

void ks_free(void *pointer);
void ks_strfreev(char **strings);

#ifdef __cplusplus
}
#endif
#endif
