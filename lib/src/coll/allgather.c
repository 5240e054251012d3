/* Allgather and Allgatherv (Allgather is Allgatherv with equal counts).
 *
 * Multi-lane. Block b (of rank b, cluster X, index i in X; any size, zero
 * included) reaches everyone along a two-level tree, cut into pieces of
 * about one chunk so the levels overlap:
 *   1. b sends the block to every other rank of X;
 *   2. lane (i mod k) of X, which has the block after step 1 (or is b),
 *      sends it across the WAN to one entry rank per other cluster Y
 *      (index i mod n_Y, so the entries spread over Y);
 *   3. the entry sends it to every other rank of Y.
 * The WAN carries each block once per cluster, at most k ranks of a cluster
 * send across it, and every rank sends about as much as it receives (with
 * irregular counts, in proportion to the blocks it owns and serves).
 * Every rank receives from up to n_X - 1 of its cluster and one entry at
 * once: for large blocks, on a cluster switch with small port buffers, that
 * incast drops packets (the 2x4 testbed, 4 MiB: 4 % of segments resent).
 *
 * Rings, the same call from WANMPI_ALLGATHER_RING bytes on: k rings (k =
 * WANMPI_LANES, by default one: ring_count), ring j visiting the clusters in order and each cluster's ranks
 * cyclically from its (j mod n_X)-th, so that ring j crosses from cluster X
 * to the next at a rank of its own: k ranks of each cluster send across the
 * WAN, the WAN carries each block once per cluster, and every rank has one
 * neighbour before and one after it in each ring, which are the same ranks
 * in all rings but the one where it starts its cluster: one sender at once
 * with one ring, at most two with more (the MPI's own ring allgather has one, and crosses the WAN at
 * every step where ranks of clusters alternate). Piece q of block b goes
 * round ring (b + q) mod k and is passed on as soon as it arrives. Two
 * clusters only: with more, a ring carries other clusters' blocks over each
 * WAN link (with three, 2/3 of the result on each link in one direction,
 * where the tree sends 1/3 each way).
 *
 * Data moves as bytes of the packed representation (send and receive types
 * may differ, as MPI allows); with a contiguous receive type the blocks land
 * in place at their displacements.
 *
 * Single-lane (baseline): the MPI library's gather onto one leader per
 * cluster, the leaders exchange their clusters' blocks, the MPI library's
 * broadcast inside each cluster. */
#include "coll.h"
#include "sched.h"
#include "../common/alloc.h"
#include "../common/log.h"
#include "../common/settings.h"

#include <stdlib.h>
#include <string.h>

struct gather {
    const struct wm_comm *wc;
    char *data;                 /* block b: len[b] bytes at data + at[b] */
    int64_t *at, *len;
    int64_t chunk, per_block;   /* pieces of at most chunk bytes; piece q of b has tag b * per_block + q */
    int rings;                  /* 0: the two-level tree; k: rings, ring j's order in next/prev[j * size + rank] */
    int *next, *prev;
};

static int piece_bytes(const struct gather *g, int b, int64_t q)
{
    int64_t left = g->len[b] - q * g->chunk;
    return (int)(left < g->chunk ? left : g->chunk);
}

static char *piece_at(const struct gather *g, int b, int64_t q)
{
    return g->data + g->at[b] + q * g->chunk;
}

static int64_t pieces_of(const struct gather *g, int b)
{
    return (g->len[b] + g->chunk - 1) / g->chunk;
}

static int wan_lane(const struct wm_comm *wc, int b)
{
    int x = wc->cluster_of[b];
    return wm_lane_rank(wc, x, wc->index_of[b] % wm_lanes(wc, x));
}

static int entry(const struct wm_comm *wc, int b, int y)
{
    return wc->members[y][wc->index_of[b] % wc->cluster_size[y]];
}

/* k: WANMPI_LANES where set (at most the smallest cluster), else one ring:
 * on the 2x4 testbed four rings (two senders per rank) resent 0.8 % of
 * their segments and took 0.41 s for 4 MiB, one ring none and 0.35 s (the
 * bound, as the MPI's own ring with the clusters' ranks contiguous). More
 * rings are for a WAN that one TCP connection cannot fill. */
static int ring_count(const struct wm_comm *wc)
{
    if (wc->lanes <= 0)
        return 1;
    int k = wc->lanes;
    for (int x = 0; x < wc->nclusters; x++)
        k = wm_lanes(wc, x) < k ? wm_lanes(wc, x) : k;
    return k;
}

static int ring_of(const struct gather *g, int b, int64_t q)
{
    return (int)((b + q) % g->rings);
}

