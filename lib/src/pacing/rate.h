/* The pacing rate of this rank's WAN sockets, set through libwanshim.
 *
 * libwanshim (lib/src/shim, preloaded beside this library by `wanmpi run`)
 * owns the sockets; it is reached through dlsym(RTLD_DEFAULT), so libwanmpi
 * also works without it (then nothing is paced and the attributes say so).
 * Rates here are bytes/s, like SO_MAX_PACING_RATE; 0 = not paced. */
#ifndef WANMPI_RATE_H
#define WANMPI_RATE_H

#include <stdint.h>

/* 1 if the shim is loaded and classifies sockets (it knows the cluster map). */
int wm_rate_available(void);

/* B: the inter-cluster bandwidth from WANMPI_WAN_RATE, bytes/s; 0 if unknown. */
uint64_t wm_rate_maxrate(void);

/* The rate between clusters `a` and `b` (names), bytes/s: their entry in
 * WANMPI_WAN_RATES, else B. A malformed WANMPI_WAN_RATES is a fatal error
 * that names it. */
uint64_t wm_rate_between(const char *a, const char *b);
/* Reads WANMPI_WAN_RATES now, so that a malformed one stops the job at its
 * first collective (as every other bad setting does) rather than at its
 * first paced call. */
void wm_rate_read_pairs(void);

/* The rate every WAN socket gets now, and the rate the job started with. */
uint64_t wm_rate_wan(void);
uint64_t wm_rate_initial(void);

/* Re-paces every WAN socket of the process at once (and later ones).
 * Returns 0, or -1 if the shim is not there (nothing changed). */
int wm_rate_set_wan(uint64_t bytes_per_s);

/* Paces the sockets to one cluster at their own rate (UINT64_MAX: follow
 * the process-wide rate again). Returns 0 or -1. */
int wm_rate_set_cluster(const char *cluster, uint64_t bytes_per_s);

/* Paces the sockets inside this rank's cluster (0: not paced, the default).
 * Returns 0 or -1. */
int wm_rate_set_local(uint64_t bytes_per_s);
uint64_t wm_rate_local(void);

/* Paces the sockets to the host with IPv4 address `ipv4` (network order) at
 * their own rate; UINT64_MAX: back to their cluster's rate. Returns 0 or -1. */
int wm_rate_set_peer(uint32_t ipv4, uint64_t bytes_per_s);

/* Number of rate changes made by libwanmpi, for the statistics. */
long wm_rate_changes(void);

#endif
