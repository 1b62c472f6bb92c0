/* The floor of a request-reply middle (`gateway bench --routes real`, floor-F-B-real): a
 * measurement tool, not a product. One thread, one epoll loop, plain sockets, no library: the
 * least a middle must do to carry requests from one family's clients to the other family's
 * server and the replies back, with the gateway's own envelope translation (what
 * gateway/_kernel_reqrep.pxi and _kernel_write.pxi write on each route):
 *
 *   zmq->zmq  [""][body] from a DEALER   -> [routing id 00+u32][""][body] to the ROUTER echo;
 *             [routing id][""][body]      -> [""][body] to the client of that routing id
 *   zmq->sp   [""][body] from a DEALER   -> SP [token][body] (token: 31 bits, top bit set,
 *             the client parked under it); SP [token][body] -> [""][body] to that client
 *   sp->zmq   SP [request id][body]      -> [pipe id][request id][""][body] (pipe id: 4 bytes,
 *             top bit clear); [pipe id][request id][""][body] -> SP [request id][body]
 *   sp->sp    SP [request id][body]      -> SP [pipe id][request id][body]; the reply's first
 *             word routes it, the rest goes back
 *
 * Front: a listener on tcp://127.0.0.1:0 speaking ZMTP 3.x NULL as a ROUTER to libzmq DEALERs,
 * or SP/TCP as a raw rep0 to req0 peers. Back: one connection to server= as a ZMTP DEALER or a
 * raw SP req0. Each ready socket gets one recv into a buffer of 128 KiB free at least per
 * loop turn (grown for a large message), and every destination one send per turn with all it
 * got in that turn. TCP_NODELAY everywhere, as the
 * gateway sets it. The handshakes block (bounded by 5 s): connections come before the traffic.
 *
 * What a floor leaves out (the gateway does it): hop limits and backtraces of more than one
 * word, ZeroMQ app envelope frames before the delimiter (a zmq->sp request must be [""][body]),
 * in-flight accounting, metrics, logs beyond a drop line, reconnection. Anything it does not
 * carry is dropped with a line on stderr (the first 10) and counted; a server that goes away
 * ends it.
 *
 *   relay_floor zmq-zmq|zmq-sp|sp-zmq|sp-sp server=tcp://127.0.0.1:PORT [lifetime=SECONDS]
 *       READY {"url": "tcp://127.0.0.1:FRONT_PORT"}, then relays until its stdin closes.
 */
#define _GNU_SOURCE /* accept4 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "peer.h"

#define MAX_FRONT 256       /* front connections (the bench's clients: 1 DEALER, 64 req0) */
#define BUF_START (256u << 10) /* each buffer's first size: one recv's room at least */
#define MAX_MESSAGE ((64u << 20) + 1024) /* a message (the nng peers take 64 MiB bodies) */
#define MAX_OUT (256u << 20) /* what one destination may hold */
#define MAX_FRAMES 16       /* frames of one ZeroMQ message */
#define TOKENS 4096         /* zmq->sp requests in flight (a power of two) */
#define SP_REQ0 0x30
#define SP_REP0 0x31

typedef struct {
    int fd, zmtp;                /* fd -1: free slot; zmtp: ZMTP framing, else SP */
    unsigned char *in, *out;
    size_t in_len, out_len, in_cap, out_cap;
    int dirty, blocked;          /* dirty: out has bytes of this turn; blocked: waits EPOLLOUT */
} conn;

typedef struct {
    const unsigned char *p;
    size_t n;
} frame;

static conn conns[MAX_FRONT + 1]; /* the front's, then the back's */
static conn *const back = &conns[MAX_FRONT];
static conn *dirty[MAX_FRONT + 1];
static int ndirty, epfd, front_zmtp;
static long drops;
static struct {
    uint32_t seq; /* 0: free */
    int conn;
} tokens[TOKENS];
static uint32_t token_seq;

static int drop(const char *why)
{
    if (++drops <= 10)
        fprintf(stderr, "relay_floor: drop %s (%ld so far)\n", why, drops);
    return 0;
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 3; i >= 0; i--, v >>= 8)
        p[i] = (unsigned char)v;
}

/* ---- output: bytes for one destination, sent once at the end of the loop turn ---- */

