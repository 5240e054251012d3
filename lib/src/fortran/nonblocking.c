/* Fortran bindings of the nonblocking and persistent collectives of ours
 * (docs/nonblocking.md, "Fortran"): mpi_ibcast_ ... mpi_ialltoallv_ and
 * mpi_ibarrier_ in every mangling and Open MPI's mpi_f08 name
 * (mpi_ibcast_f08_), and the persistent ones: MPI-4's mpi_bcast_init_ & co
 * under MPICH, Open MPI 4.1's mpix_bcast_init_ (its pcollreq extension).
 *
 * Measured (nm/objdump of the libraries, docs/libwanmpi.md "Fortran"): Open
 * MPI 4.1's Fortran library calls PMPI_Ibcast, PMPIX_Bcast_init & co, below
 * ours; MPICH's (Debian's 4.0.2 bindings) calls MPI_Ibcast, so there these
 * bindings replace a path that already reached ours. The requests they
 * return are ours (generalized requests): fortran/progress.c binds the
 * completion calls so that a Fortran MPI_WAIT advances them.
 *
 * The alltoallw ones, whose datatype arrays need converting, are in
 * alltoallw.c. */
#include <mpi.h>

#include "arguments.h"
#include "names.h"
#include "../coll/persistent.h"
#include "../coll/wanmpi_internal.h"

void mpi_ibcast_(void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *request,
                 MPI_Fint *ierr)
{
    MPI_Request r = MPI_REQUEST_NULL;
    int rc = wm_ibcast(buffer(buf), *count, MPI_Type_f2c(*type), *root, MPI_Comm_f2c(*comm), &r);
    out_request(rc, r, request, ierr);
}
FORTRAN_NAMES(mpi_ibcast, MPI_IBCAST,
              (void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *request,
               MPI_Fint *ierr),
              (buf, count, type, root, comm, request, ierr))

void mpi_iallreduce_(const void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *op,
                     MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierr)
{
    MPI_Request r = MPI_REQUEST_NULL;
    int rc = wm_iallreduce(send_buffer(sendbuf), buffer(recvbuf), *count, MPI_Type_f2c(*type), MPI_Op_f2c(*op),
                           MPI_Comm_f2c(*comm), &r);
    out_request(rc, r, request, ierr);
}
FORTRAN_NAMES(mpi_iallreduce, MPI_IALLREDUCE,
              (const void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *op, MPI_Fint *comm,
               MPI_Fint *request, MPI_Fint *ierr),
              (sendbuf, recvbuf, count, type, op, comm, request, ierr))

void mpi_ireduce_(const void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *op,
                  MPI_Fint *root, MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierr)
{
    MPI_Request r = MPI_REQUEST_NULL;
    int rc = wm_ireduce(send_buffer(sendbuf), buffer(recvbuf), *count, MPI_Type_f2c(*type), MPI_Op_f2c(*op),
                        *root, MPI_Comm_f2c(*comm), &r);
    out_request(rc, r, request, ierr);
}
FORTRAN_NAMES(mpi_ireduce, MPI_IREDUCE,
              (const void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *op, MPI_Fint *root,
               MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierr),
              (sendbuf, recvbuf, count, type, op, root, comm, request, ierr))

void mpi_ireduce_scatter_block_(const void *sendbuf, void *recvbuf, MPI_Fint *recvcount, MPI_Fint *type,
                                MPI_Fint *op, MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierr)
{
    MPI_Request r = MPI_REQUEST_NULL;
    int rc = wm_ireduce_scatter_block(send_buffer(sendbuf), buffer(recvbuf), *recvcount, MPI_Type_f2c(*type),
                                      MPI_Op_f2c(*op), MPI_Comm_f2c(*comm), &r);
    out_request(rc, r, request, ierr);
}
FORTRAN_NAMES(mpi_ireduce_scatter_block, MPI_IREDUCE_SCATTER_BLOCK,
              (const void *sendbuf, void *recvbuf, MPI_Fint *recvcount, MPI_Fint *type, MPI_Fint *op,
               MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierr),
              (sendbuf, recvbuf, recvcount, type, op, comm, request, ierr))

void mpi_ireduce_scatter_(const void *sendbuf, void *recvbuf, const MPI_Fint *recvcounts, MPI_Fint *type,
                          MPI_Fint *op, MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierr)
{
    MPI_Request r = MPI_REQUEST_NULL;
    int rc = wm_ireduce_scatter(send_buffer(sendbuf), buffer(recvbuf), recvcounts, MPI_Type_f2c(*type),
                                MPI_Op_f2c(*op), MPI_Comm_f2c(*comm), &r);
    out_request(rc, r, request, ierr);
}
FORTRAN_NAMES(mpi_ireduce_scatter, MPI_IREDUCE_SCATTER,
              (const void *sendbuf, void *recvbuf, const MPI_Fint *recvcounts, MPI_Fint *type, MPI_Fint *op,
               MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierr),
              (sendbuf, recvbuf, recvcounts, type, op, comm, request, ierr))

