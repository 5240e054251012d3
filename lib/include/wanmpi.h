/* wanmpi: WAN-aware collectives under any MPI (libwanmpi-<mpi>.so).
 *
 * Programs need nothing from this header to benefit: `wanmpi run` preloads
 * the library and MPI_Bcast, MPI_Allreduce, MPI_Reduce, MPI_Allgather,
 * MPI_Reduce_scatter_block, MPI_Barrier, MPI_Alltoall and MPI_Alltoallv (C and
 * Fortran) become cluster-aware. What follows is for programs that want to
 * know, or to pace their own point-to-point phases (docs/pacing.md); such
 * programs link with -lwanmpi-<mpi> (build/lib; lib/wanmpi/<mpi>/libwanmpi.so in
 * an installed prefix). */
#ifndef WANMPI_H
#define WANMPI_H

#include <mpi.h>

#define WANMPI_VERSION "0.1"

#ifdef __cplusplus
extern "C" {
#endif

/* The MPI this build of libwanmpi was compiled against, from its headers:
 * "Open MPI 4.1.4", "MPICH 5.0.2" (also "Intel MPI ...", "MVAPICH2 ...", or
 * "MPI 3.1" for an MPI it does not know). `wanmpi run` refuses to preload a
 * libwanmpi under a launcher of another MPI (docs/install.md). */
extern const char wanmpi_built_for[];

/* How many clusters the ranks of `comm` span, and which one (0-based, in
 * order of the lowest rank) the calling rank is in. Collective over `comm`
 * the first time it is called for a communicator. */
int wanmpi_comm_clusters(MPI_Comm comm, int *nclusters, int *my_cluster);

/* Pacing attributes (keyvals valid after MPI_Init; use them on any
 * communicator, they act on the whole process). Values are KB/s (1000 B/s):
 *   int *b, flag;
 *   MPI_Comm_get_attr(MPI_COMM_WORLD, WANMPI_MAXRATE, &b, &flag);   // B
 *   int matb = *b / 4;
 *   MPI_Comm_set_attr(MPI_COMM_WORLD, WANMPI_MATB, &matb);          // re-paces now
 *   MPI_Comm_delete_attr(MPI_COMM_WORLD, WANMPI_MATB);              // back to the start rate
 * WANMPI_MAXRATE: get only (flag 0 if the WAN rate is unknown). WANMPI_MATB:
 * get (0: not paced), put (> 0), delete. Bad values: MPI_ERR_ARG /
 * MPI_ERR_KEYVAL class, on the communicator's error handler. */
extern int WANMPI_MAXRATE;
extern int WANMPI_MATB;

/* MATB = B / n: n ranks send across the WAN at the same time (the pacing
 * paper's psp_set_limit). n > 0. */
int wanmpi_set_senders(MPI_Comm comm, int n);

/* Reliable blast UDP between a pair of ranks (MPICH-G2's
 * MPICHX_UDPSOCKET_PARAMETERS; docs/libwanmpi.md, "Blast transport"). Both
 * ranks of the pair put it, naming each other:
 *   struct wanmpi_udp_params up = { .partner_rank = me ? 0 : 1,
 *                                   .payload_size = 1452, .rate_mbps = 1000.0 };
 *   MPI_Comm_set_attr(MPI_COMM_WORLD, WANMPI_UDP_PARAMS, &up);
 * From then on the TCP connections between this rank and the partner's node
 * (open ones too) go through the relays with their bulk data (reads of 256
 * KiB and more) blasted over UDP at rate_mbps (Mbit/s on the wire) in
 * datagrams of payload_size bytes (64..65507), as far as the relays allow. One partner per
 * communicator (a second put replaces the first; use a duplicate for
 * another partner); MPI_Comm_delete_attr or freeing the communicator
 * withdraws it. Get returns a pointer to the values put. Needs `wanmpi run`
 * with relays; otherwise the put succeeds and warns that nothing is blasted.
 * Bad values: MPI_ERR_RANK / MPI_ERR_ARG class, own error strings. */
struct wanmpi_udp_params {
    int partner_rank;       /* rank in the communicator (remote group of an intercommunicator) */
    int payload_size;       /* UDP payload bytes of a full datagram, 64..65507 */
    double rate_mbps;       /* blast rate, Mbit/s (IP bytes), > 0 */
};
extern int WANMPI_UDP_PARAMS;

#ifdef __cplusplus
}
#endif

#endif