/* `buf` of `*cap` bytes made at least `need` (doubling), or 0 */
static int grow(unsigned char **buf, size_t *cap, size_t need)
{
    size_t to = *cap;
    while (to < need)
        to *= 2;
    unsigned char *b = to == *cap ? *buf : realloc(*buf, to);
    if (!b)
        return 0;
    *buf = b;
    *cap = to;
    return 1;
}

static unsigned char *reserve(conn *c, size_t n)
{
    if (c->fd < 0 || c->out_len + n > MAX_OUT || !grow(&c->out, &c->out_cap, c->out_len + n))
        return NULL;
    if (!c->dirty && !c->blocked) {
        c->dirty = 1;
        dirty[ndirty++] = c;
    }
    unsigned char *at = c->out + c->out_len;
    c->out_len += n;
    return at;
}

static size_t zframe_size(size_t n) { return n + (n <= 255 ? 2 : 9); }

static unsigned char *zframe(unsigned char *at, const void *data, size_t n, int more)
{
    if (n <= 255) {
        at[0] = more ? 1 : 0;
        at[1] = (unsigned char)n;
        at += 2;
    } else {
        at[0] = more ? 3 : 2;
        put_be64(at + 1, n);
        at += 9;
    }
    if (n)
        memcpy(at, data, n);
    return at + n;
}

static unsigned char *sp_head(conn *c, size_t payload)
{
    unsigned char *at = reserve(c, 8 + payload);
    if (at)
        put_be64(at, payload);
    return at ? at + 8 : NULL;
}

static void close_conn(conn *c, const char *why)
{
    if (c == back)
        die("relay_floor: the server's connection ended: %s", why);
    epoll_ctl(epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->fd = -1;
    c->in_len = c->out_len = 0;
    c->blocked = 0; /* (a dirty one stays listed: flush skips it) */
}

static void flush(conn *c)
{
    size_t sent = 0;
    while (c->fd >= 0 && sent < c->out_len) {
        ssize_t k = send(c->fd, c->out + sent, c->out_len - sent, MSG_NOSIGNAL);
        if (k > 0) {
            sent += (size_t)k;
            continue;
        }
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && errno == EAGAIN)
            break;
        close_conn(c, k == 0 ? "send returned 0" : strerror(errno));
        return;
    }
    if (c->fd < 0)
        return;
    memmove(c->out, c->out + sent, c->out_len - sent);
    c->out_len -= sent;
    int blocked = c->out_len > 0;
    if (blocked != c->blocked) { /* (the rest when the socket takes it) */
        struct epoll_event ev = {.events = EPOLLIN | (blocked ? EPOLLOUT : 0),
                                 .data.ptr = c};
        epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev);
        c->blocked = blocked;
    }
}

/* ---- the four translations ---- */

static int front_index(const conn *c) { return (int)(c - conns); }

/* a front client's request: an SP payload (n bytes), or ZeroMQ frames */
static int request(conn *from, const unsigned char *p, size_t n, frame *f, int nf)
{
    unsigned char *at;
    uint32_t id = (uint32_t)front_index(from);
    if (!from->zmtp) { /* [request id][body]: a direct req0 client's one-word backtrace */
        if (n < 4 || !(p[0] & 0x80))
            return drop("an SP request of more than one backtrace word");
        if (!back->zmtp) { /* sp->sp */
            if (!(at = sp_head(back, 4 + n)))
                return drop("the server's output is full");
            put32(at, id);
            memcpy(at + 4, p, n);
            return 1;
        } /* sp->zmq */
        if (!(at = reserve(back, 2 * zframe_size(4) + zframe_size(0) + zframe_size(n - 4))))
            return drop("the server's output is full");
        unsigned char pipe[4];
        put32(pipe, id);
        at = zframe(at, pipe, 4, 1);
        at = zframe(at, p, 4, 1);
        at = zframe(at, NULL, 0, 1);
        zframe(at, p + 4, n - 4, 0);
        return 1;
    }
    if (nf < 2 || f[0].n != 0) /* [""][body...] from a DEALER */
        return drop("a ZeroMQ request that is not [\"\"][body]");
    if (back->zmtp) { /* zmq->zmq: the routing id, then the frames as they came */
        size_t need = zframe_size(5);
        for (int i = 0; i < nf; i++)
            need += zframe_size(f[i].n);
        if (!(at = reserve(back, need)))
            return drop("the server's output is full");
        unsigned char rid[5] = {0};
        put32(rid + 1, id);
        at = zframe(at, rid, 5, 1);
        for (int i = 0; i < nf; i++)
            at = zframe(at, f[i].p, f[i].n, i < nf - 1);
        return 1;
    } /* zmq->sp: [token][body], the client parked under the token */
    if (nf != 2)
        return drop("a ZeroMQ request of several body frames to SP");
    token_seq = (token_seq + 1) & 0x7fffffff;
    uint32_t seq = token_seq ? token_seq : (token_seq = 1);
    int slot = (int)(seq & (TOKENS - 1));
    if (tokens[slot].seq)
        return drop("the token table is full");
    if (!(at = sp_head(back, 4 + f[1].n)))
        return drop("the server's output is full");
    tokens[slot].seq = seq;
    tokens[slot].conn = (int)id;
    put32(at, 0x80000000u | seq);
    memcpy(at + 4, f[1].p, f[1].n);
    return 1;
}

