/* The WAN-aware algorithms (one file per collective) and what they share.
 * Each takes the communicator's cached cluster map; api.c decides which one
 * runs, or whether the call goes to the MPI library (PMPI) instead.
 *
 * Notation, as in ../shared/design/collectives.md: C clusters, cluster X has
 * n_X ranks, k lanes = ranks per cluster that send across the WAN. */
#ifndef WANMPI_COLL_H
#define WANMPI_COLL_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster.h"
#include "sched.h"
#include "../common/settings.h"

/* ---- algorithms ----
 * Those that take a `struct wm_sched *` fill it (sched.h): they post their
 * first operations and leave the rest to handlers and the end hook, so the
 * same code runs a blocking call (api.c runs the schedule at once) and a
 * nonblocking one (nb.c advances it). They return the first error, also
 * kept in the schedule. */
int wm_bcast_multilane(struct wm_sched *s, const struct wm_comm *wc, void *buf, int count, MPI_Datatype type,
                       int root);
int wm_bcast_singlelane(const struct wm_comm *wc, void *buf, int count, MPI_Datatype type, int root);

enum wm_reduce_mode {
    WM_TO_ALL,          /* MPI_Allreduce */
    WM_TO_ROOT,         /* MPI_Reduce */
    WM_SCATTER_BLOCKS,  /* MPI_Reduce_scatter(_block): counts[r] elements to rank r, in rank order
                           (`counts` NULL: `count` each) */
};
/* Commutative operations only (the caller checks). `counts`: reduce-scatter
 * only, the same on every rank. */
int wm_reduce_multilane(struct wm_sched *s, const struct wm_comm *wc, const void *sendbuf, void *recvbuf,
                        int count, const int *counts, MPI_Datatype type, MPI_Op op, enum wm_reduce_mode mode,
                        int root);
int wm_reduce_singlelane(const struct wm_comm *wc, const void *sendbuf, void *recvbuf, int count,
                         const int *counts, MPI_Datatype type, MPI_Op op, enum wm_reduce_mode mode, int root);

/* Allgatherv (and Allgather: equal counts, displacements r * count). */
int wm_allgatherv_multilane(struct wm_sched *s, const struct wm_comm *wc, const void *sendbuf, int sendcount,
                            MPI_Datatype sendtype, void *recvbuf, const int *recvcounts, const int *displs,
                            MPI_Datatype recvtype);
int wm_allgatherv_singlelane(const struct wm_comm *wc, const void *sendbuf, int sendcount,
                             MPI_Datatype sendtype, void *recvbuf, const int *recvcounts, const int *displs,
                             MPI_Datatype recvtype);

/* Gatherv and Scatterv (Gather and Scatter: equal counts, displacements
 * r * count). `sizes_known`: every rank knows every block's size (equal
 * counts); else the rank's own size is `own_bytes` and the root's counts
 * tell the others (gather.c). Arguments already checked. */
int wm_gatherv_run(const struct wm_comm *wc, int sizes_known, const void *sendbuf, int sendcount,
                   MPI_Datatype sendtype, void *recvbuf, const int *recvcounts, const int *displs,
                   MPI_Datatype recvtype, int root);
int wm_scatterv_run(const struct wm_comm *wc, int sizes_known, const void *sendbuf, const int *sendcounts,
                    const int *displs, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                    int root);

/* Scan and exscan (scan.c): the chain of cluster totals needs each cluster's
 * ranks to be one contiguous rank range (wm_scan_fits); arguments already
 * checked, the operation need not commute. */
int wm_scan_fits(const struct wm_comm *wc);
int wm_scan_run(const struct wm_comm *wc, int exclusive, const void *sendbuf, void *recvbuf, int count,
                MPI_Datatype type, MPI_Op op);

int wm_barrier(const struct wm_comm *wc);

/* alg: WM_ALG_SCHEDULED or WM_ALG_PACED; arguments already checked. */
int wm_alltoall_run(const struct wm_comm *wc, enum wm_alg alg, const void *sendbuf, int scount,
                    MPI_Datatype stype, void *recvbuf, int rcount, MPI_Datatype rtype);
