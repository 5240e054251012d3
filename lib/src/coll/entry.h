/* What the MPI entry points share: how a call enters, which algorithm it
 * takes, how a schedule of ours runs (blocking or nonblocking), how the
 * MPI's own nonblocking call is held and what is recorded. api.c is its
 * home; the entry points in files of their own (api_alltoallw.c) reach it
 * through the wm_entry_* functions, which are api.c's own. */
#ifndef WANMPI_ENTRY_H
#define WANMPI_ENTRY_H

#include <mpi.h>
#include "../common/pcoll.h"
#ifdef WM_PCOLL_MPIX
#include <mpi-ext.h>        /* PMPIX_<coll>_init, Open MPI 4.1's persistent collectives */
#endif
#include <stdint.h>

#include "cluster.h"
#include "nb.h"
#include "sched.h"
#include "../common/log.h"
#include "../common/settings.h"
#include "which_mpi.h"

/* A persistent collective (persistent.c) goes through the nonblocking entry
 * points with this thread's `wm_persist_call` set: at its init, to choose
 * once (the inits come in the same order on every rank, the starts need
 * not: MPI-4.1, 6.13), where ours keeps a tag slot of its own (nb.h) and the
 * MPI's becomes the MPI's own persistent request; at each MPI_Start, to run
 * ours with the init's algorithm in the init's slot. */
enum wm_persist_phase { WM_PERSIST_INIT = 1, WM_PERSIST_START };
struct wm_persist_call {
    enum wm_persist_phase phase;
    MPI_Info info;              /* the init's, for the MPI's own */
    enum wm_alg alg;            /* INIT: the choice made; START: the one to run */
    int64_t slot;               /* ours: the tag slot of every round */
    int emulated;               /* INIT, the MPI's own chosen: kept by us, each start its nonblocking call */
};

extern __thread struct wm_persist_call *wm_persist_call;

/* Runs an algorithm that fills a schedule (fn(s, wc, ...)): at once for a
 * blocking call (request NULL), else as a nonblocking collective (nb.h);
 * at a persistent init, only takes the slot. */
#define SCHEDULE(rc, wc, comm, request, fn, ...)                                      \
    do {                                                                              \
        struct wm_persist_call *pc_ = wm_persist_call;                                \
        if (request && pc_ && pc_->phase == WM_PERSIST_INIT) {                        \
            pc_->slot = wm_nb_reserve(wc);                                            \
            rc = MPI_SUCCESS;                                                         \
        } else if (request) {                                                         \
            const struct wm_comm *nbwc_;                                              \
            struct wm_sched *s_ = wm_nb_begin(wc, comm, pc_ ? pc_->slot : -1, &nbwc_); \
            rc = wm_nb_submit(s_, fn(s_, nbwc_, __VA_ARGS__), request);               \
            wm_debug(1, "nonblocking %s: ours", #fn);                                 \
        } else {                                                                      \
            struct wm_sched s_;                                                       \
            wm_sched_init(&s_, wc, 0);                                                \
            fn(&s_, wc, __VA_ARGS__);                                                 \
            rc = wm_sched_run(&s_);                                                   \
        }                                                                             \
    } while (0)

/* The MPI's own nonblocking call (`icall`, its request held by the engine:
 * wm_entry_adopt), or at a persistent init its own persistent one,
 * MPI_<coll>_init (Open MPI 4.1: MPIX_<coll>_init); the arguments are the
 * nonblocking call's before the request; its value the MPI's. */
#if defined(WM_PCOLL_MPIX)
#define WM_PMPI_INIT(coll) PMPIX_##coll##_init
#elif defined(WM_PCOLL)
#define WM_PMPI_INIT(coll) PMPI_##coll##_init
#endif
#ifdef WM_PMPI_INIT
#define MPI_OWN(icall, coll, comm, request, ...)                                                 \
    (wm_persist_call && wm_persist_call->phase == WM_PERSIST_INIT                         \
                ? (wm_mpi_persistent_broken() ? (wm_persist_call->emulated = 1, MPI_SUCCESS)     \
                                        : WM_PMPI_INIT(coll)(__VA_ARGS__, wm_persist_call->info, request)) \
                : wm_entry_adopt(icall(__VA_ARGS__, request), comm, request))
#else   /* an MPI without persistent collectives (SimGrid SMPI 3.32: MPI 3.1): api_persistent.c defines none */
#define MPI_OWN(icall, coll, comm, request, ...) wm_entry_adopt(icall(__VA_ARGS__, request), comm, request)
#endif

/* The communicator's entry and the collective's setting (WM_ALG_MPI where
 * only the MPI can take the call); a nonblocking call (`request` set) only
 * on a communicator whose entry exists. */
/* WANMPI_CHECK=all and this nonblocking call is not a persistent start:
 * it agrees on its arguments first (api.c, agree.h). */
int wm_entry_nb_agree(void);
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
