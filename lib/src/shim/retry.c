/* How a WAN socket's TCP retries through an outage (docs/libwanshim.md,
 * "WAN outages").
 *
 * When a WAN link drops, TCP retransmits with exponential backoff, and the
 * kernel caps the interval only at 120 s: after a 30 s cut the next
 * retransmission can be 25 s away, and the job sits idle that long after
 * the link is back (measured: 27.9 s). On every TCP socket to another
 * cluster the shim caps the interval (TCP_RTO_MAX_MS, Linux 6.15 and
 * later: WANMPI_TCP_RTO_MAX, default 1000 ms, the kernel's lowest), so the
 * first retransmission after the link returns comes within that cap. A capped interval would
 * also make the kernel give up sooner (tcp_retries2 retransmissions: about
 * 14 s at 1 s instead of 15 minutes), so the shim sets TCP_USER_TIMEOUT
 * too (WANMPI_TCP_USER_TIMEOUT, default 900000 ms, the kernel's own give-up
 * time at its defaults): a connection survives a cut that long, and a peer
 * that is gone is declared so as late as before. 0 leaves either to the
 * kernel. A kernel without TCP_RTO_MAX_MS keeps its backoff; the shim says
 * so once under WANMPI_SHIM_DEBUG. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "shim.h"
#include "../common/settings.h"

#ifndef TCP_RTO_MAX_MS
#define TCP_RTO_MAX_MS 44               /* linux/tcp.h since 6.15 */
#endif

static int rto_max_ms = 1000, user_timeout_ms = 900000;
static int rto_max_unsupported;

/* A whole number of milliseconds in [0, max], or -1. */
static int parse_ms(const char *text, int max)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    return errno || end == text || *end || v < 0 || v > max ? -1 : (int)v;
}

const char *ws_retry_init(const char **name, const char **value)
{
    static const struct { const char *env; int *ms; int max; } knobs[] = {
        { WM_ENV_TCP_RTO_MAX, &rto_max_ms, 120000 },            /* the kernel's own cap */
        { WM_ENV_TCP_USER_TIMEOUT, &user_timeout_ms, 86400000 }, /* a day */
    };
    for (size_t i = 0; i < sizeof knobs / sizeof knobs[0]; i++) {
        const char *text = getenv(knobs[i].env);
        if (!text || !*text)
            continue;
        int ms = parse_ms(text, knobs[i].max);
        if (ms < 0 || (knobs[i].ms == &rto_max_ms && ms > 0 && ms < 1000)) {     /* the kernel's floor */
            *name = knobs[i].env;
            *value = text;
            return knobs[i].ms == &rto_max_ms ? "expected milliseconds from 1000 to 120000, or 0 (the kernel's)"
                                              : "expected milliseconds up to 86400000, or 0 (the kernel's)";
        }
        *knobs[i].ms = ms;
    }
    return NULL;
}

void ws_retry_apply(int fd)
{
    if (rto_max_ms > 0 && !__atomic_load_n(&rto_max_unsupported, __ATOMIC_RELAXED) &&
        setsockopt(fd, IPPROTO_TCP, TCP_RTO_MAX_MS, &rto_max_ms, sizeof rto_max_ms) != 0) {
        if (errno == ENOPROTOOPT || errno == EINVAL) {
            if (!__atomic_exchange_n(&rto_max_unsupported, 1, __ATOMIC_RELAXED))
                WS_DEBUG(1, "this kernel has no TCP_RTO_MAX_MS (Linux 6.15+): WAN sockets keep the "
                            "kernel's retransmission backoff");
        } else {
            WS_DEBUG(1, "fd %d: setsockopt(TCP_RTO_MAX_MS) failed: %s", fd, strerror(errno));
        }
    }
    unsigned int timeout = (unsigned int)user_timeout_ms;
    if (timeout > 0 && setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &timeout, sizeof timeout) != 0)
        WS_DEBUG(1, "fd %d: setsockopt(TCP_USER_TIMEOUT) failed: %s", fd, strerror(errno));
}
