// Keystone's TCTI for swtpm's TPM socket, with deadlines (see swtpm_transport.h).
#define _GNU_SOURCE
#include "swtpm_transport.h"

#if defined(__linux__)

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <tss2/tss2_tpm2_types.h>

/// "KSSWTPM": the TCTI context's magic number (any value: tpm2-tss checks only the version).
#define KS_SWTPM_MAGIC 0x4b53535754504dULL
/// A response larger than this is not a TPM's (TPM2_MAX_RESPONSE_SIZE is 4096; some TPMs allow up to 8 KiB).
#define KS_SWTPM_MAX_RESPONSE 8192
/// The addresses a host name resolves to that are tried, at most.
#define KS_SWTPM_MAX_ADDRESSES 4

typedef struct {
    TSS2_TCTI_CONTEXT_COMMON_V2 common;
    /// Where swtpm listens: the first address that accepted a connection when the transport was made.
    struct sockaddr_storage address;
    socklen_t address_length;
    /// The most connect and each write may wait, in milliseconds.
    int32_t io_timeout_ms;
    /// The connection of the command in flight, -1 between commands.
    int fd;
    /// A command was sent and its response is not complete yet.
    int receiving;
    /// The response read so far, `have` bytes; `size` is its size from its header (0 until the header is in).
    uint8_t response[KS_SWTPM_MAX_RESPONSE];
    size_t have;
    size_t size;
} ks_swtpm;

static int64_t now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/// Milliseconds left until `deadline` (never negative), or -1 (wait forever) when `deadline` is -1.
static int remaining_ms(int64_t deadline) {
    if (deadline < 0) return -1;
    int64_t left = deadline - now_ms();
    if (left <= 0) return 0;
    return left > INT32_MAX ? INT32_MAX : (int)left;
}

static ks_swtpm *cast(TSS2_TCTI_CONTEXT *context) {
    ks_swtpm *t = (ks_swtpm *)context;
    if (!t || t->common.v1.magic != KS_SWTPM_MAGIC) return NULL;
    return t;
}

static void drop_connection(ks_swtpm *t) {
    if (t->fd >= 0) {
        // A connection per command: closed normally, each would leave a TIME_WAIT socket holding a local port for a
        // minute, and a few thousand signatures a second (tests, benchmarks) then exhaust the ephemeral ports of the
        // whole machine (every bind and connect on 127.0.0.1 fails). The response is complete or abandoned when the
        // connection is dropped, so nothing is lost by closing it with a reset (SO_LINGER 0), which leaves none.
        struct linger abort_on_close = { .l_onoff = 1, .l_linger = 0 };
        (void)setsockopt(t->fd, SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof abort_on_close);
        close(t->fd);
    }
    t->fd = -1;
    t->receiving = 0;
    t->have = 0;
    t->size = 0;
}

/// Connects to `address` within `deadline`: the socket (non-blocking) or -1 with errno set (ETIMEDOUT when the
/// deadline passed).
static int connect_before(const struct sockaddr *address, socklen_t length, int64_t deadline) {
    int fd = socket(address->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return -1;
    if (connect(fd, address, length) == 0) return fd;
    if (errno != EINPROGRESS && errno != EINTR) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int ready = poll(&p, 1, remaining_ms(deadline));
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) {
            close(fd);
            errno = ready == 0 ? ETIMEDOUT : errno;
            return -1;
        }
        break;
    }
    int error = 0;
    socklen_t size = sizeof error;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) != 0 || error != 0) {
        close(fd);
        errno = error ? error : EIO;
        return -1;
    }
    return fd;
}

// MARK: - The TCTI functions

static TSS2_RC transmit(TSS2_TCTI_CONTEXT *context, size_t size, const uint8_t *command) {
    ks_swtpm *t = cast(context);
    if (!t) return TSS2_TCTI_RC_BAD_CONTEXT;
    if (!command) return TSS2_TCTI_RC_BAD_REFERENCE;
    if (t->receiving) return TSS2_TCTI_RC_BAD_SEQUENCE;
    if (size < 10 || size > TPM2_MAX_COMMAND_SIZE) return TSS2_TCTI_RC_BAD_VALUE;
    int64_t deadline = t->io_timeout_ms < 0 ? -1 : now_ms() + t->io_timeout_ms;
    t->fd = connect_before((const struct sockaddr *)&t->address, t->address_length, deadline);
    if (t->fd < 0) {
        int timed_out = errno == ETIMEDOUT;
        drop_connection(t);
        return timed_out ? TSS2_TCTI_RC_TRY_AGAIN : TSS2_TCTI_RC_IO_ERROR;
    }
    size_t sent = 0;
    while (sent < size) {
        // MSG_NOSIGNAL: a swtpm that went away gives EPIPE, never SIGPIPE.
        ssize_t n = send(t->fd, command + sent, size - sent, MSG_NOSIGNAL);
        if (n > 0) {
            sent += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd p = {.fd = t->fd, .events = POLLOUT};
            int ready = poll(&p, 1, remaining_ms(deadline));
            if (ready > 0 || (ready < 0 && errno == EINTR)) continue;
            drop_connection(t);
            return ready == 0 ? TSS2_TCTI_RC_TRY_AGAIN : TSS2_TCTI_RC_IO_ERROR;
        }
        drop_connection(t);
        return TSS2_TCTI_RC_IO_ERROR;
    }
    t->receiving = 1;
    t->have = 0;
    t->size = 0;
    return TSS2_RC_SUCCESS;
}

