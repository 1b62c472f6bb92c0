/* SP pub/sub and pipeline load peers of `gateway bench --patterns` on plain sockets
 * (patterns.h): the SP wire (sp_stream.c) with pub0/sub0 (0x20/0x21) and push0/pull0
 * (0x50/0x51). nng's own peers (nng_patterns.c) stay far below any middle on two cores; these
 * cost a system call or two per message.
 *
 *   sp_patterns pub [hwm=H]                   pub0 on tcp://127.0.0.1:*: every message to every
 *                                             subscriber; one whose queue holds H messages
 *                                             already misses it (pub/sub drops)
 *   sp_patterns subs url=URL count=C          C sub0 connections (SP subscribers filter on
 *                                             their side: patterns.h counts "d." and "END")
 *   sp_patterns pull                          pull0 on tcp://127.0.0.1:* (any pushers)
 *   sp_patterns push url=URL                  push0: one connection, blocking writes of 16 KiB
 *                                             batches (the rest after the last message)
 */
#define _GNU_SOURCE /* accept4 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include "patterns.h"

#define PUB0 0x20
#define SUB0 0x21
#define PUSH0 0x50
#define PULL0 0x51
#define MAX_PEERS 64
#define READ_CAP (RECV_CAP + 16)

typedef struct {
    int fd, greeted; /* greeted: the peer's 8-byte header was skipped */
    unsigned char *buf, *out;
    size_t start, end, out_len, out_cap;
    size_t out_off; /* pub: the queue is out[out_off, out_len) (sent bytes are not moved) */
    int blocked;    /* pub: messages queued since the socket last said EAGAIN (0: not full) */
} conn;

typedef struct {
    int lfd, mine, n; /* lfd: listening (-1: dialled); mine: this side's protocol */
    conn *c[MAX_PEERS];
    size_t queue_bytes; /* pub: what a subscriber's queue may hold */
} endpoint;

static conn *new_conn(int fd, int mine)
{
    unsigned char h[8] = {0, 'S', 'P', 0, 0, (unsigned char)mine, 0, 0};
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (write(fd, h, 8) != 8) {
        close(fd);
        return NULL;
    }
    conn *c = calloc(1, sizeof *c);
    c->fd = fd;
    c->buf = malloc(READ_CAP);
    return c;
}

