/* The rules file of this process (WANMPI_RULES; docs/tuning.md), loaded once,
 * and the per-call choice on a communicator. */
#include "rules.h"
#include "cluster.h"
#include "../common/log.h"

#include <errno.h>
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FILE_BYTES (1 << 20)


/* What one communicator keeps: per collective, the rules that can apply to it. */
struct wm_comm_rules {
    int count[WM_NCOLL];
    const struct wm_rule **rule[WM_NCOLL];
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static struct {
    const char *path;
    int broken;                 /* unreadable or invalid: the MPI library's algorithms */
    uint64_t fingerprint;
    struct wm_rule_list list;
} rules;

static uint64_t fnv1a(const char *data, size_t len)
{
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)data[i]) * 1099511628211ull;
    return h | 2;               /* never 0 (no rules) nor 1 (unreadable) */
}

static int world_rank(void)
{
    int rank = -1;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank;
}

/* The file's text (at most MAX_FILE_BYTES), or NULL with `error` set. */
static char *read_file(const char *path, size_t *len, char *error, size_t error_len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(error, error_len, "cannot be read (%s)", strerror(errno));
        return NULL;
    }
    char *text = malloc(MAX_FILE_BYTES + 1);
    *len = text ? fread(text, 1, MAX_FILE_BYTES + 1, f) : 0;
    int failed = !text || ferror(f);
    fclose(f);
    if (failed || *len > MAX_FILE_BYTES) {
        snprintf(error, error_len, failed ? "cannot be read" : "is larger than %d bytes", MAX_FILE_BYTES);
        free(text);
        return NULL;
    }
    return text;
}

static void load(void)
{
    rules.path = wm_settings()->rules;
    if (!rules.path)
        return;
    char error[400] = "";
    size_t len = 0;
    char *text = read_file(rules.path, &len, error, sizeof error);
    if (!text) {
        rules.broken = 1;
        rules.fingerprint = 1;
    } else {
        rules.fingerprint = fnv1a(text, len);
        rules.broken = wm_rules_parse(text, len, &rules.list, error, sizeof error) != 0;
        free(text);
    }
    if (rules.broken) {
        wm_rules_free(&rules.list);
        if (world_rank() == 0)
            wm_warn("rules %s %s: every collective goes to the MPI library", rules.path, error);
    } else {
        wm_debug(1, "rules %s: %d rules", rules.path, rules.list.count);
    }
}

uint64_t wm_rules_fingerprint(void)
{
    pthread_once(&once, load);
    return rules.fingerprint;
}

/* Do the rule's conditions other than the size hold on wc? */
static int applies(const struct wm_rule *r, const struct wm_comm *wc)
{
    const struct wm_settings *s = wm_settings();
    const struct { enum wm_condition cond; int known; double value; } facts[] = {
        { WM_COND_CLUSTERS, 1, wc->nclusters },
        { WM_COND_RANKS, 1, wc->size },
        { WM_COND_DELAY, s->wan_delay_us >= 0, (double)s->wan_delay_us },
        { WM_COND_RATE, s->wan_rate > 0, s->wan_rate },
    };
    if ((r->has & (1u << WM_COND_MPI)) && r->mpi != wm_running_mpi())
        return 0;
    for (size_t i = 0; i < sizeof facts / sizeof facts[0]; i++)
        if ((r->has & (1u << facts[i].cond)) &&
            (!facts[i].known || !wm_range_holds(&r->range[facts[i].cond], facts[i].value)))
            return 0;
    return 1;
}

void wm_rules_attach(struct wm_comm *wc)
{
    pthread_once(&once, load);
    if (!rules.path)
        return;
    struct wm_comm_rules *cr = calloc(1, sizeof *cr);
    if (!cr)
        wm_fatal("out of memory (a communicator's rules)");
    wc->rules = cr;
    if (wc->rules_differ) {
        static int said;
        if (wc->rank == 0 && !said) {
            said = 1;
            wm_warn("rules %s: the ranks of a communicator of %d read different rules (the file missing or "
                    "different on some node?): its collectives go to the MPI library", rules.path, wc->size);
        }
        return;
    }
    for (int i = 0; i < rules.list.count; i++)
        if (applies(&rules.list.rule[i], wc))
            cr->count[rules.list.rule[i].coll]++;
    for (int c = 0; c < WM_NCOLL; c++) {
        cr->rule[c] = cr->count[c] ? calloc((size_t)cr->count[c], sizeof(struct wm_rule *)) : NULL;
        if (cr->count[c] && !cr->rule[c])
            wm_fatal("out of memory (a communicator's rules)");
        cr->count[c] = 0;
    }
    for (int i = 0; i < rules.list.count; i++) {
        const struct wm_rule *r = &rules.list.rule[i];
        if (applies(r, wc))
            cr->rule[r->coll][cr->count[r->coll]++] = r;
    }
}

void wm_rules_release(struct wm_comm *wc)
{
    if (!wc->rules)
        return;
    for (int c = 0; c < WM_NCOLL; c++)
        free(wc->rules->rule[c]);
    free(wc->rules);
    wc->rules = NULL;
}

enum wm_alg wm_rules_choose(const struct wm_comm *wc, enum wm_coll coll, double bytes, enum wm_alg dflt)
{
    if (rules.broken)
        return WM_ALG_MPI;
    const struct wm_comm_rules *cr = wc->rules;
    if (!cr)
        return dflt;
    if (wc->rules_differ)
        return WM_ALG_MPI;
    for (int i = 0; i < cr->count[coll]; i++) {
        const struct wm_rule *r = cr->rule[coll][i];
        if (!(r->has & (1u << WM_COND_BYTES)) || wm_range_holds(&r->range[WM_COND_BYTES], bytes)) {
            wm_debug(1, "%s of %.0f bytes: %s (rules line %d)", wm_coll_name(coll), bytes,
                     wm_alg_name(r->alg), r->line);
            return r->alg;
        }
    }
    return dflt;
}
