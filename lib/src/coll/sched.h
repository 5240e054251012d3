/* A small event loop over nonblocking point-to-point operations: the
 * pipelined algorithms post receives, and when one completes its handler
 * posts the sends (or reductions) that depended on it. Each algorithm is a
 * set of handlers; this file only owns the requests.
 *
 * Every message goes over the communicator's shadow, so tags only need to be
 * unique per (source, destination) pair within one collective call: the
 * algorithms use the chunk number. */
#ifndef WANMPI_SCHED_H
#define WANMPI_SCHED_H

#include <mpi.h>

#include "cluster.h"

struct wm_sched;
typedef int (*wm_handler)(struct wm_sched *s, void *arg, long item);

struct wm_sched {
    const struct wm_comm *wc;
    MPI_Comm comm;              /* wc->shadow */
    MPI_Request *req;
    struct wm_pending { wm_handler fn; void *arg; long item; } *pending;
    int n, cap, active;
    int *done;                  /* scratch for MPI_Testsome */
    int err;                    /* first error, MPI_SUCCESS otherwise */
};

void wm_sched_init(struct wm_sched *s, const struct wm_comm *wc);
/* Post; `fn` (may be NULL) runs when the operation completes. Return an MPI
 * error code (also kept in s->err, after which nothing more is posted). */
int wm_sched_send(struct wm_sched *s, const void *buf, int count, MPI_Datatype type, int dest,
                  int tag, wm_handler fn, void *arg, long item);
int wm_sched_recv(struct wm_sched *s, void *buf, int count, MPI_Datatype type, int source,
                  int tag, wm_handler fn, void *arg, long item);
/* Runs until every posted operation, and everything their handlers posted,
 * has completed. Returns the first error. Frees the scheduler's memory. */
int wm_sched_run(struct wm_sched *s);

#endif
