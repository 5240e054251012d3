/* WANMPI_CHECK=1: before a blocking collective runs, its ranks agree on its
 * arguments, so that an erroneous program (counts, datatypes, roots or
 * operations that differ between ranks: MPI requires them to match and
 * checks none of it) gets an error on every rank instead of a hang or a
 * wrong result. One small allreduce per call (a WAN round trip); off by
 * default, like MPE's collchk or MUST, whose role it plays.
 *
 * What is compared, in one MPI_Allreduce of a few integers:
 *   - what each rank sends each other rank against what that rank expects,
 *     in bytes (a sum over pairs of hashes that cancels only when every pair
 *     matches): a mismatch is MPI_ERR_TRUNCATE, the class MPI gives where it
 *     notices one;
 *   - reductions and scans also by type signature (signature.h; sizes equal,
 *     types not): MPI_ERR_TYPE;
 *   - the root: MPI_ERR_ROOT; the predefined operation: MPI_ERR_OP.
 * A rank whose own arguments are invalid (negative count, uncommitted
 * datatype, root out of range, MPI_OP_NULL) says so, and then no verdict is
 * given: every rank goes on to the call, where the MPI reports that rank's
 * error exactly as without the check. Intercommunicators are not checked.
 * Each function returns MPI_SUCCESS or the error class, which it has passed
 * to the communicator's error handler (after a message on stderr if that
 * handler ends the job). */
#ifndef WANMPI_AGREE_H
#define WANMPI_AGREE_H

#include <mpi.h>

#include <limits.h>

#define WM_AGREE_NO_ROOT INT_MIN    /* wm_agree_reduction of a call without a root */

int wm_agree_bcast(int count, MPI_Datatype type, int root, MPI_Comm comm);
/* allreduce, reduce (root; else WM_AGREE_NO_ROOT), reduce_scatter_block, scan, exscan:
 * `count` elements; reduce_scatter: `counts` (one per rank), count unused */
int wm_agree_reduction(const char *call, int count, const int *counts, MPI_Datatype type, MPI_Op op, int root,
                       MPI_Comm comm);
/* allgather (recvcounts NULL: recvcount from every rank) and allgatherv */
int wm_agree_allgather(const char *call, const void *sendbuf, int sendcount, MPI_Datatype sendtype, int recvcount,
                       const int *recvcounts, MPI_Datatype recvtype, MPI_Comm comm);
/* gather(v) (`gather` 1) and scatter(v) (0): the root's side has `counts`
 * (v-variants) or `count` for every rank; the other side `count1` of `type1`.
 * For a gather, root side = receive; for a scatter, send. */
int wm_agree_rooted(const char *call, int gather, int count1, MPI_Datatype type1, int count, const int *counts,
                    MPI_Datatype type, int root, MPI_Comm comm);
/* alltoall (sendcounts NULL: sendcount and recvcount to and from every rank),
 * alltoallv, alltoallw (sendtypes/recvtypes set: one per rank) */
int wm_agree_alltoall(const char *call, const void *sendbuf, int sendcount, const int *sendcounts,
                      MPI_Datatype sendtype, const MPI_Datatype *sendtypes, int recvcount, const int *recvcounts,
                      MPI_Datatype recvtype, const MPI_Datatype *recvtypes, MPI_Comm comm);

#endif