int wm_alltoallv_run(const struct wm_comm *wc, enum wm_alg alg, const void *sendbuf, const int *scounts,
                     const int *sdispls, MPI_Datatype stype, void *recvbuf, const int *rcounts,
                     const int *rdispls, MPI_Datatype rtype);
/* The scheduled all-to-all(v) alone, not paced (nonblocking calls). */
int wm_alltoallv_scheduled(struct wm_sched *s, const struct wm_comm *wc, const void *sendbuf,
                           const int *scounts, const int *sdispls, MPI_Datatype stype, void *recvbuf,
                           const int *rcounts, const int *rdispls, MPI_Datatype rtype);
int wm_alltoall_scheduled(struct wm_sched *s, const struct wm_comm *wc, const void *sendbuf, int scount,
                          MPI_Datatype stype, void *recvbuf, int rcount, MPI_Datatype rtype);
/* Alltoallw (alltoallw.c): byte displacements, a datatype per peer on both
 * sides; arguments already checked. The
 * blocking call paces like the alltoallv (wm_alltoallw_run). */
int wm_alltoallw_scheduled(struct wm_sched *s, const struct wm_comm *wc, const void *sendbuf,
                           const int *scounts, const int *sdispls, const MPI_Datatype *stypes, void *recvbuf,
                           const int *rcounts, const int *rdispls, const MPI_Datatype *rtypes);
int wm_alltoallw_run(const struct wm_comm *wc, const void *sendbuf, const int *scounts, const int *sdispls,
                     const MPI_Datatype *stypes, void *recvbuf, const int *rcounts, const int *rdispls,
                     const MPI_Datatype *rtypes);

/* The one all-to-all schedule, whichever front end describes the blocks:
 * every receive posted first, then the sends, blocks to other clusters
 * first, each cut into pieces (alltoall.c). Both sides of a pair must cut
 * their block alike (the same piece bytes).
 * `ends_short` (alltoallw): the sender's last message is shorter than a
 * piece (empty if need be) and the receiver posts one piece at a time, the
 * next once the last came full: a sender that sends less than its receiver
 * expects (an erroneous program) cannot leave a receive waiting, and one
 * that sends more is caught as a truncated receive, as by the MPI. */
struct wm_a2a_block {
    char *buf;                  /* the block's first element */
    int count;                  /* elements of `type` */
    int piece;                  /* elements per message (INT32_MAX: the whole block in one) */
    MPI_Datatype type;
    MPI_Aint extent;            /* of `type`: piece k starts at buf + k x piece x extent */
    int ends_short;
};
/* send[p], recv[p]: the block to and from rank p (a receive that ends
 * short is read until the schedule ends: keep recv[] until then). */
int wm_alltoall_blocks(struct wm_sched *s, const struct wm_comm *wc, const struct wm_a2a_block *send,
                       const struct wm_a2a_block *recv);

/* Pacing of a blocking all-to-all (alltoall.c, docs/pacing.md): this rank's
 * sockets for one call that sends bytes[p] to rank p (collective_counts:
 * the volumes differ by rank and are summed over the cluster, collectively),
 * until wm_alltoall_unpace. */
struct wm_pacing {
    int set;                    /* rates were changed: restore them */
    int local_set;
    uint64_t local_before;
    uint32_t *hosts;            /* hosts paced on their own (auto), to restore */
    int nhosts;
    const struct wm_comm *wc;
};
/* `bytes`: what this rank sends to each; `received`: from how many other
 * ranks it receives something (wm_received_from); `collective_counts`: the
 * counts differ by rank (alltoallv, alltoallw). */
int wm_alltoall_pace(struct wm_pacing *pc, const struct wm_comm *wc, const double *bytes, int received,
                     int collective_counts);
/* From how many other ranks a non-empty block comes (rcounts NULL: `count` from each). */
int wm_received_from(const struct wm_comm *wc, const int *rcounts, int count);
void wm_alltoall_unpace(struct wm_pacing *pc);

/* own_alltoall.c: for a paced call, the MPI library's own all-to-all set to
 * one whose flows all run at once (MPICH: "scattered"); *saved for restore.
 * Returns 1 if it changed anything. */
int wm_own_alltoall_concurrent(int *saved);
void wm_own_alltoall_restore(int saved);
void wm_own_alltoall_finalize(void);        /* before PMPI_Finalize */

