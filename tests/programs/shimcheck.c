/* shimcheck: libwanshim on loopback, without MPI and without namespaces.
 *
 * Usage: shimcheck pacing RATE     (RATE: bytes/s the API sets mid-run)
 *        shimcheck errors
 *        shimcheck threads
 *        shimcheck inherited FD   (FD: a TCP socket the parent connected)
 *
 * The clusters are loopback addresses: the tests set
 * WANMPI_CLUSTER_MAP="a=127.0.0.1/32;b=127.0.0.2/32;c=127.0.0.3/32", so this
 * host (lo: 127.0.0.1) is in cluster a and 127.0.0.2/3 are other clusters.
 * The shim's API is reached the way libwanmpi reaches it, through
 * dlsym(RTLD_DEFAULT): without the shim preloaded the program still runs.
 *
 * pacing: prints "rate PHASE SOCKET SO_MAX_PACING_RATE TCPI_MAX_PACING_RATE"
 *   and "retry PHASE SOCKET TCP_RTO_MAX_MS TCP_USER_TIMEOUT" for every socket
 *   at every phase ("-" = no cap) and "api CALL RESULT".
 * errors: prints "call NAME RESULT ERRNO" for calls that fail (and succeed
 *   with errno preset); the output must be the same with and without the shim.
 * threads: connects and closes from several threads while the main thread
 *   changes the rate; prints "threads ok" or what was wrong (exit 1).
 * inherited: prints the rate of FD (the shim's API call makes it look).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/tcp.h>          /* struct tcp_info with tcpi_max_pacing_rate */
#include <netinet/in.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "../../lib/include/wanshim.h"

#ifndef SO_MAX_PACING_RATE
#define SO_MAX_PACING_RATE 47
#endif

static void die(const char *what)
{
    fprintf(stderr, "shimcheck: %s: %s\n", what, strerror(errno));
    exit(2);
}

static struct sockaddr_in address(const char *ip, int port)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    inet_pton(AF_INET, ip, &a.sin_addr);
    return a;
}

static int listener(const char *ip, int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = address(ip, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, 1024))
        die("listen");
    socklen_t len = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &len);
    *port = ntohs(a.sin_port);
    return fd;
}

/* A blocking connect to ip:port, from `source` if not NULL. */
static int connect_to(const char *ip, int port, const char *source)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        die("socket");
    if (source) {
        struct sockaddr_in s = address(source, 0);
        if (bind(fd, (struct sockaddr *)&s, sizeof s))
            die("bind");
    }
    struct sockaddr_in a = address(ip, port);
    if (connect(fd, (struct sockaddr *)&a, sizeof a))
        die("connect");
    return fd;
}

/* The socket's cap in bytes/s: "-" for none (~0). */
static void show(const char *phase, const char *name, int fd)
{
    unsigned long rate = 0;
    socklen_t len = sizeof rate;
    char so[32], ti[32];
    if (getsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &rate, &len))
        snprintf(so, sizeof so, "error:%s", strerrorname_np(errno));
    else if (rate == ~0UL)
        snprintf(so, sizeof so, "-");
    else
        snprintf(so, sizeof so, "%lu", rate);
    struct tcp_info info;
    memset(&info, 0, sizeof info);
    len = sizeof info;
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len))
        snprintf(ti, sizeof ti, "error:%s", strerrorname_np(errno));
    else if (len < offsetof(struct tcp_info, tcpi_max_pacing_rate) + sizeof info.tcpi_max_pacing_rate)
        snprintf(ti, sizeof ti, "short");
    else if (info.tcpi_max_pacing_rate == ~0ULL)
        snprintf(ti, sizeof ti, "-");
    else
        snprintf(ti, sizeof ti, "%llu", (unsigned long long)info.tcpi_max_pacing_rate);
    printf("rate %s %s %s %s\n", phase, name, so, ti);
    /* retransmission through WAN outages: "retry PHASE SOCKET RTO_MAX_MS USER_TIMEOUT_MS" */
    int rto = 0, user = 0;
    socklen_t rlen = sizeof rto, ulen = sizeof user;
    char r[32], u[32];
    if (getsockopt(fd, IPPROTO_TCP, 44 /* TCP_RTO_MAX_MS, Linux 6.15+ */, &rto, &rlen))
        snprintf(r, sizeof r, "error:%s", strerrorname_np(errno));
    else
        snprintf(r, sizeof r, "%d", rto);
    if (getsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user, &ulen))
        snprintf(u, sizeof u, "error:%s", strerrorname_np(errno));
    else
        snprintf(u, sizeof u, "%d", user);
    printf("retry %s %s %s %s\n", phase, name, r, u);
}

