#define _GNU_SOURCE
#include "ckagent.h"
#include <errno.h>
#include <string.h>

#if defined(__linux__)
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

extern char **environ;

int ckagent_pipe(int fds[2], int nonblocking) { return pipe2(fds, O_CLOEXEC | (nonblocking ? O_NONBLOCK : 0)); }
int ckagent_accept(int fd) { return accept4(fd, NULL, NULL, SOCK_CLOEXEC); }

int ckagent_set_undumpable(void) { return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); }

int ckagent_peer_credentials(int fd, uint32_t *uid, int32_t *pid) {
    struct ucred credentials;
    socklen_t length = sizeof credentials;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) return -1;
    if (uid) *uid = (uint32_t)credentials.uid;
    if (pid) *pid = (int32_t)credentials.pid;
    return 0;
}

int ckagent_set_timeouts(int fd, int milliseconds) {
    struct timeval tv = { .tv_sec = milliseconds / 1000, .tv_usec = (milliseconds % 1000) * 1000 };
    if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0) return -1;
    return setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

pid_t ckagent_spawn_detached(const char *path, char *const argv[], int ready_fd) {
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attributes;
    pid_t pid = -1;
    int result = posix_spawn_file_actions_init(&actions);
    if (result != 0) { errno = result; return -1; }
    result = posix_spawnattr_init(&attributes);
    if (result != 0) { posix_spawn_file_actions_destroy(&actions); errno = result; return -1; }
    posix_spawn_file_actions_adddup2(&actions, ready_fd, 3);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
    // Nothing else of the starter's (a keychain file, a terminal) stays open in the agent.
    posix_spawn_file_actions_addclosefrom_np(&actions, 4);
#endif
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attributes, &none);
    posix_spawnattr_setsigdefault(&attributes, &all);
    result = posix_spawn(&pid, path, &actions, &attributes, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
    if (result != 0) { errno = result; return -1; }
    return pid;
}
#else
int ckagent_set_undumpable(void) { errno = ENOSYS; return -1; }
int ckagent_pipe(int fds[2], int nonblocking) { (void)fds; (void)nonblocking; errno = ENOSYS; return -1; }
int ckagent_accept(int fd) { (void)fd; errno = ENOSYS; return -1; }
int ckagent_peer_credentials(int fd, uint32_t *uid, int32_t *pid) { (void)fd; (void)uid; (void)pid; errno = ENOSYS; return -1; }
int ckagent_set_timeouts(int fd, int milliseconds) { (void)fd; (void)milliseconds; errno = ENOSYS; return -1; }
pid_t ckagent_spawn_detached(const char *path, char *const argv[], int ready_fd) { (void)path; (void)argv; (void)ready_fd; errno = ENOSYS; return -1; }
#endif

void ckagent_wipe(void *buffer, size_t length) {
    volatile unsigned char *bytes = (volatile unsigned char *)buffer;
    while (length--) *bytes++ = 0;
}
