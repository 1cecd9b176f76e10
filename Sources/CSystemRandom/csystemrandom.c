#include "csystemrandom.h"
#include <errno.h>
#if defined(__linux__)
#include <sys/random.h>
#endif

long csystemrandom_getrandom(void *buffer, size_t length) {
#if defined(__linux__)
    return (long)getrandom(buffer, length, 0);
#else
    (void)buffer;
    (void)length;
    errno = ENOSYS;
    return -1;
#endif
}
