/* Per-rank statistics: calls, bytes and time per collective and algorithm,
 * and the bytes this rank sent to each cluster. Written at MPI_Finalize when
 * WANMPI_STATS names a destination, as one JSON object per rank. */
#ifndef WANMPI_STATS_H
#define WANMPI_STATS_H

#include <mpi.h>

#include "cluster.h"
#include "../common/settings.h"

/* One finished collective call: `alg` is what actually ran. */
void wm_stats_call(enum wm_coll coll, enum wm_alg alg, double bytes, double seconds);
/* Bytes of one message posted by an algorithm. */
void wm_stats_sent(const struct wm_comm *wc, int dest, int count, MPI_Datatype type);
void wm_stats_write(void);

#endif
