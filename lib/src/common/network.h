/* IPv4 networks as the cluster map writes them ("198.18.0.0/24", or a host
 * "10.1.0.3" = /32). MPI-free: libwanmpi and libwanshim both parse
 * WANMPI_CLUSTER_MAP with it, and each reports errors its own way. */
#ifndef WANMPI_NETWORK_H
#define WANMPI_NETWORK_H

#include <stddef.h>
#include <stdint.h>

struct wm_network {
    uint32_t net, mask;         /* network byte order; net is already masked */
    int bits;                   /* prefix length, 0..32 */
};

/* Parses the `len` characters at `s`. 0 on success, else a negative code
 * that wm_network_problem() turns into words. */
int wm_network_parse(const char *s, size_t len, struct wm_network *out);
/* "is not an IPv4 network", "has a bad prefix length". */
const char *wm_network_problem(int code);

#endif