struct api {
    wanshim_set_wan_rate_fn *set_wan_rate;
    wanshim_wan_rate_fn *wan_rate;
    wanshim_set_cluster_rate_fn *set_cluster_rate;
    wanshim_cluster_rate_fn *cluster_rate;
    wanshim_wan_socket_count_fn *count;
    wanshim_enabled_fn *enabled;
    wanshim_set_local_rate_fn *set_local_rate;
    wanshim_set_peer_rate_fn *set_peer_rate;
};

static struct api find_api(void)
{
    return (struct api){
        (wanshim_set_wan_rate_fn *)dlsym(RTLD_DEFAULT, WANSHIM_SET_WAN_RATE),
        (wanshim_wan_rate_fn *)dlsym(RTLD_DEFAULT, WANSHIM_WAN_RATE),
        (wanshim_set_cluster_rate_fn *)dlsym(RTLD_DEFAULT, WANSHIM_SET_CLUSTER_RATE),
        (wanshim_cluster_rate_fn *)dlsym(RTLD_DEFAULT, WANSHIM_CLUSTER_RATE),
        (wanshim_wan_socket_count_fn *)dlsym(RTLD_DEFAULT, WANSHIM_WAN_SOCKET_COUNT),
        (wanshim_enabled_fn *)dlsym(RTLD_DEFAULT, WANSHIM_ENABLED),
        (wanshim_set_local_rate_fn *)dlsym(RTLD_DEFAULT, WANSHIM_SET_LOCAL_RATE),
        (wanshim_set_peer_rate_fn *)dlsym(RTLD_DEFAULT, WANSHIM_SET_PEER_RATE),
    };
}

static void api_result(const char *call, long long result)
{
    printf("api %s %lld%s%s\n", call, result, result == -1 ? " " : "",
           result == -1 ? strerrorname_np(errno) : "");
}

#define SOCKETS 10

static int pacing(uint64_t rate)
{
    struct api api = find_api();
    printf("api loaded %d\n", api.set_wan_rate != NULL);
    if (api.enabled)
        api_result("enabled", api.enabled());
    int pa, pb, pc;
    int la = listener("127.0.0.1", &pa), lb = listener("127.0.0.2", &pb), lc = listener("127.0.0.3", &pc);
    const char *names[SOCKETS] = { "to-a", "to-b", "to-c", "to-b-nonblocking", "to-b-ipv6-mapped",
                                   "accepted-from-a", "accepted-from-b", "udp-to-b", "to-b-late",
                                   "dup-of-to-c" };
    int fd[SOCKETS];
    fd[0] = connect_to("127.0.0.1", pa, NULL);
    fd[1] = connect_to("127.0.0.2", pb, NULL);
    fd[2] = connect_to("127.0.0.3", pc, NULL);
    /* non-blocking, as both MPIs connect: -1 EINPROGRESS, then completes */
    fd[3] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in b = address("127.0.0.2", pb);
    int rc = connect(fd[3], (struct sockaddr *)&b, sizeof b);
    if (rc && errno != EINPROGRESS)
        die("non-blocking connect");
    /* dual-stack socket, IPv4-mapped peer */
    fd[4] = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 b6 = { .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)pb) };
    inet_pton(AF_INET6, "::ffff:127.0.0.2", &b6.sin6_addr);
    if (fd[4] < 0 || connect(fd[4], (struct sockaddr *)&b6, sizeof b6))
        die("connect ipv6-mapped");
    /* accepted: the peer's source address decides (the to-a client is from 127.0.0.1) */
    fd[5] = accept(la, NULL, NULL);
    int from_b = connect_to("127.0.0.1", pa, "127.0.0.2");
    struct sockaddr_in peer;
    socklen_t plen = sizeof peer;
    fd[6] = accept4(la, (struct sockaddr *)&peer, &plen, SOCK_CLOEXEC);
    fd[7] = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd[7] < 0 || connect(fd[7], (struct sockaddr *)&b, sizeof b))
        die("connect udp");
    fd[8] = -1;
    fd[9] = -1;
    if (fd[5] < 0 || fd[6] < 0)
        die("accept");
    for (int i = 0; i < 8; i++)
        show("initial", names[i], fd[i]);
    if (!api.set_wan_rate)
        return 0;
    api_result("count-initial", api.count());
    api_result("set_wan_rate", api.set_wan_rate(rate));
    api_result("wan_rate", (long long)api.wan_rate());
    for (int i = 0; i < 8; i++)
        show("after-set", names[i], fd[i]);
    /* connected after the rate was set */
    fd[8] = connect_to("127.0.0.2", pb, NULL);
    show("after-set", names[8], fd[8]);
    api_result("count-after-set", api.count());
    /* one cluster on its own rate, then back to the WAN rate */
    api_result("set_cluster_rate_c", api.set_cluster_rate("c", rate / 2));
    api_result("cluster_rate_c", (long long)api.cluster_rate("c"));
    api_result("cluster_rate_b", (long long)api.cluster_rate("b"));
    show("cluster-c", names[1], fd[1]);
    show("cluster-c", names[2], fd[2]);
    api_result("set_cluster_rate_a", api.set_cluster_rate("a", 1000));
    api_result("set_cluster_rate_z", api.set_cluster_rate("z", 1000));
    api_result("set_cluster_rate_c_wan", api.set_cluster_rate("c", WANSHIM_RATE_WAN));
    show("cluster-c-wan", names[2], fd[2]);
    /* the sockets inside our cluster, paced on request and let go again */
    if (api.set_local_rate) {
        api_result("set_local_rate", api.set_local_rate(rate / 4));
        for (int i = 0; i < 8; i++)
            show("local", names[i], fd[i]);
        api_result("set_local_rate_0", api.set_local_rate(0));
    }
    /* one peer host on its own rate, then back */
    if (api.set_peer_rate) {
        struct sockaddr_in c3 = { .sin_family = AF_INET };
        inet_pton(AF_INET, "127.0.0.3", &c3.sin_addr);
        struct sockaddr_un notip = { .sun_family = AF_UNIX };
        api_result("set_peer_rate_c", api.set_peer_rate((struct sockaddr *)&c3, sizeof c3, rate / 3));
        for (int i = 0; i < 8; i++)
            show("peer", names[i], fd[i]);
        api_result("set_peer_rate_unix", api.set_peer_rate((struct sockaddr *)&notip, sizeof notip, 1000));
        api_result("set_peer_rate_c_back", api.set_peer_rate((struct sockaddr *)&c3, sizeof c3, WANSHIM_RATE_WAN));
        show("peer-back", names[2], fd[2]);
    }
    /* a duplicate keeps the socket tracked after the original is closed */
    fd[9] = dup(fd[2]);
    close(fd[2]);
    fd[2] = -1;
    api_result("count-after-dup-close", api.count());
    api_result("set_wan_rate-after-dup", api.set_wan_rate(rate + 1));
    show("after-dup", names[9], fd[9]);
    api_result("set_wan_rate_0", api.set_wan_rate(0));
    for (int i = 0; i < SOCKETS; i++)
        if (fd[i] >= 0)
            show("after-unset", names[i], fd[i]);
    for (int i = 0; i < SOCKETS; i++)
        if (fd[i] >= 0)
            close(fd[i]);
    api_result("count-after-close", api.count());
    close(from_b);
    close(la);
    close(lb);
    close(lc);
    return 0;
}

