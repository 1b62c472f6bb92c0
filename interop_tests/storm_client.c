/* A connection storm that is never the bottleneck: non-blocking sockets on one epoll loop.
 * Compiled at test time by interop_tests/test_gateway_storm.py (cc -O2).
 *
 *   storm_client hold|idle HOST PORT COUNT WAVE EVERY_US TIMEOUT_S
 *
 * Opens COUNT TCP connections to HOST:PORT, WAVE of them every EVERY_US microseconds.
 * hold: each sends a ZMTP 3.1 NULL greeting and a READY as a DEALER once connected, and is held
 *       once the server's greeting (64 bytes) and READY arrived; it then stays open until a line
 *       (or EOF) on stdin.
 * idle: each sends nothing and ends when the server closes it (EOF or reset).
 * Stops when every connection ended (held, closed, failed) or after TIMEOUT_S seconds, then
 * prints one line per connection, "started connected first ended outcome" (CLOCK_MONOTONIC
 * seconds, the clock of Python's time.monotonic; first: the server's first bytes arrived, which
 * a server that greets at once (ZMTP) sends when it accepts; 0 = never; outcome H held, E eof,
 * R reset, C closed before held, F connect failed, P pending), then "END". "READY" first. The soft
 * RLIMIT_NOFILE is raised to the hard limit. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct conn {
    int fd;
    double started, connected, first, ended;
    char outcome;
    int got;
    unsigned char buf[128];
};

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static unsigned char hello[128];
static size_t hello_len;

static void make_hello(void) {
    unsigned char *p = hello;
    memset(p, 0, 64);
    p[0] = 0xff;
    p[9] = 0x7f;
    p[10] = 3;
    p[11] = 1;
    memcpy(p + 12, "NULL", 4);
    p += 64;
    /* READY command: flags 0x04, size, "\x05READY", "\x0bSocket-Type" + u32 len + "DEALER" */
    unsigned char body[64];
    size_t n = 0;
    body[n++] = 5;
    memcpy(body + n, "READY", 5); n += 5;
    body[n++] = 11;
    memcpy(body + n, "Socket-Type", 11); n += 11;
    body[n++] = 0; body[n++] = 0; body[n++] = 0; body[n++] = 6;
    memcpy(body + n, "DEALER", 6); n += 6;
    *p++ = 0x04;
    *p++ = (unsigned char)n;
    memcpy(p, body, n);
    hello_len = 64 + 2 + n;
}

int main(int argc, char **argv) {
    if (argc != 8) {
        fprintf(stderr, "usage: %s hold|idle HOST PORT COUNT WAVE EVERY_US TIMEOUT_S\n", argv[0]);
        return 2;
    }
    int hold = strcmp(argv[1], "hold") == 0;
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((unsigned short)atoi(argv[3]));
    if (inet_pton(AF_INET, argv[2], &addr.sin_addr) != 1) {
        fprintf(stderr, "bad address %s\n", argv[2]);
        return 2;
    }
    int count = atoi(argv[4]), wave = atoi(argv[5]);
    double every = atof(argv[6]) / 1e6, timeout = atof(argv[7]);
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    make_hello();
    struct conn *conns = calloc((size_t)count, sizeof *conns);
    int ep = epoll_create1(0);
    struct epoll_event events[512];
    printf("READY\n");
    fflush(stdout);

    int opened = 0, done = 0;
    double t0 = now(), next_wave = t0, deadline = t0 + timeout;
    while (done < count && now() < deadline) {
        double t = now();
        while (opened < count && t >= next_wave) {
            for (int k = 0; k < wave && opened < count; k++) {
                struct conn *c = &conns[opened];
                c->started = now();
                c->outcome = 'P';
                c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
                int one = 1;
                if (c->fd >= 0)
                    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                if (c->fd < 0 || (connect(c->fd, (struct sockaddr *)&addr, sizeof addr) != 0
                                  && errno != EINPROGRESS)) {
                    c->outcome = 'F';
                    c->ended = now();
                    if (c->fd >= 0) close(c->fd);
                    c->fd = -1;
                    done++;
                } else {
                    struct epoll_event ev = {.events = EPOLLOUT, .data.u32 = (unsigned)opened};
                    epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
                }
                opened++;
            }
            next_wave += every;
        }
        int wait_ms = 50;
        if (opened < count) {
            double left = next_wave - now();
            wait_ms = left <= 0 ? 0 : (int)(left * 1000) + 1;
            if (wait_ms > 50) wait_ms = 50;
        }
        int n = epoll_wait(ep, events, 512, wait_ms);
        for (int i = 0; i < n; i++) {
            struct conn *c = &conns[events[i].data.u32];
            if (!c->connected) {
                int err = 0;
                socklen_t len = sizeof err;
                getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
                if (err) {
                    c->outcome = 'F';
                    c->ended = now();
                    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                    close(c->fd);
                    c->fd = -1;
                    done++;
                    continue;
                }
                c->connected = now();
                if (hold && send(c->fd, hello, hello_len, MSG_NOSIGNAL) != (ssize_t)hello_len) {
                    c->outcome = 'C';
                    c->ended = now();
                    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                    done++;
                    continue;
                }
                struct epoll_event ev = {.events = EPOLLIN, .data.u32 = events[i].data.u32};
                epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
                continue;
            }
            unsigned char scratch[4096];
            unsigned char *into = hold ? c->buf + c->got : scratch;
            size_t room = hold ? sizeof c->buf - (size_t)c->got : sizeof scratch;
            ssize_t r = recv(c->fd, into, room ? room : 1, 0);
            if (r > 0 && !c->first)
                c->first = now();
            if (r > 0 && hold) {
                c->got += (int)r;
                if (c->got >= 64 + 2 + 6
                        && memmem(c->buf + 64, (size_t)c->got - 64, "READY", 5) != NULL) {
                    c->outcome = 'H';
                    c->ended = now();
                    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);  /* stays open */
                    done++;
                } else if (c->got >= (int)sizeof c->buf) {
                    c->outcome = 'C';
                    c->ended = now();
                    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                    done++;
                }
            } else if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
                c->outcome = r == 0 ? (hold ? 'C' : 'E') : (hold ? 'C' : 'R');
                c->ended = now();
                epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                close(c->fd);
                c->fd = -1;
                done++;
            }
        }
    }
    for (int i = 0; i < opened; i++)
        printf("%.6f %.6f %.6f %.6f %c\n", conns[i].started, conns[i].connected,
               conns[i].first, conns[i].ended, conns[i].outcome);
    printf("END\n");
    fflush(stdout);
    if (hold) {
        char line[64];
        if (fgets(line, sizeof line, stdin) == NULL) { /* EOF: close too */ }
    }
    for (int i = 0; i < opened; i++)
        if (conns[i].fd >= 0) close(conns[i].fd);
    free(conns);
    return 0;
}
