#include "settings.h"
#include "log.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *coll_names[WM_NCOLL] = {
    "bcast", "allreduce", "reduce", "allgather", "reduce_scatter_block",
    "barrier", "gather", "scatter", "alltoall", "alltoallv", "allgatherv", "gatherv", "scatterv",
    "scan", "exscan", "reduce_scatter", "alltoallw",
};
static const char *alg_names[WM_NALG] = { "multilane", "singlelane", "mpi", "scheduled", "paced" };
static const char *rate_mode_names[] = { "matb", "auto", "off" };

const char *wm_coll_name(enum wm_coll c) { return coll_names[c]; }

const char *wm_alg_name(enum wm_alg a) { return alg_names[a]; }

const char *wm_rate_mode_name(enum wm_rate_mode m) { return rate_mode_names[m]; }

static const char *nonempty(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* A non-negative integer within [min, max], or a fatal error naming the variable. */
static long long env_integer(const char *name, long long dflt, long long min, long long max)
{
    const char *v = nonempty(name);
    if (!v)
        return dflt;
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    while (*end && isspace((unsigned char)*end))
        end++;
    if (errno || end == v || *end || x < min || x > max)
        wm_fatal("%s=%s: expected an integer from %lld to %lld", name, v, min, max);
    return x;
}

static enum wm_alg env_alg(enum wm_coll c, int *set)
{
    char name[64] = WM_ENV_ALG_PREFIX;
    size_t n = strlen(name);
    for (const char *s = coll_names[c]; *s && n + 1 < sizeof name; s++)
        name[n++] = (char)toupper((unsigned char)*s);
    name[n] = 0;
    int a2a = c == WM_ALLTOALL || c == WM_ALLTOALLV || c == WM_ALLTOALLW;
    const char *v = nonempty(name);
    *set = v != NULL;
    if (!v)
        return a2a ? WM_ALG_SCHEDULED : WM_ALG_MULTILANE;
    for (int a = 0; a < WM_NALG; a++) {
        int allowed = a == WM_ALG_MPI || (a2a ? a == WM_ALG_SCHEDULED || (a == WM_ALG_PACED && c != WM_ALLTOALLW)
                                              : a == WM_ALG_MULTILANE || a == WM_ALG_SINGLELANE);
        if (allowed && !strcasecmp(v, alg_names[a]))
            return (enum wm_alg)a;
    }
    if (c == WM_ALLTOALLW)      /* no paced form: it would be the MPI's own, paced, for one collective more */
        wm_fatal("%s=%s: expected scheduled or mpi", name, v);
    if (a2a)
        wm_fatal("%s=%s: expected scheduled, paced or mpi", name, v);
    wm_fatal("%s=%s: expected multilane, singlelane or mpi", name, v);
}

static enum wm_rate_mode env_rate_mode(const char *name)
{
    const char *v = nonempty(name);
    if (!v)
        return WM_RATE_AUTO;
    for (int m = 0; m < (int)(sizeof rate_mode_names / sizeof rate_mode_names[0]); m++)
        if (!strcasecmp(v, rate_mode_names[m]))
            return (enum wm_rate_mode)m;
    wm_fatal("%s=%s: expected matb, auto or off", name, v);
}

/* WANMPI_CHECK: 0 (default), 1 (blocking collectives) or all. */
static enum wm_check env_check(const char *name)
{
    const char *v = nonempty(name);
    if (!v || !strcmp(v, "0"))
        return WM_CHECK_OFF;
    if (!strcmp(v, "1"))
        return WM_CHECK_BLOCKING;
    if (!strcasecmp(v, "all"))
        return WM_CHECK_ALL;
    wm_fatal("%s=%s: expected 0, 1 or all", name, v);
}

/* auto (default) or off. */
static enum wm_rate_mode env_auto_off(const char *name)
{
    const char *v = nonempty(name);
    if (!v || !strcasecmp(v, "auto"))
        return WM_RATE_AUTO;
    if (!strcasecmp(v, "off"))
        return WM_RATE_OFF;
    wm_fatal("%s=%s: expected auto or off", name, v);
}

/* One of two words: returns 0 for `first` (also unset), 1 for `second`. */
static int env_choice(const char *name, const char *first, const char *second)
{
    const char *v = nonempty(name);
    if (!v || !strcasecmp(v, first))
        return 0;
    if (!strcasecmp(v, second))
        return 1;
    wm_fatal("%s=%s: expected %s or %s", name, v, first, second);
}

static struct wm_settings settings;
static int parsed;

const struct wm_settings *wm_settings(void)
{
    if (parsed)
        return &settings;
    parsed = 1;     /* before parsing: wm_fatal -> wm_debug -> wm_settings must not recurse */
    settings.debug = (int)env_integer(WM_ENV_DEBUG, 0, 0, 3);
    settings.cluster = nonempty(WM_ENV_CLUSTER);
    settings.rank_clusters = nonempty(WM_ENV_RANK_CLUSTERS);
    settings.cluster_map = nonempty(WM_ENV_CLUSTER_MAP);
    settings.wan_rate = (double)env_integer(WM_ENV_WAN_RATE, 0, 1, LLONG_MAX);
    settings.nic_rate = (double)env_integer(WM_ENV_NIC_RATE, 0, 1, LLONG_MAX);
    settings.wan_delay_us = env_integer(WM_ENV_WAN_DELAY, -1, 0, 1000000000LL);
    settings.wan_rates = nonempty(WM_ENV_WAN_RATES);
    settings.rules = nonempty(WM_ENV_RULES);
    settings.lanes = (int)env_integer(WM_ENV_LANES, 0, 1, 1 << 20);
    settings.lan_latency_us = env_integer(WM_ENV_LAN_LATENCY, WM_DEFAULT_LAN_LATENCY, 0, 1000000LL);
    settings.fan = (int)env_integer(WM_ENV_FAN, 0, 1, 16);
    settings.window = env_integer(WM_ENV_WINDOW, WM_DEFAULT_WINDOW, 0, 1LL << 40);
    settings.chunk = (size_t)env_integer(WM_ENV_CHUNK, WM_DEFAULT_CHUNK, 1024, 1LL << 30);
    settings.small = (size_t)env_integer(WM_ENV_SMALL, WM_DEFAULT_SMALL, 0, 1LL << 40);
    settings.ring = (size_t)env_integer(WM_ENV_RING, WM_DEFAULT_RING, 0, 1LL << 62);
    for (int c = 0; c < WM_NCOLL; c++)
        settings.alg[c] = env_alg((enum wm_coll)c, &settings.alg_set[c]);
    settings.disabled = (int)env_integer(WM_ENV_DISABLE, 0, 0, 1);
    settings.alltoall_rate = env_rate_mode(WM_ENV_ALLTOALL_RATE);
    settings.allreduce_rate = env_auto_off(WM_ENV_ALLREDUCE_RATE);
    settings.matb_divisor = (int)env_integer(WM_ENV_MATB_DIVISOR, 1, 1, 64);
    settings.nonblocking_ours = !env_choice(WM_ENV_NONBLOCKING, "ours", "mpi");
    settings.progress_thread = env_choice(WM_ENV_PROGRESS, "calls", "thread");
    settings.check = env_check(WM_ENV_CHECK);
    settings.stats = nonempty(WM_ENV_STATS);
    return &settings;
}
