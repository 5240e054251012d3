/* 1:1 NAT, as between cloud regions (docs/libwanshim.md, "1:1 NAT"): every
 * node has a private address on its interface and a public one that its
 * region's NAT maps to it. The MPI knows only the private addresses (the
 * ones its ranks see on their interfaces and publish to each other), which
 * other regions cannot reach; open-mpi/ompi #11174, #8257, #12520.
 *
 * WANMPI_NAT_MAP lists the pairs, "10.1.0.5=3.8.1.2,...". A connect to a
 * private address of it in another cluster goes to the public address (same
 * port); an accept from, or getpeername of, a public address reports the
 * private one, which is what the MPI expects of the peer (Open MPI drops a
 * connection from an address it does not know). Connections inside a cluster
 * use private addresses and are left alone.
 *
 * The table is written once by ws_nat_load (under ws_init's pthread_once)
 * before `count` is published, and read-only afterwards. */
#include "shim.h"
#include "../common/settings.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WS_MAX_NAT_PAIRS 65536

struct pair { uint32_t private_ip, public_ip; };    /* network order */

static struct pair *pairs;
static int count;               /* published with release once the table is complete */

static int bad(const char *spec, const char *item, size_t n, const char *problem)
{
    ws_log("%s=%s: '%.*s' %s; the shim is off in this process (no socket is paced)", WM_ENV_NAT_MAP,
           spec, (int)n, item, problem);
    return -1;
}

static int parse_ip(const char *s, size_t n, uint32_t *out)
{
    char text[INET_ADDRSTRLEN];
    if (n == 0 || n >= sizeof text)
        return -1;
    memcpy(text, s, n);
    text[n] = 0;
    struct in_addr a;
    if (inet_pton(AF_INET, text, &a) != 1)
        return -1;
    *out = a.s_addr;
    return 0;
}

/* One "PRIVATE=PUBLIC" item into pairs[*n]. */
static int add_pair(const char *spec, const char *item, size_t len, int *n)
{
    const char *eq = memchr(item, '=', len);
    if (!eq)
        return bad(spec, item, len, "is not PRIVATE=PUBLIC");
    struct pair p;
    if (parse_ip(item, (size_t)(eq - item), &p.private_ip) != 0
        || parse_ip(eq + 1, (size_t)(item + len - eq - 1), &p.public_ip) != 0)
        return bad(spec, item, len, "needs two IPv4 addresses");
    for (int i = 0; i < *n; i++)
        if (pairs[i].private_ip == p.private_ip || pairs[i].public_ip == p.public_ip)
            return bad(spec, item, len, "repeats an address of an earlier pair");
    if (*n == WS_MAX_NAT_PAIRS)
        return bad(spec, item, len, "is one pair too many (65536 at most)");
    pairs[(*n)++] = p;
    return 0;
}

int ws_nat_load(const char *spec)
{
    if (!spec || !*spec)
        return 0;
    size_t items = 1;
    for (const char *s = spec; *s; s++)
        items += *s == ',';
    pairs = calloc(items < WS_MAX_NAT_PAIRS ? items : WS_MAX_NAT_PAIRS, sizeof *pairs);
    if (!pairs)
        return bad(spec, "", 0, "cannot be held: out of memory");
    int n = 0;
    for (const char *p = spec;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (add_pair(spec, p, len, &n) != 0) {
            free(pairs);
            pairs = NULL;
            return -1;
        }
        if (!comma)
            break;
        p = comma + 1;
    }
    __atomic_store_n(&count, n, __ATOMIC_RELEASE);
    WS_DEBUG(1, "1:1 NAT: %d addresses mapped", n);
    return 0;
}

/* The IPv4 address inside `sa` (AF_INET or v4-mapped AF_INET6), or NULL. */
static uint32_t *ipv4_field(struct sockaddr *sa, socklen_t len)
{
    if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in))
        return &((struct sockaddr_in *)sa)->sin_addr.s_addr;
    if (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
        struct in6_addr *a6 = &((struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a6))
            return (uint32_t *)(void *)&a6->s6_addr[12];
    }
    return NULL;
}

int ws_nat_public(const struct sockaddr *addr, socklen_t len, struct sockaddr_storage *out)
{
    int n = __atomic_load_n(&count, __ATOMIC_ACQUIRE);
    if (n == 0 || !addr || len < sizeof(sa_family_t) || len > sizeof *out)
        return 0;
    if (ws_peer_cluster(addr, len) < 0)         /* this cluster's own, or in none */
        return 0;
    memcpy(out, addr, len);
    uint32_t *ip = ipv4_field((struct sockaddr *)out, len);
    for (int i = 0; ip && i < n; i++)
        if (pairs[i].private_ip == *ip) {
            *ip = pairs[i].public_ip;
            return 1;
        }
    return 0;
}

int ws_nat_private(struct sockaddr *addr, socklen_t len)
{
    int n = __atomic_load_n(&count, __ATOMIC_ACQUIRE);
    if (n == 0 || !addr || len < sizeof(sa_family_t))
        return 0;
    uint32_t *ip = ipv4_field(addr, len);
    for (int i = 0; ip && i < n; i++)
        if (pairs[i].public_ip == *ip) {
            *ip = pairs[i].private_ip;
            return 1;
        }
    return 0;
}
