#include "rate.h"
#include "../common/cluster_map.h"
#include "../common/settings.h"
#include "../common/log.h"
#include "../../include/wanshim.h"

#include <dlfcn.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static wanshim_set_wan_rate_fn *set_wan;
static wanshim_wan_rate_fn *get_wan;
static wanshim_set_cluster_rate_fn *set_cluster;
static wanshim_set_local_rate_fn *set_local;
static wanshim_local_rate_fn *get_local;
static wanshim_set_peer_rate_fn *set_peer;
static int available;
static uint64_t initial;
static long changes;

static void resolve(void)
{
    wanshim_enabled_fn *enabled = (wanshim_enabled_fn *)dlsym(RTLD_DEFAULT, WANSHIM_ENABLED);
    set_wan = (wanshim_set_wan_rate_fn *)dlsym(RTLD_DEFAULT, WANSHIM_SET_WAN_RATE);
    get_wan = (wanshim_wan_rate_fn *)dlsym(RTLD_DEFAULT, WANSHIM_WAN_RATE);
    set_cluster = (wanshim_set_cluster_rate_fn *)dlsym(RTLD_DEFAULT, WANSHIM_SET_CLUSTER_RATE);
    set_local = (wanshim_set_local_rate_fn *)dlsym(RTLD_DEFAULT, WANSHIM_SET_LOCAL_RATE);
    get_local = (wanshim_local_rate_fn *)dlsym(RTLD_DEFAULT, WANSHIM_LOCAL_RATE);
    set_peer = (wanshim_set_peer_rate_fn *)dlsym(RTLD_DEFAULT, WANSHIM_SET_PEER_RATE);
    available = enabled && set_wan && get_wan && set_cluster && set_local && get_local && set_peer && enabled();
    initial = available ? get_wan() : 0;
    wm_debug(1, "pacing: libwanshim %s, initial WAN rate %llu B/s", available ? "present" : "absent",
             (unsigned long long)initial);
}

int wm_rate_available(void)
{
    pthread_once(&once, resolve);
    return available;
}

uint64_t wm_rate_maxrate(void)
{
    return (uint64_t)(wm_settings()->wan_rate / 8);
}

/* ---- WANMPI_WAN_RATES ---- */

#define MAX_PAIRS 1024

static struct pair { char a[WM_CLUSTER_NAME_MAX], b[WM_CLUSTER_NAME_MAX]; uint64_t rate; } pairs[MAX_PAIRS];
static int npairs;
static pthread_once_t pairs_once = PTHREAD_ONCE_INIT;

/* The name of `len` characters at `s` into `out`, or a fatal error. */
static void pair_name(const char *spec, const char *s, size_t len, char *out)
{
    if (!wm_cluster_name_valid(s, len))
        wm_fatal("%s=%s: '%.*s' is not a cluster name (expected \"a:b=BITS;...\")", WM_ENV_WAN_RATES, spec,
                 (int)len, s);
    memcpy(out, s, len);
    out[len] = 0;
}

static void parse_pairs(void)
{
    const char *spec = wm_settings()->wan_rates;
    for (const char *s = spec; s && *s;) {
        const char *end = strchr(s, ';');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        const char *colon = memchr(s, ':', len), *eq = memchr(s, '=', len);
        if (!colon || !eq || eq < colon)
            wm_fatal("%s=%s: '%.*s' is not NAME:NAME=BITS", WM_ENV_WAN_RATES, spec, (int)len, s);
        if (npairs == MAX_PAIRS)
            wm_fatal("%s: more than %d pairs of clusters", WM_ENV_WAN_RATES, MAX_PAIRS);
        struct pair *p = &pairs[npairs++];
        pair_name(spec, s, (size_t)(colon - s), p->a);
        pair_name(spec, colon + 1, (size_t)(eq - colon - 1), p->b);
        char *stop;
        unsigned long long bits = strtoull(eq + 1, &stop, 10);
        if (stop == eq + 1 || stop != s + len || bits == 0 || eq[1] == '-')
            wm_fatal("%s=%s: the rate of %s:%s must be a positive integer of bits/s", WM_ENV_WAN_RATES, spec,
                     p->a, p->b);
        p->rate = bits / 8 ? bits / 8 : 1;
        s = end ? end + 1 : s + len;
    }
}

void wm_rate_read_pairs(void)
{
    pthread_once(&pairs_once, parse_pairs);
}

uint64_t wm_rate_between(const char *a, const char *b)
{
    pthread_once(&pairs_once, parse_pairs);
    for (int i = 0; i < npairs; i++)
        if ((!strcmp(pairs[i].a, a) && !strcmp(pairs[i].b, b)) || (!strcmp(pairs[i].a, b) && !strcmp(pairs[i].b, a)))
            return pairs[i].rate;
    return wm_rate_maxrate();
}

uint64_t wm_rate_wan(void)
{
    return wm_rate_available() ? get_wan() : 0;
}

uint64_t wm_rate_initial(void)
{
    wm_rate_available();
    return initial;
}

int wm_rate_set_wan(uint64_t bytes_per_s)
{
    if (!wm_rate_available())
        return -1;
    if (get_wan() == bytes_per_s)
        return 0;
    changes++;
    wm_debug(1, "pacing: WAN rate %llu B/s", (unsigned long long)bytes_per_s);
    return set_wan(bytes_per_s) < 0 ? -1 : 0;
}

int wm_rate_set_cluster(const char *cluster, uint64_t bytes_per_s)
{
    if (!wm_rate_available())
        return -1;
    changes++;
    return set_cluster(cluster, bytes_per_s) < 0 ? -1 : 0;
}

int wm_rate_set_local(uint64_t bytes_per_s)
{
    if (!wm_rate_available())
        return -1;
    if (get_local() == bytes_per_s)
        return 0;
    changes++;
    return set_local(bytes_per_s) < 0 ? -1 : 0;
}

uint64_t wm_rate_local(void)
{
    return wm_rate_available() ? get_local() : 0;
}

int wm_rate_set_peer(uint32_t ipv4, uint64_t bytes_per_s)
{
    if (!wm_rate_available() || !ipv4)
        return -1;
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = ipv4;
    changes++;
    return set_peer((const struct sockaddr *)&sa, sizeof sa, bytes_per_s) < 0 ? -1 : 0;
}

long wm_rate_changes(void)
{
    return changes;
}
