/* Broadcast.
 *
 * Multi-lane (pipelined chains). The message is cut into chunks; chunk c
 * belongs to segment s = c mod S, S = min(k, n_R - 1) segments (k = 1 unless
 * WANMPI_LANES says otherwise: one chain measured fastest; R = the
 * root's cluster). Every segment travels along its own chain, through the
 * clusters in order R, R+1, ..., R-1 (mod C):
 *
 *   root -> R[s0] -> ... -> R[s0-1] ==WAN==> X[e_s] -> ... -> X[e_s-1] ==WAN==> Y[e_s] -> ...
 *
 * The chain of segment s visits every non-root rank of R starting at a
 * rotated position s0 = s (n_R-1)/S, so the S chains end on S different
 * ranks, and the last rank of a chain is the one that sends the segment
 * across the WAN instead of forwarding it locally. In every other cluster
 * the chain starts at entry e_s, visits every rank, and its last rank sends
 * the segment on to the next cluster's entry. Every rank therefore sends the
 * message at most once in total (the lower bound of M/b per NIC; with three
 * or more clusters a root-cluster rank that sent to every other cluster
 * would send it C-1 times), at most S = k ranks of a cluster send across the
 * WAN, and the WAN carries the message once into every cluster. The price
 * is one more WAN delay per cluster beyond the second.
 *
 * With three or more clusters, where those delays cost more than a second
 * copy of the message at a NIC (star_of_clusters: a short message, a long
 * delay), the clusters form a star instead: the first rank of each
 * segment's chain in R, which has the segment straight from the root,
 * feeds every other cluster's chain directly (one WAN delay in all), and no
 * cluster forwards to the next. Its copies across go at once; its and every
 * rank's forwards inside the cluster wait in a window of a few chunks
 * (sendq.h), so a backlog in R (whose ranks send 1 + (C-2)/S times the
 * message) delays only copies that have no WAN delay ahead of them.
 * With many ranks per cluster (n hops of LAN latency against the message's
 * time at a NIC: tree.c's model) every segment runs down a tree of fan-out
 * f instead of the chain, laid over the chain's order (the chain's last
 * rank a leaf), in f segments whose trees start ceil((n-1)/f) ranks apart,
 * so that every rank is inner in at most about one and sends the message
 * about once (tree.c computes the busiest rank's load from this layout).
 * Chunks are under Open MPI's TCP eager limit, so no chunk waits for a
 * rendezvous round trip across the WAN, and all receives are posted first.
 *
 *   step:      1      2      3      4      5 ...
 *   root     c0,c1  c2,c3  c4,c5
 *   R[0]            c0>    c2> c1>  ...          (forward: local, or WAN if last)
 *   X[e]                          c0>  ...
 *
 * Data moves as bytes of the packed representation, so ranks may describe
 * the same message with different (count, datatype) pairs as MPI allows.
 *
 * Single-lane (the grid-MPI baseline, and the small-message path): the root
 * sends the whole message to one leader per other cluster, then every cluster
 * runs the MPI library's own broadcast inside the cluster. */
#include "coll.h"
#include "sched.h"
#include "sendq.h"
#include "../common/log.h"

#include <stdlib.h>

struct bcast {
    const struct wm_comm *wc;
    void *buf;          /* the user's (count, type, root) */
    int count, root;
    MPI_Datatype type;
    char *packed;       /* the message packed, for a non-contiguous type; else NULL */
    char *data;
    int64_t total, chunk;
    int segments;
    int fan;            /* of the tree inside every cluster (1: the chain) */
    int star;           /* clusters fed from R directly (else in turn) */
    int *source;        /* [segments] who sends me the segment's chunks (-1: I am the root) */
    int *ndest;         /* [segments] */
    int *dest;          /* [segments][max_dest] */
    int max_dest;
    struct wm_sendq lan; /* my sends inside my cluster (a window in the star) */
};

static int chunk_count(const struct bcast *b, int64_t c)
{
    int64_t left = b->total - c * b->chunk;
    return (int)(left < b->chunk ? left : b->chunk);
}

/* Sends chunk c on: across the WAN at once, inside my cluster through the
 * window (oldest chunk first), so that a backlog of local forwards never
 * holds up a copy that still has a WAN delay ahead of it. */
