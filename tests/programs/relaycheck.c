/* relaycheck: libwanshim's relaying on loopback, without MPI and without
 * namespaces. tests/test_shim_relay.py runs it under the shim beside a fake
 * relay written in Python; clusters are loopback ranges (a = 127.0.0.0/24,
 * b = 127.0.1.0/24, ...).
 *
 * Usage:
 *   relaycheck vectors                       the selection hash and a preamble
 *                                            (relay_preamble.c linked in, no shim needed)
 *   relaycheck select N IP...                which of N relays serves each IP (the hash)
 *   relaycheck select-address N IP...        the same by address (the shim's default)
 *   relaycheck pair SRC IP[,IP...] MODE ACCEPT [BYTES]
 *        for each IP: listen on IP, connect from SRC (bind SRC:0 first, as
 *        Open MPI and MPICH do) with a MODE (blocking | nonblocking) connect,
 *        accept with ACCEPT (addr: accept(fd, addr, len); null: accept(fd,
 *        NULL, NULL) then getpeername, as MPICH; accept4: non-blocking
 *        accept4), exchange BYTES each way (default 1 MiB) with half-close;
 *        with RELAYCHECK_BLAST_OPEN="RATE PAYLOAD", a blast request for IP
 *        once the connection is open (as `blast` below) before the exchange
 *   relaycheck connect SRC IP PORT MODE      one connect; its result, SO_ERROR,
 *                                            getpeername and a second connect
 *   relaycheck accept IP PORT N LISTENER ACCEPT
 *        listen (LISTENER blocking | nonblocking), print "listening PORT",
 *        then accept N connections and print each one's addresses and first line
 *   relaycheck parallel SRC IP K             K non-blocking connects started
 *                                            together, then waited for: times
 *   relaycheck blast IP RATE PAYLOAD COMMAND...
 *        wanshim_request_blast(IP, RATE B/s, PAYLOAD) first, print its result
 *        ("blast-request N" or "blast-request -1 ERRNO"), then run COMMAND
 * Output: one "key value..." line per observation; exit 2 on a setup error. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../../lib/src/shim/relay.h"
#include "../../lib/include/wanshim.h"

static void die(const char *what)
{
    fprintf(stderr, "relaycheck: %s: %s\n", what, strerror(errno));
    exit(2);
}

static const char *err_name(int err)
{
    const char *n = err ? strerrorname_np(err) : "0";
    return n ? n : "?";
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static struct sockaddr_in address(const char *ip, int port)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    if (inet_pton(AF_INET, ip, &a.sin_addr) != 1) {
        fprintf(stderr, "relaycheck: %s is not an IPv4 address\n", ip);
        exit(2);
    }
    return a;
}

static const char *text(const struct sockaddr *sa, socklen_t len, char *buf, size_t size)
{
    char host[INET6_ADDRSTRLEN];
    if (len >= sizeof(struct sockaddr_in) && sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const void *)sa;
        snprintf(buf, size, "%s:%u", inet_ntop(AF_INET, &in->sin_addr, host, sizeof host),
                 ntohs(in->sin_port));
    } else if (len >= sizeof(struct sockaddr_in6) && sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const void *)sa;
        snprintf(buf, size, "[%s]:%u", inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host),
                 ntohs(in6->sin6_port));
    } else {
        snprintf(buf, size, "family-%d-len-%u", len ? sa->sa_family : -1, (unsigned)len);
    }
    return buf;
}

static int listener(const char *ip, int port, int *bound)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = address(ip, port);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, 128))
        die("listen");
    socklen_t len = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &len);
    *bound = ntohs(a.sin_port);
    return fd;
}

static int bound_socket(const char *source, int nonblocking)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in s = address(source, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&s, sizeof s))
        die("bind");
    if (nonblocking && fcntl(fd, F_SETFL, O_NONBLOCK))
        die("fcntl");
    return fd;
}

static void set_blocking(int fd)
{
    int flags = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
}

static void print_name(const char *key, const char *tag, int fd, int peer)
{
    struct sockaddr_storage sa;
    socklen_t len = sizeof sa;
    char buf[80];
    int rc = peer ? getpeername(fd, (struct sockaddr *)&sa, &len)
                  : getsockname(fd, (struct sockaddr *)&sa, &len);
    if (rc)
        printf("%s %s -1 %s\n", key, tag, err_name(errno));
    else
        printf("%s %s %s\n", key, tag, text((struct sockaddr *)&sa, len, buf, sizeof buf));
}

static const char *revents(short r, char *buf, size_t size)
{
    snprintf(buf, size, "%s%s%s%s%s", r & POLLIN ? "IN," : "", r & POLLOUT ? "OUT," : "",
             r & POLLERR ? "ERR," : "", r & POLLHUP ? "HUP," : "", r ? "" : "none,");
    buf[strlen(buf) - 1] = 0;
    return buf;
}

/* ---- data both ways, with half-close ---- */

