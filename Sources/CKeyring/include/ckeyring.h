#ifndef CKEYRING_H
#define CKEYRING_H
#include <stddef.h>
#include <stdint.h>

// The Linux kernel key retention service through raw syscalls (keyctl(2), add_key(2)), so that Swift,
// which cannot call the variadic syscall(2), needs no libkeyutils. Every function returns -1 and sets
// errno on failure (also on platforms without the keyring).

/// Adds (or replaces) a "user" key with `description` in the user keyring; returns its serial.
int32_t ckeyring_add(const char *description, const void *payload, size_t length);
/// Finds the "user" key with `description` in the user keyring; returns its serial.
int32_t ckeyring_search(const char *description);
/// Reads up to `capacity` bytes of the key's payload; returns the payload's full length.
long ckeyring_read(int32_t key, void *buffer, size_t capacity);
/// Makes the key expire after `seconds` (0: never).
int ckeyring_set_timeout(int32_t key, unsigned seconds);
/// Revokes the key and unlinks it from the user keyring.
int ckeyring_remove(int32_t key);
#include "ckagent.h"
#endif
