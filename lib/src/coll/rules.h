/* Rules files (docs/tuning.md): which algorithm runs per call, by collective,
 * MPI, communicator shape, WAN delay and rate, and message size. Written by
 * `wanmpi tune`, named by WANMPI_RULES.
 *
 * rules_file.c parses the text (no MPI); rules.c loads the file once per
 * process, keeps per communicator the rules that can apply to it, and answers
 * per call. Every rank of a communicator must decide the same: the file's
 * fingerprint travels in the communicator's one exchange (cluster.c), and a
 * communicator whose ranks read different rules uses the MPI library's own
 * algorithms. */
#ifndef WANMPI_RULES_H
#define WANMPI_RULES_H

#include <stddef.h>
#include <stdint.h>

#include "../common/settings.h"
#include "which_mpi.h"

/* A RANGE of docs/tuning.md: lo <= x < hi, or lo <= x <= hi when closed. */
struct wm_range {
    double lo, hi;
    int closed;
};


enum wm_condition { WM_COND_MPI, WM_COND_CLUSTERS, WM_COND_RANKS, WM_COND_DELAY, WM_COND_RATE,
                    WM_COND_BYTES, WM_NCOND };

struct wm_rule {
    enum wm_coll coll;
    enum wm_alg alg;
    int line;                               /* in the file, from 1 */
    unsigned has;                           /* bit (1 << enum wm_condition) per condition given */
    enum wm_mpi mpi;                        /* mpi=: holds under that MPI (which_mpi.h) */
    struct wm_range range[WM_NCOND];        /* delay in microseconds, rate in bits/s */
};

struct wm_rule_list {
    struct wm_rule *rule;
    int count;
};

/* Parses a whole file's text. 0 on success; else -1 and "line N: problem"
 * in `error`. The list is freed with wm_rules_free, also after an error. */
int wm_rules_parse(const char *text, size_t len, struct wm_rule_list *out, char *error, size_t error_len);
void wm_rules_free(struct wm_rule_list *list);

int wm_range_holds(const struct wm_range *r, double x);

/* ---- rules.c: for libwanmpi's calls ---- */
struct wm_comm;

/* Fingerprint of this process's rules (0: none), for the ranks to compare. */
uint64_t wm_rules_fingerprint(void);

/* Keeps on `wc` the rules whose conditions other than the size hold for it
 * (none if wc->rules_differ: its ranks read different rules). Called once,
 * when wc is built; wm_rules_release frees what it kept. */
void wm_rules_attach(struct wm_comm *wc);
void wm_rules_release(struct wm_comm *wc);

/* The algorithm the rules choose for a call of `coll` of `bytes` on wc; `dflt`
 * when no rule matches. A rules file that could not be read, or ranks that
 * read different ones: WM_ALG_MPI. */
enum wm_alg wm_rules_choose(const struct wm_comm *wc, enum wm_coll coll, double bytes, enum wm_alg dflt);

#endif
