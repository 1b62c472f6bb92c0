/* nng pub/sub and pipeline load peers of `gateway bench --patterns` (patterns.h):
 *
 *   nng_patterns pub [hwm=H]                          pub0 on tcp://127.0.0.1:0; READY {"url"}
 *   nng_patterns subs url=URL count=C [hwm=H]         C sub0 sockets
 *   nng_patterns pull [hwm=H]                         pull0 on tcp://127.0.0.1:0; READY {"url"}
 *   nng_patterns push url=URL [hwm=H]                 push0
 *
 * Queues: hwm messages, at most nng's 8192.
 */
#include "nng_peer.h" /* (nng.h, before the protocols' headers) */
#include <nng/protocol/pipeline0/pull.h>
#include <nng/protocol/pipeline0/push.h>
#include <nng/protocol/pubsub0/pub.h>
#include <nng/protocol/pubsub0/sub.h>
#include <poll.h>

#include "patterns.h"

static int nsend(void *arg, const char *buf, size_t n)
{
    return nng_send(*(nng_socket *)arg, (void *)buf, n, 0) == 0 ? 0 : -1;
}

static int nrecv_any(void **socks, int n, int ms, int *index, char *buf, size_t cap,
                     size_t *len)
{
    static int next; /* round robin: no socket starves the others */
    struct pollfd fds[MAX_SUBS];
    if (n == 1) { /* one socket: a blocking receive (nng's receive fd costs a wake-up more) */
        nng_socket s = *(nng_socket *)socks[0];
        size_t got = cap;
        nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, ms);
        int rv = nng_recv(s, buf, &got, 0);
        *index = 0;
        *len = got;
        return rv == 0 ? 1 : rv == NNG_ETIMEDOUT ? 0 : -1;
    }
    for (int pass = 0; pass < 2; pass++) {
        for (int k = 0; k < n; k++) {
            int i = (next + k) % n;
            size_t got = cap;
            int rv = nng_recv(*(nng_socket *)socks[i], buf, &got, NNG_FLAG_NONBLOCK);
            if (rv == 0) {
                *index = i;
                *len = got;
                next = (i + 1) % n;
                return 1;
            }
            if (rv != NNG_EAGAIN)
                return -1;
        }
        if (pass == 1)
            break;
        for (int i = 0; i < n; i++) {
            int fd = -1;
            nng_socket_get_int(*(nng_socket *)socks[i], NNG_OPT_RECVFD, &fd);
            fds[i] = (struct pollfd){fd, POLLIN, 0};
        }
        int rv = poll(fds, (nfds_t)n, ms);
        if (rv == 0)
            return 0;
        if (rv < 0)
            return errno == EINTR ? 0 : -1;
    }
    return 0;
}

static void queues(nng_socket s, int hwm)
{
    int buf = hwm < 8192 ? hwm : 8192;
    nng_socket_set_int(s, NNG_OPT_SENDBUF, buf); /* (a protocol without one says so: ignored) */
    nng_socket_set_int(s, NNG_OPT_RECVBUF, buf);
    nng_socket_set_ms(s, NNG_OPT_SENDTIMEO, 60000);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "", *url = arg_str(argc, argv, "url", NULL);
    int hwm = (int)arg_int(argc, argv, "hwm", 1000), rc, rv;
    pattern_wire w = {nsend, nrecv_any, NULL};
    nng_socket s;
    bounded_life(argc, argv, 0);
    if (strcmp(mode, "pub") == 0 || strcmp(mode, "pull") == 0) {
        int pub = mode[1] == 'u' && mode[2] == 'b';
        if ((rv = pub ? nng_pub0_open(&s) : nng_pull0_open(&s)) != 0)
            die("nng_patterns %s: %s", mode, nng_strerror(rv));
        queues(s, hwm);
        listen_ready(s, "nng_patterns");
        rc = pub ? run_sender(&w, &s, 1) : run_pull(&w, &s);
    } else if (strcmp(mode, "push") == 0 && url) {
        if ((rv = nng_push0_open(&s)) != 0)
            die("nng_patterns push: %s", nng_strerror(rv));
        queues(s, hwm);
        if ((rv = nng_dial(s, url, NULL, NNG_FLAG_NONBLOCK)) != 0)
            die("nng_patterns push: cannot dial %s: %s", url, nng_strerror(rv));
        printf("READY {\"url\": \"%s\"}\n", url);
        fflush(stdout);
        rc = run_sender(&w, &s, 0);
    } else if (strcmp(mode, "subs") == 0 && url) {
        int count = (int)arg_int(argc, argv, "count", 1);
        static nng_socket subs[MAX_SUBS];
        void *socks[MAX_SUBS];
        if (count < 1 || count > MAX_SUBS)
            die("nng_patterns subs: 1 <= count <= %d", MAX_SUBS);
        for (int i = 0; i < count; i++) {
            if ((rv = nng_sub0_open(&subs[i])) != 0)
                die("nng_patterns subs: %s", nng_strerror(rv));
            queues(subs[i], hwm);
            nng_socket_set(subs[i], NNG_OPT_SUB_SUBSCRIBE, "d.", 2);
            nng_socket_set(subs[i], NNG_OPT_SUB_SUBSCRIBE, "END", 3);
            if ((rv = nng_dial(subs[i], url, NULL, NNG_FLAG_NONBLOCK)) != 0)
                die("nng_patterns subs: cannot dial %s: %s", url, nng_strerror(rv));
            socks[i] = &subs[i];
        }
        rc = run_subs(&w, socks, count);
    } else {
        die("usage: nng_patterns pub | pull | push url=URL | subs url=URL count=C [hwm=H]");
    }
    _exit(rc);
}