/* ---- shared pieces ---- */

/* Where `count` elements of `type` live in memory. */
struct wm_layout {
    int size;                   /* bytes of data per element (MPI_Type_size) */
    MPI_Aint extent, true_lb, true_extent;
    int contiguous;             /* the elements are size*count bytes at buf + true_lb */
};
int wm_layout(MPI_Datatype type, int count, struct wm_layout *out);

/* Bytes of one element of `type`, also past INT_MAX (MPI-4); -1 on an error. */
int64_t wm_type_bytes(MPI_Datatype type);
/* Room for `count` elements laid out like `type`; `*base` is what to free. */
void *wm_alloc_elements(const struct wm_layout *l, int64_t count, void **base);
/* Copies `count` elements (any datatype) from src to dst. */
int wm_copy_elements(void *dst, const void *src, int count, MPI_Datatype type, const struct wm_layout *l);
/* Whether the MPI defines a predefined `op` on a named `type` (op_check.c). */
int wm_op_defined(MPI_Datatype type, MPI_Op op);
/* Whether `type` may be used in communication: predefined, or committed
 * (type_check.c); 0 for MPI_DATATYPE_NULL. */
int wm_type_committed(MPI_Datatype type);
/* The datatype's combiner (MPI_COMBINER_NAMED: predefined), and in *large
 * whether it was made with large counts (its contents need the _c query);
 * 0 on an error (type_check.c). */
int wm_type_combiner(MPI_Datatype type, int *combiner, int *large);

/* ---- blocks of the v-collectives (blocks.c) ---- */

/* Block b of a buffer described by (counts, displs, type). */
void *wm_block_in(const void *buf, const int *displs, const struct wm_layout *l, int b);
/* Whether blocks of this type must travel packed (elements not size bytes apart). */
int wm_must_pack(const struct wm_layout *l);
/* Byte length (len) and place (at) of each of the n blocks: in place in buf
 * (`packed` 0, a contiguous type: *data points into buf) or packed in rank
 * order into a new buffer (`packed` 1: *data is it, the caller frees it).
 * Returns the total bytes. */
int64_t wm_blocks(int n, const void *buf, const int *counts, const int *displs, const struct wm_layout *l,
                  int packed, int64_t *at, int64_t *len, char **data);
/* Puts my own block (sendbuf, or MPI_IN_PLACE: already in recvbuf) where
 * wm_blocks placed it. */
int wm_own_block(const struct wm_comm *wc, const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                 void *recvbuf, const int *recvcounts, const int *displs, MPI_Datatype recvtype,
                 const struct wm_layout *rl, char *data, const int64_t *at, const int64_t *len, int packed);
/* Every block from the packed data into recvbuf, or from sendbuf into it. */
int wm_unpack_blocks(const struct wm_comm *wc, char *data, const int64_t *at, const int64_t *len, void *recvbuf,
                     const int *recvcounts, const int *displs, MPI_Datatype recvtype, const struct wm_layout *rl);
int wm_pack_blocks(const struct wm_comm *wc, char *data, const int64_t *at, const int64_t *len, const void *sendbuf,
                   const int *sendcounts, const int *displs, MPI_Datatype sendtype, const struct wm_layout *sl);

/* ---- among the clusters' leaders (leaders.c): called by the leaders only ---- */

int wm_leaders_barrier(const struct wm_comm *wc);
/* Cluster c's block (counts[c] bytes at buf + displs[c]) to every leader. */
int wm_leaders_allgatherv(const struct wm_comm *wc, char *buf, const int *counts, const int *displs);
/* The clusters' `work` vectors reduced in cluster order, into `work` at the
 * leader of cluster `to`, or at every leader (`to` -1); `l`: the layout of
 * `count` elements of `type`. */
int wm_leaders_reduce(const struct wm_comm *wc, void *work, int count, MPI_Datatype type, MPI_Op op,
                      const struct wm_layout *l, int to);

/* Lane j of cluster c (0 <= j < wm_lanes): spread over the cluster's ranks. */
int wm_lane_rank(const struct wm_comm *wc, int c, int j);

