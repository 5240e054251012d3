/* The MPI-4 large-count C bindings (MPI_Bcast_c & co, counts as MPI_Count,
 * displacements as MPI_Aint). MPI-4 programs call them, and so does mpi4py 4
 * under MPICH 5 for every buffer-API collective (measured: without these,
 * WANMPI_STATS saw only its barriers). A call whose counts and
 * displacements all fit in an int takes exactly the path of the int binding
 * (api.c); a larger one, or an intercommunicator's all-to-all(v), goes to the
 * MPI library unchanged and is not counted in WANMPI_STATS. Built only
 * against an MPI that has them (MPI_VERSION >= 4: MPICH 5, not Open MPI 4.1). */
#include <limits.h>
#include <mpi.h>
#include <stdlib.h>

#include "coll.h"
#include "wanmpi_internal.h"
#include "../common/settings.h"

#if MPI_VERSION >= 4

static int fits(MPI_Count c)
{
    return c >= 0 && c <= INT_MAX;
}

/* counts[i] and displs[i] as ints into out (2n ints), or 0 if one does not fit */
static int as_ints(const MPI_Count *counts, const MPI_Aint *displs, int n, int *out)
{
    for (int i = 0; i < n; i++) {
        if (!fits(counts[i]) || displs[i] < 0 || displs[i] > INT_MAX)
            return 0;
        out[i] = (int)counts[i];
        out[n + i] = (int)displs[i];
    }
    return 1;
}

/* Room for `per_rank` ints per rank of an intracommunicator (*n: its size);
 * NULL, *n = 0, for an intercommunicator or MPI_COMM_NULL, whose calls go to
 * the MPI as they are (it reports a bad one). */
static int *room(MPI_Comm comm, int per_rank, int *n)
{
    int inter = 1;
    *n = 0;
    if (comm != MPI_COMM_NULL && PMPI_Comm_test_inter(comm, &inter) == MPI_SUCCESS && !inter)
        PMPI_Comm_size(comm, n);
    return *n > 0 ? malloc(sizeof(int) * (size_t)per_rank * (size_t)*n) : NULL;
}

/* Whether this rank may be the root of a rooted collective, whose counts
 * then matter: its rank in an intracommunicator; on an intercommunicator
 * (root MPI_ROOT, MPI_PROC_NULL or a remote rank) always, so that a count
 * past INT_MAX goes to the MPI unchanged. */
static int is_root(MPI_Comm comm, int root)
{
    int rank = -1, inter = 0;
    if (comm == MPI_COMM_NULL || PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter)
        return 1;
    return PMPI_Comm_rank(comm, &rank) == MPI_SUCCESS && rank == root;
}

int MPI_Bcast_c(void *buf, MPI_Count count, MPI_Datatype type, int root, MPI_Comm comm)
{
    return fits(count) ? wm_bcast(buf, (int)count, type, root, comm) : PMPI_Bcast_c(buf, count, type, root, comm);
}

int MPI_Allreduce_c(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype type, MPI_Op op,
                    MPI_Comm comm)
{
    return fits(count) ? wm_allreduce(sendbuf, recvbuf, (int)count, type, op, comm)
                       : PMPI_Allreduce_c(sendbuf, recvbuf, count, type, op, comm);
}

int MPI_Reduce_c(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype type, MPI_Op op, int root,
                 MPI_Comm comm)
{
    return fits(count) ? wm_reduce(sendbuf, recvbuf, (int)count, type, op, root, comm)
                       : PMPI_Reduce_c(sendbuf, recvbuf, count, type, op, root, comm);
}

int MPI_Scan_c(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype type, MPI_Op op, MPI_Comm comm)
{
    return fits(count) ? wm_scan(sendbuf, recvbuf, (int)count, type, op, comm)
                       : PMPI_Scan_c(sendbuf, recvbuf, count, type, op, comm);
}

int MPI_Exscan_c(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype type, MPI_Op op, MPI_Comm comm)
{
    return fits(count) ? wm_exscan(sendbuf, recvbuf, (int)count, type, op, comm)
                       : PMPI_Exscan_c(sendbuf, recvbuf, count, type, op, comm);
}

