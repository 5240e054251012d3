/* The cluster map: which cluster an IPv4 address is in. One home for both
 * libraries: libwanmpi (lib/src/coll/cluster.c) finds this process's cluster
 * with it, libwanshim (lib/src/shim/clusters.c) also every peer's, and the two
 * must agree on every address, or a rank would pace sockets its collectives
 * treat as local.
 *
 * WANMPI_CLUSTER_MAP is "a=198.18.0.0/24;b=198.18.1.0/24,10.1.0.0/16": a
 * cluster's name, '=', its networks separated by ','; clusters separated by
 * ';'. A name may appear twice (its networks add up). An address in several
 * networks belongs to the longest prefix. MPI-free; errors come back as text
 * for each library to report its own way. */
#ifndef WANMPI_CLUSTER_MAP_H
#define WANMPI_CLUSTER_MAP_H

#include <stddef.h>
#include <stdint.h>

#define WM_CLUSTER_NAME_MAX 64      /* with the terminating 0 */
#define WM_MAX_CLUSTERS 256

struct wm_cluster_network {
    uint32_t net, mask;             /* network byte order */
    int bits, cluster;
};

struct wm_cluster_map {
    char names[WM_MAX_CLUSTERS][WM_CLUSTER_NAME_MAX];
    int nclusters;
    struct wm_cluster_network *networks;
    int nnetworks;
};

/* 1 if the `len` characters at `name` are a valid cluster name: 1 to 63
 * letters, digits, '_', '-' or '.'. */
int wm_cluster_name_valid(const char *name, size_t len);

/* Parses `spec` into `map` (zeroed first). 0, or -1 with the problem written
 * to `problem` (without the variable's name); `map` is then freed. */
int wm_cluster_map_parse(const char *spec, struct wm_cluster_map *map, char *problem, size_t size);

/* The index of cluster `name`, or -1 if it is not in the map. */
int wm_cluster_map_find(const struct wm_cluster_map *map, const char *name);

/* The cluster of `addr` (IPv4, network order): longest prefix, or -1. */
int wm_cluster_map_lookup(const struct wm_cluster_map *map, uint32_t addr);

/* This host's cluster: the one with a network (any, not only the longest
 * prefix) holding one of the host's IPv4 addresses. 0 with the cluster and
 * that address (the first such, in interface order); -1 with `problem` if no
 * address or addresses in two clusters match, or the addresses are unreadable. */
int wm_cluster_map_host(const struct wm_cluster_map *map, int *cluster, uint32_t *address,
                        char *problem, size_t size);

void wm_cluster_map_free(struct wm_cluster_map *map);

#endif
