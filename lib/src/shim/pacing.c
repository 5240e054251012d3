/* The WAN sockets of the process and their pacing (set through the public
 * API, api.c).
 *
 * A table indexed by file descriptor holds every open TCP socket to another
 * cluster, and every one inside this process's cluster ("local": never paced
 * unless wanshim_set_local_rate asks, e.g. while libwanmpi's all-to-all keeps
 * the flows into one receiver within its NIC). An entry also records the socket's identity (device and inode),
 * because a descriptor can be closed without passing through our close()
 * (close_range, a raw syscall, fclose of an fdopen'd stream) and then reused
 * for something else: before touching a socket the shim checks that the
 * descriptor still refers to it, and drops the entry otherwise. A stale
 * entry can therefore cost an fstat, never a rate on the wrong socket.
 *
 * SO_MAX_PACING_RATE caps the socket's pacing rate in bytes/s. Without the fq
 * qdisc TCP paces internally (since Linux 4.13), so this works in any network
 * namespace and needs no privilege. One lock guards the table and the rates;
 * it is held across setsockopt so that a close() in another thread (which
 * removes its entry under the lock before closing) can never let a re-pacing
 * touch a descriptor number that has just been reused. */
#include "shim.h"
#include "wanshim.h"
#include "../common/cluster_map.h"
#include "../common/network.h"

#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifndef SO_MAX_PACING_RATE
#define SO_MAX_PACING_RATE 47
#endif

struct wan_socket {
    dev_t dev;
    ino_t ino;
    int cluster;            /* index of the other cluster; this process's own if local */
    unsigned char used;
    unsigned char local;    /* a socket inside this process's cluster */
    uint32_t peer;          /* the peer's IPv4 address, network order (0: none) */
    uint64_t own_rate;      /* set by wanshim_set_peer_rate; WANSHIM_RATE_WAN: none */
    unsigned char paced;    /* a cap was ever set (the kernel then keeps pacing it internally) */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct wan_socket *table;
static int table_size;
static int wan_count;                   /* WAN entries in use */
static int used_count;                  /* all entries in use; read without the lock by close() */
static uint64_t wan_rate;               /* bytes/s, 0: not paced */
static uint64_t local_rate;             /* bytes/s for local sockets, 0: not paced (the default) */
static uint64_t cluster_rate[WM_MAX_CLUSTERS];     /* WANSHIM_RATE_WAN: follow wan_rate */

void ws_pacing_init(uint64_t rate)
{
    pthread_mutex_lock(&lock);
    wan_rate = rate;
    for (int i = 0; i < WM_MAX_CLUSTERS; i++)
        cluster_rate[i] = WANSHIM_RATE_WAN;
    pthread_mutex_unlock(&lock);
}

void ws_pacing_atfork_prepare(void) { pthread_mutex_lock(&lock); }
void ws_pacing_atfork_release(void) { pthread_mutex_unlock(&lock); }

static uint64_t rate_for(int cluster)
{
    return cluster_rate[cluster] == WANSHIM_RATE_WAN ? wan_rate : cluster_rate[cluster];
}

static uint64_t rate_of(const struct wan_socket *e)
{
    if (e->own_rate != WANSHIM_RATE_WAN)
        return e->own_rate;
    return e->local ? local_rate : rate_for(e->cluster);
}

/* 0: lift the cap. Rates that do not fit the 32-bit form (where ~0U means
 * "no cap") use the 64-bit form, accepted since Linux 4.20. */
static int set_max_pacing_rate(int fd, uint64_t rate)
{
    if (rate == 0) {
        unsigned int none = ~0U;
        return setsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &none, sizeof none);
    }
    if (rate < UINT32_MAX) {
        unsigned int r32 = (unsigned int)rate;
        return setsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &r32, sizeof r32);
    }
    unsigned long r64 = rate;
    return setsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &r64, sizeof r64);
}

/* Sets `rate` on the socket of entry `fd`; a socket never paced is left
 * alone when there is no cap to set. Called with the lock held. */
static int apply(int fd, uint64_t rate)
{
    struct wan_socket *e = &table[fd];
    if (rate == 0 && !e->paced)
        return 0;
    if (set_max_pacing_rate(fd, rate) != 0)
        return -1;
    e->paced |= rate != 0;
    return 0;
}

static int same_socket(int fd, const struct wan_socket *e)
{
    struct stat st;
    return fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_ino == e->ino && st.st_dev == e->dev;
}

static void drop(int fd)
{
    table[fd].used = 0;
    if (!table[fd].local)
        wan_count--;
    __atomic_sub_fetch(&used_count, 1, __ATOMIC_RELEASE);
}

