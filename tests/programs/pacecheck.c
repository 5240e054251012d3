/* pacecheck: the pacing attributes and the rate-managed all-to-all, seen
 * from the sockets.
 *
 * Run under `wanmpi run` on the default testbed (clusters on 198.18.0.0/24
 * and 198.18.1.0/24: a peer is in another cluster iff its address differs
 * from the socket's own in the first three octets). Every rank:
 *   - exchanges data with every rank, so every pair has a connection;
 *   - reads WANMPI_MAXRATE (must be WANMPI_WAN_RATE / 8000 KB/s) and
 *     WANMPI_MATB (the start rate, WANMPI_PACING_RATE / 1000, 0 = not paced);
 *   - puts WANMPI_MATB with MPI_Comm_set_attr and MPI_Attr_put and reads it
 *     back, and reads SO_MAX_PACING_RATE of its own sockets: exactly the
 *     other-cluster ones carry the rate;
 *   - puts bad values (negative, zero, NULL, a put to WANMPI_MAXRATE,
 *     wanmpi_set_senders(comm, 0)): each returns an error of the right class,
 *     and the rate is unchanged;
 *   - wanmpi_set_senders(comm, 4): MATB = B / 4;
 *   - runs MPI_Alltoall and MPI_Alltoallv: afterwards the sockets are back
 *     at that rate and libwanshim has no per-cluster override left;
 *   - deletes WANMPI_MATB: back to the start rate.
 * The keyvals are found with dlsym, so the program needs libwanmpi only at
 * run time (preloaded). Rank 0 prints "pacecheck: N checks ok"; any failure
 * prints what and aborts. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
#include <mpi.h>
#include <netinet/in.h>
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

static int rank, checks;

#define CHECK(cond, ...)                                                                        \
    do {                                                                                         \
        checks++;                                                                                \
        if (!(cond)) {                                                                           \
            fprintf(stderr, "pacecheck: rank %d: FAIL %s:%d: ", rank, __FILE__, __LINE__);       \
            fprintf(stderr, __VA_ARGS__);                                                        \
            fputc('\n', stderr);                                                                 \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                        \
        }                                                                                        \
    } while (0)

static int *keyval(const char *name)
{
    int *k = dlsym(RTLD_DEFAULT, name);
    if (!k) {
        fprintf(stderr, "pacecheck: %s not found: is libwanmpi preloaded?\n", name);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return k;
}

static long long env_number(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? atoll(v) : 0;
}

static int get(int key, int deprecated)
{
    int *value = NULL, flag = 0, rc;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    rc = deprecated ? MPI_Attr_get(MPI_COMM_WORLD, key, &value, &flag)
                    : MPI_Comm_get_attr(MPI_COMM_WORLD, key, &value, &flag);
#pragma GCC diagnostic pop
    CHECK(rc == MPI_SUCCESS && flag && value, "get of keyval %d: rc %d flag %d", key, rc, flag);
    return *value;
}

static int put(int key, int *value, int deprecated)
{
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    return deprecated ? MPI_Attr_put(MPI_COMM_WORLD, key, value) : MPI_Comm_set_attr(MPI_COMM_WORLD, key, value);
#pragma GCC diagnostic pop
}

static int error_class(int rc)
{
    int cls = -1;
    MPI_Error_class(rc, &cls);
    return cls;
}

/* Every TCP socket of this process: other-cluster ones must be paced at
 * `wan` bytes/s (0: not paced), same-cluster ones never. Returns the number
 * of other-cluster sockets seen. */
