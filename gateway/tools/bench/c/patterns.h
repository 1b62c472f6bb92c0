/* The pub/sub and pipeline load peers of `gateway bench --patterns`, for any wire
 * (zmq_patterns.c, nng_patterns.c give them the sockets). The same roles, commands and results
 * as peer.py's `pattern-*` peers (gateway/tools/bench/patterns.py drives both):
 *
 *   pub    binds; {"op": "go", "n", "size", "warm"}: `warm` seconds of "w." messages (the
 *          subscriptions settle), n "d.x..." messages as fast as it goes, then "END" 100 times
 *          over a second -> {"sent", "elapsed"}
 *   subs   count= subscribers of "d." and "END" dialling url=; READY {"count"};
 *          {"op": "collect", "timeout", "pause"}: counts "d." messages per socket until each
 *          saw END -> {"received", "per_socket", "elapsed" (first to last "d."), "complete"};
 *          `pause` (C peers only, default 0): seconds of not reading after the first "d.", a
 *          subscriber slower than any publisher (its queue fills for certain)
 *   pull   binds; {"op": "collect", "n", "timeout"} -> {"received", "elapsed"} (first to n-th)
 *   push   dials url=; {"op": "go", "n", "size"}: n blocking sends -> {"sent", "elapsed"}
 *
 * All take hwm= (every queue) and lifetime= (peer.h).
 */
#ifndef GATEWAY_BENCH_PATTERNS_H
#define GATEWAY_BENCH_PATTERNS_H

#include "peer.h"

#define MAX_SUBS 1000
#define RECV_CAP 65536

typedef struct {
    /* one message, blocking (bounded by the socket's send timeout): 0 or -1 */
    int (*send)(void *sock, const char *buf, size_t n);
    /* the next message of any of the sockets within `ms`: 1 (its index and length), 0 when
     * none came, -1 on an error */
    int (*recv_any)(void **socks, int n, int ms, int *index, char *buf, size_t cap,
                    size_t *len);
    /* write what sends queued (NULL: sends write at once) */
    void (*flush)(void *sock);
} pattern_wire;

static void sleep_s(double s)
{
    struct timespec t = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&t, NULL);
}

static int send_failed(long sent)
{
    printf("RESULT {\"error\": \"send failed after %ld messages\"}\n", sent);
    fflush(stdout);
    return 1;
}

/* the publisher and the pusher: `go` commands until stdin ends */
static int run_sender(const pattern_wire *w, void *sock, int publisher)
{
    char line[LINE_MAX_BYTES];
    while (next_command(line, sizeof line)) {
        if (!is_op(line, "go")) {
            unknown_command(line);
            continue;
        }
        long n = (long)json_num(line, "n", 0), size = (long)json_num(line, "size", 100);
        char *body = malloc((size_t)(size > 2 ? size : 2));
        memset(body, 'x', (size_t)(size > 2 ? size : 2));
        if (publisher) {
            double end = now_s() + json_num(line, "warm", 1.0);
            while (now_s() < end) {
                w->send(sock, "w.", 2);
                if (w->flush)
                    w->flush(sock);
                sleep_s(0.002);
            }
            memcpy(body, "d.", 2);
            if (size < 2)
                size = 2;
        }
        double t0 = now_s();
        for (long i = 0; i < n; i++)
            if (w->send(sock, body, (size_t)size) != 0)
                return send_failed(i);
        if (w->flush)
            w->flush(sock);
        double elapsed = now_s() - t0;
        for (int i = 0; publisher && i < 100; i++) {
            w->send(sock, "END", 3);
            if (w->flush)
                w->flush(sock);
            sleep_s(0.01);
        }
        free(body);
        printf("RESULT {\"sent\": %ld, \"elapsed\": %.6f}\n", n, elapsed);
        fflush(stdout);
    }
    return 0;
}

/* the puller: `collect` commands */
static int run_pull(const pattern_wire *w, void *sock)
{
    char line[LINE_MAX_BYTES], *buf = malloc(RECV_CAP);
    while (next_command(line, sizeof line)) {
        if (!is_op(line, "collect")) {
            unknown_command(line);
            continue;
        }
        long n = (long)json_num(line, "n", 0), got = 0;
        double deadline = now_s() + json_num(line, "timeout", 60), t0 = 0;
        while (got < n && now_s() < deadline) {
            int index;
            size_t len;
            int rv = w->recv_any(&sock, 1, 200, &index, buf, RECV_CAP, &len);
            if (rv < 0)
                break;
            if (rv == 0)
                continue;
            if (!got)
                t0 = now_s();
            got++;
        }
        double elapsed = got ? now_s() - t0 : 0;
        printf("RESULT {\"received\": %ld, \"elapsed\": %.6f}\n", got,
               elapsed > 1e-9 ? elapsed : 1e-9);
        fflush(stdout);
    }
    free(buf);
    return 0;
}

/* the subscribers: `collect` commands */
static int run_subs(const pattern_wire *w, void **socks, int count)
{
    char line[LINE_MAX_BYTES], *buf = malloc(RECV_CAP);
    long counts[MAX_SUBS];
    char done[MAX_SUBS];
    printf("READY {\"count\": %d}\n", count);
    fflush(stdout);
    while (next_command(line, sizeof line)) {
        if (!is_op(line, "collect")) {
            unknown_command(line);
            continue;
        }
        memset(counts, 0, sizeof counts);
        memset(done, 0, sizeof done);
        int finished = 0;
        long total = 0;
        double deadline = now_s() + json_num(line, "timeout", 60), first = 0, last = 0;
        double pause = json_num(line, "pause", 0);
        while (finished < count && now_s() < deadline) {
            int i;
            size_t len;
            int rv = w->recv_any(socks, count, 100, &i, buf, RECV_CAP, &len);
            if (rv < 0)
                break;
            if (rv == 0)
                continue;
            if (len >= 2 && memcmp(buf, "d.", 2) == 0) {
                last = now_s();
                if (first == 0) {
                    first = last;
                    if (pause > 0)
                        sleep_s(pause);
                }
                counts[i]++;
                total++;
            } else if (len == 3 && memcmp(buf, "END", 3) == 0 && !done[i]) {
                done[i] = 1;
                finished++;
            }
        }
        double elapsed = last - first > 1e-9 ? last - first : 1e-9;
        printf("RESULT {\"received\": %ld, \"elapsed\": %.6f, \"complete\": %s, \"per_socket\": [",
               total, elapsed, finished == count ? "true" : "false");
        for (int i = 0; i < count; i++)
            printf(i ? ",%ld" : "%ld", counts[i]);
        printf("]}\n");
        fflush(stdout);
    }
    free(buf);
    return 0;
}

#endif
