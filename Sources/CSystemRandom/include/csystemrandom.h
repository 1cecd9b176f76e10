#ifndef CSYSTEMRANDOM_H
#define CSYSTEMRANDOM_H
#include <stddef.h>

// The kernel's CSPRNG, getrandom(2), for SecRandomCopyBytes: Swift's Glibc module does not export
// <sys/random.h>. One call, no flags, no loop: the caller retries short reads and EINTR.

/// Writes up to `length` random bytes from getrandom(2) (flags 0: the urandom source, which blocks only
/// until the kernel's generator is seeded at boot). Returns the number of bytes written, or -1 with errno
/// set; errno is ENOSYS where the system has no getrandom.
long csystemrandom_getrandom(void *buffer, size_t length);
#endif
