/* nng's request-reply peers shaped as nng's users write them (`gateway bench --routes real`):
 * cooked sockets, contexts and aio callbacks, one message per send, as in nng's
 * demo/async/server.c and demo/async/client.c. (nng_reqrep.c's raw sockets with thousands of
 * requests in flight on one connection are the bench's, not an application's.)
 *
 *   nng_shapes server [contexts=N]      a cooked rep0 on tcp://127.0.0.1:0 with N contexts
 *                                       (default 64), each a request-reply loop of aio
 *                                       callbacks: receive on the context, send the request's
 *                                       body back on it, receive again; READY {"url"}
 *   nng_shapes client url=URL [sockets=N]   N cooked req0 sockets (default 64), each dialled
 *                                       on its own connection with one request in flight (the
 *                                       reply's callback sends that socket's next request): N
 *                                       copies of demo/async/client.c in one process; W up to N
 *                                       (reqrep.h); latency on socket 0, blocking
 *   nng_shapes client url=URL requests=N window=W size=S    one run, one JSON line
 *
 * Both take lifetime=SECONDS (peer.h). Messages up to MAX_BODY bytes (nng's default limit is
 * 1 MiB: a 1 MiB body and its request id would be refused).
 */
#include "nng_peer.h" /* (nng.h, before the protocols' headers) */
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>

#include "reqrep.h"

#define MAX_BODY (64u << 20)
#define DEFAULT_PARALLEL 64

/* ---- the server: demo/async/server.c without its sleep ---- */

struct work {
    enum { RECV, SEND } state;
    nng_aio *aio;
    nng_ctx ctx;
};

static void server_cb(void *arg)
{
    struct work *w = arg;
    int rv = nng_aio_result(w->aio);
    if (w->state == RECV) {
        if (rv == NNG_ECLOSED)
            return;
        if (rv != 0) /* (as the demo: fatal) */
            die("nng_shapes server: nng_ctx_recv: %s", nng_strerror(rv));
        nng_msg *msg = nng_aio_get_msg(w->aio); /* the reply is the request's body */
        nng_aio_set_msg(w->aio, msg);
        w->state = SEND;
        nng_ctx_send(w->ctx, w->aio);
        return;
    }
    if (rv != 0) { /* (the reply's client went away: the message is still ours) */
        nng_msg_free(nng_aio_get_msg(w->aio));
        if (rv == NNG_ECLOSED)
            return;
    }
    w->state = RECV;
    nng_ctx_recv(w->ctx, w->aio);
}

static _Noreturn void server(long parallel)
{
    nng_socket s;
    int rv;
    if ((rv = nng_rep0_open(&s)) != 0)
        die("nng_shapes server: nng_rep0_open: %s", nng_strerror(rv));
    nng_socket_set_size(s, NNG_OPT_RECVMAXSZ, MAX_BODY);
    struct work *works = calloc((size_t)parallel, sizeof *works);
    for (long i = 0; i < parallel; i++) {
        if ((rv = nng_aio_alloc(&works[i].aio, server_cb, &works[i])) != 0
            || (rv = nng_ctx_open(&works[i].ctx, s)) != 0)
            die("nng_shapes server: a context: %s", nng_strerror(rv));
        works[i].state = RECV;
        nng_ctx_recv(works[i].ctx, works[i].aio); /* (waits for the first pipe's requests) */
    }
    listen_ready(s, "nng_shapes server");
    for (;;)
        pause(); /* (the callbacks run on nng's threads; peer.h ends the process) */
}

/* ---- the client: N req0 sockets, one request in flight each, driven by aio callbacks ---- */

typedef struct run run;

typedef struct {
    nng_socket s;
    nng_aio *aio;
    uint32_t slot, id;
    enum { IDLE, SENDING, RECEIVING } state;
    run *r;
} conn;