/* ---- errors: results and errno of failing calls ---- */

static void call(const char *name, int result)
{
    int err = errno;
    printf("call %s %d %s\n", name, result < 0 ? -1 : result >= 0 ? 0 : result,
           strerrorname_np(err) ? strerrorname_np(err) : "0");
}

static int errors(void)
{
    int port, closed_port;
    int l = listener("127.0.0.1", &closed_port);
    close(l);
    int lb = listener("127.0.0.2", &port);
    int pipefd[2];
    if (pipe(pipefd))
        die("pipe");
    struct sockaddr_in refused_a = address("127.0.0.1", closed_port);
    struct sockaddr_in refused_b = address("127.0.0.3", closed_port);
    struct sockaddr_in ok = address("127.0.0.2", port);

    int s = socket(AF_INET, SOCK_STREAM, 0);
    call("connect-refused-same-cluster", connect(s, (struct sockaddr *)&refused_a, sizeof refused_a));
    close(s);
    s = socket(AF_INET, SOCK_STREAM, 0);
    call("connect-refused-other-cluster", connect(s, (struct sockaddr *)&refused_b, sizeof refused_b));
    close(s);
    call("connect-not-a-socket", connect(pipefd[0], (struct sockaddr *)&ok, sizeof ok));
    call("connect-bad-fd", connect(-1, (struct sockaddr *)&ok, sizeof ok));
    s = socket(AF_INET, SOCK_STREAM, 0);
    call("connect-short-address", connect(s, (struct sockaddr *)&ok, 4));
    call("connect-null-address", connect(s, NULL, sizeof ok));
    errno = EDOM;
    call("connect-ok-keeps-errno", connect(s, (struct sockaddr *)&ok, sizeof ok));
    call("connect-again", connect(s, (struct sockaddr *)&ok, sizeof ok));

    call("accept-not-a-socket", accept(pipefd[0], NULL, NULL));
    call("accept-bad-fd", accept(12345, NULL, NULL));
    int unlistened = socket(AF_INET, SOCK_STREAM, 0);
    call("accept-not-listening", accept(unlistened, NULL, NULL));
    call("accept4-bad-flags", accept4(lb, NULL, NULL, 0x7fff0000));
    int nb = listener("127.0.0.2", &port);
    fcntl(nb, F_SETFL, O_NONBLOCK);
    call("accept-nothing-pending", accept(nb, NULL, NULL));
    call("accept4-nothing-pending", accept4(nb, NULL, NULL, SOCK_NONBLOCK));
    errno = EDOM;
    int a = accept(lb, NULL, NULL);
    call("accept-ok-keeps-errno", a);

    call("close-bad-fd", close(-1));
    errno = EDOM;
    call("close-ok-keeps-errno", close(a));
    call("close-twice", close(a));
    call("dup-bad-fd", dup(-1));
    call("dup2-bad-fd", dup2(-1, 100));
    call("dup3-same-fd", dup3(s, s, 0));
    errno = EDOM;
    int d = dup(s);
    call("dup-ok-keeps-errno", d < 0 ? d : 0);
    errno = EDOM;
    call("dup2-ok-keeps-errno", dup2(s, d) == d ? 0 : -1);
    call("close-dup", close(d));
    close(s);
    close(unlistened);
    close(nb);
    close(lb);
    return 0;
}

