/* libzmq request-reply load peers of `gateway bench`.
 *
 *   zmq_reqrep echo                     a ROUTER on tcp://127.0.0.1:* that sends every message
 *                                       back to the peer it came from (routing id, empty
 *                                       delimiter, body: a REP's reply); READY {"url"}
 *   zmq_reqrep client url=URL           a DEALER sending [""][body], W in flight (reqrep.h)
 *   zmq_reqrep client url=URL requests=N window=W size=S    one run, one JSON line
 *
 * Both take lifetime=SECONDS (peer.h). Queues hold DEFAULT_HWM messages: above any window.
 */
#include <zmq.h>

#include "reqrep.h"

static int zmq_send_request(void *s, const char *body, size_t size, uint32_t id)
{
    (void)id; /* ZeroMQ has no request id: the DEALER's replies come back by its connection */
    if (zmq_send(s, "", 0, ZMQ_SNDMORE) != 0)
        return -1;
    return zmq_send(s, body, size, 0) == (int)size ? 0 : -1;
}

static int zmq_recv_reply(void *s, char *buf, size_t cap, size_t *len, uint32_t *id, char *why)
{
    char delimiter[1];
    int more;
    size_t more_size = sizeof more;
    *id = 0;
    int n = zmq_recv(s, delimiter, sizeof delimiter, 0);
    if (n < 0) {
        if (errno == EAGAIN)
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
    void *s = new_socket(ctx, ZMQ_DEALER);
    int rcvtimeo = 200, sndtimeo = 60000;
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &rcvtimeo, sizeof rcvtimeo);
    zmq_setsockopt(s, ZMQ_SNDTIMEO, &sndtimeo, sizeof sndtimeo);
    if (zmq_connect(s, url) != 0)
        die("zmq_reqrep client: cannot connect to %s: %s", url, zmq_strerror(errno));
    wire w = {s, zmq_send_request, zmq_recv_reply, 0};
    int rc = client_main(argc, argv, &w, url);
    zmq_close(s); /* linger 0: nothing waits */
    _exit(rc);
}
