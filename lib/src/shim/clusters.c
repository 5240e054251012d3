/* The cluster map: which cluster a peer address is in.
 *
 * WANMPI_CLUSTER_MAP is the string libwanmpi reads too
 * ("a=198.18.0.0/24;b=198.18.1.0/24,10.1.0.0/16"), parsed the same way
 * (lib/src/coll/cluster.c), with the same messages; the two must agree on
 * every address, or a rank would pace sockets its collectives treat as local.
 * Peers are IPv4, or IPv4-mapped IPv6 (::ffff:a.b.c.d) since dual-stack
 * sockets report those; other IPv6 peers are in no cluster. A peer in several
 * networks belongs to the longest prefix. Written once by ws_clusters_load
 * (under ws_init's pthread_once), read-only afterwards: no lock needed. */
#include "shim.h"
#include "../common/network.h"
#include "../common/settings.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct network { uint32_t net, mask; int bits, cluster; };

static char names[WS_MAX_CLUSTERS][WS_CLUSTER_NAME_MAX];
static int ncluster;
static struct network *networks;
static int nnetwork;
static int self = -1;

int ws_cluster_count(void) { return ncluster; }
int ws_self_cluster(void) { return self; }
const char *ws_cluster_name(int i) { return i >= 0 && i < ncluster ? names[i] : "?"; }

int ws_cluster_index(const char *name)
{
    for (int i = 0; i < ncluster; i++)
        if (!strcmp(names[i], name))
            return i;
    return -1;
}

static int fail(const char *spec, const char *fmt, ...) WS_PRINTF(2, 3);
static int fail(const char *spec, const char *fmt, ...)
{
    char problem[640];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(problem, sizeof problem, fmt, ap);
    va_end(ap);
    ws_log("%s=%s: %s; the shim is off in this process (no socket is paced)", WM_ENV_CLUSTER_MAP,
           spec, problem);
    return -1;
}

static int valid_name(const char *name, size_t len)
{
    if (len == 0 || len >= WS_CLUSTER_NAME_MAX)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (!isalnum((unsigned char)name[i]) && name[i] != '_' && name[i] != '-' && name[i] != '.')
            return 0;
    return 1;
}

static int add_network(const char *spec, const char *s, size_t len, int cluster)
{
    struct wm_network n;
    int problem = wm_network_parse(s, len, &n);
    if (problem)
        return fail(spec, "'%.*s' %s", (int)len, s, wm_network_problem(problem));
    struct network *grown = realloc(networks, (size_t)(nnetwork + 1) * sizeof *networks);
    if (!grown)
        return fail(spec, "out of memory");
    networks = grown;
    networks[nnetwork++] = (struct network){ n.net, n.mask, n.bits, cluster };
    return 0;
}

/* Cluster of an IPv4 address (network byte order): longest prefix, or -1. */
static int cluster_of(uint32_t addr)
{
    int best = -1, best_bits = -1;
    for (int i = 0; i < nnetwork; i++)
        if ((addr & networks[i].mask) == networks[i].net && networks[i].bits > best_bits) {
            best = networks[i].cluster;
            best_bits = networks[i].bits;
        }
    return best;
}

static int parse(const char *spec)
{
    const char *p = spec;
    while (*p) {
        const char *eq = strchr(p, '=');
        const char *end = strchr(p, ';');
        if (!end)
            end = p + strlen(p);
        if (!eq || eq > end)
            return fail(spec, "expected NAME=NETWORK[,NETWORK][;NAME=...]");
        if (!valid_name(p, (size_t)(eq - p)))
            return fail(spec, "cluster name '%.*s' must have 1 to 63 letters, digits, '_', '-' "
                        "or '.'", (int)(eq - p), p);
        char name[WS_CLUSTER_NAME_MAX];
        snprintf(name, sizeof name, "%.*s", (int)(eq - p), p);
        int c = ws_cluster_index(name);
        if (c < 0) {
            if (ncluster == WS_MAX_CLUSTERS)
                return fail(spec, "more than %d clusters", WS_MAX_CLUSTERS);
            c = ncluster++;
            memcpy(names[c], name, sizeof name);
        }
        const char *n = eq + 1;
        while (n < end) {
            const char *comma = memchr(n, ',', (size_t)(end - n));
            const char *stop = comma ? comma : end;
            if (add_network(spec, n, (size_t)(stop - n), c) != 0)
                return -1;
            n = stop < end ? stop + 1 : end;
        }
        p = *end ? end + 1 : end;
    }
    return 0;
}

/* The cluster whose networks contain one of this host's addresses. */
static int self_from_addresses(const char *spec)
{
    struct ifaddrs *ifs;
    if (getifaddrs(&ifs) != 0)
        return fail(spec, "getifaddrs() failed: cannot tell this host's cluster");
    int found = -1;
    char list[512] = "";
    size_t used = 0;
    for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
            continue;
        uint32_t addr = ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
        char text[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &addr, text, sizeof text);
        if (used + sizeof text + 2 < sizeof list)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", used ? ", " : "", text);
        /* like libwanmpi: any network of the cluster, not only the longest prefix */
        for (int k = 0; k < nnetwork; k++) {
            if ((addr & networks[k].mask) != networks[k].net || networks[k].cluster == found)
                continue;
            if (found >= 0) {
                freeifaddrs(ifs);
                return fail(spec, "this host has addresses in two clusters ('%s' and '%s')",
                            names[found], names[networks[k].cluster]);
            }
            found = networks[k].cluster;
            WS_DEBUG(1, "this host's address %s is in cluster '%s'", text, names[found]);
        }
    }
    freeifaddrs(ifs);
    if (found < 0) {
        return fail(spec, "none of this host's addresses (%s) is in a cluster's network", list);
    }
    self = found;
    return 0;
}

int ws_clusters_load(const char *spec, const char *self_name)
{
    if (parse(spec) != 0)
        return -1;
    if (!self_name)
        return self_from_addresses(spec);
    if (!valid_name(self_name, strlen(self_name))) {
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

int ws_ipv4(const struct sockaddr *sa, socklen_t len, uint32_t *addr)
{
    if (!sa || len < sizeof(sa_family_t))
        return -1;
    if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
        *addr = ((const struct sockaddr_in *)sa)->sin_addr.s_addr;
        return 0;
    }
    if (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
        const struct in6_addr *a6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (!IN6_IS_ADDR_V4MAPPED(a6))
            return -1;
        memcpy(addr, &a6->s6_addr[12], sizeof *addr);
        return 0;
    }
    return -1;
}

int ws_peer_cluster(const struct sockaddr *sa, socklen_t len)
{
    uint32_t addr;
    if (ws_ipv4(sa, len, &addr) != 0)
        return WS_PEER_UNMAPPED;
    int c = cluster_of(addr);
    if (c < 0)
        return WS_PEER_UNMAPPED;
    return c == self ? WS_PEER_LOCAL : c;
}
