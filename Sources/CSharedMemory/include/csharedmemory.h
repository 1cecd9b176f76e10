#ifndef CSHAREDMEMORY_H
#define CSHAREDMEMORY_H
#include <stdint.h>

// Atomic operations and futex waits on memory that several processes map (mmap MAP_SHARED of one file), for the
// keychain file's cross-process group commit (Sources/KeychainFile/SharedCommit.swift). Swift's Synchronization
// atomics live in Swift-owned storage and cannot address a shared mapping. Every operation is sequentially
// consistent; every address must be naturally aligned.

static inline uint64_t keystone_shared_load64(const uint64_t *address) { return __atomic_load_n(address, __ATOMIC_SEQ_CST); }
static inline void keystone_shared_store64(uint64_t *address, uint64_t value) { __atomic_store_n(address, value, __ATOMIC_SEQ_CST); }
/// Adds `value` and returns the sum.
static inline uint64_t keystone_shared_add64(uint64_t *address, uint64_t value) { return __atomic_add_fetch(address, value, __ATOMIC_SEQ_CST); }
static inline uint32_t keystone_shared_load32(const uint32_t *address) { return __atomic_load_n(address, __ATOMIC_SEQ_CST); }
/// Adds `value` (wrapping) and returns the sum.
static inline uint32_t keystone_shared_add32(uint32_t *address, uint32_t value) { return __atomic_add_fetch(address, value, __ATOMIC_SEQ_CST); }

/// Sleeps while `*word == expected`, at most `timeout_ns` nanoseconds (FUTEX_WAIT on a shared mapping: another process's
/// `keystone_shared_wake` wakes it). Returns 0 when woken or when the word had already changed, else an errno
/// (ETIMEDOUT, EINTR). Where there is no futex (not Linux) it sleeps `timeout_ns` unless the word changed.
int keystone_shared_wait(uint32_t *word, uint32_t expected, int64_t timeout_ns);

/// Wakes up to `count` of the processes and threads sleeping in `keystone_shared_wait` on `word` (INT32_MAX: all).
void keystone_shared_wake(uint32_t *word, int32_t count);
#endif
