/* libwanshim internals. Calls go one way, from the top of this list down:
 *   wrappers.c   the LD_PRELOAD wrappers of the socket calls (Darshan's shape:
 *                call the real function, record, return its result and errno
 *                unchanged)
 *   api.c        the public API of lib/include/wanshim.h
 *   init.c       settings from the environment, read once at the first
 *                intercepted call or API call (ws_init); sets up the parts
 *   relay.c      relaying (relay.h): the connect redirect, the accept repair
 *   blast.c      the table of blast requests (relay.h)
 *   pacing.c     the table of WAN sockets and their SO_MAX_PACING_RATE
 *   nat.c        1:1 NAT: private and public addresses of nodes (cloud regions)
 *   clusters.c   which cluster a peer address is in
 *   relay_preamble.c  the relay protocol's bytes (relay.h)
 *   real.c       the real socket calls (dlsym(RTLD_NEXT))
 *   log.c        diagnostics (ws_log, WANMPI_SHIM_DEBUG)
 * and below them lib/src/common: network.c (addresses), cluster_map.c (the
 * cluster map, shared with libwanmpi), log_line.c. Nothing here depends on
 * MPI. The environment variable names live in lib/src/common/settings.h,
 * beside libwanmpi's. */
#ifndef WANSHIM_INTERNAL_H
#define WANSHIM_INTERNAL_H

#include <stdint.h>
#include <sys/socket.h>

#if defined(__GNUC__)
#define WS_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define WS_PRINTF(a, b)
#endif
#define WS_EXPORT __attribute__((visibility("default")))


/* ---- init.c ---- */
enum ws_state {
    WS_PASSIVE,     /* no cluster map: every call passes through */
    WS_ACTIVE,      /* classifying peers and pacing WAN sockets */
    WS_DISABLED     /* a setting was bad (reported on stderr): pass through */
};
/* Reads the settings on first use (thread-safe, once); returns the state. */
enum ws_state ws_init(void);

/* ---- log.c ---- */
extern int ws_debug;                /* WANMPI_SHIM_DEBUG, valid from process start */
void ws_log(const char *fmt, ...) WS_PRINTF(1, 2);        /* "wanshim[pid]: ..." on stderr */
#define WS_DEBUG(level, ...) do { if (ws_debug >= (level)) ws_log(__VA_ARGS__); } while (0)

/* ---- real.c: the real calls, resolved on first use ---- */
int ws_real_connect(int fd, const struct sockaddr *addr, socklen_t len);
int ws_real_accept(int fd, struct sockaddr *addr, socklen_t *len);
int ws_real_accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags);
int ws_real_close(int fd);
int ws_real_dup(int oldfd);
int ws_real_dup2(int oldfd, int newfd);
int ws_real_dup3(int oldfd, int newfd, int flags);
int ws_real_getpeername(int fd, struct sockaddr *addr, socklen_t *len);
int ws_real_getsockopt(int fd, int level, int name, void *value, socklen_t *len);

/* ---- clusters.c ---- */
/* Parses WANMPI_CLUSTER_MAP `spec` and finds this process's cluster: the name
 * `self` (WANMPI_CLUSTER) if given, else the cluster whose networks contain
 * one of this host's addresses. 0, or -1 after printing what is wrong. */
int ws_clusters_load(const char *spec, const char *self);
#define WS_PEER_LOCAL (-1)          /* this process's cluster */
#define WS_PEER_UNMAPPED (-2)       /* in no cluster's network (loopback, ...), or not IP */
/* The cluster of a peer address: an index of another cluster, or one of the above. */
int ws_peer_cluster(const struct sockaddr *sa, socklen_t len);
int ws_cluster_count(void);
int ws_cluster_index(const char *name);     /* -1 if not in the map */
const char *ws_cluster_name(int index);
int ws_self_cluster(void);                  /* index, or -1 if not in the map */

/* ---- nat.c ---- */
/* Reads WANMPI_NAT_MAP `spec` (NULL or "": no NAT). 0, or -1 after printing
 * what is wrong. */
int ws_nat_load(const char *spec);
/* connect(): 1 and `*out` (the same address with the public IP) if `addr`
 * is the private address of a NAT'd node in another cluster; else 0. */
int ws_nat_public(const struct sockaddr *addr, socklen_t len, struct sockaddr_storage *out);
/* accept(), getpeername(): rewrites a public address in place into its
 * private one (the first `len` bytes of `addr` are valid); 1 if it did. */
int ws_nat_private(struct sockaddr *addr, socklen_t len);

/* ---- pacing.c ---- */
void ws_pacing_init(uint64_t wan_rate);     /* before any socket is tracked */

/* retry.c: TCP retransmission through WAN outages. ws_retry_init reads the
 * settings (NULL, or the problem with *name and *value set); ws_retry_apply
 * sets them on a TCP socket to another cluster. */
const char *ws_retry_init(const char **name, const char **value);
void ws_retry_apply(int fd);
/* A connect or accept on `fd` succeeded (or is in progress) toward `peer`.
 * Tracks and paces it if it is a TCP socket to another cluster; forgets what
 * was known about `fd` otherwise. */
void ws_socket_connected(int fd, const struct sockaddr *peer, socklen_t len, const char *how);
/* Tracks the sockets to other clusters that are already open (inherited). */
void ws_adopt_open_sockets(void);
/* `fd` is about to be closed. */
void ws_socket_closing(int fd);
/* `newfd` now refers to what `oldfd` refers to (dup, dup2, dup3). */
void ws_socket_duplicated(int oldfd, int newfd);
void ws_pacing_atfork_prepare(void);
void ws_pacing_atfork_release(void);
/* For the API: the setters return how many sockets they re-paced. */
int ws_pacing_set_wan_rate(uint64_t bytes_per_s);
int ws_pacing_set_local_rate(uint64_t bytes_per_s);
uint64_t ws_pacing_wan_rate(void);
uint64_t ws_pacing_local_rate(void);
/* `*now`: the rate the sockets to `cluster` have afterwards. */
int ws_pacing_set_cluster_rate(int cluster, uint64_t bytes_per_s, uint64_t *now);
uint64_t ws_pacing_cluster_rate(int cluster);
int ws_pacing_wan_socket_count(void);       /* after dropping entries closed behind our back */
int ws_pacing_set_peer_rate(uint32_t ipv4, uint64_t bytes_per_s);

#endif
