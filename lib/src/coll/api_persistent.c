/* The C bindings of the persistent collectives (persistent.h): MPI-4's
 * MPI_<coll>_init where the MPI has them (MPICH 5, Open MPI 5), Open MPI 4.1's
 * MPIX_<coll>_init (its pcollreq extension, mpi-ext.h) there; and
 * MPI_Start/MPI_Startall, which start ours and pass every other request on. */
#include <mpi.h>

#include "persistent.h"
#include "../common/pcoll.h"

#ifdef WM_PCOLL_MPIX
#define INIT(name) MPIX_##name##_init
#include <mpi-ext.h>      /* declares them */
#else
#define INIT(name) MPI_##name##_init
#endif

/* None where the MPI has no persistent collectives of its own to fall back
 * on (SimGrid SMPI 3.32 is MPI 3.1): entry.h, WM_PMPI_INIT. */
#ifdef WM_PCOLL

int INIT(Bcast)(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Info info,
                MPI_Request *request)
{
    struct wm_persist_args a = { .kind = WM_P_BCAST, .recvbuf = buf, .recvcount = count, .recvtype = type,
                                 .root = root, .comm = comm, .info = info };
    return wm_persist_init(&a, request);
}

static int reduction(enum wm_persist_kind kind, const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
                     MPI_Op op, int root, MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    struct wm_persist_args a = { .kind = kind, .sendbuf = sendbuf, .recvbuf = recvbuf, .recvcount = count,
                                 .recvtype = type, .op = op, .root = root, .comm = comm,
                                 .info = info };
    return wm_persist_init(&a, request);
}

int INIT(Allreduce)(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                    MPI_Info info, MPI_Request *request)
{
    return reduction(WM_P_ALLREDUCE, sendbuf, recvbuf, count, type, op, 0, comm, info, request);
}

int INIT(Reduce)(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, int root,
                 MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    return reduction(WM_P_REDUCE, sendbuf, recvbuf, count, type, op, root, comm, info, request);
}

int INIT(Reduce_scatter_block)(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype type, MPI_Op op,
                               MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    return reduction(WM_P_REDUCE_SCATTER_BLOCK, sendbuf, recvbuf, recvcount, type, op, 0, comm, info, request);
}

int INIT(Reduce_scatter)(const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype type, MPI_Op op,
                         MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    struct wm_persist_args a = { .kind = WM_P_REDUCE_SCATTER, .sendbuf = sendbuf, .recvbuf = recvbuf,
                                 .recvcounts = recvcounts, .recvtype = type, .op = op, .comm = comm,
                                 .info = info };
    return wm_persist_init(&a, request);
}

/* Allgather and alltoall: one send and one receive (count, type). */
static int exchange(enum wm_persist_kind kind, const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                    void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info,
                    MPI_Request *request)
{
    struct wm_persist_args a = { .kind = kind, .sendbuf = sendbuf, .sendcount = sendcount, .sendtype = sendtype,
                                 .recvbuf = recvbuf, .recvcount = recvcount, .recvtype = recvtype, .comm = comm,
                                 .info = info };
    return wm_persist_init(&a, request);
}

int INIT(Allgather)(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                    MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    return exchange(WM_P_ALLGATHER, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, info,
                    request);
}

int INIT(Allgatherv)(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                     const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm,
                     MPI_Info info, MPI_Request *request)
{
    struct wm_persist_args a = { .kind = WM_P_ALLGATHERV, .sendbuf = sendbuf, .sendcount = sendcount,
                                 .sendtype = sendtype, .recvbuf = recvbuf, .recvcounts = recvcounts,
                                 .rdispls = displs, .recvtype = recvtype, .comm = comm,
                                 .info = info };
    return wm_persist_init(&a, request);
}

int INIT(Alltoall)(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                   MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    return exchange(WM_P_ALLTOALL, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, info,
                    request);
}

int INIT(Alltoallv)(const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                    void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
                    MPI_Info info, MPI_Request *request)
{
    struct wm_persist_args a = { .kind = WM_P_ALLTOALLV, .sendbuf = sendbuf, .sendcounts = sendcounts,
                                 .sdispls = sdispls, .sendtype = sendtype, .recvbuf = recvbuf,
                                 .recvcounts = recvcounts, .rdispls = rdispls, .recvtype = recvtype, .comm = comm,
                                 .info = info };
    return wm_persist_init(&a, request);
}

int INIT(Alltoallw)(const void *sendbuf, const int sendcounts[], const int sdispls[], const MPI_Datatype sendtypes[],
                    void *recvbuf, const int recvcounts[], const int rdispls[], const MPI_Datatype recvtypes[],
                    MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    struct wm_persist_args a = { .kind = WM_P_ALLTOALLW, .sendbuf = sendbuf, .sendcounts = sendcounts,
                                 .sdispls = sdispls, .sendtypes = sendtypes, .recvbuf = recvbuf,
                                 .recvcounts = recvcounts, .rdispls = rdispls, .recvtypes = recvtypes,
                                 .comm = comm, .info = info };
    return wm_persist_init(&a, request);
}

#endif

int MPI_Start(MPI_Request *request)
{
    int rc;
    if (wm_persist_any() && request && wm_persist_start(request, &rc))
        return rc;
    return PMPI_Start(request);
}

int MPI_Startall(int count, MPI_Request requests[])
{
    if (!wm_persist_any())
        return PMPI_Startall(count, requests);
    for (int i = 0; i < count; i++) {
        int rc;
        if (!wm_persist_start(&requests[i], &rc))
            rc = PMPI_Start(&requests[i]);
        if (rc != MPI_SUCCESS)
            return rc;
    }
    return MPI_SUCCESS;
}