static int forward(struct wm_sched *s, void *arg, long c)
{
    struct bcast *b = arg;
    int seg = (int)(c % b->segments), mine = b->wc->my_cluster;
    const int *dest = b->dest + seg * b->max_dest;
    for (int d = 0; d < b->ndest[seg]; d++)
        if (b->wc->cluster_of[dest[d]] != mine)
            wm_sched_send(s, b->data + c * b->chunk, chunk_count(b, c), MPI_BYTE, dest[d], (int)c, NULL, NULL, 0);
    for (int d = 0; d < b->ndest[seg]; d++)
        if (b->wc->cluster_of[dest[d]] == mine)
            wm_sendq_send(s, &b->lan, b->data + c * b->chunk, chunk_count(b, c), MPI_BYTE, dest[d], (int)c, c);
    return s->err;
}

static void add_dest(struct bcast *b, int seg, int rank)
{
    b->dest[seg * b->max_dest + b->ndest[seg]++] = rank;
}

/* Entry rank of segment s in cluster x (tree.c: spread so that trees'
 * inner ranks do not overlap). */
static int entry(const struct wm_comm *wc, int x, int s, int segments, int fan)
{
    return wm_tree_start(s, segments, wc->cluster_size[x], fan);
}

/* Who sends each segment on to the next cluster, in every cluster x (R:
 * among its non-root ranks), as a place in the order the segments' chains
 * and trees start from (wm_tree_start): onward[x * segments + s]. The last
 * rank of the chain; with fan-out f trees in f segments, the leaf that sends
 * least (tree.c), so that no inner rank sends a third copy. */
static int *onward_ranks(const struct wm_comm *wc, int root, int segments, int fan, int star)
{
    int C = wc->nclusters, R = wc->cluster_of[root];
    int *onward = calloc((size_t)C * (size_t)segments, sizeof *onward);
    if (!onward)
        wm_fatal("out of memory (broadcast plan)");
    for (int x = 0; x < C; x++) {
        int n = x == R ? wc->cluster_size[R] - 1 : wc->cluster_size[x];
        if (n > 0 && fan > 1 && segments == fan && !star) {
            wm_tree_forwarders(n, fan, onward + x * segments);
            continue;
        }
        for (int s = 0; s < segments && n > 0; s++)
            onward[x * segments + s] = (wm_tree_start(s, segments, n, fan) + n - 1) % n;
    }
    return onward;
}

/* The rank of R that feeds every other cluster in a star: the first rank of
 * the segment's chain or tree in R, which has the chunks straight from the
 * root, so they cross while R's own forwards are still under way (from the
 * chain's last ranks they left only after every hop in R). */
static int star_sender(const struct wm_comm *wc, int root, int start, int others)
{
    int R = wc->cluster_of[root], nR = wc->cluster_size[R], ir = wc->index_of[root];
    return others == 0 ? root : wc->members[R][(ir + 1 + start % others) % nR];
}

/* Fills source/dest of every segment for this rank (see the chain above):
 * inside every cluster the segment's chain, or with fan-out f > 1 a tree
 * (tree.c) over the same order, the rank that sends on one of its leaves. In
 * R the root feeds R[0], the tree's root (the root sends every chunk once). */
