/* What the MPI entry points share: how a call enters, which algorithm it
 * takes, how a schedule of ours runs (blocking or nonblocking), how the
 * MPI's own nonblocking call is held and what is recorded. api.c is its
 * home; the entry points in files of their own (api_alltoallw.c) reach it
 * through the wm_entry_* functions, which are api.c's own. */
#ifndef WANMPI_ENTRY_H
#define WANMPI_ENTRY_H

#include <mpi.h>

#include "cluster.h"
#include "nb.h"
#include "sched.h"
#include "../common/log.h"
#include "../common/settings.h"

/* Runs an algorithm that fills a schedule (fn(s, wc, ...)): at once for a
 * blocking call (request NULL), else as a nonblocking collective (nb.h). */
#define SCHEDULE(rc, wc, comm, request, fn, ...)                                      \
    do {                                                                              \
        if (request) {                                                                \
            const struct wm_comm *nbwc_;                                              \
            struct wm_sched *s_ = wm_nb_begin(wc, comm, &nbwc_);                      \
            rc = wm_nb_submit(s_, fn(s_, nbwc_, __VA_ARGS__), request);               \
            wm_debug(1, "nonblocking %s: ours", #fn);                                 \
        } else {                                                                      \
            struct wm_sched s_;                                                       \
            wm_sched_init(&s_, wc, 0);                                                \
            fn(&s_, wc, __VA_ARGS__);                                                 \
            rc = wm_sched_run(&s_);                                                   \
        }                                                                             \
    } while (0)

/* The communicator's entry and the collective's setting (WM_ALG_MPI where
 * only the MPI can take the call); a nonblocking call (`request` set) only
 * on a communicator whose entry exists. */
int wm_entry_enter(enum wm_coll c, MPI_Comm comm, const struct wm_comm **out, enum wm_alg *alg,
                   MPI_Request *request);
/* Once the arguments are checked: the setting, the rules or the built-in choice. */
enum wm_alg wm_entry_decide(const struct wm_comm *wc, enum wm_coll c, enum wm_alg alg, double bytes);
/* A nonblocking call runs ours only where the blocking call would run a schedule. */
enum wm_alg wm_entry_nonblocking(enum wm_alg alg, MPI_Request *request);
/* The MPI's own nonblocking call's request, held by the engine (nb.h). */
int wm_entry_adopt(int rc, MPI_Comm comm, MPI_Request *request);
/* The statistics of a call (nothing for a nonblocking one). */
void wm_entry_record(enum wm_coll c, enum wm_alg alg, double bytes, double t0, MPI_Request *request);

#endif
