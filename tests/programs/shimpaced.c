/* shimpaced: which of this rank's sockets are paced, after traffic between
 * every pair of ranks.
 *
 * Usage: shimpaced [--bytes N] [--rate BYTES_PER_S]
 * Every rank exchanges N bytes (default 200000) with every other rank
 * (point-to-point, so every pair has a connection whatever the collectives
 * do), then lists its own TCP sockets by walking /proc/self/fd:
 *   "sock RANK PHASE LOCAL PEER RATE"   RATE: SO_MAX_PACING_RATE, "-" if none
 *   "count RANK PHASE N"               libwanshim's count of WAN sockets (-1: no shim)
 * With --rate, it then sets the WAN rate through libwanshim's API (found with
 * dlsym, as libwanmpi does) and lists them again (phase "after"). Rank 0
 * prints every rank's report, in rank order. Which sockets must be paced is
 * the test's business (tests/test_shim.py knows the topology). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
#include <mpi.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "../../lib/include/wanshim.h"

#ifndef SO_MAX_PACING_RATE
#define SO_MAX_PACING_RATE 47
#endif

#define REPORT_MAX 65536

static char report[REPORT_MAX];
static size_t used;

static void add(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void add(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(report + used, sizeof report - used, fmt, ap);
    va_end(ap);
    if (n > 0 && used + (size_t)n < sizeof report)
        used += (size_t)n;
}

static const char *text(const struct sockaddr_storage *ss, char *buf, size_t size)
{
    char host[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *in = (const void *)ss;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
        port = ntohs(in->sin_port);
    } else if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const void *)ss;
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
            inet_ntop(AF_INET, &in6->sin6_addr.s6_addr[12], host, sizeof host);
        else
            inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
        port = ntohs(in6->sin6_port);
    }
    snprintf(buf, size, "%s:%d", host, port);
    return buf;
}

static void list_sockets(int rank, const char *phase)
{
    DIR *dir = opendir("/proc/self/fd");
    struct dirent *d;
    while (dir && (d = readdir(dir))) {
        int fd = atoi(d->d_name);
        struct stat st;
        if (d->d_name[0] == '.' || fd == dirfd(dir) || fstat(fd, &st) || !S_ISSOCK(st.st_mode))
            continue;
        int domain = 0, proto = 0;
        socklen_t len = sizeof domain;
        getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len);
        len = sizeof proto;
        getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &len);
        if ((domain != AF_INET && domain != AF_INET6) || proto != IPPROTO_TCP)
            continue;
        struct sockaddr_storage local, peer;
        socklen_t llen = sizeof local, plen = sizeof peer;
        if (getsockname(fd, (struct sockaddr *)&local, &llen) ||
            getpeername(fd, (struct sockaddr *)&peer, &plen))
            continue;       /* a listener */
        unsigned long rate = 0;
        len = sizeof rate;
        char r[32], l[64], p[64];
        if (getsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &rate, &len))
            snprintf(r, sizeof r, "error");
        else if (rate == ~0UL)
            snprintf(r, sizeof r, "-");
        else
            snprintf(r, sizeof r, "%lu", rate);
        add("sock %d %s %s %s %s\n", rank, phase, text(&local, l, sizeof l), text(&peer, p, sizeof p), r);
    }
    if (dir)
        closedir(dir);
    wanshim_wan_socket_count_fn *count =
        (wanshim_wan_socket_count_fn *)dlsym(RTLD_DEFAULT, WANSHIM_WAN_SOCKET_COUNT);
    add("count %d %s %d\n", rank, phase, count ? count() : -1);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    long bytes = 200000;
    long long rate = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--bytes"))
            bytes = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--rate"))
            rate = atoll(argv[i + 1]);
    }
    char *out = malloc((size_t)bytes), *in = malloc((size_t)bytes);
    memset(out, rank, (size_t)bytes);
    int bad = 0;
    for (int step = 1; step < size; step++) {
        int to = (rank + step) % size, from = (rank - step + size) % size;
        MPI_Sendrecv(out, (int)bytes, MPI_BYTE, to, 0, in, (int)bytes, MPI_BYTE, from, 0,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (long i = 0; i < bytes; i++)
            bad |= in[i] != (char)from;
    }
    list_sockets(rank, "traffic");
    if (rate >= 0) {
        wanshim_set_wan_rate_fn *set = (wanshim_set_wan_rate_fn *)dlsym(RTLD_DEFAULT, WANSHIM_SET_WAN_RATE);
        add("set %d %d\n", rank, set ? set((uint64_t)rate) : -2);
        list_sockets(rank, "after");
    }
    int n = (int)used, *lens = NULL, *displs = NULL;
    char *all = NULL;
    if (rank == 0) {
        lens = malloc(sizeof(int) * (size_t)size);
        displs = malloc(sizeof(int) * (size_t)size);
    }
    MPI_Gather(&n, 1, MPI_INT, lens, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        int total = 0;
        for (int r = 0; r < size; r++) {
            displs[r] = total;
            total += lens[r];
        }
        all = malloc((size_t)total + 1);
        all[total] = 0;
    }
    MPI_Gatherv(report, n, MPI_CHAR, all, lens, displs, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rank == 0)
        fputs(all, stdout);
    int any_bad;
    MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && any_bad)
        printf("shimpaced: wrong data\n");
    MPI_Finalize();
    return any_bad ? 3 : 0;
}