int MPI_Reduce_scatter_block_c(const void *sendbuf, void *recvbuf, MPI_Count recvcount, MPI_Datatype type,
                               MPI_Op op, MPI_Comm comm)
{
    return fits(recvcount) ? wm_reduce_scatter_block(sendbuf, recvbuf, (int)recvcount, type, op, comm)
                           : PMPI_Reduce_scatter_block_c(sendbuf, recvbuf, recvcount, type, op, comm);
}

int MPI_Reduce_scatter_c(const void *sendbuf, void *recvbuf, const MPI_Count recvcounts[], MPI_Datatype type,
                         MPI_Op op, MPI_Comm comm)
{
    int n, rc, ok, *recv = room(comm, 1, &n);
    ok = recv && recvcounts;
    for (int i = 0; ok && i < n; i++)
        if ((ok = fits(recvcounts[i])))
            recv[i] = (int)recvcounts[i];
    rc = ok ? wm_reduce_scatter(sendbuf, recvbuf, recv, type, op, comm)
            : PMPI_Reduce_scatter_c(sendbuf, recvbuf, recvcounts, type, op, comm);
    free(recv);
    return rc;
}

int MPI_Allgather_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
                    MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    /* with MPI_IN_PLACE the send count is ignored, whatever it holds */
    return (sendbuf == MPI_IN_PLACE || fits(sendcount)) && fits(recvcount)
               ? wm_allgather(sendbuf, fits(sendcount) ? (int)sendcount : 0, sendtype, recvbuf, (int)recvcount,
                              recvtype, comm)
               : PMPI_Allgather_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Allgatherv_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
                     const MPI_Count recvcounts[], const MPI_Aint displs[], MPI_Datatype recvtype, MPI_Comm comm)
{
    int n, rc, *recv = room(comm, 2, &n);
    if (recv && recvcounts && displs && as_ints(recvcounts, displs, n, recv) &&
        (sendbuf == MPI_IN_PLACE || fits(sendcount)))
        rc = wm_allgatherv(sendbuf, fits(sendcount) ? (int)sendcount : 0, sendtype, recvbuf, recv, recv + n,
                           recvtype, comm);
    else
        rc = PMPI_Allgatherv_c(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm);
    free(recv);
    return rc;
}

int MPI_Gather_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
                 MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    /* each count matters only where MPI reads it: the send count not with MPI_IN_PLACE,
     * the receive count at the root only (elsewhere it may hold anything) */
    return (sendbuf == MPI_IN_PLACE || fits(sendcount)) && (fits(recvcount) || !is_root(comm, root))
               ? wm_gather(sendbuf, fits(sendcount) ? (int)sendcount : 0, sendtype, recvbuf,
                           fits(recvcount) ? (int)recvcount : 0, recvtype, root, comm)
               : PMPI_Gather_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
}

int MPI_Scatter_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
                  MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    return (recvbuf == MPI_IN_PLACE || fits(recvcount)) && (fits(sendcount) || !is_root(comm, root))
               ? wm_scatter(sendbuf, fits(sendcount) ? (int)sendcount : 0, sendtype, recvbuf,
                            fits(recvcount) ? (int)recvcount : 0, recvtype, root, comm)
               : PMPI_Scatter_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
}

int MPI_Gatherv_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
                  const MPI_Count recvcounts[], const MPI_Aint displs[], MPI_Datatype recvtype, int root,
                  MPI_Comm comm)
{
    int n, rc, *recv = room(comm, 2, &n), root_ok = recv && !is_root(comm, root);
    if (recv && !root_ok)
        root_ok = recvcounts && displs && as_ints(recvcounts, displs, n, recv);
    if (root_ok && (sendbuf == MPI_IN_PLACE || fits(sendcount)))
        rc = wm_gatherv(sendbuf, fits(sendcount) ? (int)sendcount : 0, sendtype, recvbuf,
                        is_root(comm, root) ? recv : NULL, is_root(comm, root) ? recv + n : NULL, recvtype, root,
                        comm);
    else
        rc = PMPI_Gatherv_c(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm);
    free(recv);
    return rc;
}