static int check_sockets(unsigned long long wan, const char *when)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int wan_sockets = 0;
    while (d && (e = readdir(d))) {
        int fd = atoi(e->d_name);
        struct stat st;
        struct sockaddr_in self, peer;
        socklen_t ls = sizeof self, lp = sizeof peer;
        int type = 0;
        socklen_t lt = sizeof type;
        if (e->d_name[0] == '.' || fstat(fd, &st) || !S_ISSOCK(st.st_mode))
            continue;
        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &lt) || type != SOCK_STREAM)
            continue;
        if (getsockname(fd, (struct sockaddr *)&self, &ls) || getpeername(fd, (struct sockaddr *)&peer, &lp) ||
            self.sin_family != AF_INET || peer.sin_family != AF_INET)
            continue;
        uint32_t a = ntohl(self.sin_addr.s_addr), b = ntohl(peer.sin_addr.s_addr);
        if ((a >> 24) == 127 || (b >> 24) == 127)
            continue;
        unsigned long long rate = 0;
        socklen_t lr = sizeof rate;
        CHECK(getsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &rate, &lr) == 0, "getsockopt fd %d", fd);
        char peer_s[32];
        inet_ntop(AF_INET, &peer.sin_addr, peer_s, sizeof peer_s);
        int other = (a >> 8) != (b >> 8);
        int paced = rate < 0xffffffffULL;
        if (other) {
            wan_sockets++;
            if (wan)
                CHECK(rate == wan, "%s: socket to %s paced at %llu B/s, want %llu", when, peer_s, rate, wan);
            else
                CHECK(!paced, "%s: socket to %s paced at %llu B/s, want not paced", when, peer_s, rate);
        } else {
            CHECK(!paced, "%s: same-cluster socket to %s paced at %llu B/s", when, peer_s, rate);
        }
    }
    if (d)
        closedir(d);
    return wan_sockets;
}