static void accept_all(endpoint *e)
{
    for (int fd; e->n < MAX_PEERS && (fd = accept4(e->lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0;) {
        conn *c = new_conn(fd, e->mine);
        if (c)
            e->c[e->n++] = c;
    }
}

static void drop(endpoint *e, int i)
{
    close(e->c[i]->fd);
    free(e->c[i]->buf);
    free(e->c[i]->out);
    free(e->c[i]);
    e->c[i] = e->c[--e->n];
}

/* write what the socket takes of c's queue; -1: the connection failed. What it takes leaves
 * the queue by moving out_off: the bytes are moved (to the front) only when the queue needs
 * the room, at most once per queue's worth, never once per write. */
static int write_some(conn *c)
{
    if (c->out_len == c->out_off)
        return 0;
    ssize_t k = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
                     MSG_DONTWAIT | MSG_NOSIGNAL);
    if (k < 0) {
        if (errno != EAGAIN && errno != EINTR)
            return -1;
        c->blocked = errno == EAGAIN;
        return 0;
    }
    c->blocked = 0;
    c->out_off += (size_t)k;
    if (c->out_off == c->out_len)
        c->out_off = c->out_len = 0;
    return 0;
}

#define PUB_BATCH 16384 /* a subscriber's queue is written once it holds this much */
#define PUB_RETRY 64    /* after EAGAIN, the next try comes this many messages later, or
                         * before a message the full queue would drop (each try is a system
                         * call: once per message cost the publisher more CPU than libzmq's,
                         * which waits for its I/O thread's poll) */

/* pub: the frame into every subscriber's queue (a full queue misses it: pub/sub drops) */
static int pub_send(void *arg, const char *body, size_t n)
{
    endpoint *e = arg;
    unsigned char head[8];
    if (n > RECV_CAP)
        return -1;
    put_be64(head, n);
    for (int i = e->n - 1; i >= 0; i--) {
        conn *c = e->c[i];
        /* a full queue tries the socket once more before it drops the message */
        if (c->blocked && c->out_len - c->out_off + n + 8 > e->queue_bytes) {
            if (write_some(c) != 0) {
                drop(e, i);
                continue;
            }
        }
        if (c->out_len - c->out_off + n + 8 <= e->queue_bytes) {
            if (c->out_cap < 2 * e->queue_bytes) {
                c->out_cap = 2 * e->queue_bytes;
                c->out = realloc(c->out, c->out_cap);
            }
            if (c->out_len + n + 8 > c->out_cap) { /* the queue's bytes to the front */
                memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
                c->out_len -= c->out_off;
                c->out_off = 0;
            }
            memcpy(c->out + c->out_len, head, 8);
            memcpy(c->out + c->out_len + 8, body, n);
            c->out_len += n + 8;
        }
        if (c->blocked && c->blocked < PUB_RETRY) {
            c->blocked++;
            continue;
        }
        if (c->out_len - c->out_off >= PUB_BATCH && write_some(c) != 0)
            drop(e, i);
    }
    return 0;
}

/* pub: new subscribers in, every queue written */
static void pub_flush(void *arg)
{
    endpoint *e = arg;
    accept_all(e);
    for (int i = e->n - 1; i >= 0; i--)
        if (write_some(e->c[i]) != 0)
            drop(e, i);
}

/* push: blocking writes of the queued frames */
static void push_flush(void *arg)
{
    endpoint *e = arg;
    conn *c = e->c[0];
    for (size_t at = 0; at < c->out_len;) {
        ssize_t k = send(c->fd, c->out + at, c->out_len - at, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            e->n = 0; /* the connection failed: the next send says so */
            break;
        }
        at += (size_t)k;
    }
    c->out_len = 0;
}

/* push: the frame queued, the queue written (blocking) once it holds PUB_BATCH bytes */
static int push_send(void *arg, const char *body, size_t n)
{
    endpoint *e = arg;
    if (n > RECV_CAP || e->n < 1)
        return -1;
    conn *c = e->c[0];
    if (c->out_cap < PUB_BATCH + 8 + RECV_CAP) {
        c->out_cap = PUB_BATCH + 8 + RECV_CAP;
        c->out = realloc(c->out, c->out_cap);
    }
    put_be64(c->out + c->out_len, n);
    memcpy(c->out + c->out_len + 8, body, n);
    c->out_len += n + 8;
    if (c->out_len >= PUB_BATCH)
        push_flush(e);
    return e->n < 1 ? -1 : 0;
}

/* a whole message buffered in c: 1 (into buf), else 0; -1: a message over the limit */
static int take(conn *c, char *buf, size_t cap, size_t *len)
{
    if (!c->greeted && c->end - c->start >= 8) {
        c->start += 8;
        c->greeted = 1;
    }
    if (!c->greeted || c->end - c->start < 8)
        return 0;
    uint64_t n = get_be64(c->buf + c->start);
    if (n > RECV_CAP || n > cap)
        return -1;
    if (c->end - c->start < 8 + n)
        return 0;
    memcpy(buf, c->buf + c->start + 8, (size_t)n);
    *len = (size_t)n;
    c->start += 8 + (size_t)n;
    return 1;
}

static int recv_any(void **socks, int n, int ms, int *index, char *buf, size_t cap,
                    size_t *len)
{
    static int next; /* round robin over the endpoints */
    for (int pass = 0; pass < 2; pass++) {
        struct pollfd fds[MAX_SUBS + MAX_PEERS];
        conn *of[MAX_SUBS + MAX_PEERS];
        int owner[MAX_SUBS + MAX_PEERS], nfds = 0;
        for (int k = 0; k < n; k++) {
            int i = (next + k) % n;
            endpoint *e = socks[i];
            for (int j = 0; j < e->n; j++) {
                int got = take(e->c[j], buf, cap, len);
                if (got != 0) {
                    *index = i;
                    next = (i + 1) % n;
                    return got;
                }
            }
        }
        if (pass == 1)
            break;
        for (int i = 0; i < n; i++) {
            endpoint *e = socks[i];
            if (e->lfd >= 0 && nfds < MAX_SUBS + MAX_PEERS) {
                of[nfds] = NULL;
                owner[nfds] = i;
                fds[nfds++] = (struct pollfd){e->lfd, POLLIN, 0};
            }
            for (int j = 0; j < e->n && nfds < MAX_SUBS + MAX_PEERS; j++) {
                of[nfds] = e->c[j];
                owner[nfds] = i;
                fds[nfds++] = (struct pollfd){e->c[j]->fd, POLLIN, 0};
            }
        }
        int rv = poll(fds, (nfds_t)nfds, ms);
        if (rv <= 0)
            return rv < 0 && errno != EINTR ? -1 : 0;
        for (int f = 0; f < nfds; f++) {
            if (!fds[f].revents)
                continue;
            endpoint *e = socks[owner[f]];
            conn *c = of[f];
            if (c == NULL) {
                accept_all(e);
                continue;
            }
            if (c->start > 0) {
                memmove(c->buf, c->buf + c->start, c->end - c->start);
                c->end -= c->start;
                c->start = 0;
            }
            ssize_t k = recv(c->fd, c->buf + c->end, READ_CAP - c->end, MSG_DONTWAIT);
            if (k > 0)
                c->end += (size_t)k;
            else if (k == 0 || (errno != EAGAIN && errno != EINTR))
                for (int j = 0; j < e->n; j++)
                    if (e->c[j] == c) {
                        drop(e, j);
                        break;
                    }
        }
    }
    return 0;
}

static void listen_ready(endpoint *e)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    e->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (bind(e->lfd, (void *)&a, sizeof a) != 0 || listen(e->lfd, 128) != 0
        || getsockname(e->lfd, (void *)&a, &alen) != 0)
        die("sp_patterns: cannot listen: %s", strerror(errno));
    ready_url(ntohs(a.sin_port));
}

/* one dialled connection (retried for up to 10 s: the middle may still be starting) */
static void dial(endpoint *e, const char *url)
{
    char host[64];
    int port;
    if (sscanf(url, "tcp://%63[^:]:%d", host, &port) != 2)
        die("sp_patterns: not tcp://HOST:PORT: %s", url);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1)
        die("sp_patterns: not an IPv4 address: %s", host);
    double deadline = now_s() + 10;
    for (;;) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(fd, (void *)&a, sizeof a) == 0) {
            e->lfd = -1;
            e->c[0] = new_conn(fd, e->mine);
            e->n = e->c[0] != NULL;
            if (e->n)
                return;
        } else {
            close(fd);
        }
        if (now_s() > deadline)
            die("sp_patterns: cannot connect to %s: %s", url, strerror(errno));
        sleep_s(0.05);
    }
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "", *url = arg_str(argc, argv, "url", NULL);
    long hwm = arg_int(argc, argv, "hwm", 1000);
    static endpoint eps[MAX_SUBS];
    pattern_wire w = {pub_send, recv_any, pub_flush};
    int rc;
    signal(SIGPIPE, SIG_IGN);
    bounded_life(argc, argv, 0);
    if (strcmp(mode, "pub") == 0) {
        eps[0].mine = PUB0;
        eps[0].queue_bytes = (size_t)(hwm > 0 ? hwm : 1) * 128 + PUB_BATCH; /* (~100 B) */
        listen_ready(&eps[0]);
        rc = run_sender(&w, &eps[0], 1);
    } else if (strcmp(mode, "pull") == 0) {
        eps[0].mine = PULL0;
        listen_ready(&eps[0]);
        rc = run_pull(&w, &eps[0]);
    } else if (strcmp(mode, "push") == 0 && url) {
        eps[0].mine = PUSH0;
        dial(&eps[0], url);
        printf("READY {\"url\": \"%s\"}\n", url);
        fflush(stdout);
        w.send = push_send;
        w.flush = push_flush;
        rc = run_sender(&w, &eps[0], 0);
    } else if (strcmp(mode, "subs") == 0 && url) {
        int count = (int)arg_int(argc, argv, "count", 1);
        void *socks[MAX_SUBS];
        if (count < 1 || count > MAX_SUBS)
            die("sp_patterns subs: 1 <= count <= %d", MAX_SUBS);
        for (int i = 0; i < count; i++) {
            eps[i].mine = SUB0;
            dial(&eps[i], url);
            socks[i] = &eps[i];
        }
        rc = run_subs(&w, socks, count);
    } else {
        die("usage: sp_patterns pub | pull | push url=URL | subs url=URL count=C [hwm=H]");
    }
    _exit(rc);
}
