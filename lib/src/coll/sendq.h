/* A window on the sends a pipelined algorithm makes inside its cluster.
 *
 * A pipeline's steps share one connection per neighbour: in the reductions
 * a rank's ring successor gets the pieces it starts, the partials it passes
 * on and the results it passes on. The MPI library sends them in the order
 * they were posted (one TCP stream; the simulator shares the link among all
 * of them instead), so posting every piece's first step at once queued the
 * rest behind a quarter of the vector: a partial waited that long at every
 * hop, and the WAN phase and the results started late. Here at most
 * `window` sends are in the MPI library at once; the others wait, oldest
 * piece (smallest priority) first, and go as earlier ones complete. */
#ifndef WANMPI_SENDQ_H
#define WANMPI_SENDQ_H

#include <mpi.h>

#include "sched.h"

struct wm_sendq_item {
    const void *buf;
    int count, dest, tag;
    MPI_Datatype type;
    long prio;
};

struct wm_sendq {
    int window;                 /* sends in the MPI library at most; 0: no limit */
    int inflight;
    struct wm_sendq_item *heap; /* the waiting sends, a binary min-heap by prio */
    int n, cap;
};

void wm_sendq_init(struct wm_sendq *q, int window);
/* Sends now if the window has room, else when it has and no waiting send
 * has a smaller `prio`. Returns an MPI error code (also kept in s->err). */
int wm_sendq_send(struct wm_sched *s, struct wm_sendq *q, const void *buf, int count, MPI_Datatype type,
                  int dest, int tag, long prio);
void wm_sendq_free(struct wm_sendq *q);

#endif
