/* Allgather.
 *
 * Multi-lane. Block b (of rank b, cluster X, index i in X) reaches everyone
 * along a two-level tree, cut into pieces of about one chunk so the levels
 * overlap:
 *   1. b sends the block to every other rank of X;
 *   2. lane (i mod k) of X, which has the block after step 1 (or is b),
 *      sends it across the WAN to one entry rank per other cluster Y
 *      (index i mod n_Y, so the entries spread over Y);
 *   3. the entry sends it to every other rank of Y.
 * The WAN carries each block once per cluster, at most k ranks of a cluster
 * send across it, and every rank sends about as much as it receives.
 * Data moves as bytes of the packed representation (send and receive types
 * may differ, as MPI allows).
 *
 * Single-lane (baseline): the MPI library's gather onto one leader per
 * cluster, the leaders exchange their clusters' blocks, the MPI library's
 * broadcast inside each cluster. */
#include "coll.h"
#include "sched.h"
#include "../common/log.h"

#include <stdlib.h>
#include <string.h>

struct gather {
    const struct wm_comm *wc;
    char *data;                 /* size * block bytes, rank order */
    int64_t block, chunk, per_block;
};

static int piece_bytes(const struct gather *g, int64_t q)
{
    int64_t left = g->block - q * g->chunk;
    return (int)(left < g->chunk ? left : g->chunk);
}

static char *piece_at(const struct gather *g, int b, int64_t q)
{
    return g->data + (int64_t)b * g->block + q * g->chunk;
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

/* Sends piece q of block b on to everyone this rank serves. */
static int pass_on(struct wm_sched *s, void *arg, long item)
{
    struct gather *g = arg;
    const struct wm_comm *wc = g->wc;
    int b = (int)(item / g->per_block);
    int64_t q = item % g->per_block;
    int X = wc->cluster_of[b], me = wc->rank, Y = wc->my_cluster;
    int tag = (int)item, n = piece_bytes(g, q);
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
static int source_of(const struct wm_comm *wc, int b)
{
    int X = wc->cluster_of[b], Y = wc->my_cluster;
    if (X == Y)
        return b;
    int e = entry(wc, b, Y);
    return e == wc->rank ? wan_lane(wc, b) : e;
}

/* Puts my own block into the packed rank-order buffer. */
static int own_block(const struct wm_comm *wc, const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                     void *recvbuf, int recvcount, MPI_Datatype recvtype, const struct wm_layout *rl,
                     char *data, int64_t block, int packed)
{
    char *mine = (char *)recvbuf + (int64_t)wc->rank * recvcount * rl->extent;
    int pos = (int)(wc->rank * block), rc = MPI_SUCCESS;
    if (sendbuf == MPI_IN_PLACE) {
        if (packed)
            rc = PMPI_Pack(mine, recvcount, recvtype, data, (int)(block * wc->size), &pos, wc->shadow);
        return rc;
    }
    if (packed)
        return PMPI_Pack(sendbuf, sendcount, sendtype, data, (int)(block * wc->size), &pos, wc->shadow);
    return PMPI_Sendrecv(sendbuf, sendcount, sendtype, 0, 0, mine, recvcount, recvtype, 0, 0,
                         MPI_COMM_SELF, MPI_STATUS_IGNORE);
}

int wm_allgather_multilane(const struct wm_comm *wc, const void *sendbuf, int sendcount,
                           MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype)
{
    struct wm_layout rl;
    int64_t total_count = (int64_t)recvcount * wc->size;
    int rc = wm_layout(recvtype, (int)total_count, &rl);
    if (rc != MPI_SUCCESS)
        return rc;
    struct gather g = { .wc = wc, .block = (int64_t)recvcount * rl.size };
    if (g.block == 0)
        return MPI_SUCCESS;
    int packed = !rl.contiguous;
    if (packed) {
        g.data = malloc((size_t)(g.block * wc->size));
        if (!g.data)
            wm_fatal("out of memory: %lld bytes for an allgather", (long long)(g.block * wc->size));
    } else {
        g.data = (char *)recvbuf + rl.true_lb;
    }
    if ((rc = own_block(wc, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, &rl, g.data,
                        g.block, packed)) != MPI_SUCCESS)
        goto out;
    int64_t chunk;
    g.per_block = wm_pieces(wc, g.block, (int64_t)wm_chunk_bytes(), wc->size, &chunk);
    g.chunk = chunk;

    struct wm_sched s;
    wm_sched_init(&s, wc);
    for (int b = 0; b < wc->size; b++)
        for (int64_t q = 0; q < g.per_block; q++) {
            long item = (long)(b * g.per_block + q);
            if (b == wc->rank)
                pass_on(&s, &g, item);
            else
                wm_sched_recv(&s, piece_at(&g, b, q), piece_bytes(&g, q), MPI_BYTE, source_of(wc, b),
                              (int)item, pass_on, &g, item);
        }
    rc = wm_sched_run(&s);
    if (rc == MPI_SUCCESS && packed) {
        int pos = 0;
        rc = PMPI_Unpack(g.data, (int)(g.block * wc->size), &pos, recvbuf, (int)total_count, recvtype,
                         wc->shadow);
    }
out:
    if (packed)
        free(g.data);
    return rc;
}

int wm_allgather_singlelane(const struct wm_comm *wc, const void *sendbuf, int sendcount,
                            MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype)
{
    struct wm_layout rl;
    int64_t total_count = (int64_t)recvcount * wc->size;
    int rc = wm_layout(recvtype, (int)total_count, &rl);
    if (rc != MPI_SUCCESS)
        return rc;
    int64_t block = (int64_t)recvcount * rl.size, P = wc->size;
    if (block == 0)
        return MPI_SUCCESS;
    /* everything as packed bytes: mine, my cluster's (cluster order), everyone's (rank order) */
    char *all = malloc((size_t)(block * P)), *by_cluster = malloc((size_t)(block * P));
    int *counts = malloc((size_t)wc->nclusters * sizeof(int)), *displs = malloc((size_t)wc->nclusters * sizeof(int));
    if (!all || !by_cluster || !counts || !displs)
        wm_fatal("out of memory: %lld bytes for an allgather", (long long)(2 * block * P));
    if ((rc = own_block(wc, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, &rl, all, block,
                        1)) != MPI_SUCCESS)
        goto out;
    int X = wc->my_cluster, leader = wc->my_index == 0;
    for (int x = 0, d = 0; x < wc->nclusters; x++) {
        counts[x] = (int)(block * wc->cluster_size[x]);
        displs[x] = d;
        d += counts[x];
    }
    rc = PMPI_Gather(all + wc->rank * block, (int)block, MPI_BYTE, by_cluster + displs[X], (int)block,
                     MPI_BYTE, 0, wc->local);
    if (rc == MPI_SUCCESS && leader)
        rc = PMPI_Allgatherv(MPI_IN_PLACE, 0, MPI_BYTE, by_cluster, counts, displs, MPI_BYTE, wc->leaders);
    if (rc == MPI_SUCCESS)
        rc = PMPI_Bcast(by_cluster, (int)(block * P), MPI_BYTE, 0, wc->local);
    if (rc != MPI_SUCCESS)
        goto out;
    for (int r = 0; r < P; r++)
        memcpy(all + r * block, by_cluster + displs[wc->cluster_of[r]] + (int64_t)wc->index_of[r] * block,
               (size_t)block);
    int pos = 0;
    rc = PMPI_Unpack(all, (int)(block * P), &pos, recvbuf, (int)total_count, recvtype, wc->shadow);
out:
    free(all);
    free(by_cluster);
    free(counts);
    free(displs);
    return rc;
}