struct run {
    conn *conns;
    long n, size, window;
    const char *body; /* the request body's bytes after its tag */
    long sent, done; /* (atomic) */
    int stop;        /* (atomic) no new request: done, failed or out of time */
    long idle;       /* connections with nothing in flight (under mu) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    long errors;
    char error[200];
};

static void wake(run *r)
{
    pthread_mutex_lock(&r->mu);
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

static void fail(run *r, const char *fmt, const char *what)
{
    pthread_mutex_lock(&r->mu);
    if (!r->errors++)
        snprintf(r->error, sizeof r->error, fmt, what);
    __atomic_store_n(&r->stop, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&r->mu);
}

/* the connection has nothing in flight any more (its callback's last use of the run) */
static void rest(conn *c)
{
    run *r = c->r;
    pthread_mutex_lock(&r->mu);
    c->state = IDLE;
    r->idle++;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

/* the connection's next request (a new message, as an application makes one per request) */
static int send_next(conn *c)
{
    run *r = c->r;
    nng_msg *m;
    if (nng_msg_alloc(&m, (size_t)r->size) != 0)
        return -1;
    char *body = nng_msg_body(m);
    memcpy(body, r->body, (size_t)r->size);
    c->id = next_id();
    tag(body, c->slot, c->id);
    nng_aio_set_msg(c->aio, m);
    c->state = SENDING;
    nng_send_aio(c->s, c->aio);
    return 0;
}

static void client_cb(void *arg)
{
    conn *c = arg;
    run *r = c->r;
    int rv = nng_aio_result(c->aio);
    if (c->state == SENDING) {
        if (rv != 0) {
            nng_msg_free(nng_aio_get_msg(c->aio));
            if (rv != NNG_ECANCELED || !__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE))
                fail(r, "send failed: %s", nng_strerror(rv));
            rest(c);
            return;
        }
        if (__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) { /* (its reply is not waited for) */
            rest(c);
            return;
        }
        c->state = RECEIVING;
        nng_recv_aio(c->s, c->aio);
        return;
    }
    if (rv != 0) {
        if (rv != NNG_ECANCELED || !__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE))
            fail(r, "receive failed: %s", nng_strerror(rv));
        rest(c);
        return;
    }
    nng_msg *m = nng_aio_get_msg(c->aio);
    uint32_t ids[1] = {c->id}, slot;
    const char *bad = "a reply for another socket";
    uint32_t got_slot = UINT32_MAX;
    if (nng_msg_len(m) >= TAG_BYTES)
        memcpy(&got_slot, nng_msg_body(m), 4);
    if (got_slot == c->slot) { /* (check_reply's slot 0 is this socket's only request) */
        char *reply = nng_msg_body(m);
        memset(reply, 0, 4);
        bad = check_reply(reply, nng_msg_len(m), 0, r->body, (size_t)r->size, ids, 1, 0, &slot);
    }
    nng_msg_free(m);
    if (*bad) {
        fail(r, "after a reply: %s", bad);
        rest(c);
        return;
    }
    if (__atomic_add_fetch(&r->done, 1, __ATOMIC_ACQ_REL) == r->n)
        wake(r);
    if (__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)
        || __atomic_add_fetch(&r->sent, 1, __ATOMIC_ACQ_REL) > r->n || send_next(c) != 0) {
        rest(c);
    }
}

typedef struct {
    conn *conns;
    long sockets;
} req_sockets;

/* W requests in flight, one per socket; the run lives on the heap and is freed once every
 * callback has rested (a socket that never comes back keeps it: the run is reported failed) */
static tput_result aio_tput(wire *w, long window, long n, long size, double timeout)
{
    req_sockets *rs = w->sock;
    tput_result res = {0};
    char *body = malloc((size_t)size);
    run *r = calloc(1, sizeof *r);
    memset(body, 'x', (size_t)size);
    tag(body, 0, 0);
    *r = (run){.conns = rs->conns, .n = n, .size = size, .window = window < n ? window : n,
               .body = body};
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    double t0 = now_s(), cpu0 = cpu_s(), deadline = t0 + timeout;
    r->sent = r->window;
    r->idle = window - r->window;
    for (long i = 0; i < r->window; i++) {
        conn *c = &rs->conns[i];
        c->r = r;
        nng_aio_set_timeout(c->aio, (nng_duration)(timeout * 1000) + 5000);
        if (send_next(c) != 0) {
            fail(r, "%s", "cannot make a request");
            pthread_mutex_lock(&r->mu);
            r->idle += r->window - i;
            pthread_mutex_unlock(&r->mu);
            break;
        }
    }
    pthread_mutex_lock(&r->mu);
    for (;;) {
        long done = __atomic_load_n(&r->done, __ATOMIC_ACQUIRE);
        if ((done >= n || r->errors) && r->idle >= window) /* every callback has rested */
            break;
        if (now_s() > deadline && !r->stop) { /* out of time: stop what is in flight */
            res.timed_out = 1;
            __atomic_store_n(&r->stop, 1, __ATOMIC_RELEASE);
            pthread_mutex_unlock(&r->mu);
            for (long i = 0; i < r->window; i++)
                nng_aio_cancel(rs->conns[i].aio);
            pthread_mutex_lock(&r->mu);
        }
        if (res.timed_out && r->idle >= window)
            break;
        if (now_s() > deadline + 10) { /* a callback that never came: say so, give up */
            snprintf(res.error, sizeof res.error, "%ld of %ld sockets never came back",
                     window - r->idle, window);
            res.errors++;
            break;
        }
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_nsec += 100 * 1000000;
        if (t.tv_nsec >= 1000000000) {
            t.tv_sec++;
            t.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&r->cv, &r->mu, &t);
    }
    res.elapsed = now_s() - t0;
    res.cpu = cpu_s() - cpu0;
    res.n = __atomic_load_n(&r->done, __ATOMIC_ACQUIRE);
    int stuck = r->idle < window;
    if (r->errors) {
        res.errors += r->errors;
        memcpy(res.error, r->error, sizeof res.error);
    }
    pthread_mutex_unlock(&r->mu);
    if (stuck) /* (a callback may still use the run: it stays) */
        return res;
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
    free(body);
    free(r);
    return res;
}