static void traffic(int bytes)
{
    int n;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    char *s = calloc(bytes, 1), *r = calloc(bytes, 1);
    for (int step = 1; step < n; step++)
        MPI_Sendrecv(s, bytes, MPI_BYTE, (rank + step) % n, 0, r, bytes, MPI_BYTE, (rank - step + n) % n, 0,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    free(s);
    free(r);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int n;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int maxrate = *keyval("WANMPI_MAXRATE"), matb = *keyval("WANMPI_MATB");
    int (*set_senders)(MPI_Comm, int) = (int (*)(MPI_Comm, int))dlsym(RTLD_DEFAULT, "wanmpi_set_senders");
    wanshim_cluster_rate_fn *cluster_rate = (wanshim_cluster_rate_fn *)dlsym(RTLD_DEFAULT, WANSHIM_CLUSTER_RATE);
    wanshim_wan_rate_fn *wan_rate = (wanshim_wan_rate_fn *)dlsym(RTLD_DEFAULT, WANSHIM_WAN_RATE);
    CHECK(set_senders && cluster_rate && wan_rate, "wanmpi_set_senders or libwanshim's API missing");
    traffic(100000);

    long long b = env_number("WANMPI_WAN_RATE") / 8000, start = env_number("WANMPI_PACING_RATE") / 1000;
    CHECK(get(maxrate, 0) == b, "WANMPI_MAXRATE %d, want %lld KB/s", get(maxrate, 0), b);
    CHECK(get(maxrate, 1) == b, "MPI_Attr_get WANMPI_MAXRATE %d", get(maxrate, 1));
    CHECK(get(matb, 0) == start, "WANMPI_MATB at start %d, want %lld", get(matb, 0), start);
    CHECK(check_sockets((unsigned long long)start * 1000, "start") > 0, "no socket to another cluster");

    int v = 3000;
    CHECK(put(matb, &v, 0) == MPI_SUCCESS, "MPI_Comm_set_attr WANMPI_MATB 3000");
    CHECK(get(matb, 0) == 3000, "WANMPI_MATB after put: %d", get(matb, 0));
    check_sockets(3000000, "after put 3000");
    v = 4000;
    CHECK(put(matb, &v, 1) == MPI_SUCCESS, "MPI_Attr_put WANMPI_MATB 4000");
    CHECK(get(matb, 1) == 4000, "WANMPI_MATB after MPI_Attr_put: %d", get(matb, 1));
    check_sockets(4000000, "after put 4000");

    int bad[] = { -5, 0 };
    for (int i = 0; i < 2; i++) {
        int rc = put(matb, &bad[i], i);
        CHECK(rc != MPI_SUCCESS && error_class(rc) == MPI_ERR_ARG, "put %d: rc %d class %d", bad[i], rc,
              error_class(rc));
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        CHECK(strstr(msg, "WANMPI_MATB") != NULL, "error string of a bad put: %s", msg);
    }
    v = 10;
    int rc = put(maxrate, &v, 0);
    CHECK(rc != MPI_SUCCESS && error_class(rc) == MPI_ERR_KEYVAL, "put of WANMPI_MAXRATE: rc %d", rc);
    rc = put(matb, NULL, 0);
    CHECK(rc != MPI_SUCCESS && error_class(rc) == MPI_ERR_ARG, "put of NULL: rc %d", rc);
    rc = set_senders(MPI_COMM_WORLD, 0);
    CHECK(rc != MPI_SUCCESS && error_class(rc) == MPI_ERR_ARG, "wanmpi_set_senders 0: rc %d", rc);
    CHECK(get(matb, 0) == 4000, "bad puts changed WANMPI_MATB to %d", get(matb, 0));
    check_sockets(4000000, "after bad puts");

    CHECK(set_senders(MPI_COMM_WORLD, 4) == MPI_SUCCESS, "wanmpi_set_senders 4");
    long long quarter = (env_number("WANMPI_WAN_RATE") / 8 / 4 + 999) / 1000;
    CHECK(get(matb, 0) == quarter, "MATB after wanmpi_set_senders(4): %d, want %lld", get(matb, 0), quarter);
    unsigned long long paced = (unsigned long long)quarter * 1000;
    check_sockets(paced, "after set_senders");

    int count = 16384;                               /* 64 KB per pair */
    int *s = malloc((size_t)count * n * sizeof *s), *r = malloc((size_t)count * n * sizeof *r);
    for (long i = 0; i < (long)count * n; i++)
        s[i] = (int)(rank * 100000 + i);
    CHECK(MPI_Alltoall(s, count, MPI_INT, r, count, MPI_INT, MPI_COMM_WORLD) == MPI_SUCCESS, "alltoall");
    for (int p = 0; p < n; p++)
        CHECK(r[(long)p * count + 5] == p * 100000 + rank * count + 5, "alltoall data from %d", p);
    check_sockets(paced, "after alltoall");
    int *c = malloc(4 * n * sizeof *c);
    for (int p = 0; p < n; p++) {
        c[p] = c[2 * n + p] = count / 2;
        c[n + p] = c[3 * n + p] = p * count;
    }
    CHECK(MPI_Alltoallv(s, c, c + n, MPI_INT, r, c + 2 * n, c + 3 * n, MPI_INT, MPI_COMM_WORLD) == MPI_SUCCESS,
          "alltoallv");
    check_sockets(paced, "after alltoallv");
    CHECK(wan_rate() == paced, "libwanshim's WAN rate %llu after the collectives, want %llu",
          (unsigned long long)wan_rate(), paced);
    const char *clusters[] = { "a", "b" };
    for (int i = 0; i < 2; i++) {
        uint64_t cr = cluster_rate(clusters[i]);
        CHECK(cr == UINT64_MAX || cr == paced, "cluster %s left at %llu B/s", clusters[i], (unsigned long long)cr);
    }

    CHECK(MPI_Comm_delete_attr(MPI_COMM_WORLD, matb) == MPI_SUCCESS, "delete WANMPI_MATB");
    CHECK(get(matb, 0) == start, "WANMPI_MATB after delete %d, want %lld", get(matb, 0), start);
    check_sockets((unsigned long long)start * 1000, "after delete");

    int total = 0;
    MPI_Reduce(&checks, &total, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("pacecheck: %d checks ok\n", total);
    free(s);
    free(r);
    free(c);
    MPI_Finalize();
    return 0;
}
