/* The public API of lib/include/wanshim.h: each call reads the settings if
 * nothing has yet (ws_init), asks the part that owns the answer (pacing.c,
 * blast.c, relay.c) and keeps errno unless it fails. */
#include "shim.h"
#include "relay.h"
#include "wanshim.h"
#include "../common/network.h"

#include <errno.h>
#include <stdint.h>

static int set_rate(int local, uint64_t bytes_per_s, const char *what)
{
    int saved = errno;
    if (ws_init() == WS_DISABLED) {
        errno = ENOSYS;
        return -1;
    }
    int n = local ? ws_pacing_set_local_rate(bytes_per_s) : ws_pacing_set_wan_rate(bytes_per_s);
    WS_DEBUG(1, "%s rate %llu B/s%s: %d sockets re-paced", what, (unsigned long long)bytes_per_s,
             bytes_per_s ? "" : " (not paced)", n);
    errno = saved;
    return n;
}

WS_EXPORT int wanshim_set_wan_rate(uint64_t bytes_per_s)
{
    return set_rate(0, bytes_per_s, "WAN");
}

WS_EXPORT uint64_t wanshim_wan_rate(void)
{
    ws_init();
    return ws_pacing_wan_rate();
}

WS_EXPORT int wanshim_set_local_rate(uint64_t bytes_per_s)
{
    return set_rate(1, bytes_per_s, "local");
}

WS_EXPORT uint64_t wanshim_local_rate(void)
{
    ws_init();
    return ws_pacing_local_rate();
}

static int other_cluster(const char *name)
{
    int c = name ? ws_cluster_index(name) : -1;
    return c >= 0 && c != ws_self_cluster() ? c : -1;
}

WS_EXPORT int wanshim_set_cluster_rate(const char *cluster, uint64_t bytes_per_s)
{
    int saved = errno;
    if (ws_init() == WS_DISABLED) {
        errno = ENOSYS;
        return -1;
    }
    int c = other_cluster(cluster);
    if (c < 0) {
        errno = EINVAL;
        return -1;
    }
    uint64_t now;
    int n = ws_pacing_set_cluster_rate(c, bytes_per_s, &now);
    WS_DEBUG(1, "rate to cluster '%s' %llu B/s%s: %d sockets re-paced", cluster,
             (unsigned long long)now, bytes_per_s == WANSHIM_RATE_WAN ? " (the WAN rate)" : "", n);
    errno = saved;
    return n;
}

WS_EXPORT uint64_t wanshim_cluster_rate(const char *cluster)
{
    if (ws_init() == WS_DISABLED)
        return UINT64_MAX;
    int c = other_cluster(cluster);
    return c < 0 ? UINT64_MAX : ws_pacing_cluster_rate(c);
}

WS_EXPORT int wanshim_wan_socket_count(void)
{
    int saved = errno;
    if (ws_init() != WS_ACTIVE)
        return 0;
    int n = ws_pacing_wan_socket_count();
    errno = saved;
    return n;
}

WS_EXPORT int wanshim_set_peer_rate(const struct sockaddr *peer, socklen_t len, uint64_t bytes_per_s)
{
    int saved = errno;
    uint32_t ip;
    if (ws_init() == WS_DISABLED) {
        errno = ENOSYS;
        return -1;
    }
    if (wm_ipv4(peer, len, &ip) != 0) {
        errno = EINVAL;
        return -1;
    }
    int n = ws_pacing_set_peer_rate(ip, bytes_per_s);
    WS_DEBUG(2, "rate of the sockets to one peer: %llu B/s, %d re-paced", (unsigned long long)bytes_per_s, n);
    errno = saved;
    return n;
}

WS_EXPORT int wanshim_enabled(void)
{
    return ws_init() == WS_ACTIVE;
}

WS_EXPORT int wanshim_request_blast(const struct sockaddr *peer, socklen_t len, uint64_t bytes_per_s,
                                    unsigned payload)
{
    int saved = errno;
    if (ws_init() == WS_DISABLED) {
        errno = ENOSYS;
        return -1;
    }
    uint8_t host[16];
    size_t n = ws_host_bytes(peer, len, host);
    if (n == 0 || (bytes_per_s && (payload < WS_MIN_DATAGRAM || payload > WS_MAX_DATAGRAM))) {
        errno = EINVAL;
        return -1;
    }
    if (!ws_relaying()) {
        errno = EOPNOTSUPP;
        return -1;
    }
    int err = ws_blast_set(host, n, bytes_per_s, payload);
    if (err) {
        errno = err;
        return -1;
    }
    char where[80];
    wm_format_address(peer, len, where, sizeof where);
    WS_DEBUG(1, "blast request for %s: %llu B/s, payload %u", where, (unsigned long long)bytes_per_s,
             payload);
    int stay = ws_relay_upgrade_host(host, n, bytes_per_s, payload);
    errno = saved;
    return stay;
}
