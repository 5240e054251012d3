#include "cluster_map.h"
#include "network.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(char *problem, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *problem, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(problem, size, fmt, ap);
    va_end(ap);
    return -1;
}

int wm_cluster_name_valid(const char *name, size_t len)
{
    if (len == 0 || len >= WM_CLUSTER_NAME_MAX)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (!isalnum((unsigned char)name[i]) && name[i] != '_' && name[i] != '-' && name[i] != '.')
            return 0;
    return 1;
}

int wm_cluster_map_find(const struct wm_cluster_map *map, const char *name)
{
    for (int i = 0; i < map->nclusters; i++)
        if (!strcmp(map->names[i], name))
            return i;
    return -1;
}

void wm_cluster_map_free(struct wm_cluster_map *map)
{
    free(map->networks);
    map->networks = NULL;
    map->nnetworks = 0;
    map->nclusters = 0;
}

static int add_network(struct wm_cluster_map *map, const char *s, size_t len, int cluster,
                       char *problem, size_t size)
{
    struct wm_network n;
    int code = wm_network_parse(s, len, &n);
    if (code)
        return fail(problem, size, "'%.*s' %s", (int)len, s, wm_network_problem(code));
    struct wm_cluster_network *grown =
        realloc(map->networks, (size_t)(map->nnetworks + 1) * sizeof *map->networks);
    if (!grown)
        return fail(problem, size, "out of memory");
    map->networks = grown;
    map->networks[map->nnetworks++] = (struct wm_cluster_network){ n.net, n.mask, n.bits, cluster };
    return 0;
}

/* The cluster named by the `len` characters at `name`, added if new; -1 with
 * `problem` if the name is bad or the map is full. */
static int cluster_named(struct wm_cluster_map *map, const char *name, size_t len, char *problem,
                         size_t size)
{
    if (!wm_cluster_name_valid(name, len))
        return fail(problem, size, "cluster name '%.*s' must have 1 to %d letters, digits, '_', "
                    "'-' or '.'", (int)len, name, WM_CLUSTER_NAME_MAX - 1);
    char text[WM_CLUSTER_NAME_MAX];
    snprintf(text, sizeof text, "%.*s", (int)len, name);
    int c = wm_cluster_map_find(map, text);
    if (c >= 0)
        return c;
    if (map->nclusters == WM_MAX_CLUSTERS)
        return fail(problem, size, "more than %d clusters", WM_MAX_CLUSTERS);
    memcpy(map->names[map->nclusters], text, sizeof text);
    return map->nclusters++;
}

static int parse(const char *spec, struct wm_cluster_map *map, char *problem, size_t size)
{
    const char *p = spec;
    while (*p) {
        const char *eq = strchr(p, '=');
        const char *end = strchr(p, ';');
        if (!end)
            end = p + strlen(p);
        if (!eq || eq > end)
            return fail(problem, size, "expected NAME=NETWORK[,NETWORK][;NAME=...]");
        int c = cluster_named(map, p, (size_t)(eq - p), problem, size);
        if (c < 0)
            return -1;
        for (const char *n = eq + 1; n < end;) {
            const char *comma = memchr(n, ',', (size_t)(end - n));
            const char *stop = comma ? comma : end;
            if (add_network(map, n, (size_t)(stop - n), c, problem, size) != 0)
                return -1;
            n = stop < end ? stop + 1 : end;
        }
        p = *end ? end + 1 : end;
    }
    return 0;
}

int wm_cluster_map_parse(const char *spec, struct wm_cluster_map *map, char *problem, size_t size)
{
    memset(map, 0, sizeof *map);
    if (parse(spec, map, problem, size) == 0)
        return 0;
    wm_cluster_map_free(map);
    return -1;
}

int wm_cluster_map_lookup(const struct wm_cluster_map *map, uint32_t addr)
{
    int best = -1, best_bits = -1;
    for (int i = 0; i < map->nnetworks; i++) {
        const struct wm_cluster_network *n = &map->networks[i];
        if ((addr & n->mask) == n->net && n->bits > best_bits) {
            best = n->cluster;
            best_bits = n->bits;
        }
    }
    return best;
}

/* "1.2.3.4, 10.0.0.1, ..." : the host's IPv4 addresses, for a message. */
static void list_addresses(const struct ifaddrs *ifs, char *list, size_t size)
{
    size_t used = 0;
    list[0] = 0;
    for (const struct ifaddrs *i = ifs; i && used + INET_ADDRSTRLEN + 2 < size; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
            continue;
        char a[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &((const struct sockaddr_in *)i->ifa_addr)->sin_addr, a, sizeof a);
        used += (size_t)snprintf(list + used, size - used, "%s%s", used ? ", " : "", a);
    }
}

int wm_cluster_map_host(const struct wm_cluster_map *map, int *cluster, uint32_t *address,
                        char *problem, size_t size)
{
    struct ifaddrs *ifs;
    if (getifaddrs(&ifs) != 0)
        return fail(problem, size, "getifaddrs() failed: cannot tell this host's cluster");
    int found = -1;
    for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
            continue;
        uint32_t addr = ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
        for (int k = 0; k < map->nnetworks; k++) {
            const struct wm_cluster_network *n = &map->networks[k];
            if ((addr & n->mask) != n->net || n->cluster == found)
                continue;
            if (found >= 0) {
                freeifaddrs(ifs);
                return fail(problem, size, "this host has addresses in two clusters ('%s' and '%s')",
                            map->names[found], map->names[n->cluster]);
            }
            found = n->cluster;
            *address = addr;
        }
    }
    if (found < 0) {
        char list[512];
        list_addresses(ifs, list, sizeof list);
        freeifaddrs(ifs);
        return fail(problem, size, "none of this host's addresses (%s) is in a cluster's network",
                    list);
    }
    freeifaddrs(ifs);
    *cluster = found;
    return 0;
}
