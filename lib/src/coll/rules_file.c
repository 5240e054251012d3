/* The text of a rules file (docs/tuning.md) into a list of rules; no MPI.
 * Every problem is reported with its line, and nothing of a bad file is used. */
#include "rules.h"
#include "../common/log_line.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WM_RULES_VERSION "1"
#define MAX_TOKENS 16

static const char *cond_names[WM_NCOND] = { "mpi", "clusters", "ranks", "delay", "rate", "bytes" };

/* Units of a condition's numbers: name and factor; `required`: a bare number is refused. */
struct unit { const char *name; double factor; };
static const struct unit byte_units[] = { {"", 1}, {"K", 1024.0}, {"M", 1048576.0}, {"G", 1073741824.0},
                                          {NULL, 0} };
static const struct unit delay_units[] = { {"us", 1}, {"ms", 1e3}, {"s", 1e6}, {NULL, 0} };
static const struct unit rate_units[] = { {"bit", 1}, {"Kbit", 1e3}, {"Mbit", 1e6}, {"Gbit", 1e9},
                                          {NULL, 0} };
static const struct unit count_units[] = { {"", 1}, {NULL, 0} };

static const struct unit *units_of(enum wm_condition c)
{
    switch (c) {
    case WM_COND_BYTES: return byte_units;
    case WM_COND_DELAY: return delay_units;
    case WM_COND_RATE: return rate_units;
    default: return count_units;
    }
}

static const char *unit_list(enum wm_condition c)
{
    switch (c) {
    case WM_COND_BYTES: return "bytes, or with K, M or G";
    case WM_COND_DELAY: return "with us, ms or s";
    case WM_COND_RATE: return "with bit, Kbit, Mbit or Gbit";
    default: return "a whole number";
    }
}

struct parser {
    int line;
    char *error;
    size_t error_len;
};

