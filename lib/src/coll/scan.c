/* MPI_Scan and MPI_Exscan across clusters: one WAN crossing per cluster
 * boundary, in cluster order, instead of the MPI's rounds (recursive doubling
 * or a linear chain) that cross the WAN at several of them.
 *
 * The prefix follows rank order, so the schedule needs every cluster's ranks
 * to form one contiguous rank range, the clusters in rank order
 * (wm_scan_fits); api.c gives any other communicator to the MPI library.
 *
 *   stage  where                     what
 *   1      inside every cluster      local scan (exscan) on wc->local
 *   2      last rank of cluster X    receives P_X = clusters 0..X-1 from the
 *                                    last rank of X-1 (WAN), sends
 *                                    P_X OP total_X on to the last of X+1
 *   3      inside cluster X > 0      P_X broadcast from its last rank; every
 *                                    rank's result = P_X OP local result
 *
 * Operands keep rank order (user operations need not commute):
 * PMPI_Reduce_local(in, inout) computes inout = in OP inout, and `in` is
 * always the lower ranks' part. An exscan's first rank of a cluster X > 0
 * gets P_X alone; the first rank of the communicator keeps its buffer as the
 * MPI leaves it (undefined by the standard). */
#include "coll.h"
#include <stdlib.h>

#define PREFIX_TAG 0    /* our own traffic runs on the shadow communicator */

int wm_scan_fits(const struct wm_comm *wc)
{
    for (int r = 1; r < wc->size; r++)
        if (wc->cluster_of[r] < wc->cluster_of[r - 1])
            return 0;
    return 1;       /* clusters are numbered by lowest rank: non-decreasing means contiguous */
}

/* The last rank of cluster x, in rank order. */
static int last_of(const struct wm_comm *wc, int x)
{
    return wc->members[x][wc->cluster_size[x] - 1];
}

/* Stage 1 at the last rank of a cluster that passes a prefix on: the local
 * result into recvbuf and the cluster's total into `total`. */
static int local_stage(const struct wm_comm *wc, int exclusive, const void *sendbuf, void *recvbuf, int count,
                       MPI_Datatype type, MPI_Op op, const struct wm_layout *l, void *total)
{
    int rc;
    if (!exclusive) {
        if ((rc = PMPI_Scan(sendbuf, recvbuf, count, type, op, wc->local)) != MPI_SUCCESS)
            return rc;
        return wm_copy_elements(total, recvbuf, count, type, l);
    }
    /* my own input first: an in-place exscan overwrites it */
    rc = wm_copy_elements(total, sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf, count, type, l);
    if (rc == MPI_SUCCESS)
        rc = PMPI_Exscan(sendbuf, recvbuf, count, type, op, wc->local);
    if (rc == MPI_SUCCESS && wc->my_index > 0)
        rc = PMPI_Reduce_local(recvbuf, total, count, type, op);     /* total = earlier OP mine */
    return rc;
}

int wm_scan_run(const struct wm_comm *wc, int exclusive, const void *sendbuf, void *recvbuf, int count,
                MPI_Datatype type, MPI_Op op)
{
    struct wm_layout l;
    int rc = wm_layout(type, count, &l);
    if (rc != MPI_SUCCESS)
        return rc;
    int x = wc->my_cluster, n = wc->cluster_size[x], last = wc->my_index == n - 1;
    int passes_on = last && x < wc->nclusters - 1;
    void *total_base = NULL, *prefix_base = NULL;
    char *total = passes_on ? wm_alloc_elements(&l, count, &total_base) : NULL;
    char *prefix = x > 0 ? wm_alloc_elements(&l, count, &prefix_base) : NULL;

    if (passes_on)
        rc = local_stage(wc, exclusive, sendbuf, recvbuf, count, type, op, &l, total);
    else if (exclusive)
        rc = PMPI_Exscan(sendbuf, recvbuf, count, type, op, wc->local);
    else
        rc = PMPI_Scan(sendbuf, recvbuf, count, type, op, wc->local);
    if (rc != MPI_SUCCESS)
        goto done;

    if (last && x > 0)
        rc = PMPI_Recv(prefix, count, type, last_of(wc, x - 1), PREFIX_TAG, wc->shadow, MPI_STATUS_IGNORE);
    if (rc == MPI_SUCCESS && passes_on) {
        if (x > 0)
            rc = PMPI_Reduce_local(prefix, total, count, type, op);
        if (rc == MPI_SUCCESS)
            rc = PMPI_Send(total, count, type, last_of(wc, x + 1), PREFIX_TAG, wc->shadow);
    }
    if (rc != MPI_SUCCESS || x == 0)
        goto done;

    if ((rc = PMPI_Bcast(prefix, count, type, n - 1, wc->local)) != MPI_SUCCESS)
        goto done;
    if (exclusive && wc->my_index == 0)
        rc = wm_copy_elements(recvbuf, prefix, count, type, &l);
    else
        rc = PMPI_Reduce_local(prefix, recvbuf, count, type, op);
done:
    free(total_base);
    free(prefix_base);
    return rc;
}
