/* SP-over-TCP request-reply load peers of `gateway bench` written on plain sockets: the SP
 * wire (RFC sp-tcp-mapping: an 8-byte header 00 'S' 'P' 00, protocol, 0 0; then messages of
 * an 8-byte big-endian length and the bytes) costs a few system calls per message here, where
 * nng's threads cost tens of microseconds: these peers leave the CPU to the middle.
 *
 *   sp_stream echo                      a rep0 peer on tcp://127.0.0.1:* (any number of
 *                                       connections, epoll) sending every message back as it
 *                                       came: the backtrace first, so a REP's reply; READY
 *   sp_stream client url=URL            a req0 peer with its own request ids (top bit set), W
 *                                       in flight (reqrep.h); the requests for the replies of
 *                                       one read go out in one write, as libzmq's DEALER
 *                                       sends (nng's own clients write each: c-nng)
 *   sp_stream client url=URL requests=N window=W size=S    one run, one JSON line
 *
 * Both take lifetime=SECONDS (peer.h). The echo drops a connection whose peer is no req0 or
 * sends a message over MAX_MESSAGE bytes (a line on stderr).
 */
#define _GNU_SOURCE /* accept4 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "reqrep.h"

#define SP_REQ0 0x30
#define SP_REP0 0x31
#define MAX_MESSAGE (1 << 21) /* 2 MiB: a 1 MiB body and its header fit */
#define MAX_CONNS 1024

static void sp_header(unsigned char *h, int proto)
{
    const unsigned char head[8] = {0, 'S', 'P', 0, 0, (unsigned char)proto, 0, 0};
    memcpy(h, head, 8);
}