int MPI_Scatterv_c(const void *sendbuf, const MPI_Count sendcounts[], const MPI_Aint displs[],
                   MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int root,
                   MPI_Comm comm)
{
    int n, rc, *send = room(comm, 2, &n), root_ok = send && !is_root(comm, root);
    if (send && !root_ok)
        root_ok = sendcounts && displs && as_ints(sendcounts, displs, n, send);
    if (root_ok && (recvbuf == MPI_IN_PLACE || fits(recvcount)))
        rc = wm_scatterv(sendbuf, is_root(comm, root) ? send : NULL, is_root(comm, root) ? send + n : NULL,
                         sendtype, recvbuf, fits(recvcount) ? (int)recvcount : 0, recvtype, root, comm);
    else
        rc = PMPI_Scatterv_c(sendbuf, sendcounts, displs, sendtype,
                             recvbuf, recvcount, recvtype, root, comm);
    free(send);
    return rc;
}

int MPI_Alltoall_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
                   MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    return (sendbuf == MPI_IN_PLACE || fits(sendcount)) && fits(recvcount)
               ? wm_alltoall(sendbuf, fits(sendcount) ? (int)sendcount : 0, sendtype, recvbuf, (int)recvcount,
                             recvtype, comm)
               : PMPI_Alltoall_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

/* One side of an all-to-all(v,w)_c as MPI_Alltoallw's arguments: per peer
 * an int count, an int byte displacement and a datatype. A block whose
 * count or displacement does not fit in an int becomes one element of a
 * type made for it (the block at its displacement, from the buffer's
 * start), freed after the call. So every rank takes the same path, whatever
 * its own counts: a rank that sent its call to the MPI because one of its
 * blocks is large, while the others ran ours, would wait for ever. */
struct w_side {
    int *counts, *displs;
    MPI_Datatype *types, *made;
    int nmade;
};

static void w_side_free(struct w_side *w)
{
    for (int i = 0; i < w->nmade; i++)
        PMPI_Type_free(&w->made[i]);
    free(w->counts);
}

/* displs in elements of `type` (alltoallv: types NULL) or in bytes (alltoallw) */
static int w_side(int n, const MPI_Count *counts, const MPI_Aint *displs, MPI_Datatype type,
                  const MPI_Datatype *types, struct w_side *w)
{
    char *room = malloc((sizeof(int) * 2 + sizeof(MPI_Datatype) * 2) * (size_t)(n ? n : 1));
    *w = (struct w_side){ (int *)room, (int *)room + n, NULL, NULL, 0 };
    if (!room)
        return 0;
    w->types = (MPI_Datatype *)(w->displs + n);
    w->made = w->types + n;
    for (int p = 0; p < n; p++) {
        MPI_Datatype t = types ? types[p] : type;
        MPI_Aint lb = 0, extent = 1;
        if (!types && PMPI_Type_get_extent(t, &lb, &extent) != MPI_SUCCESS)
            return 0;
        MPI_Count at = (MPI_Count)displs[p] * extent, count = counts[p];
        w->types[p] = t;
        if (fits(count) && at >= INT_MIN && at <= INT_MAX) {
            w->counts[p] = (int)count;
            w->displs[p] = (int)at;
            continue;
        }
        MPI_Datatype block;
        if (count < 0 || PMPI_Type_create_hindexed_c(1, &count, &at, t, &block) != MPI_SUCCESS)
            return 0;
        w->made[w->nmade++] = block;
        if (PMPI_Type_commit(&block) != MPI_SUCCESS)
            return 0;
        w->types[p] = block;
        w->counts[p] = 1;
        w->displs[p] = 0;
    }
    return 1;
}

/* Whether an all-to-all(v)_c runs as our alltoallw: on an intracommunicator,
 * with a separate send buffer, where the int binding would run our scheduled
 * all-to-all (the setting alone decides: it is the same on every rank). */
