/* libwanshim internals. The shim has four parts:
 *   wrappers.c   the LD_PRELOAD wrappers of the socket calls (Darshan's shape:
 *                resolve the real symbol, call it, record, return its result
 *                and errno unchanged)
 *   config.c     settings from the environment, read once at the first
 *                connect/accept or API call; diagnostics
 *   clusters.c   the cluster map: which cluster a peer address is in
 *   pacing.c     the table of WAN sockets and their SO_MAX_PACING_RATE; the
 *                public API of lib/include/wanshim.h
 * Nothing here depends on MPI. The environment variable names live in
 * lib/src/common/settings.h, beside libwanmpi's. */
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

#define WS_CLUSTER_NAME_MAX 64      /* as libwanmpi's WM_CLUSTER_NAME_MAX */
#define WS_MAX_CLUSTERS 256

/* ---- config.c ---- */
enum ws_state {
    WS_PASSIVE,     /* no cluster map: every call passes through */
    WS_ACTIVE,      /* classifying peers and pacing WAN sockets */
    WS_DISABLED     /* a setting was bad (reported on stderr): pass through */
};
/* Reads the settings on first use (thread-safe, once); returns the state. */
enum ws_state ws_init(void);
extern int ws_debug;                /* WANMPI_SHIM_DEBUG, valid from process start */
void ws_log(const char *fmt, ...) WS_PRINTF(1, 2);        /* "wanshim[pid]: ..." on stderr */
#define WS_DEBUG(level, ...) do { if (ws_debug >= (level)) ws_log(__VA_ARGS__); } while (0)
/* "1.2.3.4:80", "[::1]:80", "unix", ... for messages */
const char *ws_format_address(const struct sockaddr *sa, socklen_t len, char *buf, size_t size);

/* ---- clusters.c ---- */
/* Parses WANMPI_CLUSTER_MAP `spec` and finds this process's cluster: the name
 * `self` (WANMPI_CLUSTER) if given, else the cluster whose networks contain
 * one of this host's addresses. 0, or -1 after printing what is wrong. */
int ws_clusters_load(const char *spec, const char *self);
#define WS_PEER_LOCAL (-1)          /* this process's cluster */
#define WS_PEER_UNMAPPED (-2)       /* in no cluster's network (loopback, ...), or not IP */
/* The IPv4 address (network order) of an AF_INET or v4-mapped AF_INET6
 * address: 0, or -1 if it has none. */
int ws_ipv4(const struct sockaddr *sa, socklen_t len, uint32_t *addr);
/* The cluster of a peer address: an index of another cluster, or one of the above. */
int ws_peer_cluster(const struct sockaddr *sa, socklen_t len);
int ws_cluster_count(void);
int ws_cluster_index(const char *name);     /* -1 if not in the map */
const char *ws_cluster_name(int index);
int ws_self_cluster(void);                  /* index, or -1 if not in the map */

/* ---- pacing.c ---- */
void ws_pacing_init(uint64_t wan_rate);     /* before any socket is tracked */
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

#endif