static void plan(const struct wm_comm *wc, int root, struct bcast *b)
{
    int R = wc->cluster_of[root], nR = wc->cluster_size[R], ir = wc->index_of[root];
    int me = wc->rank, X = wc->my_cluster, C = wc->nclusters, f = b->fan, first, kids, S = b->segments;
    int others = nR - 1;                        /* non-root ranks of R: R[j] = members[(ir+1+j) % nR] */
    int *onward = onward_ranks(wc, root, S, f, b->star);
    for (int s = 0; s < S; s++) {
        b->source[s] = -1;
        b->ndest[s] = 0;
        int start = wm_tree_start(s, b->segments, others, f);
#define R_AT(j) (wc->members[R][(ir + 1 + ((start + (j)) % others)) % nR])
        int wan_sender = others > 0 ? wc->members[R][(ir + 1 + onward[R * S + s]) % nR] : root;
        if (me == root) {
            if (others > 0)
                add_dest(b, s, R_AT(0));
        } else if (X == R) {
            int pos = (wc->my_index - ir - 1 + nR) % nR;          /* my place among R's non-roots */
            int u = (pos - start + others) % others;              /* my place in this segment's tree */
            b->source[s] = u == 0 ? root : R_AT(wm_tree_parent(u, f));
            kids = wm_tree_children(u, others, f, &first);
            for (int i = 0; i < kids; i++)
                add_dest(b, s, R_AT(first + i));
        } else {
            int n = wc->cluster_size[X], e = entry(wc, X, s, b->segments, f);
            int j = (wc->my_index - e + n) % n, before = (X - 1 + C) % C;
            b->source[s] = j > 0 ? wc->members[X][(e + wm_tree_parent(j, f)) % n]
                         : b->star ? star_sender(wc, root, start, others)
                         : before == R ? wan_sender : wc->members[before][onward[before * S + s]];
            kids = wm_tree_children(j, n, f, &first);
            for (int i = 0; i < kids; i++)
                add_dest(b, s, wc->members[X][(e + first + i) % n]);
            if (wc->my_index == onward[X * S + s] && !b->star && (X + 1) % C != R)
                add_dest(b, s, wc->members[(X + 1) % C][entry(wc, (X + 1) % C, s, b->segments, f)]);
        }
        for (int x = 1; x < C && X == R; x++) {
            int to = (R + x) % C;
            if (b->star ? me == star_sender(wc, root, start, others) : me == wan_sender && x == 1)
                add_dest(b, s, wc->members[to][entry(wc, to, s, b->segments, f)]);
        }
#undef R_AT
    }
    free(onward);
}

/* Star of clusters or chain through them (three or more clusters), and the
 * segments. The chain (one segment unless WANMPI_LANES says otherwise) pays
 * one more WAN delay per cluster beyond the second; the star sends C-1 more
 * copies of each segment from R, from the first rank of its chain, so
 * with S segments (automatic: every non-root rank of R starts one and ends
 * one) the busiest rank of R sends about f M, f = 1 + (C-2)/S; with fewer
 * segments than non-root ranks (WANMPI_LANES) a rank that starts one need
 * not end one: f = 1 + (C-1)/S; C-1 when the root is R's only rank. The
 * star where it is the faster:
 * max(f M/b, M/W) + d < max(M/b, M/W) + (C-1) d, with the topology's NIC
 * rate b, narrowest WAN rate W and one-way delay d (WANMPI_NIC_RATE,
 * WANMPI_WAN_RATE, WANMPI_WAN_DELAY; none known: the chain). Returns the
 * segments of the star, or 0 for the chain. */
static int star_segments(const struct wm_comm *wc, int64_t total, int others)
{
    int C = wc->nclusters;
    double m, w, d;
    if (C < 3 || !wm_link_times(total, &m, &w, &d) || d <= 0)
        return 0;
    int S = wc->lanes > 0 ? (wc->lanes < others ? wc->lanes : others) : others;
    if (S < 1)
        S = 1;
    double f = others == 0 ? C - 1 : 1 + (double)(S == others ? C - 2 : C - 1) / S;
    double star = (f * m > w ? f * m : w) + d, chain = (m > w ? m : w) + (C - 1) * d;
    return star < chain ? S : 0;
}

static int bcast_end(void *state, int rc)
{
    struct bcast *b = state;
    if (rc == MPI_SUCCESS && b->packed && b->wc->rank != b->root) {
        int pos = 0;
        rc = PMPI_Unpack(b->packed, (int)b->total, &pos, b->buf, b->count, b->type, b->wc->shadow);
    }
    free(b->source);
    free(b->ndest);
    free(b->dest);
    free(b->packed);
    wm_sendq_free(&b->lan);
    free(b);
    return rc;
}

