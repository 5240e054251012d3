/* The single-lane algorithms' exchanges among the clusters' leaders (local
 * index 0), as point-to-point messages on the shadow communicator: one WAN
 * crossing each, and no leaders' communicator to create (whose context id
 * the MPI agrees on across the WAN: 20 ms under MPICH, 61 ms under Open MPI
 * on the 2x4 testbed at 10 ms, per communicator).
 *
 * A reduction is computed in cluster order, v0 op (v1 op (... op v(n-1))),
 * identically on every leader that needs it: every rank gets the same bits
 * even where the operation is not associative (floating point). */
#include "coll.h"
#include "../common/log.h"

#include <stdlib.h>

#define LEADERS_TAG 1

static int leader_of(const struct wm_comm *wc, int c) { return wc->members[c][0]; }

static MPI_Request *requests(int n)
{
    MPI_Request *r = calloc((size_t)(n ? n : 1), sizeof *r);
    if (!r)
        wm_fatal("out of memory (%d requests)", n);
    return r;
}

int wm_leaders_barrier(const struct wm_comm *wc)
{
    int n = wc->nclusters, k = 0, rc = MPI_SUCCESS;
    MPI_Request *req = requests(2 * n);
    for (int c = 0; c < n && rc == MPI_SUCCESS; c++)
        if (c != wc->my_cluster)
            rc = PMPI_Irecv(NULL, 0, MPI_BYTE, leader_of(wc, c), LEADERS_TAG, wc->shadow, &req[k++]);
    for (int c = 0; c < n && rc == MPI_SUCCESS; c++)
        if (c != wc->my_cluster)
            rc = PMPI_Isend(NULL, 0, MPI_BYTE, leader_of(wc, c), LEADERS_TAG, wc->shadow, &req[k++]);
    if (rc == MPI_SUCCESS)
        rc = PMPI_Waitall(k, req, MPI_STATUSES_IGNORE);
    free(req);
    return rc;
}

int wm_leaders_allgatherv(const struct wm_comm *wc, char *buf, const int *counts, const int *displs)
{
    int n = wc->nclusters, me = wc->my_cluster, k = 0, rc = MPI_SUCCESS;
    MPI_Request *req = requests(2 * n);
    for (int c = 0; c < n && rc == MPI_SUCCESS; c++)
        if (c != me)
            rc = PMPI_Irecv(buf + displs[c], counts[c], MPI_BYTE, leader_of(wc, c), LEADERS_TAG, wc->shadow,
                            &req[k++]);
    for (int c = 0; c < n && rc == MPI_SUCCESS; c++)
        if (c != me)
            rc = PMPI_Isend(buf + displs[me], counts[me], MPI_BYTE, leader_of(wc, c), LEADERS_TAG, wc->shadow,
                            &req[k++]);
    if (rc == MPI_SUCCESS)
        rc = PMPI_Waitall(k, req, MPI_STATUSES_IGNORE);
    free(req);
    return rc;
}

/* Folds the clusters' vectors (v[c]) in cluster order into v[n-1]. */
static int fold(void **v, int n, int count, MPI_Datatype type, MPI_Op op)
{
    int rc = MPI_SUCCESS;
    for (int c = n - 2; c >= 0 && rc == MPI_SUCCESS; c--)
        rc = PMPI_Reduce_local(v[c], v[n - 1], count, type, op);
    return rc;
}

int wm_leaders_reduce(const struct wm_comm *wc, void *work, int count, MPI_Datatype type, MPI_Op op,
                      const struct wm_layout *l, int to)
{
    int n = wc->nclusters, me = wc->my_cluster, k = 0, rc = MPI_SUCCESS;
    int gets = to < 0 || to == me;
    MPI_Request *req = requests(2 * n);
    void **v = calloc((size_t)n, sizeof *v), **base = calloc((size_t)n, sizeof *base);
    if (!v || !base)
        wm_fatal("out of memory (%d clusters' vectors)", n);
    for (int c = 0; c < n && rc == MPI_SUCCESS; c++) {
        if (c == me) {
            v[c] = work;
        } else if (gets) {
            v[c] = wm_alloc_elements(l, count, &base[c]);
            rc = PMPI_Irecv(v[c], count, type, leader_of(wc, c), LEADERS_TAG, wc->shadow, &req[k++]);
        }
    }
    for (int c = 0; c < n && rc == MPI_SUCCESS; c++)
        if (c != me && (to < 0 || c == to))
            rc = PMPI_Isend(work, count, type, leader_of(wc, c), LEADERS_TAG, wc->shadow, &req[k++]);
    if (rc == MPI_SUCCESS)
        rc = PMPI_Waitall(k, req, MPI_STATUSES_IGNORE);
    if (rc == MPI_SUCCESS && gets) {
        /* the last vector accumulates: a received one, or mine (then nothing else is written) */
        rc = fold(v, n, count, type, op);
        if (rc == MPI_SUCCESS && me != n - 1)
            rc = wm_copy_elements(work, v[n - 1], count, type, l);
    }
    for (int c = 0; c < n; c++)
        free(base[c]);
    free(v);
    free(base);
    free(req);
    return rc;
}
