/* A small event loop over nonblocking point-to-point operations: the
 * pipelined algorithms post receives, and when one completes its handler
 * posts the sends (or reductions) that depended on it. Each algorithm is a
 * set of handlers; this file only owns the requests.
 *
 * Every message goes over the communicator's shadow, so tags only need to be
 * unique per (source, destination) pair within one collective call: the
 * algorithms use the chunk number, and the scheduler adds `tag_base` (0 for
 * a blocking call; a nonblocking one gets its own tag range, nb.c, so several
 * outstanding collectives on one communicator never mix their messages).
 *
 * A schedule runs in one of two ways: at once (wm_sched_run: a blocking
 * collective), or step by step (wm_sched_step, then wm_sched_end: a
 * nonblocking one, progressed by nb.c). Either way the algorithm's end hook
 * (wm_sched_at_end) runs once, after the last operation: it unpacks, copies
 * out and frees the algorithm's state. */
#ifndef WANMPI_SCHED_H
#define WANMPI_SCHED_H

#include <mpi.h>

#include "cluster.h"

struct wm_sched;
typedef int (*wm_handler)(struct wm_sched *s, void *arg, long item);
/* Receives the schedule's result (MPI_SUCCESS or its first error); returns
 * the collective's. */
typedef int (*wm_end_hook)(void *state, int rc);

struct wm_sched {
    const struct wm_comm *wc;
    MPI_Comm comm;              /* wc->shadow */
    int tag_base;
    MPI_Request *req;
    struct wm_pending { wm_handler fn; void *arg; long item; } *pending;
    int n, cap, active;
    int *done;                  /* scratch for MPI_Testsome */
    MPI_Status *status;         /* its statuses; `current`: the one whose handler runs */
    const MPI_Status *current;
    int err;                    /* first error, MPI_SUCCESS otherwise */
    int completed;              /* operations the last step saw complete */
    wm_end_hook end;
    void *end_state;
};

void wm_sched_init(struct wm_sched *s, const struct wm_comm *wc, int tag_base);
/* Post; `fn` (may be NULL) runs when the operation completes. Return an MPI
 * error code (also kept in s->err, after which nothing more is posted). */
int wm_sched_send(struct wm_sched *s, const void *buf, int count, MPI_Datatype type, int dest,
                  int tag, wm_handler fn, void *arg, long item);
int wm_sched_recv(struct wm_sched *s, void *buf, int count, MPI_Datatype type, int source,
                  int tag, wm_handler fn, void *arg, long item);
/* Takes a request started elsewhere (the MPI's own nonblocking collective). */
int wm_sched_adopt(struct wm_sched *s, MPI_Request request);
/* `end` runs once, when the schedule has ended (also after an error). */
void wm_sched_at_end(struct wm_sched *s, wm_end_hook end, void *state);
/* Inside a handler: the status of the operation that completed (a
 * receive's source, tag and count). */
const MPI_Status *wm_sched_status(const struct wm_sched *s);
/* Marks the schedule failed with rc (no-op for MPI_SUCCESS); returns rc. */
int wm_sched_fail(struct wm_sched *s, int rc);

/* Tests the posted operations once and runs the handlers of those that
 * completed. Returns 1 when the schedule has nothing left to do (or failed). */
int wm_sched_step(struct wm_sched *s);
/* After the last step: runs the end hook, frees the scheduler's memory and
 * returns the collective's result. */
int wm_sched_end(struct wm_sched *s);
/* Runs until every posted operation, and everything their handlers posted,
 * has completed, then ends the schedule (wm_sched_end). */
int wm_sched_run(struct wm_sched *s);

/* Called between steps while a blocking schedule waits (nb.c progresses the
 * outstanding nonblocking collectives there); NULL: nothing. */
extern void (*wm_sched_idle)(void);

#endif
