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

#include "wanmpi_internal.h"

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

int MPI_Alltoallv_c(const void *sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[],
                    MPI_Datatype sendtype, void *recvbuf, const MPI_Count recvcounts[], const MPI_Aint rdispls[],
                    MPI_Datatype recvtype, MPI_Comm comm)
{
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

/* Byte displacements: an int each, as in MPI_Alltoallw. */
int MPI_Alltoallw_c(const void *sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[],
                    const MPI_Datatype sendtypes[], void *recvbuf, const MPI_Count recvcounts[],
                    const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm)
{
    int n, rc, *send = room(comm, 4, &n), *recv = send ? send + 2 * n : NULL;
    if (send && sendbuf != MPI_IN_PLACE && sendcounts && sdispls && recvcounts && rdispls &&
        as_ints(sendcounts, sdispls, n, send) && as_ints(recvcounts, rdispls, n, recv))
        rc = wm_alltoallw(sendbuf, send, send + n, sendtypes, recvbuf, recv, recv + n, recvtypes, comm);
    else        /* in place too: ours would send it to the MPI's own anyway */
        rc = PMPI_Alltoallw_c(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes,
                              comm);
    free(send);
    return rc;
}

#endif
