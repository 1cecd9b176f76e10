// Plain libsecret, as a C program calls it: the baseline of keystone-benchmarks' Secret Service rows.
#define SECRET_API_SUBJECT_TO_CHANGE 1
#include <libsecret/secret.h>
#include <stdio.h>
#include <string.h>
#include "libsecret_baseline.h"

// The schema a C program would declare for a password keyed by service and account.
static const SecretSchema baseline_schema = {
    "dev.keystone.BenchmarkBaseline", SECRET_SCHEMA_NONE,
    {
        { "service", SECRET_SCHEMA_ATTRIBUTE_STRING },
        { "account", SECRET_SCHEMA_ATTRIBUTE_STRING },
        { NULL, 0 },
    }
};

// The same attributes without the schema's name, to find every program's items by service.
static const SecretSchema any_schema = {
    "dev.keystone.BenchmarkAny", SECRET_SCHEMA_DONT_MATCH_NAME,
    {
        { "service", SECRET_SCHEMA_ATTRIBUTE_STRING },
        { "account", SECRET_SCHEMA_ATTRIBUTE_STRING },
        { NULL, 0 },
    }
};

static void note(char *error, int error_size, const char *message) {
    if (error == NULL || error_size <= 0 || error[0] != '\0') return;
    snprintf(error, (size_t)error_size, "%s", message);
}

int ks_baseline_store_lookup(const char *service, const char *account_prefix, const char *secret_prefix, int first,
                             int count, char *error, int error_size) {
    int succeeded = 0;
    for (int i = first; i < first + count; i++) {
        char account[256], secret[256], label[512];
        snprintf(account, sizeof account, "%s%d", account_prefix, i);
        snprintf(secret, sizeof secret, "%s%d", secret_prefix, i);
        snprintf(label, sizeof label, "%s (%s)", service, account);
        GError *gerror = NULL;
        if (!secret_password_store_sync(&baseline_schema, SECRET_COLLECTION_DEFAULT, label, secret, NULL, &gerror,
                                        "service", service, "account", account, NULL)) {
            note(error, error_size, gerror != NULL ? gerror->message : "secret_password_store_sync failed");
            g_clear_error(&gerror);
            continue;
        }
        gchar *found = secret_password_lookup_sync(&baseline_schema, NULL, &gerror,
                                                   "service", service, "account", account, NULL);
        if (found == NULL) {
            note(error, error_size, gerror != NULL ? gerror->message : "secret_password_lookup_sync found nothing");
            g_clear_error(&gerror);
            continue;
        }
        if (strcmp(found, secret) == 0) succeeded++;
        else note(error, error_size, "secret_password_lookup_sync returned another secret");
        secret_password_free(found);
    }
    return succeeded;
}

int ks_baseline_clear(const char *service, char *error, int error_size) {
    GError *gerror = NULL;
    gboolean deleted = secret_password_clear_sync(&any_schema, NULL, &gerror, "service", service, NULL);
    if (gerror != NULL) {
        note(error, error_size, gerror->message);
        g_error_free(gerror);
        return -1;
    }
    return deleted ? 1 : 0;
}

int ks_baseline_count(const char *service, char *error, int error_size) {
    GError *gerror = NULL;
    GList *items = secret_password_search_sync(&any_schema, SECRET_SEARCH_ALL, NULL, &gerror, "service", service, NULL);
    if (gerror != NULL) {
        note(error, error_size, gerror->message);
        g_error_free(gerror);
        return -1;
    }
    int count = (int)g_list_length(items);
    g_list_free_full(items, g_object_unref);
    return count;
}

void ks_baseline_disconnect(void) { secret_service_disconnect(); }