void mpi_iallgather_(const void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf,
                     MPI_Fint *recvcount, MPI_Fint *recvtype, MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierr)
{
    MPI_Request r = MPI_REQUEST_NULL;
    int rc = wm_iallgather(send_buffer(sendbuf), *sendcount, MPI_Type_f2c(*sendtype), buffer(recvbuf), *recvcount,
                           MPI_Type_f2c(*recvtype), MPI_Comm_f2c(*comm), &r);
    out_request(rc, r, request, ierr);
}
FORTRAN_NAMES(mpi_iallgather, MPI_IALLGATHER,
              (const void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf, MPI_Fint *recvcount,
               MPI_Fint *recvtype, MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierr),
              (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request, ierr))

/* MPI_Fint is int under both MPIs (bindings.c checks it): count arrays pass through. */
void mpi_iallgatherv_(const void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf,
                      const MPI_Fint *recvcounts, const MPI_Fint *displs, MPI_Fint *recvtype, MPI_Fint *comm,
                      MPI_Fint *request, MPI_Fint *ierr)
{
    MPI_Request r = MPI_REQUEST_NULL;
    int rc = wm_iallgatherv(send_buffer(sendbuf), *sendcount, MPI_Type_f2c(*sendtype), buffer(recvbuf), recvcounts,
                            displs, MPI_Type_f2c(*recvtype), MPI_Comm_f2c(*comm), &r);
    out_request(rc, r, request, ierr);
}
FORTRAN_NAMES(mpi_iallgatherv, MPI_IALLGATHERV,
              (const void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf,
               const MPI_Fint *recvcounts, const MPI_Fint *displs, MPI_Fint *recvtype, MPI_Fint *comm,
               MPI_Fint *request, MPI_Fint *ierr),
              (sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, request, ierr))

void mpi_ialltoall_(const void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf,
                    MPI_Fint *recvcount, MPI_Fint *recvtype, MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierr)
{
    MPI_Request r = MPI_REQUEST_NULL;
    int rc = wm_ialltoall(send_buffer(sendbuf), *sendcount, MPI_Type_f2c(*sendtype), buffer(recvbuf), *recvcount,
                          MPI_Type_f2c(*recvtype), MPI_Comm_f2c(*comm), &r);
    out_request(rc, r, request, ierr);
}
FORTRAN_NAMES(mpi_ialltoall, MPI_IALLTOALL,
              (const void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf, MPI_Fint *recvcount,
               MPI_Fint *recvtype, MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierr),
              (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request, ierr))

void mpi_ialltoallv_(const void *sendbuf, const MPI_Fint *sendcounts, const MPI_Fint *sdispls, MPI_Fint *sendtype,
                     void *recvbuf, const MPI_Fint *recvcounts, const MPI_Fint *rdispls, MPI_Fint *recvtype,
                     MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierr)
{
    MPI_Request r = MPI_REQUEST_NULL;
    int rc = wm_ialltoallv(send_buffer(sendbuf), sendcounts, sdispls, MPI_Type_f2c(*sendtype), buffer(recvbuf),
                           recvcounts, rdispls, MPI_Type_f2c(*recvtype), MPI_Comm_f2c(*comm), &r);
    out_request(rc, r, request, ierr);
}
FORTRAN_NAMES(mpi_ialltoallv, MPI_IALLTOALLV,
              (const void *sendbuf, const MPI_Fint *sendcounts, const MPI_Fint *sdispls, MPI_Fint *sendtype,
               void *recvbuf, const MPI_Fint *recvcounts, const MPI_Fint *rdispls, MPI_Fint *recvtype,
               MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierr),
              (sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, request, ierr))

/* The MPI's own barrier, its request held by the engine like ours (api.c). */
void mpi_ibarrier_(MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierr)
{
    MPI_Request r = MPI_REQUEST_NULL;
    int rc = wm_ibarrier(MPI_Comm_f2c(*comm), &r);
    out_request(rc, r, request, ierr);
}
FORTRAN_NAMES(mpi_ibarrier, MPI_IBARRIER, (MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierr),
              (comm, request, ierr))

#ifdef WM_PCOLL     /* as in coll/api_persistent.c */
/* ---- persistent: MPI_<COLL>_INIT (MPICH 5), MPIX_<COLL>_INIT (Open MPI 4.1) ---- */


