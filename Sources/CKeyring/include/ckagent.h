#ifndef CKAGENT_H
#define CKAGENT_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

// What the unlock agent (`keystone agent`) and its client need from Linux that Swift cannot call directly
// (prctl(2) and the SO_PEERCRED structure; posix_spawn(3) with POSIX_SPAWN_SETSID). Every function returns -1 and
// sets errno on failure (also on platforms without them).

/// Makes this process undumpable (PR_SET_DUMPABLE 0): no core dump, and other processes of the same user can
/// neither ptrace it nor read /proc/PID/mem.
int ckagent_set_undumpable(void);
/// The user id and process id of the peer of the connected Unix socket `fd` (SO_PEERCRED): the credentials the peer
/// had when it connected (a client) or listened (the agent).
int ckagent_peer_credentials(int fd, uint32_t *uid, int32_t *pid);
/// Sets both send and receive timeouts of `fd` (SO_SNDTIMEO, SO_RCVTIMEO) to `milliseconds`. On a Unix socket the
/// send timeout also bounds connect(2) when the listener's queue is full.
int ckagent_set_timeouts(int fd, int milliseconds);
/// Starts `path` with `argv` (NULL-terminated) in a new session (setsid), its standard input, output and error on
/// /dev/null and `ready_fd` as its descriptor 3; returns its pid.
pid_t ckagent_spawn_detached(const char *path, char *const argv[], int ready_fd);
/// pipe2(2) with O_CLOEXEC (and O_NONBLOCK when `nonblocking`).
int ckagent_pipe(int fds[2], int nonblocking);
/// accept4(2) with SOCK_CLOEXEC; the peer's address is not wanted.
int ckagent_accept(int fd);
/// Overwrites `length` bytes at `buffer` with zeros in a way the compiler cannot remove.
void ckagent_wipe(void *buffer, size_t length);
#endif
