/* Persistent collectives (MPI-4 MPI_Bcast_init, ...; Open MPI 4.1's
 * MPIX_*_init). The init chooses (api.c), once: where the MPI's own
 * algorithm runs, the user holds the MPI's own persistent request; where
 * ours runs, every MPI_Start runs our nonblocking schedule (nb.c) in a tag
 * slot the init reserved, and the user's request stands for the current
 * round.
 *
 * The handle of one of ours is a real persistent request of the MPI (a send
 * to this process on MPI_COMM_SELF, never started): the completion calls
 * map it to the request of its round before they call the MPI
 * (progress.c), and should it reach the MPI unmapped, the MPI sees an
 * inactive persistent request, which is what an idle persistent collective
 * is. */
#ifndef WANMPI_PERSISTENT_H
#define WANMPI_PERSISTENT_H

#include <mpi.h>

enum wm_persist_kind { WM_P_BCAST, WM_P_ALLREDUCE, WM_P_REDUCE, WM_P_REDUCE_SCATTER_BLOCK, WM_P_ALLGATHER,
                       WM_P_ALLGATHERV, WM_P_ALLTOALL, WM_P_ALLTOALLV, WM_P_REDUCE_SCATTER, WM_P_ALLTOALLW };

/* The arguments of MPI_<kind>_init, kept for every start (a broadcast's
 * buffer, count and type are the receive ones). */
struct wm_persist_args {
    enum wm_persist_kind kind;
    const void *sendbuf;
    void *recvbuf;
    int sendcount, recvcount, root;
    const int *sendcounts, *sdispls, *recvcounts, *rdispls;
    MPI_Datatype sendtype, recvtype;
    const MPI_Datatype *sendtypes, *recvtypes;     /* alltoallw */
    MPI_Op op;
    MPI_Comm comm;
    MPI_Info info;              /* for the MPI's own persistent call */
    void *owned;                /* freed with the request (malloc'd; NULL: none): arrays the
                                   caller made for us, e.g. the Fortran binding's C datatypes */
};

/* MPI_<kind>_init: the user's handle in *request (ours, or the MPI's own);
 * a->owned is ours to free from here on, whatever it returns. */
int wm_persist_init(const struct wm_persist_args *a, MPI_Request *request);

/* A start of a persistent collective of the MPI's own that libwanmpi keeps
 * (persistent_mpi.c): its nonblocking call on `own`, the request's duplicate. */
int wm_persist_mpi_start(const struct wm_persist_args *a, MPI_Comm own, MPI_Request *round);

/* Whether any persistent collective of ours exists (cheap). */
int wm_persist_any(void);

/* The requests the MPI must see for reqs[0..n): each of ours replaced by
 * its round's request (MPI_REQUEST_NULL when inactive). */
void wm_persist_map(int n, const MPI_Request *reqs, MPI_Request *mapped);
/* After the MPI updated `mapped`: ours whose round completed become
 * inactive and keep their handle; the others take what the MPI left. */
void wm_persist_unmap(int n, MPI_Request *reqs, const MPI_Request *mapped);

/* MPI_Start of one of ours: 1 and *rc if it is ours, else 0. */
int wm_persist_start(MPI_Request *request, int *rc);
/* MPI_Request_free of one of ours: 1 and *rc if it is ours, else 0. */
int wm_persist_free(MPI_Request *request, int *rc);

#endif
