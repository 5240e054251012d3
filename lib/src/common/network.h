/* IPv4 networks as the cluster map writes them ("198.18.0.0/24", or a host
 * "10.1.0.3" = /32), and single IP addresses (the relays' and the ranks'
 * nodes): parsed, and addresses formatted for messages. MPI-free: libwanmpi
 * and libwanshim both parse their settings with it, and each reports errors
 * its own way. */
#ifndef WANMPI_NETWORK_H
#define WANMPI_NETWORK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct wm_network {
    uint32_t net, mask;         /* network byte order; net is already masked */
    int bits;                   /* prefix length, 0..32 */
};

/* Parses the `len` characters at `s`. 0 on success, else a negative code
 * that wm_network_problem() turns into words. */
int wm_network_parse(const char *s, size_t len, struct wm_network *out);
/* "is not an IPv4 network", "has a bad prefix length". */
const char *wm_network_problem(int code);

/* One IP address, "1.2.3.4", "::1" or "[::1]" (the `n` characters at `s`),
 * into `out` (port 0). 0, or -1 if it is not one. */
int wm_address_parse(const char *s, size_t n, struct sockaddr_storage *out, socklen_t *len);

/* "1.2.3.4:80", "[::1]:80", "unix", "(none)", ... for messages; returns `buf`. */
const char *wm_format_address(const struct sockaddr *sa, socklen_t len, char *buf, size_t size);

/* The IPv4 address (network order) of an AF_INET or v4-mapped AF_INET6
 * address: 0, or -1 if it has none. */
int wm_ipv4(const struct sockaddr *sa, socklen_t len, uint32_t *addr);

#endif
