/* The request-reply load client of `gateway bench`, for any wire (zmq_reqrep.c, nng_reqrep.c,
 * sp_stream.c, nng_shapes.c give it their sockets' send and receive, or a throughput run of
 * their own).
 *
 * W requests in flight, each in a slot: its body starts with the slot number and the request
 * id (4 bytes each, then 'x' up to the size), and a reply must be that very body, for a slot
 * in flight, carrying the id the slot last sent (and, where the wire has one, the same id in
 * its header: SP's request id). The first reply that is not stops the run with an error.
 *
 * Commands (peer.h's line protocol):
 *   {"op": "tput", "window": W, "n": N, "size": S, "timeout": T}
 *       -> {"n", "elapsed", "timed_out", "cpu_s", "errors"[, "error"]}
 *       (a client of several sockets, one request in flight each, takes W up to its sockets)
 *   {"op": "lat", "n": N, "size": S, "timeout": T, "warmup": K}   (one request in flight)
 *       -> {"samples_ns": [...], "elapsed", "cpu_s"}
 *   {"op": "quit"}
 * or, with `requests=N window=W size=S` on the command line, one tput run printed as one JSON
 * line, exit status 0 when all N replies came back correct.
 */
#ifndef GATEWAY_BENCH_REQREP_H
#define GATEWAY_BENCH_REQREP_H

#include "peer.h"

#define TAG_BYTES 8 /* slot, request id */
#define MAX_WINDOW 4096

typedef struct tput_result tput_result;

typedef struct wire {
    void *sock;
    /* one request of slot `slot`: `size` bytes of `body`, request id `id` (top bit set); 0 or
     * -1 (a client of several sockets sends slot k's requests on socket k) */
    int (*send)(void *sock, uint32_t slot, const char *body, size_t size, uint32_t id);
    /* the next reply into buf (at most cap bytes; *len its whole size) and its header's id
     * (0 where the wire has none): 1, or 0 when none came within the receive timeout, or -1
     * (with a reason in `why`) */
    int (*recv)(void *sock, char *buf, size_t cap, size_t *len, uint32_t *id, char *why);
    int header_id; /* 1: replies carry the request id in a header (SP) */
    long sockets;  /* the client's sockets, one request in flight each (0: one socket, any
                    * number in flight): the largest window */
    /* a throughput run of its own (NULL: run_tput with send and recv) */
    tput_result (*tput)(struct wire *w, long window, long n, long size, double timeout);
} wire;

struct tput_result {
    long n;
    double elapsed, cpu;
    int timed_out;
    long errors;
    char error[200];
};

/* (atomic: a client's callbacks may run on several threads) */
static uint32_t next_id(void)
{
    static uint32_t seq;
    return 0x80000000u | (__atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED) & 0x7fffffff);
}

static void tag(char *body, uint32_t slot, uint32_t id)
{
    memcpy(body, &slot, 4);
    memcpy(body + 4, &id, 4);
}

/* "" when `reply` answers a request in flight (its slot freed), else what is wrong with it */
static const char *check_reply(const char *reply, size_t len, uint32_t header_id,
                               const char *body, size_t size, const uint32_t *ids, int window,
                               int header, uint32_t *slot_out)
{
    uint32_t slot, id;
    if (len != size)
        return "reply of another size than the request";
    memcpy(&slot, reply, 4);
    memcpy(&id, reply + 4, 4);
    if (slot >= (uint32_t)window || ids[slot] == 0 || ids[slot] != id)
        return "reply to no request in flight (duplicate or unknown)";
    if (header && header_id != id)
        return "reply whose SP request id is not its request's";
    if (memcmp(reply + TAG_BYTES, body + TAG_BYTES, size - TAG_BYTES) != 0)
        return "reply body differs from the request";
    *slot_out = slot;
    return "";
}

static tput_result run_tput(wire *w, long window, long n, long size, double timeout)
{
    tput_result r = {0};
    uint32_t ids[MAX_WINDOW] = {0};
    char *body = malloc((size_t)size), *reply = malloc((size_t)size + 1);
    memset(body, 'x', (size_t)size);
    double deadline = now_s() + timeout, cpu0 = cpu_s(), t0 = now_s();
    long sent = 0;
    char why[160] = "";
    if (window > n)
        window = n;
    for (uint32_t slot = 0; slot < (uint32_t)window; slot++, sent++) {
        ids[slot] = next_id();
        tag(body, slot, ids[slot]);
        if (w->send(w->sock, slot, body, (size_t)size, ids[slot]) != 0) {
            snprintf(r.error, sizeof r.error, "send failed after %ld requests", sent);
            r.errors++;
            goto out;
        }
    }
    while (r.n < n) {
        size_t len;
        uint32_t hid, slot;
        int got = w->recv(w->sock, reply, (size_t)size + 1, &len, &hid, why);
        if (got < 0) {
            snprintf(r.error, sizeof r.error, "receive failed after %ld replies: %s", r.n, why);
            r.errors++;
            break;
        }
        if (got == 0) {
            if (now_s() > deadline) {
                r.timed_out = 1;
                break;
            }
            continue;
        }
        const char *bad = check_reply(reply, len, hid, body, (size_t)size, ids, (int)window,
                                      w->header_id, &slot);
        if (*bad) {
            snprintf(r.error, sizeof r.error, "after %ld replies: %s", r.n, bad);
            r.errors++;
            break;
        }
        r.n++;
        ids[slot] = 0;
        if (sent < n) {
            ids[slot] = next_id();
            tag(body, slot, ids[slot]);
            if (w->send(w->sock, slot, body, (size_t)size, ids[slot]) != 0) {
                snprintf(r.error, sizeof r.error, "send failed after %ld requests", sent);
                r.errors++;
                break;
            }
            sent++;
        }
        if ((r.n & 1023) == 0 && now_s() > deadline) {
            r.timed_out = 1;
            break;
        }
    }
out:
    r.elapsed = now_s() - t0;
    r.cpu = cpu_s() - cpu0;
    free(body);
    free(reply);
    return r;
}

