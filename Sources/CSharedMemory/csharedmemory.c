#include "csharedmemory.h"
#include <errno.h>
#include <limits.h>
#include <time.h>
#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

int keystone_shared_wait(uint32_t *word, uint32_t expected, int64_t timeout_ns) {
    if (timeout_ns < 0) timeout_ns = 0;
    struct timespec timeout = { (time_t)(timeout_ns / 1000000000), (long)(timeout_ns % 1000000000) };
#if defined(__linux__)
    // Not FUTEX_PRIVATE_FLAG: the word is in a file mapping shared with other processes.
    long rc = syscall(SYS_futex, word, FUTEX_WAIT, expected, &timeout, NULL, 0);
    if (rc == 0) return 0;
    return errno == EAGAIN ? 0 : errno;
#else
    if (__atomic_load_n(word, __ATOMIC_SEQ_CST) != expected) return 0;
    return nanosleep(&timeout, NULL) == 0 ? ETIMEDOUT : errno;
#endif
}

void keystone_shared_wake(uint32_t *word, int32_t count) {
#if defined(__linux__)
    syscall(SYS_futex, word, FUTEX_WAKE, count, NULL, NULL, 0);
#else
    (void)word;
    (void)count;
#endif
}
