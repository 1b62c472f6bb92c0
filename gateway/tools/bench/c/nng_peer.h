/* What the nng load peers of `gateway bench` share (nng_reqrep.c, nng_patterns.c, nng_shapes.c):
 * peer.h, and a listener on an ephemeral port announced with READY. */
#ifndef GATEWAY_BENCH_NNG_PEER_H
#define GATEWAY_BENCH_NNG_PEER_H

#include <arpa/inet.h>
#include <nng/nng.h>

#include "peer.h"

/* listen on tcp://127.0.0.1:0 and say READY with the port chosen; `who` names the peer in the
 * error that ends it when it cannot */
static inline void listen_ready(nng_socket s, const char *who)
{
    nng_listener l;
    nng_sockaddr sa;
    int rv;
    if ((rv = nng_listen(s, "tcp://127.0.0.1:0", &l, 0)) != 0
        || (rv = nng_listener_get_addr(l, NNG_OPT_LOCADDR, &sa)) != 0)
        die("%s: cannot listen: %s", who, nng_strerror(rv));
    ready_url(ntohs(sa.s_in.sa_port));
}

#endif