/* The user's handle (persistent.h). */
static void init(struct wm_persist_args *a, MPI_Fint *comm, MPI_Fint *info, MPI_Fint *request, MPI_Fint *ierr)
{
    MPI_Request r = MPI_REQUEST_NULL;
    a->comm = MPI_Comm_f2c(*comm);
    a->info = MPI_Info_f2c(*info);
    int rc = wm_persist_init(a, &r);
    out_request(rc, r, request, ierr);
}

static void bcast_init(void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *info,
                       MPI_Fint *request, MPI_Fint *ierr)
{
    struct wm_persist_args a = { .kind = WM_P_BCAST, .recvbuf = buffer(buf), .recvcount = *count,
                                 .recvtype = MPI_Type_f2c(*type), .root = *root };
    init(&a, comm, info, request, ierr);
}
INIT_NAMES(bcast, BCAST,
           (void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *info,
            MPI_Fint *request, MPI_Fint *ierr),
           (buf, count, type, root, comm, info, request, ierr))

static void reduction(enum wm_persist_kind kind, const void *sendbuf, void *recvbuf, MPI_Fint *count,
                      MPI_Fint *type, MPI_Fint *op, int root, MPI_Fint *comm, MPI_Fint *info, MPI_Fint *request,
                      MPI_Fint *ierr)
{
    struct wm_persist_args a = { .kind = kind, .sendbuf = send_buffer(sendbuf), .recvbuf = buffer(recvbuf),
                                 .recvcount = *count, .recvtype = MPI_Type_f2c(*type), .op = MPI_Op_f2c(*op),
                                 .root = root };
    init(&a, comm, info, request, ierr);
}

static void allreduce_init(const void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *op,
                           MPI_Fint *comm, MPI_Fint *info, MPI_Fint *request, MPI_Fint *ierr)
{
    reduction(WM_P_ALLREDUCE, sendbuf, recvbuf, count, type, op, 0, comm, info, request, ierr);
}
INIT_NAMES(allreduce, ALLREDUCE,
           (const void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *op, MPI_Fint *comm,
            MPI_Fint *info, MPI_Fint *request, MPI_Fint *ierr),
           (sendbuf, recvbuf, count, type, op, comm, info, request, ierr))

static void reduce_init(const void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *op,
                        MPI_Fint *root, MPI_Fint *comm, MPI_Fint *info, MPI_Fint *request, MPI_Fint *ierr)
{
    reduction(WM_P_REDUCE, sendbuf, recvbuf, count, type, op, *root, comm, info, request, ierr);
}
INIT_NAMES(reduce, REDUCE,
           (const void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *op, MPI_Fint *root,
            MPI_Fint *comm, MPI_Fint *info, MPI_Fint *request, MPI_Fint *ierr),
           (sendbuf, recvbuf, count, type, op, root, comm, info, request, ierr))

static void reduce_scatter_block_init(const void *sendbuf, void *recvbuf, MPI_Fint *recvcount, MPI_Fint *type,
                                      MPI_Fint *op, MPI_Fint *comm, MPI_Fint *info, MPI_Fint *request,
                                      MPI_Fint *ierr)
{
    reduction(WM_P_REDUCE_SCATTER_BLOCK, sendbuf, recvbuf, recvcount, type, op, 0, comm, info, request, ierr);
}
INIT_NAMES(reduce_scatter_block, REDUCE_SCATTER_BLOCK,
           (const void *sendbuf, void *recvbuf, MPI_Fint *recvcount, MPI_Fint *type, MPI_Fint *op, MPI_Fint *comm,
            MPI_Fint *info, MPI_Fint *request, MPI_Fint *ierr),
           (sendbuf, recvbuf, recvcount, type, op, comm, info, request, ierr))

/* The counts are kept by address, as MPI requires them to stay valid. */
static void reduce_scatter_init(const void *sendbuf, void *recvbuf, const MPI_Fint *recvcounts, MPI_Fint *type,
                                MPI_Fint *op, MPI_Fint *comm, MPI_Fint *info, MPI_Fint *request, MPI_Fint *ierr)
{
    struct wm_persist_args a = { .kind = WM_P_REDUCE_SCATTER, .sendbuf = send_buffer(sendbuf),
                                 .recvbuf = buffer(recvbuf), .recvcounts = recvcounts,
                                 .recvtype = MPI_Type_f2c(*type), .op = MPI_Op_f2c(*op) };
    init(&a, comm, info, request, ierr);
}
INIT_NAMES(reduce_scatter, REDUCE_SCATTER,
           (const void *sendbuf, void *recvbuf, const MPI_Fint *recvcounts, MPI_Fint *type, MPI_Fint *op,
            MPI_Fint *comm, MPI_Fint *info, MPI_Fint *request, MPI_Fint *ierr),
           (sendbuf, recvbuf, recvcounts, type, op, comm, info, request, ierr))