static int fail(struct parser *p, const char *fmt, ...) WM_PRINTF(2, 3);
static int fail(struct parser *p, const char *fmt, ...)
{
    int n = snprintf(p->error, p->error_len, "line %d: ", p->line);
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < p->error_len)
        vsnprintf(p->error + n, p->error_len - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

/* One number with its unit, the whole of [s, end). */
static int number(struct parser *p, enum wm_condition c, const char *s, size_t len, double *out)
{
    char text[64];
    if (len == 0 || len >= sizeof text)
        return fail(p, "%s: expected a number (%s)", cond_names[c], unit_list(c));
    memcpy(text, s, len);
    text[len] = 0;
    char *end;
    double v = strtod(text, &end);
    size_t digits = strspn(text, "0123456789.");    /* as python/wanmpi/rules.py: no signs, exponents, hex */
    if (end == text || end != text + digits || !isfinite(v) || !isdigit((unsigned char)text[0]))
        return fail(p, "%s: '%s' is not a number (%s)", cond_names[c], text, unit_list(c));
    for (const struct unit *u = units_of(c); u->name; u++)
        if (!strcmp(end, u->name)) {
            *out = v * u->factor;
            if ((c == WM_COND_CLUSTERS || c == WM_COND_RANKS) && v != floor(v))
                return fail(p, "%s: '%s' is not a whole number", cond_names[c], text);
            return 0;
        }
    return fail(p, "%s: '%s' has no valid unit (%s)", cond_names[c], text, unit_list(c));
}

/* "N", "A-B", "A-" or "-B". */
static int range(struct parser *p, enum wm_condition c, const char *s, struct wm_range *r)
{
    const char *dash = strchr(s, '-');
    size_t len = strlen(s);
    r->lo = 0;
    r->hi = INFINITY;
    r->closed = 0;
    if (!dash) {
        if (number(p, c, s, len, &r->lo))
            return -1;
        r->hi = r->lo;
        r->closed = 1;
        return 0;
    }
    if (dash == s && len == 1)
        return fail(p, "%s: '-' is not a range (N, A-B, A- or -B)", cond_names[c]);
    if (dash > s && number(p, c, s, (size_t)(dash - s), &r->lo))
        return -1;
    if (dash[1] && number(p, c, dash + 1, strlen(dash + 1), &r->hi))
        return -1;
    if (r->hi <= r->lo)
        return fail(p, "%s=%s is empty (A-B needs A < B)", cond_names[c], s);
    return 0;
}

static int condition(struct parser *p, struct wm_rule *rule, char *token)
{
    char *eq = strchr(token, '=');
    if (!eq)
        return fail(p, "'%s' is not a condition (NAME=VALUE: mpi, clusters, ranks, delay, rate, bytes)",
                    token);
    *eq = 0;
    const char *value = eq + 1;
    int c = 0;
    while (c < WM_NCOND && strcmp(token, cond_names[c]))
        c++;
    if (c == WM_NCOND)
        return fail(p, "unknown condition '%s' (mpi, clusters, ranks, delay, rate, bytes)", token);
    if (rule->has & (1u << c))
        return fail(p, "condition '%s' given twice", token);
    rule->has |= 1u << c;
    if (c == WM_COND_MPI) {
        static const char *const mpis[] = { [WM_MPI_OPENMPI] = "openmpi", [WM_MPI_MPICH] = "mpich",
                                            [WM_MPI_OPENMPI5] = "openmpi5", [WM_MPI_INTELMPI] = "intelmpi" };
        for (int m = WM_MPI_OPENMPI; m <= WM_MPI_INTELMPI; m++)
            if (!strcmp(value, mpis[m])) {
                rule->mpi = (enum wm_mpi)m;
                return 0;
            }
        return fail(p, "mpi=%s: expected openmpi, mpich, openmpi5 or intelmpi", value);
    }
    if (c == WM_COND_BYTES && (rule->coll == WM_ALLTOALLV || rule->coll == WM_ALLTOALLW ||
                               rule->coll == WM_GATHERV || rule->coll == WM_SCATTERV))
        return fail(p, "%s rules cannot have a bytes condition (its ranks see different sizes)",
                    wm_coll_name(rule->coll));
    return range(p, (enum wm_condition)c, value, &rule->range[c]);
}

static const enum wm_coll wrapped[] = { WM_BCAST, WM_ALLREDUCE, WM_REDUCE, WM_ALLGATHER, WM_ALLGATHERV,
                                        WM_REDUCE_SCATTER_BLOCK, WM_BARRIER, WM_GATHER, WM_GATHERV,
                                        WM_SCATTER, WM_SCATTERV, WM_SCAN, WM_EXSCAN, WM_ALLTOALL,
                                        WM_ALLTOALLV, WM_REDUCE_SCATTER, WM_ALLTOALLW };

static int collective(struct parser *p, const char *name, enum wm_coll *out)
{
    for (size_t i = 0; i < sizeof wrapped / sizeof wrapped[0]; i++)
        if (!strcmp(name, wm_coll_name(wrapped[i]))) {
            *out = wrapped[i];
            return 0;
        }
    return fail(p, "unknown collective '%s' (bcast, allreduce, reduce, allgather, allgatherv, "
                "reduce_scatter_block, barrier, gather, gatherv, scatter, scatterv, scan, exscan, alltoall, "
                "alltoallv, reduce_scatter, alltoallw)", name);
}

static int algorithm(struct parser *p, enum wm_coll coll, const char *name, enum wm_alg *out)
{
    int a2a = coll == WM_ALLTOALL || coll == WM_ALLTOALLV;
    const enum wm_alg allowed[3] = { a2a ? WM_ALG_SCHEDULED : WM_ALG_MULTILANE,
                                     a2a ? WM_ALG_PACED : WM_ALG_SINGLELANE, WM_ALG_MPI };
    if (coll == WM_ALLTOALLW) {         /* one algorithm of ours: scheduled */
        if (strcmp(name, "scheduled") && strcmp(name, "mpi"))
            return fail(p, "unknown algorithm '%s' for alltoallw (expected scheduled or mpi)", name);
        *out = name[0] == 's' ? WM_ALG_SCHEDULED : WM_ALG_MPI;
        return 0;
    }
    for (int i = 0; i < 3; i++)
        if (!strcmp(name, wm_alg_name(allowed[i]))) {
            *out = allowed[i];
            return 0;
        }
    return fail(p, "unknown algorithm '%s' for %s (expected %s, %s or mpi)", name, wm_coll_name(coll),
                wm_alg_name(allowed[0]), wm_alg_name(allowed[1]));
}

/* Splits a line at blanks, after cutting its comment. Returns the count. */
static int tokens(char *line, char **tok)
{
    char *hash = strchr(line, '#');
    if (hash)
        *hash = 0;
    int n = 0;
    char *save;
    for (char *t = strtok_r(line, " \t\r\v\f", &save); t; t = strtok_r(NULL, " \t\r\v\f", &save), n++)
        if (n < MAX_TOKENS)
            tok[n] = t;
    return n;
}

static int add(struct wm_rule_list *list, const struct wm_rule *rule)
{
    if ((list->count & (list->count - 1)) == 0) {       /* 0, 1, 2, 4, ...: grow */
        void *grown = realloc(list->rule, (size_t)(list->count ? 2 * list->count : 1) * sizeof *rule);
        if (!grown)
            return -1;
        list->rule = grown;
    }
    list->rule[list->count++] = *rule;
    return 0;
}

static int parse_line(struct parser *p, char *line, int *versioned, struct wm_rule_list *out)
{
    char *tok[MAX_TOKENS];
    int n = tokens(line, tok);
    if (n == 0)
        return 0;
    if (n > MAX_TOKENS)
        return fail(p, "more than %d words", MAX_TOKENS);
    if (!*versioned) {
        if (n != 2 || strcmp(tok[0], "wanmpi-rules"))
            return fail(p, "expected 'wanmpi-rules " WM_RULES_VERSION "' first");
        if (strcmp(tok[1], WM_RULES_VERSION))
            return fail(p, "version %s is not supported (this libwanmpi reads version " WM_RULES_VERSION ")",
                        tok[1]);
        *versioned = 1;
        return 0;
    }
    if (n < 2)
        return fail(p, "expected COLLECTIVE ALGORITHM [CONDITION ...]");
    struct wm_rule rule;
    memset(&rule, 0, sizeof rule);
    rule.line = p->line;
    if (collective(p, tok[0], &rule.coll) || algorithm(p, rule.coll, tok[1], &rule.alg))
        return -1;
    for (int i = 2; i < n; i++)
        if (condition(p, &rule, tok[i]))
            return -1;
    if (add(out, &rule))
        return fail(p, "out of memory");
    return 0;
}

int wm_rules_parse(const char *text, size_t len, struct wm_rule_list *out, char *error, size_t error_len)
{
    struct parser p = { 0, error, error_len };
    out->rule = NULL;
    out->count = 0;
    int versioned = 0;
    size_t start = 0;
    while (start < len) {
        size_t end = start;
        while (end < len && text[end] != '\n')
            end++;
        p.line++;
        char *line = malloc(end - start + 1);
        if (!line)
            return fail(&p, "out of memory");
        memcpy(line, text + start, end - start);
        line[end - start] = 0;
        int rc = memchr(line, 0, end - start) ? fail(&p, "contains a NUL byte")
                                              : parse_line(&p, line, &versioned, out);
        free(line);
        if (rc)
            return -1;
        start = end + 1;
    }
    if (!versioned) {
        p.line = p.line ? p.line : 1;
        return fail(&p, "no rules: the file is empty (expected 'wanmpi-rules " WM_RULES_VERSION "' first)");
    }
    return 0;
}

void wm_rules_free(struct wm_rule_list *list)
{
    free(list->rule);
    list->rule = NULL;
    list->count = 0;
}

int wm_range_holds(const struct wm_range *r, double x)
{
    return x >= r->lo && (r->closed ? x <= r->hi : x < r->hi);
}
