#include "stats.h"
#include "../common/log.h"
#include "../pacing/rate.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define WM_MAX_CLUSTERS 256

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    long calls[WM_NALG];
    double bytes, seconds;
} per_coll[WM_NCOLL];
static double to_cluster[WM_MAX_CLUSTERS];

void wm_stats_call(enum wm_coll coll, enum wm_alg alg, double bytes, double seconds)
{
    pthread_mutex_lock(&lock);
    per_coll[coll].calls[alg]++;
    per_coll[coll].bytes += bytes;
    per_coll[coll].seconds += seconds;
    pthread_mutex_unlock(&lock);
}

void wm_stats_sent(const struct wm_comm *wc, int dest, int count, MPI_Datatype type)
{
    int size;
    PMPI_Type_size(type, &size);
    int g = wc->cluster_global[wc->cluster_of[dest]];
    if (g < WM_MAX_CLUSTERS) {
        pthread_mutex_lock(&lock);
        to_cluster[g] += (double)count * size;
        pthread_mutex_unlock(&lock);
    }
}

/* WANMPI_STATS with %r, %p, %h expanded. */
static void destination(char *out, size_t len, const char *pattern, int rank)
{
    size_t used = 0;
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    for (const char *p = pattern; *p && used + 1 < len; p++) {
        if (p[0] == '%' && (p[1] == 'r' || p[1] == 'p' || p[1] == 'h')) {
            p++;
            if (*p == 'r')
                used += (size_t)snprintf(out + used, len - used, "%d", rank);
            else if (*p == 'p')
                used += (size_t)snprintf(out + used, len - used, "%ld", (long)getpid());
            else
                used += (size_t)snprintf(out + used, len - used, "%s", host);
        } else {
            out[used++] = *p;
        }
        if (used >= len)
            used = len - 1;
    }
    out[used] = 0;
}

void wm_stats_write(void)
{
    const char *pattern = wm_settings()->stats;
    if (!pattern)
        return;
    int rank = 0, size = 1;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    FILE *out = stderr;
    char path[4096];
    if (strcmp(pattern, "stderr")) {
        destination(path, sizeof path, pattern, rank);
        out = fopen(path, strchr(pattern, '%') ? "w" : "a");
        if (!out) {
            fprintf(stderr, "wanmpi: %s=%s: cannot write %s\n", WM_ENV_STATS, pattern, path);
            return;
        }
    }
    const struct wm_settings *s = wm_settings();
    fprintf(out, "{\"rank\": %d, \"size\": %d, \"lanes\": %d, \"chunk\": %zu, \"wan_rate\": %.0f, "
            "\"nic_rate\": %.0f, \"collectives\": {", rank, size, s->lanes, s->chunk, s->wan_rate, s->nic_rate);
    int first = 1;
    for (int c = 0; c < WM_NCOLL; c++) {
        long total = 0;
        for (int a = 0; a < WM_NALG; a++)
            total += per_coll[c].calls[a];
        if (!total)
            continue;
        fprintf(out, "%s\"%s\": {\"calls\": %ld", first ? "" : ", ", wm_coll_name((enum wm_coll)c), total);
        for (int a = 0; a < WM_NALG; a++)
            if (per_coll[c].calls[a] || a <= WM_ALG_MPI)
                fprintf(out, ", \"%s\": %ld", wm_alg_name((enum wm_alg)a), per_coll[c].calls[a]);
        fprintf(out, ", \"bytes\": %.0f, \"seconds\": %.6f}", per_coll[c].bytes, per_coll[c].seconds);
        first = 0;
    }
    fprintf(out, "}, \"bytes_to_cluster\": {");
    for (int g = 0; g < wm_cluster_count() && g < WM_MAX_CLUSTERS; g++)
        fprintf(out, "%s\"%s\": %.0f", g ? ", " : "", wm_cluster_name(g), to_cluster[g]);
    fprintf(out, "}, \"pacing\": {\"shim\": %s, \"rate_changes\": %ld, \"wan_rate\": %llu}}\n",
            wm_rate_available() ? "true" : "false", wm_rate_changes(), (unsigned long long)wm_rate_wan());
    if (out != stderr)
        fclose(out);
    else
        fflush(out);
}