static uint8_t pattern(size_t i) { return (uint8_t)(i * 7 % 251); }

struct side { int fd; size_t bytes; long result; };

/* The server: echoes what it reads, checks the pattern, half-closes at EOF. */
static void *echo(void *arg)
{
    struct side *s = arg;
    uint8_t buf[65536];
    size_t total = 0;
    s->result = 0;
    for (;;) {
        ssize_t r = read(s->fd, buf, sizeof buf);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        for (ssize_t i = 0; i < r; i++)
            if (buf[i] != pattern(total + (size_t)i)) {
                s->result = -1 - (long)(total + (size_t)i);
                shutdown(s->fd, SHUT_RDWR);     /* the client must not wait for an echo */
                return NULL;
            }
        for (ssize_t off = 0; off < r;) {
            ssize_t w = write(s->fd, buf + off, (size_t)(r - off));
            if (w <= 0) {
                s->result = -1;
                return NULL;
            }
            off += w;
        }
        total += (size_t)r;
    }
    shutdown(s->fd, SHUT_WR);
    s->result = (long)total;
    return NULL;
}

static void *writer(void *arg)
{
    struct side *s = arg;
    uint8_t buf[65536];
    size_t sent = 0;
    while (sent < s->bytes) {
        size_t n = s->bytes - sent < sizeof buf ? s->bytes - sent : sizeof buf;
        for (size_t i = 0; i < n; i++)
            buf[i] = pattern(sent + i);
        ssize_t w = write(s->fd, buf, n);
        if (w <= 0) {
            s->result = -1;
            return NULL;
        }
        sent += (size_t)w;
    }
    shutdown(s->fd, SHUT_WR);
    s->result = (long)sent;
    return NULL;
}

static void exchange(const char *key, int client, int server, size_t bytes)
{
    set_blocking(client);
    set_blocking(server);
    struct side srv = { server, bytes, 0 }, cli = { client, bytes, 0 };
    pthread_t t1, t2;
    pthread_create(&t1, NULL, echo, &srv);
    pthread_create(&t2, NULL, writer, &cli);
    uint8_t buf[65536];
    size_t got = 0;
    long bad = -1;
    for (;;) {
        ssize_t r = read(client, buf, sizeof buf);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        for (ssize_t i = 0; i < r && bad < 0; i++)
            if (buf[i] != pattern(got + (size_t)i))
                bad = (long)(got + (size_t)i);
        got += (size_t)r;
    }
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    if (bad < 0 && got == bytes && srv.result == (long)bytes && cli.result == (long)bytes)
        printf("data %s ok %zu\n", key, bytes);
    else
        printf("data %s bad echoed=%zu first-bad=%ld server=%ld client=%ld\n", key, got, bad,
               srv.result, cli.result);
}

/* ---- commands ---- */

