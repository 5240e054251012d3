/* tcprtt: round-trip time of small messages over one TCP connection, without
 * MPI: what `wanmpi bench relay --parts latency` uses to split the latency a
 * relay adds into its network path and its process.
 *
 * Usage:
 *   tcprtt serve IP PORT             echo every connection (one at a time),
 *                                    print "listening PORT" first
 *   tcprtt ping IP PORT [N [SIZE]]   N round trips (default 2000, after 200
 *                                    unmeasured) of SIZE bytes (default 8)
 * ping prints one JSON line:
 *   {"bench": "tcprtt", "size": SIZE, "rounds": N, "median_us": ..,
 *    "p10_us": .., "p90_us": .., "min_us": ..}
 * Both ends set TCP_NODELAY. Under libwanshim with WANMPI_RELAYS the connect
 * goes through the relays like any rank's. Exit 2 on a setup error, 3 if an
 * echo differs from what was sent. */
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

#define WARMUP 200

static void die(const char *what)
{
    perror(what);
    exit(2);
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static struct sockaddr_in endpoint(const char *ip, const char *port)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(port)) };
    if (inet_pton(AF_INET, ip, &a.sin_addr) != 1) {
        fprintf(stderr, "tcprtt: %s is not an IPv4 address\n", ip);
        exit(2);
    }
    return a;
}

static int full(int fd, char *buf, size_t n, int reading)
{
    size_t done = 0;
    while (done < n) {
        ssize_t k = reading ? read(fd, buf + done, n - done) : write(fd, buf + done, n - done);
        if (k <= 0)
            return -1;
        done += (size_t)k;
    }
    return 0;
}

static void nodelay(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

__attribute__((noreturn)) static void serve(const char *ip, const char *port)
{
    struct sockaddr_in a = endpoint(ip, port);
    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 16))
        die("listen");
    socklen_t len = sizeof a;
    getsockname(l, (struct sockaddr *)&a, &len);
    printf("listening %d\n", ntohs(a.sin_port));
    fflush(stdout);
    char buf[65536];
    for (;;) {
        int c = accept(l, NULL, NULL);
        if (c < 0)
            continue;
        nodelay(c);
        ssize_t n;
        while ((n = read(c, buf, sizeof buf)) > 0)
            if (full(c, buf, (size_t)n, 0))
                break;
        close(c);
    }
}

static int cmp(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static int ping(const char *ip, const char *port, int rounds, int size)
{
    struct sockaddr_in a = endpoint(ip, port);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a))
        die("connect");
    nodelay(fd);
    char *out = malloc((size_t)size), *in = malloc((size_t)size);
    double *rtt = malloc(sizeof(double) * (size_t)rounds);
    if (!out || !in || !rtt)
        die("malloc");
    for (int i = -WARMUP; i < rounds; i++) {
        for (int k = 0; k < size; k++)
            out[k] = (char)(i * 7 + k);
        double t0 = now_us();
        if (full(fd, out, (size_t)size, 0) || full(fd, in, (size_t)size, 1))
            die("echo");
        double t = now_us() - t0;
        if (memcmp(in, out, (size_t)size)) {
            fprintf(stderr, "tcprtt: round %d: the echo differs from what was sent\n", i);
            return 3;
        }
        if (i >= 0)
            rtt[i] = t;
    }
    qsort(rtt, (size_t)rounds, sizeof *rtt, cmp);
    printf("{\"bench\": \"tcprtt\", \"size\": %d, \"rounds\": %d, \"median_us\": %.1f, \"p10_us\": %.1f, "
           "\"p90_us\": %.1f, \"min_us\": %.1f}\n", size, rounds, rtt[rounds / 2], rtt[rounds / 10],
           rtt[rounds * 9 / 10], rtt[0]);
    close(fd);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 4 && !strcmp(argv[1], "serve"))
        serve(argv[2], argv[3]);
    if (argc >= 4 && argc <= 6 && !strcmp(argv[1], "ping")) {
        int rounds = argc > 4 ? atoi(argv[4]) : 2000, size = argc > 5 ? atoi(argv[5]) : 8;
        if (rounds < 10 || size < 1 || size > (1 << 24)) {
            fprintf(stderr, "tcprtt: N must be at least 10 and SIZE 1..16 MiB\n");
            return 2;
        }
        return ping(argv[2], argv[3], rounds, size);
    }
    fprintf(stderr, "usage: tcprtt serve IP PORT | tcprtt ping IP PORT [N [SIZE]]\n");
    return 2;
}
