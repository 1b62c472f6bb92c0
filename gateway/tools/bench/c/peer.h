/* What every C load peer of `gateway bench` shares (header only: each peer is one .c file).
 *
 * A peer is run as `PROGRAM MODE key=value ...` and speaks the bench harness's line protocol
 * (gateway/tools/bench/peer.py): one `READY {json}` line once it is bound or connected, then
 * one JSON command per stdin line, each answered by one `RESULT {json}` line. It exits when
 * its stdin closes (the harness went away), when the harness dies (PR_SET_PDEATHSIG) and in
 * any case after `lifetime=` seconds. Every wait is bounded.
 */
#ifndef GATEWAY_BENCH_PEER_H
#define GATEWAY_BENCH_PEER_H

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define LINE_MAX_BYTES 4096
#define DEFAULT_HWM 100000 /* every queue of a request-reply peer: above any bench window */

/* `key=value` among the arguments after the mode, or `dflt` */
static inline const char *arg_str(int argc, char **argv, const char *key, const char *dflt)
{
    size_t n = strlen(key);
    for (int i = 2; i < argc; i++)
        if (strncmp(argv[i], key, n) == 0 && argv[i][n] == '=')
            return argv[i] + n + 1;
    return dflt;
}

static inline long arg_int(int argc, char **argv, const char *key, long dflt)
{
    const char *v = arg_str(argc, argv, key, NULL);
    return v ? strtol(v, NULL, 10) : dflt;
}

/* a usage or set-up error: one line on stderr, exit status 2 */
static inline void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(2);
}

static inline double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static inline int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* user + system CPU seconds of this process so far (all its threads) */
static inline double cpu_s(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec)
           + (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

static inline void *exit_on_stdin_eof(void *unused)
{
    char buf[256];
    (void)unused;
    while (read(0, buf, sizeof buf) > 0) {
    }
    _exit(0);
    return NULL;
}

/* die with the harness, and after `lifetime=` seconds (default 3600) in any case; servers
 * (which read no commands) also exit when their stdin closes */
static inline void bounded_life(int argc, char **argv, int server)
{
    long lifetime = arg_int(argc, argv, "lifetime", 3600);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() == 1)
        _exit(1);
    alarm((unsigned)(lifetime > 0 ? lifetime : 3600));
    if (server) {
        pthread_t t;
        pthread_create(&t, NULL, exit_on_stdin_eof, NULL);
        pthread_detach(t);
    }
}

static inline void ready_url(int port)
{
    printf("READY {\"url\": \"tcp://127.0.0.1:%d\"}\n", port);
    fflush(stdout);
}

/* the next command line from the harness; 0 at the end of stdin */
static inline int next_command(char *line, size_t cap)
{
    if (!fgets(line, (int)cap, stdin))
        return 0;
    return 1;
}

/* the position just after `"key":` (and blanks) in a flat JSON object, or NULL */
static inline const char *json_value(const char *line, const char *key)
{
    char quoted[64];
    snprintf(quoted, sizeof quoted, "\"%s\"", key);
    const char *p = strstr(line, quoted);
    if (!p)
        return NULL;
    p += strlen(quoted);
    while (*p == ' ' || *p == ':')
        p++;
    return p;
}

static inline int is_op(const char *line, const char *op)
{
    const char *p = json_value(line, "op");
    size_t n = strlen(op);
    return p && p[0] == '"' && strncmp(p + 1, op, n) == 0 && p[n + 1] == '"';
}

static inline double json_num(const char *line, const char *key, double dflt)
{
    const char *p = json_value(line, key);
    return p ? strtod(p, NULL) : dflt;
}

/* the 8-byte big-endian sizes of the SP and ZMTP wires */
static inline uint64_t get_be64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

static inline void put_be64(unsigned char *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (unsigned char)v;
}

/* a command the peer does not know: answered, never ignored */
static inline void unknown_command(const char *line)
{
    printf("RESULT {\"error\": \"unknown command\", \"line_bytes\": %zu}\n", strlen(line));
    fflush(stdout);
}

#endif