/// Reads the response of the command in flight. `timeout` (ESAPI's, in milliseconds; -1 blocks) bounds this call:
/// when it passes first, TSS2_TCTI_RC_TRY_AGAIN, and what was read is kept for the next call.
static TSS2_RC receive(TSS2_TCTI_CONTEXT *context, size_t *response_size, uint8_t *response, int32_t timeout) {
    ks_swtpm *t = cast(context);
    if (!t) return TSS2_TCTI_RC_BAD_CONTEXT;
    if (!response_size) return TSS2_TCTI_RC_BAD_REFERENCE;
    if (!t->receiving) return TSS2_TCTI_RC_BAD_SEQUENCE;
    int64_t deadline = timeout < 0 ? -1 : now_ms() + timeout;
    for (;;) {
        size_t need = t->size ? t->size : 10;
        if (t->have >= need) break;
        ssize_t n = read(t->fd, t->response + t->have, need - t->have);
        if (n > 0) {
            t->have += (size_t)n;
            if (t->size == 0 && t->have == 10) {
                uint32_t size = ((uint32_t)t->response[2] << 24) | ((uint32_t)t->response[3] << 16) |
                                ((uint32_t)t->response[4] << 8) | (uint32_t)t->response[5];
                if (size < 10 || size > KS_SWTPM_MAX_RESPONSE) {
                    drop_connection(t);
                    return TSS2_TCTI_RC_MALFORMED_RESPONSE;
                }
                t->size = size;
            }
            continue;
        }
        if (n == 0) {  // swtpm closed the connection: it went away.
            drop_connection(t);
            return TSS2_TCTI_RC_IO_ERROR;
        }
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            drop_connection(t);
            return TSS2_TCTI_RC_IO_ERROR;
        }
        int wait = remaining_ms(deadline);
        if (wait == 0) return TSS2_TCTI_RC_TRY_AGAIN;
        struct pollfd p = {.fd = t->fd, .events = POLLIN};
        int ready = poll(&p, 1, wait);
        if (ready == 0) return TSS2_TCTI_RC_TRY_AGAIN;
        if (ready < 0 && errno != EINTR) {
            drop_connection(t);
            return TSS2_TCTI_RC_IO_ERROR;
        }
    }
    if (!response) {  // the caller asks for the size first
        *response_size = t->size;
        return TSS2_RC_SUCCESS;
    }
    if (*response_size < t->size) {
        *response_size = t->size;
        return TSS2_TCTI_RC_INSUFFICIENT_BUFFER;
    }
    memcpy(response, t->response, t->size);
    *response_size = t->size;
    drop_connection(t);
    return TSS2_RC_SUCCESS;
}

static void finalize(TSS2_TCTI_CONTEXT *context) {
    ks_swtpm *t = cast(context);
    if (t) drop_connection(t);
}

static TSS2_RC not_implemented(TSS2_TCTI_CONTEXT *context) {
    (void)context;
    return TSS2_TCTI_RC_NOT_IMPLEMENTED;
}

static TSS2_RC poll_handles(TSS2_TCTI_CONTEXT *context, TSS2_TCTI_POLL_HANDLE *handles, size_t *count) {
    (void)context;
    (void)handles;
    (void)count;
    return TSS2_TCTI_RC_NOT_IMPLEMENTED;
}

/// swtpm's locality is 0 unless set through its control channel, which Keystone never needs.
static TSS2_RC set_locality(TSS2_TCTI_CONTEXT *context, uint8_t locality) {
    (void)context;
    return locality == 0 ? TSS2_RC_SUCCESS : TSS2_TCTI_RC_NOT_IMPLEMENTED;
}

static TSS2_RC make_sticky(TSS2_TCTI_CONTEXT *context, TPM2_HANDLE *handle, uint8_t sticky) {
    (void)context;
    (void)handle;
    (void)sticky;
    return TSS2_TCTI_RC_NOT_IMPLEMENTED;
}

// MARK: - Configuration

int ks_swtpm_conf_matches(const char *conf) {
    if (!conf) return 0;
    return strcmp(conf, "swtpm") == 0 || strncmp(conf, "swtpm:", 6) == 0;
}

