/*
 * TCP helpers with deadlines. Sockets are non-blocking; poll() bounds every
 * wait. Nothing here logs.
 */
#include "boot/sock.h"
#include "core/time.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int dd_sock_set_nonblocking(int fd)
{
    int flags = fcntl(fd, F_GETFL, 0);
    return flags < 0 ? -1 : fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

void dd_sock_set_nodelay(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

int dd_sock_addr_is_local(const char *addr)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};

    if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) {
        return -1;
    }
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    /* Only an address of one of this host's interfaces can be bound. */
    int rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    int err = errno;
    close(fd);
    if (rc == 0) {
        return 1;
    }
    return err == EADDRNOTAVAIL ? 0 : -1;
}

/* One connection attempt to one resolved address, bounded by deadline. */
static int dd_sock_try(const struct addrinfo *ai, double deadline, int *err_p)
{
    int fd =
        socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
        *err_p = errno;
        return -1;
    }
    dd_sock_set_nonblocking(fd);
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
        return fd;
    }
    if (errno != EINPROGRESS) {
        *err_p = errno;
        close(fd);
        return -1;
    }
    struct pollfd pfd = {fd, POLLOUT, 0};
    int left = dd_time_left_ms(deadline);
    int rc = poll(&pfd, 1, left < 2000 ? left : 2000);
    int soerr = 0;
    socklen_t slen = sizeof(soerr);
    if (rc <= 0) {
        *err_p = rc == 0 ? ETIMEDOUT : errno;
        close(fd);
        return -1;
    }
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &slen);
    if (soerr != 0) {
        *err_p = soerr;
        close(fd);
        return -1;
    }
    return fd;
}

int dd_sock_resolvable(const char *addr, char *why, size_t why_size)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM},
                    *res = NULL;
    int rc = getaddrinfo(addr, NULL, &hints, &res);

    if (res != NULL) {
        freeaddrinfo(res);
    }
    if (rc == EAI_NONAME || rc == EAI_FAIL) {
        snprintf(why, why_size, "%s", gai_strerror(rc));
        return -1;
    }
    return 0;
}

dd_status_t dd_sock_connect(const char *addr, int port, double deadline,
                            int *fd_p, char *why, size_t why_size)
{
    struct addrinfo hints, *res = NULL;
    char service[16];
    double backoff = 0.01;

    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    snprintf(service, sizeof(service), "%d", port);
    snprintf(why, why_size, "no attempt made");
    do {
        int rc = getaddrinfo(addr, service, &hints, &res);
        if (rc != 0) {
            snprintf(why, why_size, "%s", gai_strerror(rc));
        }
        for (struct addrinfo *ai = res; rc == 0 && ai; ai = ai->ai_next) {
            int err = 0;
            int fd = dd_sock_try(ai, deadline, &err);
            if (fd >= 0) {
                freeaddrinfo(res);
                dd_sock_set_nodelay(fd);
                *fd_p = fd;
                return DD_OK;
            }
            snprintf(why, why_size, "%s", strerror(err));
        }
        if (res != NULL) {
            freeaddrinfo(res);
            res = NULL;
        }
        /* The master may not be listening yet: retry until the deadline. */
        double left = deadline - dd_time_now();
        double nap = backoff < left ? backoff : left;
        if (nap > 0) {
            usleep((useconds_t)(nap * 1e6));
        }
        backoff = backoff * 2 < 0.5 ? backoff * 2 : 0.5;
    } while (dd_time_now() < deadline);
    return DD_ERR_UNREACHABLE;
}

/* Waits for events on fd until the deadline; 1 ready, 0 timed out. */
static int dd_sock_wait(int fd, short events, double deadline)
{
    while (1) {
        struct pollfd pfd = {fd, events, 0};
        int rc = poll(&pfd, 1, dd_time_left_ms(deadline));
        if (rc > 0) {
            return 1;
        }
        if (rc == 0) {
            return 0;
        }
        if (errno != EINTR) {
            return 1; /* let the following call report the error */
        }
    }
}

dd_status_t dd_sock_send_all(int fd, const void *buf, size_t len,
                             double deadline)
{
    const uint8_t *p = buf;

    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (!dd_sock_wait(fd, POLLOUT, deadline)) {
                return DD_ERR_TIMED_OUT;
            }
            continue;
        }
        return DD_ERR_PEER_LOST;
    }
    return DD_OK;
}

static dd_status_t dd_sock_recv_all(int fd, void *buf, size_t len,
                                    double deadline)
{
    uint8_t *p = buf;

    while (len > 0) {
        ssize_t n = recv(fd, p, len, 0);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n == 0) {
            return DD_ERR_PEER_LOST;
        }
        if (errno == EINTR) {
            continue;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            if (!dd_sock_wait(fd, POLLIN, deadline)) {
                return DD_ERR_TIMED_OUT;
            }
            continue;
        }
        return DD_ERR_PEER_LOST;
    }
    return DD_OK;
}

dd_status_t dd_sock_recv_frame(int fd, double deadline, size_t max_len,
                               uint8_t **body_p, size_t *len_p)
{
    uint8_t hdr[4];
    dd_status_t status = dd_sock_recv_all(fd, hdr, 4, deadline);

    if (status != DD_OK) {
        return status;
    }
    size_t len = (size_t)hdr[0] | ((size_t)hdr[1] << 8) |
                 ((size_t)hdr[2] << 16) | ((size_t)hdr[3] << 24);
    if (len > max_len) {
        return DD_ERR_MESSAGE;
    }
    uint8_t *body = malloc(len ? len : 1);
    if (body == NULL) {
        return DD_ERR_NO_MEMORY;
    }
    status = dd_sock_recv_all(fd, body, len, deadline);
    if (status != DD_OK) {
        free(body);
        return status;
    }
    *body_p = body;
    *len_p = len;
    return DD_OK;
}