/* The rings' orders (see the top of this file). */
static void make_rings(struct gather *g, int k)
{
    const struct wm_comm *wc = g->wc;
    int P = wc->size;
    g->rings = k;
    g->next = wm_calloc(2 * (size_t)k * (size_t)P, sizeof(int), "an allgather's rings");
    g->prev = g->next + (size_t)k * (size_t)P;
    int *order = wm_calloc((size_t)P, sizeof(int), "an allgather's rings");
    for (int j = 0; j < k; j++) {
        int at = 0;
        for (int x = 0; x < wc->nclusters; x++)
            for (int t = 0; t < wc->cluster_size[x]; t++)
                order[at++] = wc->members[x][(j + t) % wc->cluster_size[x]];
        for (int i = 0; i < P; i++) {
            g->next[j * P + order[i]] = order[(i + 1) % P];
            g->prev[j * P + order[(i + 1) % P]] = order[i];
        }
    }
    free(order);
}

/* Sends piece q of block b on to everyone this rank serves. */
static int pass_on(struct wm_sched *s, void *arg, long item)
{
    struct gather *g = arg;
    const struct wm_comm *wc = g->wc;
    int b = (int)(item / g->per_block);
    int64_t q = item % g->per_block;
    int X = wc->cluster_of[b], me = wc->rank, Y = wc->my_cluster;
    int tag = (int)item, n = piece_bytes(g, b, q);
    if (g->rings) {
        int after = g->next[ring_of(g, b, q) * wc->size + me];
        if (after != b)
            wm_sched_send(s, piece_at(g, b, q), n, MPI_BYTE, after, tag, NULL, NULL, 0);
        return s->err;
    }
    if (b == me)                                    /* step 1 */
        for (int i = 0; i < wc->cluster_size[X]; i++)
            if (wc->members[X][i] != me)
                wm_sched_send(s, piece_at(g, b, q), n, MPI_BYTE, wc->members[X][i], tag, NULL, NULL, 0);
    if (X == Y && wan_lane(wc, b) == me)            /* step 2 */
        for (int y = 0; y < wc->nclusters; y++)
            if (y != X)
                wm_sched_send(s, piece_at(g, b, q), n, MPI_BYTE, entry(wc, b, y), tag, NULL, NULL, 0);
    if (X != Y && entry(wc, b, Y) == me)            /* step 3 */
        for (int i = 0; i < wc->cluster_size[Y]; i++)
            if (wc->members[Y][i] != me)
                wm_sched_send(s, piece_at(g, b, q), n, MPI_BYTE, wc->members[Y][i], tag, NULL, NULL, 0);
    return s->err;
}

/* Who sends this rank piece q of block b. */
static int source_of(const struct gather *g, int b, int64_t q)
{
    const struct wm_comm *wc = g->wc;
    if (g->rings)
        return g->prev[ring_of(g, b, q) * wc->size + wc->rank];
    int X = wc->cluster_of[b], Y = wc->my_cluster;
    if (X == Y)
        return b;
    int e = entry(wc, b, Y);
    return e == wc->rank ? wan_lane(wc, b) : e;
}

/* The end of a multi-lane allgather: unpack (a non-contiguous receive type)
 * and free. */
struct gather_run {
    struct gather g;
    int packed;
    void *recvbuf;
    int *counts, *displs;       /* copies: the caller's arrays may be gone by the end */
    MPI_Datatype recvtype;
    struct wm_layout rl;
};

static int gather_end(void *state, int rc)
{
    struct gather_run *run = state;
    if (rc == MPI_SUCCESS && run->packed)
        rc = wm_unpack_blocks(run->g.wc, run->g.data, run->g.at, run->g.len, run->recvbuf, run->counts,
                              run->displs, run->recvtype, &run->rl);
    if (run->packed)
        free(run->g.data);
    free(run->g.at);
    free(run->g.next);
    free(run->counts);
    free(run);
    return rc;
}

