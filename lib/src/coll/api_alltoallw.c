/* MPI_Alltoallw, MPI_Ialltoallw (and MPI_Alltoallw_init through it,
 * persistent.c): the scheduled all-to-all (alltoallw.c),
 * or the MPI's own.
 *
 * To the MPI's own, where it reports errors exactly as without us or where
 * ours gains nothing: a communicator in one cluster or an intercommunicator
 * (wm_comm), MPI_IN_PLACE (the schedule needs a separate send buffer; the
 * MPI's own exchanges in place), counts or datatypes MPI would reject
 * (negative, MPI_DATATYPE_NULL), WANMPI_ALLTOALLW=mpi or a rule that says
 * mpi. Only what every rank sees alike (or what MPI rejects at once)
 * decides: a block past INT_MAX bytes between two ranks must not send them
 * to the MPI while the others run ours (it travels in one message).
 *
 * One algorithm of ours (`scheduled`), no `paced` as for the alltoall(v):
 * that would be the MPI's own alltoallw with the sockets paced, and the
 * scheduled one is paced too. Its sizes differ by rank, so no size enters
 * the choice (as for the alltoallv): every rank must take the same path. */
#include "coll.h"
#include "agree.h"
#include "entry.h"
#include "wanmpi_internal.h"

/* Bytes of every block of one side, or -1 if MPI would reject one of them. */
static double side_bytes(int n, const int *counts, const int *displs, const MPI_Datatype *types)
{
    double total = 0;
    if (!counts || !displs || !types)
        return -1;
    for (int p = 0; p < n; p++) {
        int64_t size = counts[p] < 0 || !wm_type_committed(types[p]) ? -1 : wm_type_bytes(types[p]);
        if (size < 0)
            return -1;
        total += (double)counts[p] * size;
    }
    return total;
}

/* `recorded`: the collective the statistics count it as (an
 * MPI_Alltoallv_c runs as an alltoallw: api_large.c) */
static int alltoallw(enum wm_coll recorded, const void *sendbuf, const int *sendcounts, const int *sdispls,
                     const MPI_Datatype *sendtypes, void *recvbuf, const int *recvcounts, const int *rdispls,
                     const MPI_Datatype *recvtypes, MPI_Comm comm, MPI_Request *request)
{
    double t0 = PMPI_Wtime(), bytes = 0;
    const struct wm_comm *wc;
    enum wm_alg alg;
    int rc = wm_entry_enter(WM_ALLTOALLW, comm, &wc, &alg, request);
    if (rc != MPI_SUCCESS)
        return rc;
    if (alg != WM_ALG_MPI &&
        (sendbuf == MPI_IN_PLACE || side_bytes(wc->size, sendcounts, sdispls, sendtypes) < 0 ||
         (bytes = side_bytes(wc->size, recvcounts, rdispls, recvtypes)) < 0))
        alg = WM_ALG_MPI;
    alg = wm_entry_nonblocking(wm_entry_decide(wc, WM_ALLTOALLW, alg, 0), request);
    if (alg == WM_ALG_MPI)
        bytes = 0;
    if (alg == WM_ALG_MPI && request)
        rc = MPI_OWN(PMPI_Ialltoallw, Alltoallw, comm, request, sendbuf, sendcounts, sdispls, sendtypes, recvbuf,
                     recvcounts, rdispls, recvtypes, comm);
    else if (alg == WM_ALG_MPI)
        rc = PMPI_Alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm);
    else if (request)
        SCHEDULE(rc, wc, comm, request, wm_alltoallw_scheduled, sendbuf, sendcounts, sdispls, sendtypes, recvbuf,
                 recvcounts, rdispls, recvtypes);
    else
        rc = wm_alltoallw_run(wc, sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls,
                              recvtypes);
    wm_entry_record(recorded, alg, bytes, t0, request);
    return rc;
}

int wm_alltoallw_as(enum wm_coll recorded, const char *call, const void *sendbuf, const int *sendcounts,
                    const int *sdispls, const MPI_Datatype *sendtypes, void *recvbuf, const int *recvcounts,
                    const int *rdispls, const MPI_Datatype *recvtypes, MPI_Comm comm)
{
    int rc = wm_agree_alltoall(call, sendbuf, 0, sendcounts, MPI_DATATYPE_NULL, sendtypes, 0, recvcounts,
                               MPI_DATATYPE_NULL, recvtypes, comm);
    return rc != MPI_SUCCESS ? rc
                             : alltoallw(recorded, sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls,
                                         recvtypes, comm, NULL);
}

int wm_alltoallw(const void *sendbuf, const int *sendcounts, const int *sdispls, const MPI_Datatype *sendtypes,
                 void *recvbuf, const int *recvcounts, const int *rdispls, const MPI_Datatype *recvtypes,
                 MPI_Comm comm)
{
    return wm_alltoallw_as(WM_ALLTOALLW, "MPI_Alltoallw", sendbuf, sendcounts, sdispls, sendtypes, recvbuf,
                           recvcounts, rdispls, recvtypes, comm);
}

int wm_ialltoallw(const void *sendbuf, const int *sendcounts, const int *sdispls, const MPI_Datatype *sendtypes,
                  void *recvbuf, const int *recvcounts, const int *rdispls, const MPI_Datatype *recvtypes,
                  MPI_Comm comm, MPI_Request *request)
{
    int rc;
    if (wm_entry_nb_agree() &&
        (rc = wm_agree_alltoall("MPI_Ialltoallw", sendbuf, 0, sendcounts, MPI_DATATYPE_NULL, sendtypes, 0,
                                recvcounts, MPI_DATATYPE_NULL, recvtypes, comm)) != MPI_SUCCESS) {
        *request = MPI_REQUEST_NULL;
        return rc;
    }
    return alltoallw(WM_ALLTOALLW, sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes,
                     comm, request);
}

/* ---- C bindings ---- */

int MPI_Alltoallw(const void *sendbuf, const int sendcounts[], const int sdispls[], const MPI_Datatype sendtypes[],
                  void *recvbuf, const int recvcounts[], const int rdispls[], const MPI_Datatype recvtypes[],
                  MPI_Comm comm)
{
    return wm_alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm);
}

int MPI_Ialltoallw(const void *sendbuf, const int sendcounts[], const int sdispls[],
                   const MPI_Datatype sendtypes[], void *recvbuf, const int recvcounts[], const int rdispls[],
                   const MPI_Datatype recvtypes[], MPI_Comm comm, MPI_Request *request)
{
    return wm_ialltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm,
                         request);
}