static int grow(int fd)
{
    if (fd < table_size)
        return 0;
    int size = table_size ? table_size : 64;
    while (size <= fd)
        size *= 2;
    struct wan_socket *bigger = realloc(table, (size_t)size * sizeof *table);
    if (!bigger)
        return -1;
    memset(bigger + table_size, 0, (size_t)(size - table_size) * sizeof *table);
    table = bigger;
    table_size = size;
    return 0;
}

#define REPACE_WAN (-1)           /* the WAN sockets that follow the WAN rate */
#define REPACE_LOCAL (-2)         /* the local sockets */

/* Re-paces the sockets to `only_cluster`, or those of REPACE_WAN or
 * REPACE_LOCAL; returns how many. Called with the lock held. */
static int repace(int only_cluster)
{
    int n = 0;
    for (int fd = 0; fd < table_size; fd++) {
        struct wan_socket *e = &table[fd];
        if (!e->used)
            continue;
        if (only_cluster == REPACE_LOCAL ? !e->local
            : e->local || (only_cluster >= 0 ? e->cluster != only_cluster
                                              : cluster_rate[e->cluster] != WANSHIM_RATE_WAN))
            continue;
        if (!same_socket(fd, e)) {
            WS_DEBUG(1, "fd %d was closed behind our back: forgotten", fd);
            drop(fd);
            continue;
        }
        if (apply(fd, rate_of(e)) == 0)
            n++;
        else
            WS_DEBUG(1, "fd %d: setsockopt(SO_MAX_PACING_RATE) failed: %s", fd, strerror(errno));
    }
    return n;
}

void ws_socket_connected(int fd, const struct sockaddr *peer, socklen_t len, const char *how)
{
    char where[80];
    int cluster = ws_peer_cluster(peer, len);
    int proto = 0;
    socklen_t plen = sizeof proto;
    struct stat st;
    int tcp = ws_real_getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &plen) == 0 && proto == IPPROTO_TCP
              && fstat(fd, &st) == 0;
    pthread_mutex_lock(&lock);
    int known = fd < table_size && table[fd].used;
    /* paced before, as this same socket (not a different one under a reused number) */
    int was_paced = known && tcp && table[fd].dev == st.st_dev && table[fd].ino == st.st_ino
                    && table[fd].paced;
    int local = cluster == WS_PEER_LOCAL && ws_self_cluster() >= 0;
    if (local)
        cluster = ws_self_cluster();
    if (cluster < 0 || !tcp) {
        if (known) {
            if (was_paced)          /* reconnected inside the cluster: lift the cap */
                set_max_pacing_rate(fd, 0);
            drop(fd);
        }
        pthread_mutex_unlock(&lock);
        WS_DEBUG(2, "fd %d %s %s: %s", fd, how, wm_format_address(peer, len, where, sizeof where),
                 !tcp ? "not TCP" : "in no cluster");
        return;
    }
    if (grow(fd) != 0) {
        pthread_mutex_unlock(&lock);
        WS_DEBUG(1, "fd %d: out of memory, not tracked", fd);
        return;
    }
    struct wan_socket *e = &table[fd];
    if (e->used)
        drop(fd);
    __atomic_add_fetch(&used_count, 1, __ATOMIC_RELEASE);
    if (!local)
        wan_count++;
    uint32_t peer_ip = 0;
    wm_ipv4(peer, len, &peer_ip);
    *e = (struct wan_socket){ .dev = st.st_dev, .ino = st.st_ino, .cluster = cluster, .used = 1,
                              .local = (unsigned char)local, .paced = (unsigned char)was_paced,
                              .peer = peer_ip, .own_rate = WANSHIM_RATE_WAN };
    uint64_t rate = rate_of(e);
    int rc = apply(fd, rate);
    int err = errno;
    pthread_mutex_unlock(&lock);
    if (!local)
        ws_retry_apply(fd);             /* through WAN outages (retry.c) */
    if (ws_debug >= 1) {
        if (rc != 0)
            ws_log("fd %d %s %s (cluster '%s'): setsockopt(SO_MAX_PACING_RATE) failed: %s", fd, how,
                   wm_format_address(peer, len, where, sizeof where), ws_cluster_name(cluster),
                   strerror(err));
        else
            ws_log("fd %d %s %s (cluster '%s'): %s socket, %s%llu B/s", fd, how,
                   wm_format_address(peer, len, where, sizeof where), ws_cluster_name(cluster),
                   local ? "local" : "WAN", rate ? "paced at " : "not paced, ", (unsigned long long)rate);
    }
}

/* Sockets that were open before the shim looked: inherited from the parent
 * (MPICH's ranks inherit their hydra proxy's connection to mpiexec, which
 * crosses the WAN for every rank not in mpiexec's cluster) or connected
 * before the first intercepted call. Not in the table otherwise, they would
 * be the only WAN sockets left unpaced. */
