/* The Fortran MPI_ALLTOALLW (blocking): its datatypes are an array of
 * Fortran handles, converted one by one (MPI_Type_f2c) for the C entry
 * point, one per rank of the communicator (of the remote group for an
 * intercommunicator). The nonblocking MPI_IALLTOALLW would have to keep the
 * converted arrays until the request completes; it is not here. */
#include <mpi.h>
#include <stdlib.h>

#include "arguments.h"
#include "names.h"
#include "../coll/wanmpi_internal.h"

void mpi_alltoallw_(const void *sendbuf, MPI_Fint *sendcounts, MPI_Fint *sdispls, MPI_Fint *sendtypes,
                    void *recvbuf, MPI_Fint *recvcounts, MPI_Fint *rdispls, MPI_Fint *recvtypes, MPI_Fint *comm,
                    MPI_Fint *ierr)
{
    MPI_Comm c = MPI_Comm_f2c(*comm);
    int n = 0, inter = 0, rc = PMPI_Comm_test_inter(c, &inter);
    if (rc == MPI_SUCCESS)
        rc = inter ? PMPI_Comm_remote_size(c, &n) : PMPI_Comm_size(c, &n);
    if (rc != MPI_SUCCESS) {        /* a bad communicator: the MPI reports it */
        set(ierr, PMPI_Alltoallw(sendbuf, sendcounts, sdispls, NULL, recvbuf, recvcounts, rdispls, NULL, c));
        return;
    }
    MPI_Datatype *types = malloc((size_t)(n ? 2 * n : 1) * sizeof *types);
    if (!types) {
        set(ierr, MPI_ERR_NO_MEM);
        return;
    }
    const void *send = send_buffer(sendbuf);
    for (int p = 0; p < n; p++) {   /* MPI_IN_PLACE: the send types are ignored (and may be garbage) */
        types[p] = send == MPI_IN_PLACE ? MPI_DATATYPE_NULL : MPI_Type_f2c(sendtypes[p]);
        types[n + p] = MPI_Type_f2c(recvtypes[p]);
    }
    /* MPI_Fint is int with both MPIs here; the count and displacement arrays pass through */
    set(ierr, wm_alltoallw(send, sendcounts, sdispls, types, buffer(recvbuf), recvcounts, rdispls, types + n, c));
    free(types);
}
FORTRAN_NAMES(mpi_alltoallw, MPI_ALLTOALLW,
              (const void *sendbuf, MPI_Fint *sendcounts, MPI_Fint *sdispls, MPI_Fint *sendtypes, void *recvbuf,
               MPI_Fint *recvcounts, MPI_Fint *rdispls, MPI_Fint *recvtypes, MPI_Fint *comm, MPI_Fint *ierr),
              (sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, ierr))