static int vectors(void)
{
    printf("fnv1a64 \"\" %016llx\n", (unsigned long long)ws_fnv1a64((const uint8_t *)"", 0));
    printf("fnv1a64 \"a\" %016llx\n", (unsigned long long)ws_fnv1a64((const uint8_t *)"a", 1));
    printf("mix64 1 %016llx\n", (unsigned long long)ws_mix64(1));
    struct sockaddr_in host = address("10.1.0.3", 40000);
    uint8_t bytes[16];
    size_t n = ws_host_bytes((struct sockaddr *)&host, sizeof host, bytes);
    for (int k = 0; k < 2; k++)
        printf("score %d 10.1.0.3 %016llx\n", k, (unsigned long long)ws_relay_score((uint64_t)k, bytes, n));
    printf("select 2 10.1.0.3 %d\n", ws_relay_select(2, (struct sockaddr *)&host, sizeof host));
    struct sockaddr_in6 mapped = { .sin6_family = AF_INET6, .sin6_port = htons(40000) };
    inet_pton(AF_INET6, "::ffff:10.1.0.3", &mapped.sin6_addr);
    printf("select 2 ::ffff:10.1.0.3 %d\n", ws_relay_select(2, (struct sockaddr *)&mapped, sizeof mapped));

    struct sockaddr_in src = address("10.0.0.2", 1024);
    uint8_t p[WS_PREAMBLE_LEN];
    ws_preamble_encode(p, WS_KIND_CONNECT, (struct sockaddr *)&host, sizeof host,
                       (struct sockaddr *)&src, sizeof src);
    printf("preamble ");
    for (int i = 0; i < WS_PREAMBLE_LEN; i++)
        printf("%02x", p[i]);
    printf("\n");
    /* kind 3: the same endpoints with a request for 25 MB/s and 1452-byte datagrams */
    uint8_t b[WS_PREAMBLE_BLAST_LEN];
    ws_preamble_encode(b, WS_KIND_CONNECT_BLAST, (struct sockaddr *)&host, sizeof host,
                       (struct sockaddr *)&src, sizeof src);
    ws_blast_extension_encode(b + WS_PREAMBLE_LEN, 25000000, 1452);
    printf("blast-preamble ");
    for (int i = 0; i < WS_PREAMBLE_BLAST_LEN; i++)
        printf("%02x", b[i]);
    printf("\n");
    uint8_t ext[WS_BLAST_EXT_LEN];
    printf("blast-extension-bad %d %d %d\n", ws_blast_extension_encode(ext, 0, 1452),
           ws_blast_extension_encode(ext, 1, WS_MIN_DATAGRAM - 1), ws_blast_extension_encode(ext, 1, WS_MAX_DATAGRAM + 1));
    /* the same bytes as a delivery preamble decode back to the endpoints */
    p[5] = WS_KIND_DELIVER;
    struct sockaddr_storage d, s;
    socklen_t dl, sl;
    const char *why = "";
    char b1[80], b2[80];
    if (ws_preamble_decode(p, WS_KIND_DELIVER, &d, &dl, &s, &sl, &why) == 0)
        printf("decoded %s %s\n", text((struct sockaddr *)&d, dl, b1, sizeof b1),
               text((struct sockaddr *)&s, sl, b2, sizeof b2));
    p[5] = WS_KIND_CONNECT;
    int rc = ws_preamble_decode(p, WS_KIND_DELIVER, &d, &dl, &s, &sl, &why);
    printf("decode-wrong-kind %d %s\n", rc, why);
    p[5] = WS_KIND_DELIVER;
    p[25] = 1;
    rc = ws_preamble_decode(p, WS_KIND_DELIVER, &d, &dl, &s, &sl, &why);
    printf("decode-padding %d %s\n", rc, why);
    for (int r = 0; r <= 15; r++) {
        uint8_t reply[4] = { 'W', 'R', 1, (uint8_t)r };
        int reason;
        printf("reply %d %s\n", r, err_name(ws_reply_errno(reply, &reason)));
    }
    return 0;
}

static int select_relays(int argc, char **argv)
{
    int n = atoi(argv[2]);
    for (int i = 3; i < argc; i++) {
        struct sockaddr_in a = address(argv[i], 1);
        int k = !strcmp(argv[1], "select") ? ws_relay_select(n, (struct sockaddr *)&a, sizeof a)
                                           : ws_relay_select_address(n, (struct sockaddr *)&a, sizeof a);
        printf("select %s %d\n", argv[i], k);
    }
    return 0;
}

static int accept_one(int l, const char *how, const char *key)
{
    struct sockaddr_storage sa;
    socklen_t len = sizeof sa;
    char buf[80];
    int a;
    if (!strcmp(how, "null")) {
        a = accept(l, NULL, NULL);
        if (a >= 0)
            printf("accepted %s -\n", key);
    } else {
        a = !strcmp(how, "accept4") ? accept4(l, (struct sockaddr *)&sa, &len, SOCK_NONBLOCK)
                                    : accept(l, (struct sockaddr *)&sa, &len);
        if (a >= 0)
            printf("accepted %s %s\n", key, text((struct sockaddr *)&sa, len, buf, sizeof buf));
    }
    if (a < 0)
        printf("accept %s -1 %s\n", key, err_name(errno));
    else
        print_name("accepted-peer", key, a, 1);
    return a;
}

