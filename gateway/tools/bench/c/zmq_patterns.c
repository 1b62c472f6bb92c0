/* libzmq pub/sub and pipeline load peers of `gateway bench --patterns` (patterns.h):
 *
 *   zmq_patterns pub [hwm=H]                          PUB on tcp://127.0.0.1:*; READY {"url"}
 *   zmq_patterns subs url=URL count=C [hwm=H]         C SUB sockets
 *   zmq_patterns pull [hwm=H]                         PULL on tcp://127.0.0.1:*; READY {"url"}
 *   zmq_patterns push url=URL [hwm=H]                 PUSH
 */
#include <zmq.h>

#include "patterns.h"

static int zsend(void *s, const char *buf, size_t n)
{
    return zmq_send(s, buf, n, 0) == (int)n ? 0 : -1;
}

static int zrecv_any(void **socks, int n, int ms, int *index, char *buf, size_t cap,
                     size_t *len)
{
    static int next; /* round robin: no socket starves the others */
    zmq_pollitem_t items[MAX_SUBS];
    for (int pass = 0; pass < 2; pass++) {
        for (int k = 0; k < n; k++) {
            int i = (next + k) % n;
            int got = zmq_recv(socks[i], buf, cap, ZMQ_DONTWAIT);
            if (got >= 0) {
                *index = i;
                *len = (size_t)got < cap ? (size_t)got : cap;
                next = (i + 1) % n;
                return 1;
            }
            if (errno != EAGAIN)
                return -1;
        }
        if (pass == 1)
            break;
        for (int i = 0; i < n; i++)
            items[i] = (zmq_pollitem_t){socks[i], 0, ZMQ_POLLIN, 0};
        int rv = zmq_poll(items, n, ms);
        if (rv == 0)
            return 0;
        if (rv < 0)
            return errno == EINTR ? 0 : -1;
    }
    return 0;
}

static void *new_socket(void *ctx, int type, int hwm)
{
    void *s = zmq_socket(ctx, type);
    int linger = 0, sndtimeo = 60000;
    zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(s, ZMQ_RCVHWM, &hwm, sizeof hwm);
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(s, ZMQ_SNDTIMEO, &sndtimeo, sizeof sndtimeo);
    return s;
}

static void bind_ready(void *s)
{
    char url[256];
    size_t size = sizeof url;
    if (zmq_bind(s, "tcp://127.0.0.1:*") != 0)
        die("zmq_patterns: cannot bind: %s", zmq_strerror(errno));
    zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, url, &size);
    ready_url(atoi(strrchr(url, ':') + 1));
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "", *url = arg_str(argc, argv, "url", NULL);
    int hwm = (int)arg_int(argc, argv, "hwm", 1000), rc;
    pattern_wire w = {zsend, zrecv_any, NULL};
    void *ctx = zmq_ctx_new();
    bounded_life(argc, argv, 0);
    if (strcmp(mode, "pub") == 0 || strcmp(mode, "pull") == 0) {
        int pub = mode[1] == 'u' && mode[2] == 'b';
        void *s = new_socket(ctx, pub ? ZMQ_PUB : ZMQ_PULL, hwm);
        bind_ready(s);
        rc = pub ? run_sender(&w, s, 1) : run_pull(&w, s);
    } else if (strcmp(mode, "push") == 0 && url) {
        void *s = new_socket(ctx, ZMQ_PUSH, hwm);
        if (zmq_connect(s, url) != 0)
            die("zmq_patterns push: cannot connect to %s: %s", url, zmq_strerror(errno));
        printf("READY {\"url\": \"%s\"}\n", url);
        fflush(stdout);
        rc = run_sender(&w, s, 0);
    } else if (strcmp(mode, "subs") == 0 && url) {
        int count = (int)arg_int(argc, argv, "count", 1);
        void *socks[MAX_SUBS];
        if (count < 1 || count > MAX_SUBS)
            die("zmq_patterns subs: 1 <= count <= %d", MAX_SUBS);
        for (int i = 0; i < count; i++) {
            socks[i] = new_socket(ctx, ZMQ_SUB, hwm);
            zmq_setsockopt(socks[i], ZMQ_SUBSCRIBE, "d.", 2);
            zmq_setsockopt(socks[i], ZMQ_SUBSCRIBE, "END", 3);
            if (zmq_connect(socks[i], url) != 0)
                die("zmq_patterns subs: cannot connect to %s: %s", url, zmq_strerror(errno));
        }
        rc = run_subs(&w, socks, count);
    } else {
        die("usage: zmq_patterns pub | pull | push url=URL | subs url=URL count=C [hwm=H]");
    }
    _exit(rc);
}
