/* The Fortran MPI_ALLTOALLW, MPI_IALLTOALLW and MPI_ALLTOALLW_INIT (Open MPI
 * 4.1: MPIX_ALLTOALLW_INIT): their datatypes are arrays of Fortran handles,
 * one per rank of the communicator (of the remote group for an
 * intercommunicator). Where a Fortran handle is the C handle (MPICH: both
 * are ints) the arrays pass through, as MPICH's own Fortran bindings pass
 * them; else (Open MPI) they are converted one by one (MPI_Type_f2c) into
 * an array of ours, which must live as long as the call needs it: the
 * blocking call's and the nonblocking one's until they return (our
 * schedule, like Open MPI's libnbc, takes the handles when it is built),
 * the persistent one's until its request is freed (persistent.h, `owned`). */
#include <mpi.h>
#include <stdlib.h>

#include "arguments.h"
#include "names.h"
#include "../coll/persistent.h"
#include "../coll/wanmpi_internal.h"

/* The C send and receive datatypes; *owned: what to free once they are not
 * needed (NULL: nothing). MPI_SUCCESS, or the error of a bad communicator
 * or of a failed allocation. */
static int c_types(MPI_Comm c, const void *send, const MPI_Fint *sendtypes, const MPI_Fint *recvtypes,
                   const MPI_Datatype **st, const MPI_Datatype **rt, MPI_Datatype **owned)
{
    *owned = NULL;
#ifndef OPEN_MPI
    (void)c;
    (void)send;
    *st = (const MPI_Datatype *)sendtypes;      /* MPI_Datatype and MPI_Fint are int */
    *rt = (const MPI_Datatype *)recvtypes;
    return MPI_SUCCESS;
#else
    int n = 0, inter = 0, rc = PMPI_Comm_test_inter(c, &inter);
    if (rc == MPI_SUCCESS)
        rc = inter ? PMPI_Comm_remote_size(c, &n) : PMPI_Comm_size(c, &n);
    if (rc != MPI_SUCCESS)
        return rc;
    MPI_Datatype *types = malloc((size_t)(n ? 2 * n : 1) * sizeof *types);
    if (!types)
        return MPI_ERR_NO_MEM;
    for (int p = 0; p < n; p++) {   /* MPI_IN_PLACE: the send types are ignored (and may be garbage) */
        types[p] = send == MPI_IN_PLACE ? MPI_DATATYPE_NULL : MPI_Type_f2c(sendtypes[p]);
        types[n + p] = MPI_Type_f2c(recvtypes[p]);
    }
    *st = types;
    *rt = types + n;
    *owned = types;
    return MPI_SUCCESS;
#endif
}

/* MPI_Fint is int with both MPIs here; the count and displacement arrays pass through. */
void mpi_alltoallw_(const void *sendbuf, MPI_Fint *sendcounts, MPI_Fint *sdispls, MPI_Fint *sendtypes,
                    void *recvbuf, MPI_Fint *recvcounts, MPI_Fint *rdispls, MPI_Fint *recvtypes, MPI_Fint *comm,
                    MPI_Fint *ierr)
{
    MPI_Comm c = MPI_Comm_f2c(*comm);
    const void *send = send_buffer(sendbuf);
    const MPI_Datatype *st, *rt;
    MPI_Datatype *owned;
    int rc = c_types(c, send, sendtypes, recvtypes, &st, &rt, &owned);
    if (rc != MPI_SUCCESS) {        /* a bad communicator: the MPI reports it */
        set(ierr, PMPI_Alltoallw(sendbuf, sendcounts, sdispls, NULL, recvbuf, recvcounts, rdispls, NULL, c));
        return;
    }
    set(ierr, wm_alltoallw(send, sendcounts, sdispls, st, buffer(recvbuf), recvcounts, rdispls, rt, c));
    free(owned);
}
FORTRAN_NAMES(mpi_alltoallw, MPI_ALLTOALLW,
              (const void *sendbuf, MPI_Fint *sendcounts, MPI_Fint *sdispls, MPI_Fint *sendtypes, void *recvbuf,
               MPI_Fint *recvcounts, MPI_Fint *rdispls, MPI_Fint *recvtypes, MPI_Fint *comm, MPI_Fint *ierr),
              (sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, ierr))

