/* The shim's start: its settings from the environment, read once at the
 * first intercepted call or API call, then each part set up in turn
 * (pacing.c, clusters.c, nat.c, relay.c, and the open sockets adopted). The parts
 * never call back here: the wrappers and the API (the two top files) call
 * ws_init, then the parts.
 *
 * The shim lives inside someone else's process: a bad setting must never
 * crash it or change what its calls return. So a setting that cannot be read
 * is reported once on stderr, naming the variable and the value, and the shim
 * then passes every call through untouched for the life of the process. */
#include "shim.h"
#include "relay.h"
#include "../common/settings.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static enum ws_state state = WS_PASSIVE;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void disable(const char *name, const char *value, const char *problem)
{
    ws_log("%s=%s: %s; the shim is off in this process (no socket is paced)", name, value, problem);
    state = WS_DISABLED;
    ws_debug = 0;
}

/* "12500000", "100Mbit", "12.5MB", "1GiB/s" -> bytes/s. Bits need their unit
 * spelled out ("bit", "kbit", ...): "Mbps" is refused, as in topology files,
 * because tc reads it as bytes and people read it as bits. 0, or -1 with
 * `problem` set. */
static int parse_rate(const char *text, uint64_t *out, const char **problem)
{
    static const struct { const char *unit; double scale; } units[] = {
        { "", 1 }, { "b", 1 }, { "kb", 1e3 }, { "mb", 1e6 }, { "gb", 1e9 },
        { "kib", 1024.0 }, { "mib", 1048576.0 }, { "gib", 1073741824.0 },
        { "bit", 1 / 8.0 }, { "kbit", 1e3 / 8 }, { "mbit", 1e6 / 8 }, { "gbit", 1e9 / 8 },
        { "tbit", 1e12 / 8 },
    };
    const char *p = text;
    while (isspace((unsigned char)*p))
        p++;
    if (!isdigit((unsigned char)*p)) {
        *problem = "expected bytes/s (an integer) or a rate with a unit, such as 100Mbit or 12.5MB";
        return -1;
    }
    char *stop;
    errno = 0;
    double number = strtod(p, &stop);
    if (errno || !isfinite(number)) {
        *problem = "the number is out of range";
        return -1;
    }
    char unit[16];
    size_t n = 0;
    for (p = stop; isspace((unsigned char)*p); p++)
        ;
    for (; *p && !isspace((unsigned char)*p); p++) {
        if (n + 1 >= sizeof unit) {
            *problem = "unknown unit (units: B, KB, MB, GB, KiB, MiB, GiB for bytes/s; "
                       "bit, kbit, Mbit, Gbit, Tbit for bits/s)";
            return -1;
        }
        unit[n++] = (char)tolower((unsigned char)*p);
    }
    unit[n] = 0;
    while (isspace((unsigned char)*p))
        p++;
    if (n >= 2 && !strcmp(unit + n - 2, "/s"))
        unit[n -= 2] = 0;
    if (*p || (n == 0 && stop > text && strpbrk(text, ".eExX"))) {
        *problem = *p ? "unexpected text after the rate"
                      : "a rate without a unit is bytes/s and must be an integer";
        return -1;
    }
    if (n >= 3 && !strcmp(unit + n - 3, "bps")) {
        *problem = "ambiguous unit: write bits/s as kbit, Mbit or Gbit, or bytes/s as KB, MB or GB";
        return -1;
    }
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(unit, units[i].unit))
            continue;
        double bytes = number * units[i].scale;
        if (bytes >= 1.8e19) {
            *problem = "the rate is out of range";
            return -1;
        }
        *out = (uint64_t)llround(bytes);
        if (*out == 0 && number > 0)
            *out = 1;
        return 0;
    }
    *problem = "unknown unit (units: B, KB, MB, GB, KiB, MiB, GiB for bytes/s; "
               "bit, kbit, Mbit, Gbit, Tbit for bits/s)";
    return -1;
}

static void at_fork_prepare(void)
{
    ws_pacing_atfork_prepare();
    ws_relay_atfork_prepare();
    ws_blast_atfork_prepare();
}

static void at_fork_release(void)
{
    ws_blast_atfork_release();
    ws_relay_atfork_release();
    ws_pacing_atfork_release();
}

static void init_once(void)
{
    int saved = errno;
    const char *debug = getenv(WM_ENV_SHIM_DEBUG);
    if (debug && *debug && strcmp(debug, "0") && strcmp(debug, "1") && strcmp(debug, "2")) {
        disable(WM_ENV_SHIM_DEBUG, debug, "expected 0, 1 or 2");
        goto done;
    }
    uint64_t rate = 0;
    const char *rate_text = getenv(WM_ENV_PACING_RATE);
    const char *problem;
    if (rate_text && *rate_text && parse_rate(rate_text, &rate, &problem) != 0) {
        disable(WM_ENV_PACING_RATE, rate_text, problem);
        goto done;
    }
    const char *retry_name, *retry_value;
    if ((problem = ws_retry_init(&retry_name, &retry_value)) != NULL) {
        disable(retry_name, retry_value, problem);
        goto done;
    }
    const char *map = getenv(WM_ENV_CLUSTER_MAP);
    const char *self = getenv(WM_ENV_CLUSTER);
    if (self && !*self)
        self = NULL;
    ws_pacing_init(rate);
    if (!map || !*map) {
        const char *relays = getenv(WM_ENV_RELAYS);
        if (relays && *relays)      /* a job that needs its relays would fail with a wrong error */
            ws_log("%s is set but %s is not: nothing is relayed", WM_ENV_RELAYS, WM_ENV_CLUSTER_MAP);
        WS_DEBUG(1, "%s is not set: every socket is left alone", WM_ENV_CLUSTER_MAP);
        goto done;
    }
    if (ws_clusters_load(map, self) != 0 || ws_nat_load(getenv(WM_ENV_NAT_MAP)) != 0) {
        state = WS_DISABLED;
        ws_debug = 0;
        goto done;
    }
    ws_relay_init();
    pthread_atfork(at_fork_prepare, at_fork_release, at_fork_release);
    state = WS_ACTIVE;
    WS_DEBUG(1, "cluster '%s' of %d; WAN rate %llu B/s%s",
             ws_self_cluster() >= 0 ? ws_cluster_name(ws_self_cluster()) : self,
             ws_cluster_count(), (unsigned long long)rate, rate ? "" : " (not paced)");
    ws_adopt_open_sockets();
done:
    errno = saved;
}

enum ws_state ws_init(void)
{
    pthread_once(&once, init_once);
    return state;
}
