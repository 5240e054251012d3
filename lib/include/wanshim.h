/* libwanshim: the socket shim that `wanmpi run` preloads into every rank.
 *
 * It watches the TCP connections a process makes and accepts, tells for each
 * peer whether it is in this process's cluster or in another one (from
 * WANMPI_CLUSTER_MAP), and paces every socket to another cluster with
 * SO_MAX_PACING_RATE. docs/libwanshim.md describes what it intercepts, its
 * environment and its limits.
 *
 * This header is the C API that changes the pacing while a program runs.
 * libwanmpi (and anything else) reaches it without linking to the shim, so
 * that it also works when the shim is not preloaded:
 *
 *     #include <dlfcn.h>
 *     #include "wanshim.h"
 *     wanshim_set_wan_rate_fn *set = (wanshim_set_wan_rate_fn *)
 *         dlsym(RTLD_DEFAULT, WANSHIM_SET_WAN_RATE);
 *     if (set)
 *         set(12500000);          // 100 Mbit/s on every WAN socket
 *
 * Rates are bytes per second (the unit of SO_MAX_PACING_RATE); 0 means "not
 * paced". Every function is thread-safe and may be called before, during or
 * after any socket activity; none of them changes errno unless it returns -1.
 */
#ifndef WANSHIM_H
#define WANSHIM_H

#include <stdint.h>
#include <sys/socket.h>

#ifdef __cplusplus
extern "C" {
#endif

#define WANSHIM_API_VERSION 1

/* Sets the process-wide WAN rate and re-paces every WAN socket of the process
 * at once (except those to a cluster with its own rate, see below); sockets
 * connected or accepted later get it too. 0: not paced (the socket's cap is
 * lifted; see docs/libwanshim.md on what the kernel keeps). Returns the number
 * of WAN sockets re-paced (>= 0), or -1 with errno ENOSYS if the shim disabled
 * itself because of a bad setting (it said why on stderr). */
int wanshim_set_wan_rate(uint64_t bytes_per_s);

/* The process-wide WAN rate now, bytes/s; 0: not paced. */
uint64_t wanshim_wan_rate(void);

/* Paces the sockets to one cluster (a name in WANMPI_CLUSTER_MAP) at their own
 * rate, overriding the process-wide one for that cluster; WANSHIM_RATE_WAN
 * makes them follow the process-wide rate again. Returns the number of sockets
 * re-paced, or -1 with errno EINVAL (not a cluster of the map, or this
 * process's own cluster) or ENOSYS (shim disabled). */
#define WANSHIM_RATE_WAN UINT64_MAX
int wanshim_set_cluster_rate(const char *cluster, uint64_t bytes_per_s);

/* The rate sockets to `cluster` get now (its own, else the process-wide one);
 * UINT64_MAX if `cluster` is not another cluster of the map. */
uint64_t wanshim_cluster_rate(const char *cluster);

/* Paces the TCP sockets inside this process's cluster ("local"; never paced
 * unless set here). libwanmpi's all-to-all uses it so that the local flows
 * into a receiver leave room on its NIC for the flows from the WAN. 0: not
 * paced. Returns the number of sockets re-paced, or -1 with errno ENOSYS. */
int wanshim_set_local_rate(uint64_t bytes_per_s);

/* The local rate now, bytes/s; 0: not paced. */
uint64_t wanshim_local_rate(void);

/* Paces the open sockets (WAN or local) whose peer is the IPv4 address of
 * `peer` (AF_INET or v4-mapped AF_INET6; the port is ignored) at their own
 * rate, over the rates above; WANSHIM_RATE_WAN removes that, and the sockets
 * follow their cluster's (or the local) rate again. Sockets connected later
 * do not inherit it. libwanmpi's all-to-all paces each destination by the
 * volume it receives. Returns the number of sockets re-paced, or -1 with
 * errno EINVAL (not an IPv4 address) or ENOSYS. */
int wanshim_set_peer_rate(const struct sockaddr *peer, socklen_t len, uint64_t bytes_per_s);

/* Blast request (RBUDP through the relays; docs/libwanshim.md, "Blast
 * requests"): the TCP connections of this process to or from the host of
 * `peer` (IPv4 or IPv6; the port is ignored) ask the relays to carry the
 * bulk data this process sends on them as RBUDP blasts at `bytes_per_s`
 * (bytes/s on the wire, IP headers included) with UDP datagrams of `payload`
 * bytes (64..65507), as far as the relays allow (they clamp to their
 * configured rate and payload, or keep the connection on TCP when their link
 * is not set up for RBUDP). Connections connected later carry the request in
 * their connect preamble (then both directions blast); connections already
 * open, connected or accepted, are switched at once, each by the relay at
 * its other end (that relay's direction only: the partner's own request
 * switches the other). A second request for the same host replaces the
 * first; bytes_per_s 0 withdraws it. Returns the number of open
 * connections to or from that host that could not be switched (0 normally;
 * the first failure is printed on stderr), or -1 with errno EINVAL (not an
 * IP address, or payload out of range), EOPNOTSUPP (this process does not
 * relay: no WANMPI_RELAYS, so nothing can blast), ENOSPC (1024 hosts
 * requested already) or ENOSYS (shim disabled). libwanmpi's
 * WANMPI_UDP_PARAMS attribute calls it. */
int wanshim_request_blast(const struct sockaddr *peer, socklen_t len, uint64_t bytes_per_s,
                          unsigned payload);

/* Number of open TCP sockets to other clusters that the shim tracks. */
int wanshim_wan_socket_count(void);

/* 1: the shim classifies peers (it knows the cluster map and this process's
 * cluster); 0: it passes every call through untouched (no map, or disabled
 * by a bad setting). */
int wanshim_enabled(void);

/* Types and names for dlsym(RTLD_DEFAULT, ...). */
typedef int wanshim_set_wan_rate_fn(uint64_t);
typedef uint64_t wanshim_wan_rate_fn(void);
typedef int wanshim_set_cluster_rate_fn(const char *, uint64_t);
typedef uint64_t wanshim_cluster_rate_fn(const char *);
typedef int wanshim_wan_socket_count_fn(void);
typedef int wanshim_enabled_fn(void);
typedef int wanshim_set_local_rate_fn(uint64_t);
typedef uint64_t wanshim_local_rate_fn(void);
typedef int wanshim_set_peer_rate_fn(const struct sockaddr *, socklen_t, uint64_t);
typedef int wanshim_request_blast_fn(const struct sockaddr *, socklen_t, uint64_t, unsigned);
#define WANSHIM_SET_WAN_RATE      "wanshim_set_wan_rate"
#define WANSHIM_WAN_RATE          "wanshim_wan_rate"
#define WANSHIM_SET_CLUSTER_RATE  "wanshim_set_cluster_rate"
#define WANSHIM_CLUSTER_RATE      "wanshim_cluster_rate"
#define WANSHIM_WAN_SOCKET_COUNT  "wanshim_wan_socket_count"
#define WANSHIM_ENABLED           "wanshim_enabled"
#define WANSHIM_SET_LOCAL_RATE    "wanshim_set_local_rate"
#define WANSHIM_LOCAL_RATE        "wanshim_local_rate"
#define WANSHIM_SET_PEER_RATE     "wanshim_set_peer_rate"
#define WANSHIM_REQUEST_BLAST     "wanshim_request_blast"

#ifdef __cplusplus
}
#endif

#endif
