// no-keyring-exec: runs a command with the Linux kernel keyring forbidden, as Docker's default seccomp profile
// forbids it.
//
// Usage:   no-keyring-exec COMMAND [ARGUMENT...]
//          no-keyring-exec --check        (exits 0 when keyctl(2) answers EPERM under the filter, 1 otherwise)
//
// It sets PR_SET_NO_NEW_PRIVS, installs a raw seccomp BPF filter (no libseccomp) that makes keyctl(2), add_key(2)
// and request_key(2) fail with EPERM (SECCOMP_RET_ERRNO | EPERM: what Docker's default profile returns for them) and
// allows every other call, then execvp(3)s COMMAND with its arguments (the PATH is searched). The filter is inherited
// by every child and cannot be removed, so everything COMMAND starts (daemons included) runs without the keyring.
// A process of another architecture than the one this helper was built for (x86-64 or aarch64) is killed, as a
// seccomp filter must not let a foreign system-call table through.
//
// Exit status: COMMAND's own (this process becomes COMMAND); 126 when the filter cannot be installed (no seccomp in
// this kernel, or an unsupported architecture); 127 when COMMAND cannot be executed; 2 without a command.
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#if defined(__linux__)
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#if defined(__x86_64__)
#define NK_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NK_ARCH AUDIT_ARCH_AARCH64
#endif

static int install_filter(void) {
#ifndef NK_ARCH
    errno = ENOSYS;
    return -1;
#else
    struct sock_filter program[] = {
        // A foreign architecture's system-call numbers mean other calls: kill.
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NK_ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
#if defined(__x86_64__)
        // The x32 ABI shares AUDIT_ARCH_X86_64 with numbers of its own (bit 30 set): refused, so that its keyctl
        // cannot slip through.
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
#endif
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_keyctl, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_add_key, 1, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_request_key, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog filter = { .len = (unsigned short)(sizeof program / sizeof program[0]), .filter = program };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &filter);
#endif
}
#endif

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: no-keyring-exec COMMAND [ARGUMENT...] | --check\n");
        return 2;
    }
#if defined(__linux__)
    if (install_filter() != 0) {
        fprintf(stderr, "no-keyring-exec: the seccomp filter could not be installed: %s\n", strerror(errno));
        return 126;
    }
    if (strcmp(argv[1], "--check") == 0) {
        // KEYCTL_GET_KEYRING_ID (0) of the user keyring (-4): answers EPERM only when the filter works.
        long result = syscall(SYS_keyctl, 0, -4, 0);
        return (result == -1 && errno == EPERM) ? 0 : 1;
    }
    execvp(argv[1], argv + 1);
    fprintf(stderr, "no-keyring-exec: %s: %s\n", argv[1], strerror(errno));
    return 127;
#else
    fprintf(stderr, "no-keyring-exec: Linux only\n");
    return 126;
#endif
}