/* the server's reply: an SP payload, or ZeroMQ frames */
static int reply(const unsigned char *p, size_t n, frame *f, int nf)
{
    unsigned char *at;
    conn *to;
    if (!back->zmtp) {
        if (n < 4)
            return drop("an SP reply without a word");
        uint32_t word = be32(p);
        if (front_zmtp) { /* zmq->sp: [token][body] -> [""][body] */
            uint32_t seq = word & 0x7fffffff;
            int slot = (int)(seq & (TOKENS - 1));
            if (!(word & 0x80000000u) || tokens[slot].seq != seq)
                return drop("an SP reply with an unknown token");
            tokens[slot].seq = 0;
            to = &conns[tokens[slot].conn];
            if (!(at = reserve(to, zframe_size(0) + zframe_size(n - 4))))
                return drop("the client is gone or its output is full");
            at = zframe(at, NULL, 0, 1);
            zframe(at, p + 4, n - 4, 0);
            return 1;
        } /* sp->sp: [pipe id][request id][body] -> [request id][body] */
        if (word >= MAX_FRONT || n < 8)
            return drop("an SP reply with no pipe id of ours");
        if (!(at = sp_head(&conns[word], n - 4)))
            return drop("the client is gone or its output is full");
        memcpy(at, p + 4, n - 4);
        return 1;
    }
    if (nf < 1 || f[0].n != (front_zmtp ? 5u : 4u))
        return drop("a ZeroMQ reply without our routing id");
    uint32_t id = be32(f[0].p + f[0].n - 4);
    if (id >= MAX_FRONT)
        return drop("a ZeroMQ reply with a routing id not ours");
    to = &conns[id];
    if (front_zmtp) { /* zmq->zmq: the frames after the routing id, as they came */
        size_t need = 0;
        for (int i = 1; i < nf; i++)
            need += zframe_size(f[i].n);
        if (nf < 2 || !(at = reserve(to, need)))
            return drop("the client is gone or its output is full");
        for (int i = 1; i < nf; i++)
            at = zframe(at, f[i].p, f[i].n, i < nf - 1);
        return 1;
    } /* sp->zmq: [pipe id][request id][""][body] -> SP [request id][body] */
    if (nf != 4 || f[1].n != 4 || !(f[1].p[0] & 0x80) || f[2].n != 0)
        return drop("a ZeroMQ reply that is not [pipe id][request id][\"\"][body]");
    if (!(at = sp_head(to, 4 + f[3].n)))
        return drop("the client is gone or its output is full");
    memcpy(at, f[1].p, 4);
    memcpy(at + 4, f[3].p, f[3].n);
    return 1;
}

static void message(conn *c, const unsigned char *p, size_t n, frame *f, int nf)
{
    (void)(c == back ? reply(p, n, f, nf) : request(c, p, n, f, nf));
}

/* ---- input: every whole message of a connection's buffer; the bytes used ---- */

static size_t parse_sp(conn *c)
{
    size_t pos = 0;
    while (c->in_len - pos >= 8) {
        uint64_t n = get_be64(c->in + pos);
        if (n > MAX_MESSAGE) {
            close_conn(c, "an SP message over the buffer");
            return 0;
        }
        if (c->in_len - pos < 8 + n)
            break;
        message(c, c->in + pos + 8, (size_t)n, NULL, 0);
        pos += 8 + (size_t)n;
    }
    return pos;
}

