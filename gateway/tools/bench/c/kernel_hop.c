/* The kernel's own cost of a message sent one per write (`gateway bench --routes real`): a
 * measurement tool, not a peer. CONNECTIONS connected pairs on this host (loopback TCP with
 * TCP_NODELAY, as the gateway and nng set it, or unix stream sockets, ipc's), one message of
 * SIZE bytes written on each in turn, then read from each peer: what an nng req0 client's
 * request costs the middle that reads it, and the middle's reply costs to write, whatever the
 * middle is (its user time aside). On loopback TCP a write also runs the receiving end's TCP
 * (the softirq of the peer's segment and its ACK) in the writer's system time.
 *
 * The CPU of this thread (CLOCK_THREAD_CPUTIME_ID: user + system, nanoseconds) is summed over
 * the writes and over the reads apart, so each is per message:
 *
 * Messages are written to at most BATCH_BYTES of connections before they are read, so a write
 * never waits for a read.
 *
 *   kernel_hop tcp|unix [size=100 (1..16384)] [messages=200000] [connections=64]
 *       RESULT {"transport": "tcp", "size": 100, "connections": 64, "messages": 199936,
 *               "write_us": 3.25, "read_us": 2.95}
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNECTIONS 256
#define MAX_SIZE (16u << 10) /* a small message: one segment, one write (a large one is
                                 many, and its cost is its copies) */
#define BATCH_BYTES (64u << 10) /* written before they are read: what fresh buffers hold */

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static long arg(int argc, char **argv, const char *key, long dflt, long lo, long hi) {
    size_t n = strlen(key);
    for (int i = 2; i < argc; i++)
        if (!strncmp(argv[i], key, n) && argv[i][n] == '=') {
            char *end;
            long v = strtol(argv[i] + n + 1, &end, 10);
            if (*end || v < lo || v > hi) {
                fprintf(stderr, "kernel_hop: %s must be %ld..%ld\n", key, lo, hi);
                exit(2);
            }
            return v;
        }
    return dflt;
}

static int tcp_pair(int *a, int *b) {
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    int one = 1, l = socket(AF_INET, SOCK_STREAM, 0);
    if (l < 0 || bind(l, (void *)&sa, sizeof sa) || listen(l, 1) ||
        getsockname(l, (void *)&sa, &len))
        return -1;
    *a = socket(AF_INET, SOCK_STREAM, 0);
    if (*a < 0 || connect(*a, (void *)&sa, sizeof sa)) return -1;
    *b = accept(l, NULL, NULL);
    close(l);
    if (*b < 0) return -1;
    setsockopt(*a, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(*b, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2 || (strcmp(argv[1], "tcp") && strcmp(argv[1], "unix"))) {
        fprintf(stderr, "usage: kernel_hop tcp|unix [size=100] [messages=200000] "
                        "[connections=64]\n");
        return 2;
    }
    int tcp = !strcmp(argv[1], "tcp");
    long size = arg(argc, argv, "size", 100, 1, MAX_SIZE);
    long messages = arg(argc, argv, "messages", 200000, 1, 100000000);
    long n = arg(argc, argv, "connections", 64, 1, MAX_CONNECTIONS);
    int a[MAX_CONNECTIONS], b[MAX_CONNECTIONS];
    for (long i = 0; i < n; i++) {
        int sv[2];
        if (tcp ? tcp_pair(&a[i], &b[i]) : socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) {
            perror("kernel_hop: connect");
            return 1;
        }
        if (!tcp) a[i] = sv[0], b[i] = sv[1];
    }
    char *buf = malloc(size);
    if (!buf) return 1;
    memset(buf, 'x', size);
    double writes = 0, reads = 0;
    long rounds = messages / n > 0 ? messages / n : 1;
    long batch = (long)(BATCH_BYTES / size) < n ? (long)(BATCH_BYTES / size) : n;
    if (batch < 1) batch = 1; /* (a write never waits for a read: a batch fits the buffers) */
    for (long r = 0; r < rounds; r++)
        for (long first = 0; first < n; first += batch) {
            long last = first + batch < n ? first + batch : n;
            double t0 = now_ns();
            for (long i = first; i < last; i++)
                for (long sent = 0; sent < size;) {
                    ssize_t k = write(a[i], buf + sent, size - sent);
                    if (k <= 0) { perror("kernel_hop: write"); return 1; }
                    sent += k;
                }
            double t1 = now_ns();
            for (long i = first; i < last; i++)
                for (long got = 0; got < size;) {
                    ssize_t k = read(b[i], buf + got, size - got);
                    if (k <= 0) { perror("kernel_hop: read"); return 1; }
                    got += k;
                }
            writes += t1 - t0;
            reads += now_ns() - t1;
        }
    double count = (double)rounds * n;
    printf("RESULT {\"transport\": \"%s\", \"size\": %ld, \"connections\": %ld, "
           "\"messages\": %.0f, \"write_us\": %.3f, \"read_us\": %.3f}\n",
           argv[1], size, n, count, writes / count / 1e3, reads / count / 1e3);
    return 0;
}