static int request_blast(char **argv);

static int pair(int argc, char **argv)
{
    const char *source = argv[2], *mode = argv[4], *how = argv[5];
    size_t bytes = argc > 6 ? strtoul(argv[6], NULL, 10) : 1 << 20;
    int nonblocking = !strcmp(mode, "nonblocking");
    char *ips = strdup(argv[3]), *save = NULL;
    for (char *ip = strtok_r(ips, ",", &save); ip; ip = strtok_r(NULL, ",", &save)) {
        int port;
        int l = listener(ip, 0, &port);
        int s = bound_socket(source, nonblocking);
        struct sockaddr_in dst = address(ip, port);
        double t0 = now_ms();
        int rc = connect(s, (struct sockaddr *)&dst, sizeof dst);
        int err = errno;
        printf("connect %s %d %s %.3f\n", ip, rc, rc ? err_name(err) : "0", now_ms() - t0);
        int failed = rc < 0 && !(nonblocking && err == EINPROGRESS);
        if (nonblocking && rc < 0 && err == EINPROGRESS) {
            struct pollfd p = { .fd = s, .events = POLLOUT };
            char r[32];
            poll(&p, 1, 15000);
            printf("poll %s %s\n", ip, revents(p.revents, r, sizeof r));
            int so = -1;
            socklen_t len = sizeof so;
            getsockopt(s, SOL_SOCKET, SO_ERROR, &so, &len);
            printf("so_error %s %s\n", ip, err_name(so));
            failed = so != 0;
        }
        print_name("local", ip, s, 0);
        print_name("peer", ip, s, 1);
        int a = failed ? -1 : accept_one(l, how, ip);
        const char *open_blast = getenv("RELAYCHECK_BLAST_OPEN");      /* "RATE PAYLOAD" */
        if (a >= 0 && open_blast) {         /* a request while the connection is open */
            char rate[32], payload[16];
            char *args[] = { ip, rate, payload };
            if (sscanf(open_blast, "%31s %15s", rate, payload) == 2)
                request_blast(args);
        }
        if (a >= 0) {
            exchange(ip, s, a, bytes);
            close(a);
        }
        close(s);
        close(l);
    }
    free(ips);
    return 0;
}

static int connect_once(char **argv)
{
    int s = bound_socket(argv[2], !strcmp(argv[5], "nonblocking"));
    struct sockaddr_in dst = address(argv[3], atoi(argv[4]));
    double t0 = now_ms();
    int rc = connect(s, (struct sockaddr *)&dst, sizeof dst);
    int err = errno;
    printf("connect %d %s %.3f\n", rc, rc ? err_name(err) : "0", now_ms() - t0);
    if (rc < 0 && err == EINPROGRESS) {
        struct pollfd p = { .fd = s, .events = POLLOUT };
        char r[32];
        poll(&p, 1, 15000);
        printf("poll %s\n", revents(p.revents, r, sizeof r));
        for (int i = 0; i < 2; i++) {
            int so = -1;
            socklen_t len = sizeof so;
            getsockopt(s, SOL_SOCKET, SO_ERROR, &so, &len);
            printf("so_error%s %s\n", i ? "-again" : "", err_name(so));
        }
    }
    print_name("peer", "-", s, 1);
    rc = connect(s, (struct sockaddr *)&dst, sizeof dst);
    printf("connect-again %d %s\n", rc, rc ? err_name(errno) : "0");
    close(s);
    return 0;
}

