/* libzmq request-reply load peers of `gateway bench`.
 *
 *   zmq_reqrep echo                     a ROUTER on tcp://127.0.0.1:* that sends every message
 *                                       back to the peer it came from (routing id, empty
 *                                       delimiter, body: a REP's reply); READY {"url"}
 *   zmq_reqrep client url=URL           a DEALER sending [""][body], W in flight (reqrep.h)
 *   zmq_reqrep client url=URL sockets=N N DEALERs (N > 1), each with its own connection and
 *                                       one request in flight, polled by one thread
 *                                       (zmq_poll): N clients as libzmq's users write them;
 *                                       W up to N
 *   zmq_reqrep client url=URL requests=N window=W size=S    one run, one JSON line
 *
 * Both take lifetime=SECONDS (peer.h). Queues hold DEFAULT_HWM messages: above any window.
 */
#include <zmq.h>

#include "reqrep.h"

static int zmq_send_request(void *s, uint32_t slot, const char *body, size_t size, uint32_t id)
{
    (void)slot; /* one socket */
    (void)id; /* ZeroMQ has no request id: the DEALER's replies come back by its connection */
    if (zmq_send(s, "", 0, ZMQ_SNDMORE) != 0)
        return -1;
    return zmq_send(s, body, size, 0) == (int)size ? 0 : -1;
}

/* a reply ([delimiter][body]) from `s` (flags: 0 or ZMQ_DONTWAIT): 1, 0 (none), or -1 */
static int recv_on(void *s, int flags, char *buf, size_t cap, size_t *len, char *why)
{
    char delimiter[1];
    int more;
    size_t more_size = sizeof more;
    int n = zmq_recv(s, delimiter, sizeof delimiter, flags);
    if (n < 0) {
        if (errno == EAGAIN || errno == EINTR)
            return 0;
        snprintf(why, 160, "%s", zmq_strerror(errno));
        return -1;
    }
    zmq_getsockopt(s, ZMQ_RCVMORE, &more, &more_size);
    if (n != 0 || !more) {
        snprintf(why, 160, "a reply without the empty delimiter frame");
        return -1;
    }
    n = zmq_recv(s, buf, cap, 0); /* (the rest of a message is there once its first frame is) */
    zmq_getsockopt(s, ZMQ_RCVMORE, &more, &more_size);
    if (n < 0 || more) {
        snprintf(why, 160, "a reply of more than [delimiter][body]");
        return -1;
    }
    *len = (size_t)n;
    return 1;
}

static int zmq_recv_reply(void *s, char *buf, size_t cap, size_t *len, uint32_t *id, char *why)
{
    *id = 0;
    return recv_on(s, 0, buf, cap, len, why);
}

/* N DEALERs polled by one thread: slot k's requests go on socket k */
typedef struct {
    void **socks;
    zmq_pollitem_t *items;
    int n, next; /* next: the first polled item not yet read */
} dealers;

static int dealers_send(void *arg, uint32_t slot, const char *body, size_t size, uint32_t id)
{
    dealers *d = arg;
    return slot < (uint32_t)d->n ? zmq_send_request(d->socks[slot], 0, body, size, id) : -1;
}

/* the next reply of any socket: those the last zmq_poll found readable first, then a new
 * poll (at most 200 ms) */
static int dealers_recv(void *arg, char *buf, size_t cap, size_t *len, uint32_t *id, char *why)
{
    dealers *d = arg;
    *id = 0;
    for (int polls = 0; polls < 2; polls++) {
        for (; d->next < d->n; d->next++) {
            if (!(d->items[d->next].revents & ZMQ_POLLIN))
                continue;
            int got = recv_on(d->socks[d->next], ZMQ_DONTWAIT, buf, cap, len, why);
            if (got != 0) {
                d->items[d->next].revents = 0; /* (one request in flight per socket) */
                return got;
            }
        }
        int rc = zmq_poll(d->items, d->n, 200);
        if (rc < 0 && errno != EINTR) {
            snprintf(why, 160, "zmq_poll: %s", zmq_strerror(errno));
            return -1;
        }
        d->next = 0;
        if (rc <= 0)
            return 0;
    }
    return 0;
}

static void *new_socket(void *ctx, int type)
{
    void *s = zmq_socket(ctx, type);
    int hwm = DEFAULT_HWM, linger = 0;
    zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(s, ZMQ_RCVHWM, &hwm, sizeof hwm);
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    return s;
}

static _Noreturn void echo(void *ctx)
{
    void *s = new_socket(ctx, ZMQ_ROUTER);
    char url[256];
    size_t size = sizeof url;
    if (zmq_bind(s, "tcp://127.0.0.1:*") != 0)
        die("zmq_reqrep echo: cannot bind: %s", zmq_strerror(errno));
    zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, url, &size);
    ready_url(atoi(strrchr(url, ':') + 1));
    zmq_msg_t part;
    zmq_msg_init(&part);
    for (;;) { /* each frame goes back as it came: the routing id first, so to its sender */
        if (zmq_msg_recv(&part, s, 0) < 0)
            continue;
        zmq_msg_send(&part, s, zmq_msg_more(&part) ? ZMQ_SNDMORE : 0);
    }
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    void *ctx = zmq_ctx_new();
    if (strcmp(mode, "echo") == 0) {
        bounded_life(argc, argv, 1);
        echo(ctx);
    }
    if (strcmp(mode, "client") != 0)
        die("usage: zmq_reqrep echo | client url=URL [requests=N window=W size=S]");
    bounded_life(argc, argv, 0);
    const char *url = arg_str(argc, argv, "url", NULL);
    if (!url)
        die("zmq_reqrep client: url= is required");
    long sockets = arg_int(argc, argv, "sockets", 1);
    if (sockets < 1 || sockets > MAX_WINDOW)
        die("zmq_reqrep client: sockets= must be 1..%d", MAX_WINDOW);
    void **socks = calloc((size_t)sockets, sizeof *socks);
    zmq_pollitem_t *items = calloc((size_t)sockets, sizeof *items);
    for (long i = 0; i < sockets; i++) {
        void *s = socks[i] = new_socket(ctx, ZMQ_DEALER);
        int rcvtimeo = 200, sndtimeo = 60000;
        zmq_setsockopt(s, ZMQ_RCVTIMEO, &rcvtimeo, sizeof rcvtimeo);
        zmq_setsockopt(s, ZMQ_SNDTIMEO, &sndtimeo, sizeof sndtimeo);
        if (zmq_connect(s, url) != 0)
            die("zmq_reqrep client: cannot connect to %s: %s", url, zmq_strerror(errno));
        items[i] = (zmq_pollitem_t){.socket = s, .events = ZMQ_POLLIN};
    }
    dealers d = {socks, items, (int)sockets, (int)sockets};
    wire w = {.sock = socks[0], .send = zmq_send_request, .recv = zmq_recv_reply};
    if (sockets > 1)
        w = (wire){.sock = &d, .send = dealers_send, .recv = dealers_recv, .sockets = sockets};
    int rc = client_main(argc, argv, &w, url);
    for (long i = 0; i < sockets; i++)
        zmq_close(socks[i]); /* linger 0: nothing waits */
    _exit(rc);
}