static int as_ours(MPI_Comm comm, const void *sendbuf, enum wm_coll c)
{
    int inter = 1;
    const struct wm_settings *s = wm_settings();
    return sendbuf != MPI_IN_PLACE && comm != MPI_COMM_NULL && !s->disabled &&
           s->alg[c] == WM_ALG_SCHEDULED && PMPI_Comm_test_inter(comm, &inter) == MPI_SUCCESS && !inter;
}

/* Our alltoallw with both sides converted, or the MPI's own (`own`) where a
 * side cannot be (a null array, a negative count: the MPI reports it). */
#define W_CALL(coll, call, comm, sendbuf, recvbuf, own, ...)                                                         \
    do {                                                                                                 \
        int n_ = 0, rc_;                                                                                 \
        struct w_side s_ = { 0 }, r_ = { 0 };                                                            \
        PMPI_Comm_size(comm, &n_);                                                                       \
        if (__VA_ARGS__)                                                                                 \
            rc_ = wm_alltoallw_as(coll, call, sendbuf, s_.counts, s_.displs, s_.types, recvbuf, r_.counts,  \
                                  r_.displs, r_.types, comm);                                            \
        else                                                                                             \
            rc_ = (own);                                                                                 \
        w_side_free(&s_);                                                                                \
        w_side_free(&r_);                                                                                \
        return rc_;                                                                                      \
    } while (0)

int MPI_Alltoallv_c(const void *sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[],
                    MPI_Datatype sendtype, void *recvbuf, const MPI_Count recvcounts[], const MPI_Aint rdispls[],
                    MPI_Datatype recvtype, MPI_Comm comm)
{
    if (as_ours(comm, sendbuf, WM_ALLTOALLV) && wm_type_committed(sendtype) && wm_type_committed(recvtype))
        W_CALL(WM_ALLTOALLV, "MPI_Alltoallv_c", comm, sendbuf, recvbuf,
               PMPI_Alltoallv_c(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype,
                                comm),
               sendcounts && sdispls && recvcounts && rdispls &&
                   w_side(n_, sendcounts, sdispls, sendtype, NULL, &s_) &&
                   w_side(n_, recvcounts, rdispls, recvtype, NULL, &r_));
    /* Not our schedule (in place, paced, the MPI's own): the int binding where
     * this rank's counts fit, else the MPI's _c; the MPI's own either way. */
    int n, rc, *send = room(comm, 4, &n), *recv = send ? send + 2 * n : NULL;
    if (send && recvcounts && rdispls && as_ints(recvcounts, rdispls, n, recv) &&
        (sendbuf == MPI_IN_PLACE || (sendcounts && sdispls && as_ints(sendcounts, sdispls, n, send))))
        rc = sendbuf == MPI_IN_PLACE
                 ? wm_alltoallv(sendbuf, recv, recv + n, sendtype, recvbuf, recv, recv + n, recvtype, comm)
                 : wm_alltoallv(sendbuf, send, send + n, sendtype, recvbuf, recv, recv + n, recvtype, comm);
    else
        rc = PMPI_Alltoallv_c(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype,
                              comm);
    free(send);
    return rc;
}

/* Byte displacements, as in MPI_Alltoallw. */
int MPI_Alltoallw_c(const void *sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[],
                    const MPI_Datatype sendtypes[], void *recvbuf, const MPI_Count recvcounts[],
                    const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm)
{
    if (as_ours(comm, sendbuf, WM_ALLTOALLW))
        W_CALL(WM_ALLTOALLW, "MPI_Alltoallw_c", comm, sendbuf, recvbuf,
               PMPI_Alltoallw_c(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes,
                                comm),
               sendcounts && sdispls && sendtypes && recvcounts && rdispls && recvtypes &&
                   w_side(n_, sendcounts, sdispls, MPI_DATATYPE_NULL, sendtypes, &s_) &&
                   w_side(n_, recvcounts, rdispls, MPI_DATATYPE_NULL, recvtypes, &r_));
    /* in place too: ours would send it to the MPI's own anyway */
    return PMPI_Alltoallw_c(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm);
}

#endif
