#include "rate.h"
#include "../common/settings.h"
#include "../common/log.h"
#include "../../include/wanshim.h"

#include <dlfcn.h>
#include <netinet/in.h>
#include <pthread.h>
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