/* latency: one request at a time on socket 0, blocking (nng_sendmsg, nng_recvmsg) */
static int lat_send(void *arg, uint32_t slot, const char *body, size_t size, uint32_t id)
{
    req_sockets *rs = arg;
    nng_msg *m;
    (void)slot;
    (void)id; /* (a cooked req0 makes its own request ids) */
    if (nng_msg_alloc(&m, 0) != 0)
        return -1;
    if (nng_msg_append(m, body, size) != 0 || nng_sendmsg(rs->conns[0].s, m, 0) != 0) {
        nng_msg_free(m);
        return -1;
    }
    return 0;
}

static int lat_recv(void *arg, char *buf, size_t cap, size_t *len, uint32_t *id, char *why)
{
    req_sockets *rs = arg;
    nng_msg *m;
    *id = 0;
    int rv = nng_recvmsg(rs->conns[0].s, &m, 0);
    if (rv == NNG_ETIMEDOUT)
        return 0;
    if (rv != 0) {
        snprintf(why, 160, "%s", nng_strerror(rv));
        return -1;
    }
    *len = nng_msg_len(m);
    memcpy(buf, nng_msg_body(m), *len < cap ? *len : cap);
    nng_msg_free(m);
    return 1;
}

static int client(int argc, char **argv)
{
    const char *url = arg_str(argc, argv, "url", NULL);
    long sockets = arg_int(argc, argv, "sockets", DEFAULT_PARALLEL);
    int rv;
    if (!url)
        die("nng_shapes client: url= is required");
    if (sockets < 1 || sockets > MAX_WINDOW)
        die("nng_shapes client: sockets= must be 1..%d", MAX_WINDOW);
    req_sockets rs = {calloc((size_t)sockets, sizeof(conn)), sockets};
    for (long i = 0; i < sockets; i++) {
        conn *c = &rs.conns[i];
        c->slot = (uint32_t)i;
        if ((rv = nng_req0_open(&c->s)) != 0 || (rv = nng_aio_alloc(&c->aio, client_cb, c)) != 0)
            die("nng_shapes client: a socket: %s", nng_strerror(rv));
        nng_socket_set_size(c->s, NNG_OPT_RECVMAXSZ, MAX_BODY);
        nng_socket_set_ms(c->s, NNG_OPT_RECVTIMEO, 200);
        nng_socket_set_ms(c->s, NNG_OPT_SENDTIMEO, 60000);
        if ((rv = nng_dial(c->s, url, NULL, 0)) != 0) /* (blocking: connected, or an error) */
            die("nng_shapes client: cannot dial %s: %s", url, nng_strerror(rv));
    }
    wire w = {.sock = &rs, .send = lat_send, .recv = lat_recv, .sockets = sockets,
              .tput = aio_tput};
    return client_main(argc, argv, &w, url);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "server") == 0) {
        bounded_life(argc, argv, 1);
        long parallel = arg_int(argc, argv, "contexts", DEFAULT_PARALLEL);
        if (parallel < 1 || parallel > MAX_WINDOW)
            die("nng_shapes server: contexts= must be 1..%d", MAX_WINDOW);
        server(parallel);
    }
    if (strcmp(mode, "client") != 0)
        die("usage: nng_shapes server [contexts=N] | client url=URL [sockets=N] "
            "[requests=N window=W size=S]");
    bounded_life(argc, argv, 0);
    _exit(client(argc, argv));
}