int wm_allgatherv_multilane(struct wm_sched *s, const struct wm_comm *wc, const void *sendbuf, int sendcount,
                            MPI_Datatype sendtype, void *recvbuf, const int *recvcounts, const int *displs,
                            MPI_Datatype recvtype)
{
    struct gather_run *run = calloc(1, sizeof *run);
    int64_t *at = malloc(2 * sizeof(int64_t) * (size_t)wc->size);
    int *copies = malloc(2 * sizeof(int) * (size_t)wc->size);
    if (!run || !at || !copies)
        wm_fatal("out of memory for an allgather of %d ranks", wc->size);
    memcpy(copies, recvcounts, sizeof(int) * (size_t)wc->size);
    memcpy(copies + wc->size, displs, sizeof(int) * (size_t)wc->size);
    *run = (struct gather_run){ .g = { .wc = wc, .at = at, .len = at + wc->size }, .recvbuf = recvbuf,
                                .counts = copies, .displs = copies + wc->size, .recvtype = recvtype };
    struct gather *g = &run->g;
    int rc = wm_layout(recvtype, 2, &run->rl);
    wm_sched_at_end(s, gather_end, run);
    if (rc != MPI_SUCCESS)
        return wm_sched_fail(s, rc);
    run->packed = wm_must_pack(&run->rl);
    int64_t total = wm_blocks(wc->size, recvbuf, recvcounts, displs, &run->rl, run->packed, g->at, g->len,
                              &g->data), longest = 0;
    for (int b = 0; b < wc->size; b++)
        longest = g->len[b] > longest ? g->len[b] : longest;
    if (total == 0)
        return MPI_SUCCESS;
    if ((rc = wm_own_block(wc, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, &run->rl,
                           g->data, g->at, g->len, run->packed)) != MPI_SUCCESS)
        return wm_sched_fail(s, rc);
    int64_t chunk;
    g->per_block = wm_pieces(wc, longest, (int64_t)wm_chunk_bytes(), wc->size, &chunk);
    g->chunk = chunk;
    if (wc->nclusters == 2 && (double)total >= (double)wm_settings()->ring) {
        make_rings(g, ring_count(wc));
        wm_debug(1, "allgather of %lld bytes: %d ring%s", (long long)total, g->rings, g->rings > 1 ? "s" : "");
    }

    for (int b = 0; b < wc->size && s->err == MPI_SUCCESS; b++)
        for (int64_t q = 0; q < pieces_of(g, b); q++) {
            long item = (long)(b * g->per_block + q);
            if (b == wc->rank)
                pass_on(s, g, item);
            else
                wm_sched_recv(s, piece_at(g, b, q), piece_bytes(g, b, q), MPI_BYTE, source_of(g, b, q),
                              (int)item, pass_on, g, item);
        }
    return s->err;
}

int wm_allgatherv_singlelane(const struct wm_comm *wc, const void *sendbuf, int sendcount,
                             MPI_Datatype sendtype, void *recvbuf, const int *recvcounts, const int *displs,
                             MPI_Datatype recvtype)
{
    struct wm_layout rl;
    int rc = wm_layout(recvtype, 2, &rl), P = wc->size, C = wc->nclusters, X = wc->my_cluster;
    if (rc != MPI_SUCCESS)
        return rc;
    /* everything as packed bytes: everyone's in rank order (at), and by cluster, in member order */
    int64_t *at = malloc(3 * sizeof(int64_t) * (size_t)P), *len = at + P, *in_cluster = at + 2 * P;
    int *counts = malloc(sizeof(int) * (size_t)(2 * C + 2 * wc->cluster_size[X]));
    if (!at || !counts)
        wm_fatal("out of memory for an allgather of %d ranks", P);
    int *displs_c = counts + C, *local_counts = counts + 2 * C, *local_displs = local_counts + wc->cluster_size[X];
    char *all;
    int64_t total = wm_blocks(P, recvbuf, recvcounts, displs, &rl, 1, at, len, &all);
    for (int x = 0, d = 0; x < C; x++) {         /* cluster x's blocks at displs_c[x], in member order */
        int off = 0;
        for (int i = 0; i < wc->cluster_size[x]; i++) {
            int b = wc->members[x][i];
            in_cluster[b] = d + off;
            if (x == X) {
                local_counts[i] = (int)len[b];
                local_displs[i] = off;
            }
            off += (int)len[b];
        }
        displs_c[x] = d;
        counts[x] = off;
        d += off;
    }
    char *by_cluster = malloc((size_t)(total ? total : 1));
    if (!by_cluster)
        wm_fatal("out of memory: %lld bytes for an allgather", (long long)total);
    if (total == 0)
        goto out;
    if ((rc = wm_own_block(wc, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, &rl, all, at,
                           len, 1)) != MPI_SUCCESS)
        goto out;
    rc = PMPI_Gatherv(all + at[wc->rank], (int)len[wc->rank], MPI_BYTE, by_cluster + displs_c[X], local_counts,
                      local_displs, MPI_BYTE, 0, wc->local);
    if (rc == MPI_SUCCESS && wc->my_index == 0)
        rc = wm_leaders_allgatherv(wc, by_cluster, counts, displs_c);
    if (rc == MPI_SUCCESS)
        rc = PMPI_Bcast(by_cluster, (int)total, MPI_BYTE, 0, wc->local);
    if (rc != MPI_SUCCESS)
        goto out;
    for (int b = 0; b < P; b++)
        memcpy(all + at[b], by_cluster + in_cluster[b], (size_t)len[b]);
    rc = wm_unpack_blocks(wc, all, at, len, recvbuf, recvcounts, displs, recvtype, &rl);
out:
    free(all);
    free(by_cluster);
    free(at);
    free(counts);
    return rc;
}