/* ---- threads: connects, accepts and closes race rate changes ---- */

#define THREADS 4
#define ROUNDS 150
#define RATE_ONE 1000000UL
#define RATE_TWO 2000000UL

static int thread_port;
static volatile int stop_accepting;
static int failures;

static void *acceptor(void *arg)
{
    int l = *(int *)arg;
    while (!stop_accepting) {
        int fd = accept(l, NULL, NULL);
        if (fd >= 0)
            close(fd);
    }
    return NULL;
}

static void *connector(void *arg)
{
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        int fd = connect_to("127.0.0.2", thread_port, NULL);
        unsigned long rate = 0;
        socklen_t len = sizeof rate;
        getsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &rate, &len);
        if (rate != RATE_ONE && rate != RATE_TWO) {
            fprintf(stderr, "threads: a new WAN socket has rate %lu\n", rate);
            __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
        }
        int copy = dup(fd);
        close(fd);
        close(copy);
    }
    return NULL;
}

static int threads(void)
{
    struct api api = find_api();
    if (!api.set_wan_rate) {
        printf("threads: the shim is not loaded\n");
        return 1;
    }
    api.set_wan_rate(RATE_ONE);
    int l = listener("127.0.0.2", &thread_port);
    fcntl(l, F_SETFL, O_NONBLOCK);
    int keep = connect_to("127.0.0.2", thread_port, NULL);
    pthread_t acc, conn[THREADS];
    pthread_create(&acc, NULL, acceptor, &l);
    for (int i = 0; i < THREADS; i++)
        pthread_create(&conn[i], NULL, connector, NULL);
    for (int i = 0; i < 400; i++)
        api.set_wan_rate(i % 2 ? RATE_ONE : RATE_TWO);
    for (int i = 0; i < THREADS; i++)
        pthread_join(conn[i], NULL);
    api.set_wan_rate(RATE_TWO);
    stop_accepting = 1;
    pthread_join(acc, NULL);
    unsigned long rate = 0;
    socklen_t len = sizeof rate;
    getsockopt(keep, SOL_SOCKET, SO_MAX_PACING_RATE, &rate, &len);
    int count = api.count();
    if (rate != RATE_TWO || count != 1 || failures) {
        printf("threads: long-lived socket rate %lu (want %lu), %d WAN sockets (want 1), "
               "%d bad new sockets\n", rate, RATE_TWO, count, failures);
        return 1;
    }
    close(keep);
    close(l);
    printf("threads ok\n");
    return 0;
}

/* ---- inherited: a socket connected before this process started ---- */

static int inherited(int fd)
{
    struct api api = find_api();
    if (api.count)
        api_result("count", api.count());
    show("inherited", "inherited-to-b", fd);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 3 && !strcmp(argv[1], "pacing"))
        return pacing(strtoull(argv[2], NULL, 10));
    if (argc == 2 && !strcmp(argv[1], "errors"))
        return errors();
    if (argc == 2 && !strcmp(argv[1], "threads"))
        return threads();
    if (argc == 3 && !strcmp(argv[1], "inherited"))
        return inherited(atoi(argv[2]));
    fprintf(stderr, "usage: shimcheck pacing RATE | errors | threads | inherited FD\n");
    return 2;
}