static void no_delay(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* ---- the client: one blocking connection, replies read through a buffer ---- */

typedef struct {
    int fd;
    unsigned char *buf;
    size_t cap, start, end;
    unsigned char *out;
    size_t pending; /* request bytes in `out` not written yet */
} sp_conn;

static int write_all(int fd, const unsigned char *p, size_t n)
{
    while (n) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* the requests queued so far, in one write */
static int flush_requests(sp_conn *c)
{
    size_t n = c->pending;
    c->pending = 0;
    return n ? write_all(c->fd, c->out, n) : 0;
}

/* Requests are queued and written together when the client next waits for a reply (fill),
 * as libzmq's DEALER does through its I/O thread: the requests sent for the replies of one
 * read go out in one write, so the client is as cheap per request as the zmq one. */
static int sp_send_request(void *arg, uint32_t slot, const char *body, size_t size, uint32_t id)
{
    (void)slot; /* one socket */
    sp_conn *c = arg;
    if (size + 12 > c->cap)
        return -1;
    if (c->pending + size + 12 > c->cap && flush_requests(c) != 0)
        return -1;
    unsigned char *at = c->out + c->pending;
    put_be64(at, size + 4);
    uint32_t be = htonl(id);
    memcpy(at + 8, &be, 4);
    memcpy(at + 12, body, size);
    c->pending += size + 12;
    return 0;
}

/* 1: `need` bytes buffered; 0: none came within 200 ms; -1: the connection ended */
static int fill(sp_conn *c, size_t need, char *why)
{
    while (c->end - c->start < need) {
        if (c->pending && flush_requests(c) != 0) {
            snprintf(why, 160, "cannot send: %s", strerror(errno));
            return -1;
        }
        if (c->start > 0) {
            memmove(c->buf, c->buf + c->start, c->end - c->start);
            c->end -= c->start;
            c->start = 0;
        }
        ssize_t k = recv(c->fd, c->buf + c->end, c->cap - c->end, MSG_DONTWAIT);
        if (k < 0 && (errno == EAGAIN || errno == EINTR)) {
            struct pollfd p = {c->fd, POLLIN, 0}; /* nothing yet: wait (a bounded while) */
            if (poll(&p, 1, 200) == 0)
                return 0;
            continue;
        }
        if (k <= 0) {
            snprintf(why, 160, "%s", k == 0 ? "the peer closed the connection" : strerror(errno));
            return -1;
        }
        c->end += (size_t)k;
    }
    return 1;
}

static int sp_recv_reply(void *arg, char *buf, size_t cap, size_t *len, uint32_t *id, char *why)
{
    sp_conn *c = arg;
    int got = fill(c, 8, why);
    if (got <= 0)
        return got;
    uint64_t n = get_be64(c->buf + c->start);
    if (n < 4 || n + 8 > c->cap) {
        snprintf(why, 160, "a reply of %llu bytes (no request id, or over the buffer)",
                 (unsigned long long)n);
        return -1;
    }
    /* (the rest of a message follows its length: wait for it whatever the time) */
    while ((got = fill(c, 8 + (size_t)n, why)) == 0) {
    }
    if (got < 0)
        return -1;
    uint32_t be;
    memcpy(&be, c->buf + c->start + 8, 4);
    *id = ntohl(be);
    *len = (size_t)n - 4;
    memcpy(buf, c->buf + c->start + 12, *len < cap ? *len : cap);
    c->start += 8 + (size_t)n;
    return 1;
}

static int dial(const char *url, char *why)
{
    char host[64];
    int port;
    if (sscanf(url, "tcp://%63[^:]:%d", host, &port) != 2) {
        snprintf(why, 160, "not tcp://HOST:PORT: %s", url);
        return -1;
    }
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1 || connect(fd, (void *)&a, sizeof a) != 0) {
        snprintf(why, 160, "cannot connect to %s: %s", url, strerror(errno));
        close(fd);
        return -1;
    }
    no_delay(fd);
    unsigned char mine[8], theirs[8];
    sp_header(mine, SP_REQ0);
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (write_all(fd, mine, 8) != 0 || recv(fd, theirs, 8, MSG_WAITALL) != 8) {
        snprintf(why, 160, "no SP header from %s", url);
        close(fd);
        return -1;
    }
    if (memcmp(theirs, "\0SP\0", 4) != 0 || theirs[4] != 0 || theirs[5] != SP_REP0) {
        snprintf(why, 160, "%s is no rep0 peer", url);
        close(fd);
        return -1;
    }
    return fd;
}

/* ---- the echo: every connection's bytes back, whole messages, through epoll ---- */

typedef struct {
    int fd, greeted, writing; /* writing: EPOLLOUT asked for */
    unsigned char *in, *out;
    size_t in_len, out_len, out_cap;
} echo_conn;

static void drop(int ep, echo_conn *c, const char *why)
{
    if (why)
        fprintf(stderr, "sp_stream echo: dropped a connection: %s\n", why);
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    free(c->in);
    free(c->out);
    free(c);
}

/* queue `n` bytes for the peer, then write what the socket takes; -1: the connection failed */
static int echo_out(int ep, echo_conn *c, const unsigned char *p, size_t n)
{
    if (c->out_len + n > c->out_cap) {
        c->out_cap = (c->out_len + n) * 2;
        c->out = realloc(c->out, c->out_cap);
    }
    memcpy(c->out + c->out_len, p, n);
    c->out_len += n;
    ssize_t k = write(c->fd, c->out, c->out_len);
    if (k < 0 && errno != EAGAIN && errno != EINTR)
        return -1;
    if (k > 0) {
        memmove(c->out, c->out + k, c->out_len - (size_t)k);
        c->out_len -= (size_t)k;
    }
    if (c->writing != (c->out_len > 0)) {
        c->writing = c->out_len > 0;
        struct epoll_event ev = {EPOLLIN | (c->writing ? EPOLLOUT : 0), {.ptr = c}};
        epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
    }
    return 0;
}

/* read what came and echo every whole message; a reason to drop the connection, or NULL */
static const char *echo_in(int ep, echo_conn *c)
{
    ssize_t k = read(c->fd, c->in + c->in_len, MAX_MESSAGE + 16 - c->in_len);
    if (k == 0)
        return "";
    if (k < 0)
        return errno == EAGAIN || errno == EINTR ? NULL : strerror(errno);
    c->in_len += (size_t)k;
    size_t at = 0;
    if (!c->greeted) {
        if (c->in_len < 8)
            return NULL;
        if (memcmp(c->in, "\0SP\0", 4) != 0 || c->in[4] != 0 || c->in[5] != SP_REQ0)
            return "the peer is no req0";
        c->greeted = 1;
        at = 8;
    }
    size_t from = at; /* whole messages from `from` to `at` go back in one write */
    while (c->in_len - at >= 8) {
        uint64_t n = get_be64(c->in + at);
        if (n > MAX_MESSAGE)
            return "a message over the echo's limit";
        if (c->in_len - at < 8 + n)
            break;
        at += 8 + (size_t)n;
    }
    if (at > from && echo_out(ep, c, c->in + from, at - from) != 0)
        return strerror(errno);
    memmove(c->in, c->in + at, c->in_len - at);
    c->in_len -= at;
    return NULL;
}

static _Noreturn void echo(void)
{
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), ep = epoll_create1(0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    if (bind(lfd, (void *)&a, sizeof a) != 0 || listen(lfd, 128) != 0
        || getsockname(lfd, (void *)&a, &alen) != 0)
        die("sp_stream echo: cannot listen: %s", strerror(errno));
    struct epoll_event ev = {EPOLLIN, {.ptr = NULL}}, evs[64];
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
    ready_url(ntohs(a.sin_port));
    int conns = 0;
    for (;;) {
        int n = epoll_wait(ep, evs, 64, -1);
        for (int i = 0; i < n; i++) {
            echo_conn *c = evs[i].data.ptr;
            if (c == NULL) {
                int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
                if (fd < 0)
                    continue;
                if (conns >= MAX_CONNS) {
                    fprintf(stderr, "sp_stream echo: refused a connection over %d\n", MAX_CONNS);
                    close(fd);
                    continue;
                }
                no_delay(fd);
                c = calloc(1, sizeof *c);
                c->fd = fd;
                c->in = malloc(MAX_MESSAGE + 16);
                conns++;
                struct epoll_event cev = {EPOLLIN, {.ptr = c}};
                epoll_ctl(ep, EPOLL_CTL_ADD, fd, &cev);
                unsigned char h[8];
                sp_header(h, SP_REP0);
                if (echo_out(ep, c, h, 8) != 0) {
                    drop(ep, c, strerror(errno));
                    conns--;
                }
                continue;
            }
            const char *why = NULL;
            if (evs[i].events & EPOLLOUT)
                why = echo_out(ep, c, (const unsigned char *)"", 0) ? strerror(errno) : NULL;
            if (!why && evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
                why = echo_in(ep, c);
            if (why) {
                drop(ep, c, *why ? why : NULL); /* "": the peer closed: no news */
                conns--;
            }
        }
    }
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    signal(SIGPIPE, SIG_IGN);
    if (strcmp(mode, "echo") == 0) {
        bounded_life(argc, argv, 1);
        echo();
    }
    if (strcmp(mode, "client") != 0)
        die("usage: sp_stream echo | client url=URL [requests=N window=W size=S]");
    bounded_life(argc, argv, 0);
    const char *url = arg_str(argc, argv, "url", NULL);
    char why[160];
    if (!url)
        die("sp_stream client: url= is required");
    int fd = dial(url, why);
    if (fd < 0)
        die("sp_stream client: %s", why);
    sp_conn c = {fd, malloc(MAX_MESSAGE + 16), MAX_MESSAGE + 16, 0, 0, malloc(MAX_MESSAGE + 16), 0};
    wire w = {.sock = &c, .send = sp_send_request, .recv = sp_recv_reply, .header_id = 1};
    _exit(client_main(argc, argv, &w, url));
}