static size_t parse_zmtp(conn *c)
{
    size_t pos = 0, at = 0; /* pos: the start of the message being read */
    frame f[MAX_FRAMES];
    int nf = 0;
    for (;;) {
        if (c->in_len - at < 2)
            return pos;
        unsigned flags = c->in[at];
        size_t head = flags & 2 ? 9 : 2;
        if (c->in_len - at < head)
            return pos;
        uint64_t n = flags & 2 ? get_be64(c->in + at + 1) : c->in[at + 1];
        if (n > MAX_MESSAGE) {
            close_conn(c, "a ZeroMQ frame over the buffer");
            return 0;
        }
        if (c->in_len - at < head + n)
            return pos;
        if (flags & 4) { /* a command (PING...): not a frame of a message */
            at += head + (size_t)n;
            if (nf == 0)
                pos = at;
            continue;
        }
        if (nf < MAX_FRAMES)
            f[nf] = (frame){c->in + at + head, (size_t)n};
        nf++;
        at += head + (size_t)n;
        if (flags & 1)
            continue;
        if (nf > MAX_FRAMES)
            drop("a ZeroMQ message of too many frames");
        else
            message(c, NULL, 0, f, nf);
        nf = 0;
        pos = at;
    }
}

static void readable(conn *c)
{
    /* (room for a recv of BUF_START / 2 at least: a large message grows the buffer) */
    if (!grow(&c->in, &c->in_cap, c->in_len + BUF_START / 2))
        die("relay_floor: out of memory");
    ssize_t k = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
    if (k < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (k <= 0) {
        close_conn(c, k == 0 ? "closed by the peer" : strerror(errno));
        return;
    }
    c->in_len += (size_t)k;
    size_t used = c->zmtp ? parse_zmtp(c) : parse_sp(c);
    if (c->fd < 0)
        return;
    memmove(c->in, c->in + used, c->in_len - used);
    c->in_len -= used;
}

/* ---- handshakes (blocking, bounded) ---- */

static int recv_all(int fd, void *buf, size_t n)
{
    return recv(fd, buf, n, MSG_WAITALL) == (ssize_t)n ? 0 : -1;
}

static int send_all(int fd, const void *buf, size_t n)
{
    return send(fd, buf, n, MSG_NOSIGNAL) == (ssize_t)n ? 0 : -1;
}

/* ZMTP 3.x NULL as `type` (ROUTER or DEALER): our greeting and READY, then the peer's */
static int zmtp_handshake(int fd, const char *type)
{
    unsigned char g[64] = {0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 3, 1, 'N', 'U', 'L', 'L'};
    unsigned char ready[64], *at = ready + 2;
    size_t tn = strlen(type);
    memcpy(at, "\5READY\13Socket-Type", 18);
    put32(at + 18, (uint32_t)tn);
    memcpy(at + 22, type, tn);
    at += 22 + tn;
    memcpy(at, "\10Identity\0\0\0\0", 13); /* (empty, as libzmq's) */
    at += 13;
    ready[0] = 4;
    ready[1] = (unsigned char)(at - ready - 2);
    unsigned char h[2], body[256]; /* (a short frame) */
    if (send_all(fd, g, 64) || send_all(fd, ready, (size_t)(at - ready)) || recv_all(fd, g, 64))
        return -1;
    if (g[0] != 0xff || g[9] != 0x7f || g[10] < 3 || memcmp(g + 12, "NULL", 5) != 0)
        return -1;
    if (recv_all(fd, h, 2) || h[0] != 4 || recv_all(fd, body, h[1]))
        return -1;
    return memcmp(body, "\5READY", 6) == 0 ? 0 : -1;
}

static int sp_handshake(int fd, int mine, int theirs)
{
    unsigned char h[8] = {0, 'S', 'P', 0, 0, (unsigned char)mine, 0, 0}, got[8];
    if (send_all(fd, h, 8) || recv_all(fd, got, 8))
        return -1;
    return memcmp(got, "\0SP\0\0", 5) == 0 && got[5] == theirs ? 0 : -1;
}

static void setup(int fd, int zmtp, const char *type, int mine, int theirs, conn *c,
                  const char *what)
{
    int one = 1;
    struct timeval tv = {5, 0};
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if ((zmtp ? zmtp_handshake(fd, type) : sp_handshake(fd, mine, theirs)) != 0) {
        if (c == back)
            die("relay_floor: no %s handshake with the server", what);
        fprintf(stderr, "relay_floor: a client without a %s handshake: closed\n", what);
        close(fd);
        return;
    }
    struct timeval none = {0, 0}; /* (the loop never blocks on a socket) */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof none);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &none, sizeof none);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    if (!c->in) {
        c->in_cap = c->out_cap = BUF_START;
        if (!(c->in = malloc(BUF_START)) || !(c->out = malloc(BUF_START)))
            die("relay_floor: out of memory");
    }
    *c = (conn){.fd = fd, .zmtp = zmtp, .in = c->in, .out = c->out, .in_cap = c->in_cap,
                .out_cap = c->out_cap};
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
}