/* Number of pieces for `total` units cut into chunks of about `chunk` units,
 * capped so piece numbers fit in tags; sets *per_piece. */
int64_t wm_pieces(const struct wm_comm *wc, int64_t total, int64_t chunk, int64_t groups,
                  int64_t *per_piece);

/* Bytes in one pipeline chunk (WANMPI_CHUNK). */
size_t wm_chunk_bytes(void);
/* The chunk of a pipeline through a chain of `ranks` carrying `total`
 * bytes: WANMPI_CHUNK, cut so that the chain fills in at most about
 * 1/share of the message, down to 8 KiB (2x4 testbed, 10 ms: a 4 MiB bcast
 * 0.397 s with 32 KiB chunks, 0.382 s with 8 KiB: share 64; a 64 KiB
 * allreduce 0.044-0.051 s in two 32 KiB pieces, 0.031 s in eight, where a
 * 4 MiB reduce or reduce-scatter with 8-9 KiB pieces lost 3-10 %: share 16
 * for the reductions, docs/benchmarks.md). */
int64_t wm_fill_chunk(int64_t total, int ranks, int share);
/* The sends inside its cluster a pipelined algorithm keeps in the MPI
 * library at once (sendq.h): WANMPI_WINDOW bytes in pieces of
 * `piece_bytes`, at least 2 (0: no limit). */
int wm_window_pieces(long long piece_bytes);
/* The cost models' inputs for `bytes` (WANMPI_NIC_RATE, WANMPI_WAN_RATE,
 * WANMPI_WAN_DELAY): seconds at a NIC, across the narrowest WAN link (0 if its
 * rate is unknown), and the one-way delay. 0 if the NIC rate or the delay is unknown. */
int wm_link_times(int64_t bytes, double *nic_s, double *wan_s, double *delay_s);

/* ---- chains or trees inside a cluster (tree.c) ---- */

/* Hops from position 0 to the deepest of n positions in a heap of fan-out `fan`
 * (1: the chain, n - 1). */
int wm_tree_depth(int n, int fan);
/* Position t's parent (-1 for t = 0). */
int wm_tree_parent(int t, int fan);
/* Position t's children among n: how many, the first at *first (the rest follow). */
int wm_tree_children(int t, int n, int fan, int *first);
/* The reductions' fan-out for a vector of `bytes` through clusters of up to
 * n ranks in chunks of `chunk` bytes, `passes` times (2: up and down):
 * WANMPI_FAN, or the model's choice from WANMPI_NIC_RATE, WANMPI_LAN_LATENCY
 * and WANMPI_WAN_DELAY (1, the chain, when the rate is unknown); `rotated`:
 * every piece has its own tree root, so the busiest rank carries less than
 * f times the vector. */
int wm_tree_fan(int64_t bytes, int passes, int64_t chunk, int n, int rotated);
/* The broadcast's fan-out: the same model, the busiest rank's load computed
 * from the layout of its trees (wm_tree_start) over the root cluster's
 * `root_others` non-root ranks and the widest other cluster's `widest`
 * (which sends on to a next cluster if `onward`); only fan-outs whose copies
 * across leave from ranks that send nothing inside the cluster. */
int wm_bcast_fan(int64_t total, int64_t chunk, int root_others, int widest, int onward);
/* Where segment s of `segments` starts among n ranks: evenly spread, or with
 * `fan` trees of fan-out `fan` > 1, ceil((n-1)/fan) apart (inner positions
 * that do not overlap); more segments than `fan`: evenly spread in the order
 * wm_interleave takes them. */
int wm_tree_start(int s, int segments, int n, int fan);
/* The s-th of `count` items taken in turn from `fan` blocks of ceil(count/fan)
 * (a permutation of 0 .. count-1): f consecutive segments or pieces start
 * their trees about n/f ranks apart, so their inner ranks differ. */
int wm_interleave(int s, int count, int fan);
/* The broadcast's `fan` trees over n ranks, started by wm_tree_start: for
 * each tree the rank (its place in the cluster's order, as wm_tree_start's)
 * that sends its segment on to the next cluster, the leaf sending least so
 * far; returns the busiest rank's copies of the message. */
double wm_tree_forwarders(int n, int fan, int *forwarder);

#endif