static void print_tput(const char *prefix, const tput_result *r)
{
    printf("%s{\"n\": %ld, \"elapsed\": %.6f, \"timed_out\": %s, \"cpu_s\": %.6f, "
           "\"errors\": %ld",
           prefix, r->n, r->elapsed, r->timed_out ? "true" : "false", r->cpu, r->errors);
    if (r->errors)
        printf(", \"error\": \"%s\"", r->error);
    printf("}\n");
    fflush(stdout);
}

/* one request in flight: its reply within `timeout` seconds; "" or what went wrong */
static const char *round_trip(const wire *w, char *body, char *reply, long size, double timeout,
                              char *why)
{
    uint32_t ids[1] = {next_id()}, hid, slot;
    size_t len;
    double deadline = now_s() + timeout;
    tag(body, 0, ids[0]);
    if (w->send(w->sock, 0, body, (size_t)size, ids[0]) != 0)
        return "send failed";
    for (;;) {
        int got = w->recv(w->sock, reply, (size_t)size + 1, &len, &hid, why);
        if (got < 0)
            return why;
        if (got > 0)
            return check_reply(reply, len, hid, body, (size_t)size, ids, 1, w->header_id, &slot);
        if (now_s() > deadline)
            return "no reply within the timeout";
    }
}

static void run_lat(const wire *w, long n, long size, double timeout, long warmup)
{
    int64_t *samples = malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
    char *body = malloc((size_t)size), *reply = malloc((size_t)size + 1), why[160] = "";
    const char *bad = "";
    long done = 0;
    double deadline = now_s() + timeout, t0 = 0, cpu0 = 0;
    memset(body, 'x', (size_t)size);
    for (long i = 0; i < warmup + n && !*bad; i++) {
        if (i == warmup) {
            t0 = now_s();
            cpu0 = cpu_s();
        }
        int64_t a = now_ns();
        bad = round_trip(w, body, reply, size, deadline - now_s(), why);
        if (!*bad && i >= warmup)
            samples[done++] = now_ns() - a;
    }
    if (*bad) {
        printf("RESULT {\"error\": \"latency slice: %s after %ld round trips\"}\n", bad, done);
    } else {
        printf("RESULT {\"elapsed\": %.6f, \"cpu_s\": %.6f, \"samples_ns\": [", now_s() - t0,
               cpu_s() - cpu0);
        for (long i = 0; i < done; i++)
            printf(i ? ",%lld" : "%lld", (long long)samples[i]);
        printf("]}\n");
    }
    fflush(stdout);
    free(samples);
    free(body);
    free(reply);
}

/* a throughput run on the client's wire: its own (w->tput) or run_tput; an error when the
 * window is above the client's sockets (one request in flight each) */
static tput_result tput_of(wire *w, long window, long n, long size, double timeout)
{
    if (w->sockets && window > w->sockets) {
        tput_result r = {0};
        r.errors = 1;
        snprintf(r.error, sizeof r.error, "window %ld above the client's %ld sockets (one "
                 "request in flight each)", window, w->sockets);
        return r;
    }
    return w->tput ? w->tput(w, window, n, size, timeout) : run_tput(w, window, n, size, timeout);
}

/* the client's life: one run (`requests=` given) or commands until stdin closes */
static int client_main(int argc, char **argv, wire *w, const char *url)
{
    long size = arg_int(argc, argv, "size", 100);
    if (arg_str(argc, argv, "requests", NULL)) {
        long window = arg_int(argc, argv, "window", 64);
        long n = arg_int(argc, argv, "requests", 0);
        if (size < TAG_BYTES || window < 1 || window > MAX_WINDOW || n < 1)
            die("need size >= %d, 1 <= window <= %d, requests >= 1", TAG_BYTES, MAX_WINDOW);
        tput_result r = tput_of(w, window, n, size, (double)arg_int(argc, argv, "timeout", 60));
        print_tput("", &r);
        return r.n == n && !r.errors ? 0 : 1;
    }
    printf("READY {\"url\": \"%s\"}\n", url);
    fflush(stdout);
    char line[LINE_MAX_BYTES];
    while (next_command(line, sizeof line)) {
        size = (long)json_num(line, "size", 100);
        double timeout = json_num(line, "timeout", 60);
        if (is_op(line, "quit"))
            break;
        if ((is_op(line, "tput") || is_op(line, "lat")) && size < TAG_BYTES) {
            printf("RESULT {\"error\": \"the C clients need size >= %d\"}\n", TAG_BYTES);
            fflush(stdout);
        } else if (is_op(line, "tput")) {
            long window = (long)json_num(line, "window", 64);
            if (window < 1 || window > MAX_WINDOW)
                window = MAX_WINDOW;
            tput_result r = tput_of(w, window, (long)json_num(line, "n", 0), size, timeout);
            print_tput("RESULT ", &r);
        } else if (is_op(line, "lat")) {
            run_lat(w, (long)json_num(line, "n", 0), size, timeout,
                    (long)json_num(line, "warmup", 0));
        } else {
            unknown_command(line);
        }
    }
    return 0;
}

#endif
