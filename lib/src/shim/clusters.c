/* The cluster of a peer address, from WANMPI_CLUSTER_MAP (the one map of
 * both libraries: lib/src/common/cluster_map.c, with its messages). Peers are
 * IPv4, or IPv4-mapped IPv6 (::ffff:a.b.c.d) since dual-stack sockets report
 * those; other IPv6 peers are in no cluster. Written once by ws_clusters_load
 * (under ws_init's pthread_once), read-only afterwards: no lock needed. */
#include "shim.h"
#include "../common/cluster_map.h"
#include "../common/network.h"
#include "../common/settings.h"

#include <arpa/inet.h>
#include <string.h>

static struct wm_cluster_map map;
static int self = -1;

int ws_cluster_count(void) { return map.nclusters; }
int ws_self_cluster(void) { return self; }
const char *ws_cluster_name(int i) { return i >= 0 && i < map.nclusters ? map.names[i] : "?"; }
int ws_cluster_index(const char *name) { return wm_cluster_map_find(&map, name); }

static int fail(const char *spec, const char *problem)
{
    ws_log("%s=%s: %s; the shim is off in this process (no socket is paced)", WM_ENV_CLUSTER_MAP,
           spec, problem);
    return -1;
}

int ws_clusters_load(const char *spec, const char *self_name)
{
    char problem[640];
    if (wm_cluster_map_parse(spec, &map, problem, sizeof problem) != 0)
        return fail(spec, problem);
    if (!self_name) {
        uint32_t address;
        if (wm_cluster_map_host(&map, &self, &address, problem, sizeof problem) != 0)
            return fail(spec, problem);
        char text[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &address, text, sizeof text);
        WS_DEBUG(1, "this host's address %s is in cluster '%s'", text, map.names[self]);
        return 0;
    }
    if (!wm_cluster_name_valid(self_name, strlen(self_name))) {
        ws_log("%s=%s: cluster name must have 1 to 63 letters, digits, '_', '-' or '.'; the shim "
               "is off in this process (no socket is paced)", WM_ENV_CLUSTER, self_name);
        return -1;
    }
    self = ws_cluster_index(self_name);     /* -1: not in the map, every mapped peer is remote */
    if (self < 0)
        WS_DEBUG(1, "%s=%s is not in %s: every peer of the map is in another cluster",
                 WM_ENV_CLUSTER, self_name, WM_ENV_CLUSTER_MAP);
    return 0;
}

int ws_peer_cluster(const struct sockaddr *sa, socklen_t len)
{
    uint32_t addr;
    if (wm_ipv4(sa, len, &addr) != 0)
        return WS_PEER_UNMAPPED;
    int c = wm_cluster_map_lookup(&map, addr);
    if (c < 0)
        return WS_PEER_UNMAPPED;
    return c == self ? WS_PEER_LOCAL : c;
}