int wm_bcast_multilane(struct wm_sched *s, const struct wm_comm *wc, void *buf, int count, MPI_Datatype type,
                       int root)
{
    struct wm_layout l;
    int rc = wm_layout(type, count, &l);
    if (rc != MPI_SUCCESS || (int64_t)count * l.size == 0)
        return wm_sched_fail(s, rc);
    struct bcast *b = calloc(1, sizeof *b);
    if (!b)
        wm_fatal("out of memory (broadcast)");
    *b = (struct bcast){ .wc = wc, .buf = buf, .count = count, .type = type, .root = root,
                         .total = (int64_t)count * l.size };
    wm_sched_at_end(s, bcast_end, b);
    if (l.contiguous) {
        b->data = (char *)buf + l.true_lb;
    } else {
        b->packed = malloc((size_t)b->total);
        if (!b->packed)
            wm_fatal("out of memory: %lld bytes to pack a broadcast", (long long)b->total);
        b->data = b->packed;
        if (wc->rank == root) {
            int pos = 0;
            if ((rc = PMPI_Pack(buf, count, type, b->packed, (int)b->total, &pos, wc->shadow)) != MPI_SUCCESS)
                return wm_sched_fail(s, rc);
        }
    }
    int R = wc->cluster_of[root], nR = wc->cluster_size[R], widest = 1;
    for (int x = 0; x < wc->nclusters; x++)
        if (x != R && wc->cluster_size[x] > widest)
            widest = wc->cluster_size[x];
    /* The chain of P ranks fills in (P-1) chunk times */
    int64_t chunk = wm_fill_chunk(b->total, wc->size, 64);
    int64_t nchunks = wm_pieces(wc, b->total, chunk, 1, &b->chunk);
    /* automatic: one chain, which measured fastest (docs/libwanmpi.md); a
     * star one segment per non-root rank of R; trees of fan-out f as many
     * segments, each its own tree, their inner ranks apart (tree.c) */
    int star = star_segments(wc, b->total, nR - 1);
    b->star = star > 0;
    b->fan = wm_bcast_fan(b->total, b->chunk, nR - 1, widest, wc->nclusters > 2 && !b->star);
    int k = star > 0 ? star : wc->lanes > 0 ? wc->lanes : b->fan;
    b->segments = k < (nR > 1 ? nR - 1 : widest) ? k : (nR > 1 ? nR - 1 : widest);
    b->max_dest = wc->nclusters + b->fan;
    /* the star's forwards inside a cluster: WANMPI_WINDOW, at most 8 chunks
     * (3 x 8 and 4 x 8 sites, 16 MiB in 11 KiB chunks: 3-8 chunks 27.3-27.9
     * ms, 22 chunks 28.0-28.8, none 28.6 at 3 sites; docs/scale.md) */
    int window = b->star ? wm_window_pieces(b->chunk) : 0;
    wm_sendq_init(&b->lan, window < 8 ? window : 8);
    wm_debug(2, "bcast: %lld bytes, clusters %s (%d segments), fan-out %d", (long long)b->total,
             wc->nclusters < 3 ? "two" : b->star ? "in a star" : "in a chain", b->segments, b->fan);
    b->source = calloc((size_t)b->segments, sizeof(int));
    b->ndest = calloc((size_t)b->segments, sizeof(int));
    b->dest = calloc((size_t)b->segments * (size_t)b->max_dest, sizeof(int));
    if (!b->source || !b->ndest || !b->dest)
        wm_fatal("out of memory (broadcast plan)");
    plan(wc, root, b);

    for (int64_t c = 0; c < nchunks && s->err == MPI_SUCCESS; c++) {
        int seg = (int)(c % b->segments);
        if (wc->rank == root)
            forward(s, b, (long)c);
        else
            wm_sched_recv(s, b->data + c * b->chunk, chunk_count(b, c), MPI_BYTE, b->source[seg],
                          (int)c, forward, b, (long)c);
    }
    return s->err;
}

int wm_bcast_singlelane(const struct wm_comm *wc, void *buf, int count, MPI_Datatype type, int root)
{
    int R = wc->cluster_of[root], rc = MPI_SUCCESS;
    int local_root = wc->my_cluster == R ? wc->index_of[root] : 0;
    if (wc->rank == root) {
        MPI_Request *req = calloc((size_t)wc->nclusters, sizeof *req);
        if (!req)
            wm_fatal("out of memory (broadcast)");
        int n = 0;
        for (int x = 0; x < wc->nclusters && rc == MPI_SUCCESS; x++)
            if (x != R)
                rc = PMPI_Isend(buf, count, type, wc->members[x][0], 0, wc->shadow, &req[n++]);
        if (rc == MPI_SUCCESS)
            rc = PMPI_Bcast(buf, count, type, local_root, wc->local);
        int wrc = PMPI_Waitall(n, req, MPI_STATUSES_IGNORE);
        free(req);
        return rc != MPI_SUCCESS ? rc : wrc;
    }
    if (wc->my_cluster != R && wc->my_index == 0)
        rc = PMPI_Recv(buf, count, type, root, 0, wc->shadow, MPI_STATUS_IGNORE);
    if (rc == MPI_SUCCESS)
        rc = PMPI_Bcast(buf, count, type, local_root, wc->local);
    return rc;
}
