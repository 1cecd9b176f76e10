#include "ckeyring.h"
#include <errno.h>

#if defined(__linux__)
#include <unistd.h>
#include <sys/syscall.h>

#define CK_USER_KEYRING (-4)   /* KEY_SPEC_USER_KEYRING */
#define CK_REVOKE 3
#define CK_UNLINK 9
#define CK_SEARCH 10
#define CK_READ 11
#define CK_SET_TIMEOUT 15

int32_t ckeyring_add(const char *description, const void *payload, size_t length) {
    return (int32_t)syscall(SYS_add_key, "user", description, payload, length, CK_USER_KEYRING);
}
int32_t ckeyring_search(const char *description) {
    return (int32_t)syscall(SYS_keyctl, CK_SEARCH, CK_USER_KEYRING, "user", description, 0);
}
long ckeyring_read(int32_t key, void *buffer, size_t capacity) {
    return syscall(SYS_keyctl, CK_READ, key, buffer, capacity);
}
int ckeyring_set_timeout(int32_t key, unsigned seconds) {
    return (int)syscall(SYS_keyctl, CK_SET_TIMEOUT, key, seconds);
}
int ckeyring_remove(int32_t key) {
    syscall(SYS_keyctl, CK_REVOKE, key);
    return (int)syscall(SYS_keyctl, CK_UNLINK, key, CK_USER_KEYRING);
}
#else
int32_t ckeyring_add(const char *d, const void *p, size_t l) { (void)d; (void)p; (void)l; errno = ENOSYS; return -1; }
int32_t ckeyring_search(const char *d) { (void)d; errno = ENOSYS; return -1; }
long ckeyring_read(int32_t k, void *b, size_t c) { (void)k; (void)b; (void)c; errno = ENOSYS; return -1; }
int ckeyring_set_timeout(int32_t k, unsigned s) { (void)k; (void)s; errno = ENOSYS; return -1; }
int ckeyring_remove(int32_t k) { (void)k; errno = ENOSYS; return -1; }
#endif