/// Copies the value of `key` in "k1=v1,k2=v2" into `out` (at most `size` - 1 bytes). Returns 1 when present,
/// 0 when absent, -1 when too long.
static int option(const char *options, const char *key, char *out, size_t size) {
    size_t key_length = strlen(key);
    const char *p = options;
    while (p && *p) {
        const char *end = strchr(p, ',');
        size_t length = end ? (size_t)(end - p) : strlen(p);
        if (length > key_length && strncmp(p, key, key_length) == 0 && p[key_length] == '=') {
            size_t value_length = length - key_length - 1;
            if (value_length >= size) return -1;
            memcpy(out, p + key_length + 1, value_length);
            out[value_length] = 0;
            return 1;
        }
        p = end ? end + 1 : NULL;
    }
    return 0;
}

/// Whether every option in "k1=v1,..." is one of host, port, path.
static int options_known(const char *options) {
    const char *p = options;
    while (p && *p) {
        if (strncmp(p, "host=", 5) != 0 && strncmp(p, "port=", 5) != 0 && strncmp(p, "path=", 5) != 0) return 0;
        const char *end = strchr(p, ',');
        p = end ? end + 1 : NULL;
    }
    return 1;
}

TSS2_RC ks_swtpm_transport_new(const char *conf, int32_t io_timeout_ms, TSS2_TCTI_CONTEXT **out, char *message,
                               size_t message_size) {
    *out = NULL;
    const char *options = conf[5] == ':' ? conf + 6 : "";
    if (!options_known(options)) {
        snprintf(message, message_size, "the swtpm TCTI configuration \"%s\" has an option other than host, port, path",
                 conf);
        return TSS2_TCTI_RC_BAD_VALUE;
    }
    char host[256] = "localhost", port[16] = "2321", path[sizeof(((struct sockaddr_un *)0)->sun_path)] = "";
    if (option(options, "host", host, sizeof host) < 0 || option(options, "port", port, sizeof port) < 0 ||
        option(options, "path", path, sizeof path) < 0) {
        snprintf(message, message_size, "the swtpm TCTI configuration \"%s\" has a value that is too long", conf);
        return TSS2_TCTI_RC_BAD_VALUE;
    }
    ks_swtpm *t = calloc(1, sizeof *t);
    if (!t) {
        snprintf(message, message_size, "out of memory");
        return TSS2_TCTI_RC_MEMORY;
    }
    t->common.v1.magic = KS_SWTPM_MAGIC;
    t->common.v1.version = 2;
    t->common.v1.transmit = transmit;
    t->common.v1.receive = receive;
    t->common.v1.finalize = finalize;
    t->common.v1.cancel = not_implemented;
    t->common.v1.getPollHandles = poll_handles;
    t->common.v1.setLocality = set_locality;
    t->common.makeSticky = make_sticky;
    t->io_timeout_ms = io_timeout_ms;
    t->fd = -1;

    // Something must accept connections there now (as tpm2-tss's TCTI checks when it is initialized): the first
    // address that does is kept.
    int64_t deadline = io_timeout_ms < 0 ? -1 : now_ms() + io_timeout_ms;
    int last_error = 0;
    if (path[0]) {
        struct sockaddr_un address = {.sun_family = AF_UNIX};
        memcpy(address.sun_path, path, strlen(path) + 1);
        int fd = connect_before((const struct sockaddr *)&address, sizeof address, deadline);
        if (fd >= 0) {
            close(fd);
            memcpy(&t->address, &address, sizeof address);
            t->address_length = sizeof address;
        } else {
            last_error = errno;
        }
    } else {
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
        struct addrinfo *found = NULL;
        int resolved = getaddrinfo(host, port, &hints, &found);
        if (resolved != 0) {
            snprintf(message, message_size, "cannot resolve the swtpm host %s port %s: %s", host, port,
                     gai_strerror(resolved));
            free(t);
            return TSS2_TCTI_RC_IO_ERROR;
        }
        int tried = 0;
        for (struct addrinfo *a = found; a && tried < KS_SWTPM_MAX_ADDRESSES; a = a->ai_next, tried++) {
            if (a->ai_addrlen > sizeof t->address) continue;
            int fd = connect_before(a->ai_addr, a->ai_addrlen, deadline);
            if (fd < 0) {
                last_error = errno;
                continue;
            }
            close(fd);
            memcpy(&t->address, a->ai_addr, a->ai_addrlen);
            t->address_length = a->ai_addrlen;
            break;
        }
        freeaddrinfo(found);
    }
    if (t->address_length == 0) {
        if (path[0]) {
            snprintf(message, message_size, "nothing accepts connections at the swtpm socket %s: %s", path,
                     strerror(last_error ? last_error : EIO));
        } else {
            snprintf(message, message_size, "nothing accepts connections at swtpm %s port %s: %s", host, port,
                     strerror(last_error ? last_error : EIO));
        }
        free(t);
        return TSS2_TCTI_RC_IO_ERROR;
    }
    *out = (TSS2_TCTI_CONTEXT *)t;
    return TSS2_RC_SUCCESS;
}

void ks_swtpm_transport_free(TSS2_TCTI_CONTEXT *tcti) {
    ks_swtpm *t = cast(tcti);
    if (!t) return;
    drop_connection(t);
    memset(t->response, 0, sizeof t->response);
    free(t);
}

#endif