void ws_adopt_open_sockets(void)
{
    DIR *dir = opendir("/proc/self/fd");
    if (!dir)
        return;
    struct dirent *d;
    while ((d = readdir(dir))) {
        if (d->d_name[0] < '0' || d->d_name[0] > '9')
            continue;
        int fd = atoi(d->d_name);
        struct stat st;
        if (fd == dirfd(dir) || fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode))
            continue;
        struct sockaddr_storage peer;
        socklen_t len = sizeof peer;
        if (ws_real_getpeername(fd, (struct sockaddr *)&peer, &len) != 0)
            continue;           /* a listener, not connected, or not IP */
        if (ws_peer_cluster((struct sockaddr *)&peer, len) >= 0)
            ws_socket_connected(fd, (struct sockaddr *)&peer, len, "open before, connected to");
    }
    closedir(dir);
}

void ws_socket_closing(int fd)
{
    if (__atomic_load_n(&used_count, __ATOMIC_ACQUIRE) == 0)
        return;
    pthread_mutex_lock(&lock);
    if (fd >= 0 && fd < table_size && table[fd].used) {
        drop(fd);
        WS_DEBUG(2, "fd %d closed: %d WAN sockets left", fd, wan_count);
    }
    pthread_mutex_unlock(&lock);
}

void ws_socket_duplicated(int oldfd, int newfd)
{
    if (oldfd == newfd || newfd < 0 || __atomic_load_n(&used_count, __ATOMIC_ACQUIRE) == 0)
        return;
    pthread_mutex_lock(&lock);
    if (newfd < table_size && table[newfd].used)
        drop(newfd);                /* dup2/dup3 replaced it */
    if (oldfd >= 0 && oldfd < table_size && table[oldfd].used && same_socket(oldfd, &table[oldfd])
        && grow(newfd) == 0) {
        table[newfd] = table[oldfd];
        if (!table[newfd].local)
            wan_count++;
        __atomic_add_fetch(&used_count, 1, __ATOMIC_RELEASE);
        WS_DEBUG(1, "fd %d is a duplicate of WAN socket fd %d", newfd, oldfd);
    }
    pthread_mutex_unlock(&lock);
}

/* ---- for the public API (api.c) ---- */

/* Sets `*rate` and re-paces the sockets of `which` (REPACE_WAN or
 * REPACE_LOCAL); returns how many. */
static int set_rate(uint64_t *rate, uint64_t bytes_per_s, int which)
{
    pthread_mutex_lock(&lock);
    __atomic_store_n(rate, bytes_per_s, __ATOMIC_RELAXED);
    int n = repace(which);
    pthread_mutex_unlock(&lock);
    return n;
}

int ws_pacing_set_wan_rate(uint64_t bytes_per_s) { return set_rate(&wan_rate, bytes_per_s, REPACE_WAN); }

int ws_pacing_set_local_rate(uint64_t bytes_per_s)
{
    return set_rate(&local_rate, bytes_per_s, REPACE_LOCAL);
}

uint64_t ws_pacing_wan_rate(void) { return __atomic_load_n(&wan_rate, __ATOMIC_RELAXED); }

uint64_t ws_pacing_local_rate(void)
{
    pthread_mutex_lock(&lock);
    uint64_t rate = local_rate;
    pthread_mutex_unlock(&lock);
    return rate;
}

int ws_pacing_set_cluster_rate(int cluster, uint64_t bytes_per_s, uint64_t *now)
{
    pthread_mutex_lock(&lock);
    cluster_rate[cluster] = bytes_per_s;
    int n = repace(cluster);
    *now = rate_for(cluster);
    pthread_mutex_unlock(&lock);
    return n;
}

uint64_t ws_pacing_cluster_rate(int cluster)
{
    pthread_mutex_lock(&lock);
    uint64_t rate = rate_for(cluster);
    pthread_mutex_unlock(&lock);
    return rate;
}

int ws_pacing_wan_socket_count(void)
{
    pthread_mutex_lock(&lock);
    for (int fd = 0; fd < table_size; fd++)
        if (table[fd].used && !same_socket(fd, &table[fd]))
            drop(fd);
    int n = wan_count;
    pthread_mutex_unlock(&lock);
    return n;
}

int ws_pacing_set_peer_rate(uint32_t ip, uint64_t bytes_per_s)
{
    int n = 0;
    pthread_mutex_lock(&lock);
    for (int fd = 0; fd < table_size; fd++) {
        struct wan_socket *e = &table[fd];
        if (!e->used || e->peer != ip)
            continue;
        if (!same_socket(fd, e)) {
            drop(fd);
            continue;
        }
        e->own_rate = bytes_per_s;
        if (apply(fd, rate_of(e)) == 0)
            n++;
    }
    pthread_mutex_unlock(&lock);
    return n;
}