void mpi_ialltoallw_(const void *sendbuf, MPI_Fint *sendcounts, MPI_Fint *sdispls, MPI_Fint *sendtypes,
                     void *recvbuf, MPI_Fint *recvcounts, MPI_Fint *rdispls, MPI_Fint *recvtypes, MPI_Fint *comm,
                     MPI_Fint *request, MPI_Fint *ierr)
{
    MPI_Comm c = MPI_Comm_f2c(*comm);
    const void *send = send_buffer(sendbuf);
    const MPI_Datatype *st, *rt;
    MPI_Datatype *owned;
    MPI_Request r = MPI_REQUEST_NULL;
    int rc = c_types(c, send, sendtypes, recvtypes, &st, &rt, &owned);
    if (rc != MPI_SUCCESS)
        rc = PMPI_Ialltoallw(sendbuf, sendcounts, sdispls, NULL, recvbuf, recvcounts, rdispls, NULL, c, &r);
    else
        rc = wm_ialltoallw(send, sendcounts, sdispls, st, buffer(recvbuf), recvcounts, rdispls, rt, c, &r);
    free(owned);
    out_request(rc, r, request, ierr);
}
FORTRAN_NAMES(mpi_ialltoallw, MPI_IALLTOALLW,
              (const void *sendbuf, MPI_Fint *sendcounts, MPI_Fint *sdispls, MPI_Fint *sendtypes, void *recvbuf,
               MPI_Fint *recvcounts, MPI_Fint *rdispls, MPI_Fint *recvtypes, MPI_Fint *comm, MPI_Fint *request,
               MPI_Fint *ierr),
              (sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, request,
               ierr))

#ifdef WM_PCOLL     /* as in coll/api_persistent.c */
static void alltoallw_init(const void *sendbuf, MPI_Fint *sendcounts, MPI_Fint *sdispls, MPI_Fint *sendtypes,
                           void *recvbuf, MPI_Fint *recvcounts, MPI_Fint *rdispls, MPI_Fint *recvtypes,
                           MPI_Fint *comm, MPI_Fint *info, MPI_Fint *request, MPI_Fint *ierr)
{
    MPI_Comm c = MPI_Comm_f2c(*comm);
    struct wm_persist_args a = { .kind = WM_P_ALLTOALLW, .sendbuf = send_buffer(sendbuf), .sendcounts = sendcounts,
                                 .sdispls = sdispls, .recvbuf = buffer(recvbuf), .recvcounts = recvcounts,
                                 .rdispls = rdispls, .comm = c, .info = MPI_Info_f2c(*info) };
    MPI_Datatype *owned;
    MPI_Request r = MPI_REQUEST_NULL;
    int rc = c_types(c, a.sendbuf, sendtypes, recvtypes, &a.sendtypes, &a.recvtypes, &owned);
    if (rc == MPI_SUCCESS) {
        a.owned = owned;
        rc = wm_persist_init(&a, &r);
    } else {
        PMPI_Comm_call_errhandler(c, rc);
    }
    out_request(rc, r, request, ierr);
}

INIT_NAMES(alltoallw, ALLTOALLW,
           (const void *sendbuf, MPI_Fint *sendcounts, MPI_Fint *sdispls, MPI_Fint *sendtypes, void *recvbuf,
            MPI_Fint *recvcounts, MPI_Fint *rdispls, MPI_Fint *recvtypes, MPI_Fint *comm, MPI_Fint *info,
            MPI_Fint *request, MPI_Fint *ierr),
           (sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, info, request,
            ierr))
#endif
