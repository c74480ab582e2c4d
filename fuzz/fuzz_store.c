/* libFuzzer target: the TCP store's server reading what a client sends.
 * One server runs for the whole session; each input is one connection.
 * When the input's first byte is odd the connection logs in first (as a
 * rank does), so the requests after login are reached too; the rest is
 * sent as it is, and the connection is closed for writing. The server must
 * answer or drop it, never crash, hang or let a frame past its limits. */
#include "boot/store.h"
#include "boot/store_proto.h"
#include "core/log.h"
#include "core/time.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define TOKEN 0x70c3e11ull
#define WORLD (1 << 20)

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static dd_store_server_t *server;
static int port, next_rank;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    dd_store_server_params_t params = {.addr = "127.0.0.1",
                                       .token_hash = TOKEN,
                                       .world_size = WORLD,
                                       .login_s = 2.0};
    dd_log_configure(DD_LOG_ERROR, 0, "/dev/null", 0);
    if (dd_store_server_start(&params, &server) != DD_OK) {
        abort();
    }
    port = dd_store_server_port(server);
    return 0;
}

static void send_all(int fd, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n <= 0) {
            return; /* the server dropped us: fine */
        }
        p += n;
        len -= (size_t)n;
    }
}

static void hello(int fd)
{
    dd_store_buf_t b = {0};
    dd_store_buf_begin(&b);
    dd_store_buf_u8(&b, DD_STORE_OP_HELLO);
    dd_store_buf_u32(&b, DD_STORE_MAGIC);
    dd_store_buf_u16(&b, DD_STORE_VERSION);
    dd_store_buf_u64(&b, TOKEN);
    dd_store_buf_u32(&b, (uint32_t)(next_rank++ % WORLD));
    dd_store_buf_u32(&b, WORLD);
    dd_store_buf_finish(&b);
    send_all(fd, b.data, b.len);
    dd_store_buf_free(&b);
}

/* The client closes first, so each connection leaves a TIME_WAIT entry
 * on its source address and port. At a few thousand inputs a second one
 * source address runs out of ephemeral ports within a 20 s run, and
 * connect fails with EADDRNOTAVAIL: each input takes its source from the
 * next of 4096 loopback addresses (127.1.0.0/20), which the server at
 * 127.0.0.1 answers as it answers any client. */
static int connect_server(void)
{
    static uint32_t next_src;
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    for (int attempt = 0; attempt < 64; attempt++) {
        struct sockaddr_in src = {.sin_family = AF_INET};
        src.sin_addr.s_addr = htonl(0x7f010000u | (next_src++ & 0xfffu));
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            abort();
        }
        if (bind(fd, (struct sockaddr *)&src, sizeof(src)) == 0 &&
            connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
            return fd;
        }
        close(fd);
    }
    abort(); /* the server stopped answering */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = connect_server();
    if (size > 0 && (data[0] & 1)) {
        hello(fd);
    }
    if (size > 1) {
        send_all(fd, data + 1, size - 1);
    }
    shutdown(fd, SHUT_WR);
    /* The server closes once it has read the end: a bounded wait. */
    double deadline = dd_time_now() + 5.0;
    char buf[4096];
    while (1) {
        struct pollfd p = {fd, POLLIN, 0};
        int left = (int)((deadline - dd_time_now()) * 1e3);
        if (left <= 0) {
            abort(); /* the server held a closed connection */
        }
        if (poll(&p, 1, left) > 0 && recv(fd, buf, sizeof(buf), 0) <= 0) {
            break;
        }
    }
    close(fd);
    return 0;
}
