/* nng request-reply load peers of `gateway bench` (SP over TCP).
 *
 *   nng_reqrep echo                     a raw rep0 on tcp://127.0.0.1:0 that sends every request
 *                                       back with its header (the backtrace: the reply's route
 *                                       and request id); READY {"url"}
 *   nng_reqrep client url=URL           a raw req0 with its own request ids (top bit set), W in
 *                                       flight (reqrep.h)
 *   nng_reqrep client url=URL requests=N window=W size=S    one run, one JSON line
 *
 * Both take lifetime=SECONDS (peer.h). Queues are nng's largest (8192 messages); messages up
 * to MAX_BODY bytes.
 */
#include "nng_peer.h" /* (nng.h, before the protocols' headers) */
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>

#include "reqrep.h"

#define NNG_QUEUE 8192
#define MAX_BODY (64u << 20)

static int nng_send_request(void *arg, uint32_t slot, const char *body, size_t size, uint32_t id)
{
    (void)slot; /* one socket */
    nng_socket *s = arg;
    nng_msg *m;
    if (nng_msg_alloc(&m, 0) != 0)
        return -1;
    if (nng_msg_header_append_u32(m, id) != 0 || nng_msg_append(m, body, size) != 0
        || nng_sendmsg(*s, m, 0) != 0) {
        nng_msg_free(m);
        return -1;
    }
    return 0;
}

static int nng_recv_reply(void *arg, char *buf, size_t cap, size_t *len, uint32_t *id,
                          char *why)
{
    nng_socket *s = arg;
    nng_msg *m;
    int rv = nng_recvmsg(*s, &m, 0);
    if (rv == NNG_ETIMEDOUT)
        return 0;
    if (rv != 0) {
        snprintf(why, 160, "%s", nng_strerror(rv));
        return -1;
    }
    /* a raw req0 moves the request id from the body to the header */
    if (nng_msg_header_len(m) != 4 || nng_msg_header_trim_u32(m, id) != 0) {
        snprintf(why, 160, "a reply whose header is not one request id (%zu bytes)",
                 nng_msg_header_len(m));
        nng_msg_free(m);
        return -1;
    }
    *len = nng_msg_len(m);
    memcpy(buf, nng_msg_body(m), *len < cap ? *len : cap);
    nng_msg_free(m);
    return 1;
}

static void queues(nng_socket s)
{
    nng_socket_set_int(s, NNG_OPT_SENDBUF, NNG_QUEUE);
    nng_socket_set_int(s, NNG_OPT_RECVBUF, NNG_QUEUE);
    nng_socket_set_size(s, NNG_OPT_RECVMAXSZ, MAX_BODY); /* (nng's 1 MiB: no 1 MiB body) */
}

static _Noreturn void echo(void)
{
    nng_socket s;
    int rv;
    if ((rv = nng_rep0_open_raw(&s)) != 0)
        die("nng_reqrep echo: %s", nng_strerror(rv));
    queues(s);
    listen_ready(s, "nng_reqrep echo");
    for (;;) {
        nng_msg *m;
        if (nng_recvmsg(s, &m, 0) != 0)
            continue;
        if (nng_sendmsg(s, m, 0) != 0) /* (the header routes it back to its pipe) */
            nng_msg_free(m);
    }
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "echo") == 0) {
        bounded_life(argc, argv, 1);
        echo();
    }
    if (strcmp(mode, "client") != 0)
        die("usage: nng_reqrep echo | client url=URL [requests=N window=W size=S]");
    bounded_life(argc, argv, 0);
    const char *url = arg_str(argc, argv, "url", NULL);
    nng_socket s;
    int rv;
    if (!url)
        die("nng_reqrep client: url= is required");
    if ((rv = nng_req0_open_raw(&s)) != 0)
        die("nng_reqrep client: %s", nng_strerror(rv));
    queues(s);
    nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 200);
    nng_socket_set_ms(s, NNG_OPT_SENDTIMEO, 60000);
    if ((rv = nng_dial(s, url, NULL, NNG_FLAG_NONBLOCK)) != 0)
        die("nng_reqrep client: cannot dial %s: %s", url, nng_strerror(rv));
    wire w = {.sock = &s, .send = nng_send_request, .recv = nng_recv_reply, .header_id = 1};
    _exit(client_main(argc, argv, &w, url));
}