static void accept_front(int lfd, int zmtp)
{
    int fd;
    while ((fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) >= 0) {
        int slot = 0;
        while (slot < MAX_FRONT && conns[slot].fd >= 0)
            slot++;
        if (slot == MAX_FRONT) {
            fprintf(stderr, "relay_floor: over %d clients: one refused\n", MAX_FRONT);
            close(fd);
            continue;
        }
        setup(fd, zmtp, "ROUTER", SP_REP0, SP_REQ0, &conns[slot], zmtp ? "ZMTP" : "SP");
    }
}

static int tcp_socket(struct sockaddr_in *a, const char *url)
{
    char host[64];
    int port;
    if (sscanf(url, "tcp://%63[^:]:%d", host, &port) != 2)
        die("relay_floor: server= must be tcp://HOST:PORT, not %s", url);
    *a = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &a->sin_addr) != 1)
        die("relay_floor: not an IPv4 address: %s", host);
    return socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
}

int main(int argc, char **argv)
{
    const char *route = argc > 1 ? argv[1] : "";
    const char *server = arg_str(argc, argv, "server", NULL);
    const char *routes[] = {"zmq-zmq", "zmq-sp", "sp-zmq", "sp-sp"};
    int r = 0;
    while (r < 4 && strcmp(route, routes[r]) != 0)
        r++;
    if (r == 4 || !server)
        die("usage: relay_floor zmq-zmq|zmq-sp|sp-zmq|sp-sp server=tcp://HOST:PORT "
            "[lifetime=SECONDS]");
    int back_zmtp = r % 2 == 0;
    front_zmtp = r < 2;
    bounded_life(argc, argv, 1);
    for (int i = 0; i <= MAX_FRONT; i++)
        conns[i].fd = -1;
    if ((epfd = epoll_create1(EPOLL_CLOEXEC)) < 0)
        die("relay_floor: epoll_create1: %s", strerror(errno));

    struct sockaddr_in a;
    int bfd = tcp_socket(&a, server);
    if (connect(bfd, (void *)&a, sizeof a) != 0)
        die("relay_floor: cannot connect to %s: %s", server, strerror(errno));
    setup(bfd, back_zmtp, "DEALER", SP_REQ0, SP_REP0, back, back_zmtp ? "ZMTP" : "SP");

    int lfd = tcp_socket(&a, "tcp://127.0.0.1:0"), one = 1;
    socklen_t len = sizeof a;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(lfd, (void *)&a, sizeof a) != 0 || listen(lfd, 512) != 0
        || getsockname(lfd, (void *)&a, &len) != 0)
        die("relay_floor: cannot listen: %s", strerror(errno));
    fcntl(lfd, F_SETFL, fcntl(lfd, F_GETFL) | O_NONBLOCK);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL}, evs[256];
    epoll_ctl(epfd, EPOLL_CTL_ADD, lfd, &ev);
    ready_url(ntohs(a.sin_port));

    for (;;) {
        int n = epoll_wait(epfd, evs, 256, -1);
        if (n < 0 && errno != EINTR)
            die("relay_floor: epoll_wait: %s", strerror(errno));
        for (int i = 0; i < n; i++) {
            conn *c = evs[i].data.ptr;
            if (!c) {
                accept_front(lfd, front_zmtp);
                continue;
            }
            if (c->fd >= 0 && (evs[i].events & EPOLLOUT))
                flush(c);
            if (c->fd >= 0 && (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)))
                readable(c);
        }
        for (int i = 0; i < ndirty; i++) { /* one send per destination per turn */
            dirty[i]->dirty = 0;
            if (dirty[i]->fd >= 0 && !dirty[i]->blocked)
                flush(dirty[i]);
        }
        ndirty = 0;
    }
}