/* Allgather and alltoall: one send and one receive (count, type). */
static void exchange(enum wm_persist_kind kind, const void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype,
                     void *recvbuf, MPI_Fint *recvcount, MPI_Fint *recvtype, MPI_Fint *comm, MPI_Fint *info,
                     MPI_Fint *request, MPI_Fint *ierr)
{
    struct wm_persist_args a = { .kind = kind, .sendbuf = send_buffer(sendbuf), .sendcount = *sendcount,
                                 .sendtype = MPI_Type_f2c(*sendtype), .recvbuf = buffer(recvbuf),
                                 .recvcount = *recvcount, .recvtype = MPI_Type_f2c(*recvtype) };
    init(&a, comm, info, request, ierr);
}

static void allgather_init(const void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf,
                           MPI_Fint *recvcount, MPI_Fint *recvtype, MPI_Fint *comm, MPI_Fint *info,
                           MPI_Fint *request, MPI_Fint *ierr)
{
    exchange(WM_P_ALLGATHER, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, info, request, ierr);
}
INIT_NAMES(allgather, ALLGATHER,
           (const void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf, MPI_Fint *recvcount,
            MPI_Fint *recvtype, MPI_Fint *comm, MPI_Fint *info, MPI_Fint *request, MPI_Fint *ierr),
           (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, info, request, ierr))

static void alltoall_init(const void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf,
                          MPI_Fint *recvcount, MPI_Fint *recvtype, MPI_Fint *comm, MPI_Fint *info,
                          MPI_Fint *request, MPI_Fint *ierr)
{
    exchange(WM_P_ALLTOALL, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, info, request, ierr);
}
INIT_NAMES(alltoall, ALLTOALL,
           (const void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf, MPI_Fint *recvcount,
            MPI_Fint *recvtype, MPI_Fint *comm, MPI_Fint *info, MPI_Fint *request, MPI_Fint *ierr),
           (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, info, request, ierr))

/* The count arrays are kept by address, as MPI requires them to stay valid. */
static void allgatherv_init(const void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf,
                            const MPI_Fint *recvcounts, const MPI_Fint *displs, MPI_Fint *recvtype, MPI_Fint *comm,
                            MPI_Fint *info, MPI_Fint *request, MPI_Fint *ierr)
{
    struct wm_persist_args a = { .kind = WM_P_ALLGATHERV, .sendbuf = send_buffer(sendbuf), .sendcount = *sendcount,
                                 .sendtype = MPI_Type_f2c(*sendtype), .recvbuf = buffer(recvbuf),
                                 .recvcounts = recvcounts, .rdispls = displs, .recvtype = MPI_Type_f2c(*recvtype) };
    init(&a, comm, info, request, ierr);
}
INIT_NAMES(allgatherv, ALLGATHERV,
           (const void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf, const MPI_Fint *recvcounts,
            const MPI_Fint *displs, MPI_Fint *recvtype, MPI_Fint *comm, MPI_Fint *info, MPI_Fint *request,
            MPI_Fint *ierr),
           (sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, info, request, ierr))

static void alltoallv_init(const void *sendbuf, const MPI_Fint *sendcounts, const MPI_Fint *sdispls,
                           MPI_Fint *sendtype, void *recvbuf, const MPI_Fint *recvcounts, const MPI_Fint *rdispls,
                           MPI_Fint *recvtype, MPI_Fint *comm, MPI_Fint *info, MPI_Fint *request, MPI_Fint *ierr)
{
    struct wm_persist_args a = { .kind = WM_P_ALLTOALLV, .sendbuf = send_buffer(sendbuf), .sendcounts = sendcounts,
                                 .sdispls = sdispls, .sendtype = MPI_Type_f2c(*sendtype), .recvbuf = buffer(recvbuf),
                                 .recvcounts = recvcounts, .rdispls = rdispls,
                                 .recvtype = MPI_Type_f2c(*recvtype) };
    init(&a, comm, info, request, ierr);
}
INIT_NAMES(alltoallv, ALLTOALLV,
           (const void *sendbuf, const MPI_Fint *sendcounts, const MPI_Fint *sdispls, MPI_Fint *sendtype,
            void *recvbuf, const MPI_Fint *recvcounts, const MPI_Fint *rdispls, MPI_Fint *recvtype, MPI_Fint *comm,
            MPI_Fint *info, MPI_Fint *request, MPI_Fint *ierr),
           (sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, info, request,
            ierr))
#endif