static int accept_many(char **argv)
{
    int port;
    int l = listener(argv[2], atoi(argv[3]), &port);
    int n = atoi(argv[4]);
    int nonblocking = !strcmp(argv[5], "nonblocking");
    const char *how = argv[6];
    if (nonblocking)
        fcntl(l, F_SETFL, O_NONBLOCK);
    printf("listening %d\n", port);
    fflush(stdout);
    double deadline = now_ms() + 20000;
    int accepted = 0;
    while (accepted < n && now_ms() < deadline) {
        if (nonblocking) {
            struct pollfd p = { .fd = l, .events = POLLIN };
            if (poll(&p, 1, 20000) <= 0)
                break;
        }
        int a = accept_one(l, how, "-");
        fflush(stdout);
        if (a < 0)
            continue;
        accepted++;
        set_blocking(a);
        struct timeval tv = { .tv_sec = 5 };
        setsockopt(a, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        char line[256];
        size_t got = 0;
        while (got + 1 < sizeof line) {
            ssize_t r = read(a, line + got, 1);
            if (r <= 0 || line[got] == '\n')
                break;
            got++;
        }
        line[got] = 0;
        printf("line %s\n", line);
        fflush(stdout);
        close(a);
    }
    printf("done %d\n", accepted);
    close(l);
    return 0;
}

static int parallel(char **argv)
{
    int k = atoi(argv[4]), port;
    int l = listener(argv[3], 0, &port);
    struct sockaddr_in dst = address(argv[3], port);
    struct pollfd *p = calloc((size_t)k, sizeof *p);
    double t0 = now_ms();
    for (int i = 0; i < k; i++) {
        p[i].fd = bound_socket(argv[2], 1);
        p[i].events = POLLOUT;
        int rc = connect(p[i].fd, (struct sockaddr *)&dst, sizeof dst);
        if (rc < 0 && errno != EINPROGRESS)
            die("connect");
    }
    double t1 = now_ms();
    int left = k;
    while (left > 0) {
        if (poll(p, (nfds_t)k, 15000) <= 0)
            die("poll");
        for (int i = 0; i < k; i++)
            if (p[i].fd >= 0 && p[i].revents) {
                int so = -1;
                socklen_t len = sizeof so;
                getsockopt(p[i].fd, SOL_SOCKET, SO_ERROR, &so, &len);
                if (so)
                    printf("so_error %d %s\n", i, err_name(so));
                p[i].fd = -p[i].fd - 1;
                left--;
            }
    }
    double t2 = now_ms();
    printf("parallel %d inside-connect-ms %.1f all-writable-ms %.1f\n", k, t1 - t0, t2 - t0);
    for (int i = 0; i < k; i++)
        close(-p[i].fd - 1);
    close(l);
    free(p);
    return 0;
}

/* `blast IP RATE PAYLOAD`: the request through the shim's API, as libwanmpi makes it. */
static int request_blast(char **argv)
{
    wanshim_request_blast_fn *request = (wanshim_request_blast_fn *)dlsym(RTLD_DEFAULT, WANSHIM_REQUEST_BLAST);
    if (!request) {
        printf("blast-request no-shim\n");
        return -1;
    }
    struct sockaddr_in6 a6 = { .sin6_family = AF_INET6 };
    struct sockaddr_in a4 = { 0 };
    int v6 = strchr(argv[0], ':') != NULL;
    if (v6)
        inet_pton(AF_INET6, argv[0], &a6.sin6_addr);
    else
        a4 = address(argv[0], 1);
    int rc = v6 ? request((struct sockaddr *)&a6, sizeof a6, strtoull(argv[1], NULL, 10), (unsigned)atoi(argv[2]))
                : request((struct sockaddr *)&a4, sizeof a4, strtoull(argv[1], NULL, 10), (unsigned)atoi(argv[2]));
    if (rc < 0)
        printf("blast-request -1 %s\n", err_name(errno));
    else
        printf("blast-request %d\n", rc);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    while (argc >= 6 && !strcmp(argv[1], "blast")) {
        if (request_blast(argv + 2) != 0)
            return 2;
        argv += 4;
        argc -= 4;
    }
    if (argc >= 2 && !strcmp(argv[1], "vectors"))
        return vectors();
    if (argc >= 4 && (!strcmp(argv[1], "select") || !strcmp(argv[1], "select-address")))
        return select_relays(argc, argv);
    if (argc >= 6 && !strcmp(argv[1], "pair"))
        return pair(argc, argv);
    if (argc == 6 && !strcmp(argv[1], "connect"))
        return connect_once(argv);
    if (argc == 7 && !strcmp(argv[1], "accept"))
        return accept_many(argv);
    if (argc == 5 && !strcmp(argv[1], "parallel"))
        return parallel(argv);
    fprintf(stderr, "usage: see the comment at the top of tests/programs/relaycheck.c\n");
    return 2;
}
