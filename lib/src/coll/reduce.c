/* Allreduce, reduce and reduce-scatter-block: one pipelined engine.
 *
 * Multi-lane (after Rabenseifner, made WAN-aware). The vector is cut into
 * pieces of about one chunk. Every piece p has one owner per cluster (for
 * allreduce and reduce: lane p mod k of the cluster; for reduce-scatter the
 * rank that receives the block in its own cluster, a lane elsewhere):
 *
 *   1. local: every rank sends its piece to its cluster's owner, which reduces
 *      the contributions in rank order into the cluster's partial P_X;
 *   2. WAN:   owners send P_X to the owners in the clusters that need the
 *      result (allreduce: all of them, an exchange; reduce: the root's
 *      cluster; reduce-scatter: the block's cluster), which combine
 *      F = P_0 op P_1 op ... in cluster order;
 *   3. local: owners send F to the ranks that need it (allreduce: every rank
 *      of the cluster; reduce: the root).
 *
 * Every piece moves on as soon as its inputs are there, so the three stages
 * of different pieces overlap (a pipeline); each rank owns 1/k of the pieces,
 * so at most k ranks per cluster send across the WAN, and the WAN carries
 * each partial once per direction: the minimum. Because every cluster's
 * owner combines the same partials in the same order, every rank ends with
 * the identical result, bit for bit, also for floating point.
 *
 *   piece:      p0    p1    p2    p3 ...
 *   stage 1   ..t0    t1    t2    t3
 *   stage 2         ..t1+d  t2+d  ...       (d: one-way WAN delay)
 *   stage 3               ..    t2+d  ...
 *
 * Non-commutative operations are not handled here (api.c sends them to the
 * MPI library, which keeps the canonical order).
 *
 * Single-lane (the grid-MPI baseline and the small-message path): the MPI
 * library's reduce inside each cluster onto one leader, the leaders combine
 * across the WAN, the MPI library's broadcast inside each cluster. */
#include "coll.h"
#include "sched.h"
#include "../common/log.h"

#include <stdlib.h>
#include <string.h>

struct owned {                  /* a piece this rank owns in its cluster */
    char *acc;                  /* my cluster's partial */
    char *final;                /* F: in the output staging area or its own slot */
    char *contrib;              /* [n_X] contribution slots, by rank index in my cluster */
    char *partial;              /* [nclusters] partial slots, by cluster */
    char *arrived;              /* [n_X] */
    int next_local;             /* contributions are reduced in rank order up to here */
    int partials_left;
    int local_done;
};

struct red {
    const struct wm_comm *wc;
    enum wm_reduce_mode mode;
    int root;
    MPI_Datatype type;
    MPI_Op op;
    struct wm_layout l;
    const char *in;             /* the whole input vector */
    int count;                  /* elements per vector (reduce-scatter: per block) */
    int64_t chunk, per_block, pieces;
    char *out;                  /* where F lands for my outputs, element 0 = out_first */
    int64_t out_first, out_count;
    int64_t *slot_of;           /* [pieces] index into owned, -1 if not mine */
    struct owned *owned;
    size_t slot_bytes;
};

/* ---- geometry ---- */

static int64_t piece_offset(const struct red *r, int64_t p)
{
    if (r->mode == WM_SCATTER_BLOCKS)
        return (p / r->per_block) * r->count + (p % r->per_block) * r->chunk;
    return p * r->chunk;
}

static int piece_count(const struct red *r, int64_t p)
{
    int64_t end = r->mode == WM_SCATTER_BLOCKS ? (p / r->per_block + 1) * (int64_t)r->count : r->count;
    int64_t left = end - piece_offset(r, p);
    return (int)(left < r->chunk ? left : r->chunk);
}

static int block_rank(const struct red *r, int64_t p) { return (int)(p / r->per_block); }

static int is_home(const struct red *r, int x, int64_t p)
{
    switch (r->mode) {
    case WM_TO_ALL: return 1;
    case WM_TO_ROOT: return x == r->wc->cluster_of[r->root];
    default: return x == r->wc->cluster_of[block_rank(r, p)];
    }
}

static int owner(const struct red *r, int x, int64_t p)
{
    const struct wm_comm *wc = r->wc;
    if (r->mode == WM_SCATTER_BLOCKS) {
        int b = block_rank(r, p);
        if (wc->cluster_of[b] == x)
            return b;
        return wm_lane_rank(wc, x, wc->index_of[b] % wm_lanes(wc, x));
    }
    return wm_lane_rank(wc, x, (int)(p % wm_lanes(wc, x)));
}

/* Does this rank need the final value of piece p? */
static int wants_final(const struct red *r, int64_t p)
{
    switch (r->mode) {
    case WM_TO_ALL: return 1;
    case WM_TO_ROOT: return r->wc->rank == r->root;
    default: return r->wc->rank == block_rank(r, p);
    }
}

static char *at(const struct red *r, const char *base, int64_t element)
{
    return (char *)base + element * r->l.extent;
}

static char *out_piece(const struct red *r, int64_t p)
{
    return at(r, r->out, piece_offset(r, p) - r->out_first);
}

/* ---- the pipeline ---- */

static int send_final(struct wm_sched *s, struct red *r, int64_t p, struct owned *o)
{
    const struct wm_comm *wc = r->wc;
    int X = wc->my_cluster, n = piece_count(r, p);
    if (r->mode == WM_TO_ALL) {
        for (int i = 0; i < wc->cluster_size[X]; i++)
            if (i != wc->my_index)
                wm_sched_send(s, o->final, n, r->type, wc->members[X][i], (int)p, NULL, NULL, 0);
    } else if (r->mode == WM_TO_ROOT && wc->rank != r->root) {
        wm_sched_send(s, o->final, n, r->type, r->root, (int)p, NULL, NULL, 0);
    }
    return s->err;
}

static int try_finish(struct wm_sched *s, struct red *r, int64_t p, struct owned *o)
{
    if (!o->local_done || o->partials_left > 0)
        return MPI_SUCCESS;
    const struct wm_comm *wc = r->wc;
    int n = piece_count(r, p), rc;
    for (int c = 0; c < wc->nclusters; c++) {
        const char *part = c == wc->my_cluster ? o->acc : o->partial + (size_t)c * r->slot_bytes;
        rc = c == 0 ? wm_copy_elements(o->final, part, n, r->type, &r->l)
                    : PMPI_Reduce_local(part, o->final, n, r->type, r->op);
        if (rc != MPI_SUCCESS)
            return rc;
    }
    return send_final(s, r, p, o);
}

static int local_progress(struct wm_sched *s, struct red *r, int64_t p, struct owned *o)
{
    const struct wm_comm *wc = r->wc;
    int nX = wc->cluster_size[wc->my_cluster], n = piece_count(r, p), rc;
    while (o->next_local < nX) {
        int i = o->next_local;
        if (i != wc->my_index) {
            if (!o->arrived[i])
                return MPI_SUCCESS;
            rc = PMPI_Reduce_local(o->contrib + (size_t)i * r->slot_bytes, o->acc, n, r->type, r->op);
            if (rc != MPI_SUCCESS)
                return rc;
        }
        o->next_local++;
    }
    if (o->local_done)
        return MPI_SUCCESS;
    o->local_done = 1;
    /* my cluster's partial is complete: send it to the clusters that need it */
    for (int x = 0; x < wc->nclusters; x++)
        if (x != wc->my_cluster && is_home(r, x, p))
            wm_sched_send(s, o->acc, n, r->type, owner(r, x, p), (int)p, NULL, NULL, 0);
    if (!is_home(r, wc->my_cluster, p))
        return s->err;
    return try_finish(s, r, p, o);
}

static int on_contribution(struct wm_sched *s, void *arg, long item)
{
    struct red *r = arg;
    int64_t p = item / r->wc->size;
    struct owned *o = &r->owned[r->slot_of[p]];
    o->arrived[item % r->wc->size] = 1;
    return local_progress(s, r, p, o);
}

static int on_partial(struct wm_sched *s, void *arg, long p)
{
    struct red *r = arg;
    struct owned *o = &r->owned[r->slot_of[p]];
    o->partials_left--;
    return try_finish(s, r, p, o);
}

int wm_reduce_multilane(const struct wm_comm *wc, const void *sendbuf, void *recvbuf, int count,
                        MPI_Datatype type, MPI_Op op, enum wm_reduce_mode mode, int root)
{
    struct red r = { .wc = wc, .mode = mode, .root = root, .type = type, .op = op, .count = count };
    int rc = wm_layout(type, count, &r.l);
    if (rc != MPI_SUCCESS || count == 0 || r.l.size == 0)
        return rc;
    int me = wc->rank, X = wc->my_cluster, nX = wc->cluster_size[X], C = wc->nclusters;
    int in_place = sendbuf == MPI_IN_PLACE;
    r.in = in_place ? recvbuf : sendbuf;
    int64_t chunk_elems = (int64_t)(wm_chunk_bytes() / (size_t)r.l.size);
    if (mode == WM_SCATTER_BLOCKS) {
        r.per_block = wm_pieces(wc, count, chunk_elems, wc->size, &r.chunk);
        r.pieces = r.per_block * wc->size;
    } else {
        r.pieces = wm_pieces(wc, count, chunk_elems, 1, &r.chunk);
        r.per_block = r.pieces;
    }

    /* where my results go: straight into recvbuf unless the input lives there */
    void *out_base = NULL;
    int has_output = mode == WM_TO_ALL || (mode == WM_TO_ROOT && me == root) || mode == WM_SCATTER_BLOCKS;
    if (has_output) {
        r.out_first = mode == WM_SCATTER_BLOCKS ? (int64_t)me * count : 0;
        r.out_count = count;
        r.out = in_place ? wm_alloc_elements(&r.l, r.out_count, &out_base) : recvbuf;
    }

    /* the pieces I own, with room for everything they receive */
    r.slot_of = malloc((size_t)r.pieces * sizeof *r.slot_of);
    if (!r.slot_of)
        wm_fatal("out of memory (reduction plan of %lld pieces)", (long long)r.pieces);
    int64_t nowned = 0;
    for (int64_t p = 0; p < r.pieces; p++)
        r.slot_of[p] = owner(&r, X, p) == me ? nowned++ : -1;
    r.slot_bytes = (size_t)(r.l.true_extent + (r.chunk - 1) * r.l.extent);
    size_t slots = (size_t)nX + (size_t)C + 2;       /* contrib[nX], partial[C], acc, final */
    r.owned = calloc((size_t)(nowned ? nowned : 1), sizeof *r.owned);
    char *slab = malloc((size_t)(nowned ? nowned : 1) * slots * r.slot_bytes);
    char *flags = calloc((size_t)(nowned ? nowned : 1) * (size_t)nX, 1);
    if (!r.owned || !slab || !flags)
        wm_fatal("out of memory: %lld owned pieces of %zu bytes for a reduction",
                 (long long)nowned, r.slot_bytes);

    struct wm_sched s;
    wm_sched_init(&s, wc);
    for (int64_t p = 0; p < r.pieces && s.err == MPI_SUCCESS; p++) {
        int n = piece_count(&r, p);
        const char *mine = at(&r, r.in, piece_offset(&r, p));
        if (r.slot_of[p] < 0) {
            if (wants_final(&r, p))
                wm_sched_recv(&s, out_piece(&r, p), n, type, owner(&r, X, p), (int)p, NULL, NULL, 0);
            wm_sched_send(&s, mine, n, type, owner(&r, X, p), (int)p, NULL, NULL, 0);
            continue;
        }
        struct owned *o = &r.owned[r.slot_of[p]];
        char *base = slab + (size_t)r.slot_of[p] * slots * r.slot_bytes - r.l.true_lb;
        o->contrib = base;
        o->partial = base + (size_t)nX * r.slot_bytes;
        o->acc = base + (size_t)(nX + C) * r.slot_bytes;
        o->final = wants_final(&r, p) ? out_piece(&r, p) : base + (size_t)(nX + C + 1) * r.slot_bytes;
        o->arrived = flags + (size_t)r.slot_of[p] * nX;
        if ((rc = wm_copy_elements(o->acc, mine, n, type, &r.l)) != MPI_SUCCESS)
            break;
        for (int i = 0; i < nX; i++)
            if (i != wc->my_index)
                wm_sched_recv(&s, o->contrib + (size_t)i * r.slot_bytes, n, type, wc->members[X][i],
                              (int)p, on_contribution, &r, (long)(p * wc->size + i));
        if (is_home(&r, X, p))
            for (int x = 0; x < C; x++)
                if (x != X) {
                    o->partials_left++;
                    wm_sched_recv(&s, o->partial + (size_t)x * r.slot_bytes, n, type, owner(&r, x, p),
                                  (int)p, on_partial, &r, (long)p);
                }
        if (nX == 1)
            local_progress(&s, &r, p, o);
    }
    int run = wm_sched_run(&s);
    if (rc == MPI_SUCCESS)
        rc = run;
    if (rc == MPI_SUCCESS && has_output && in_place)
        rc = wm_copy_elements(recvbuf, r.out, count, type, &r.l);
    free(out_base);
    free(r.slot_of);
    free(r.owned);
    free(slab);
    free(flags);
    return rc;
}

/* ---- single lane ---- */

int wm_reduce_singlelane(const struct wm_comm *wc, const void *sendbuf, void *recvbuf, int count,
                         MPI_Datatype type, MPI_Op op, enum wm_reduce_mode mode, int root)
{
    struct wm_layout l;
    int rc = wm_layout(type, count, &l);
    if (rc != MPI_SUCCESS)
        return rc;
    int me = wc->rank, leader = wc->my_index == 0;
    int64_t total = mode == WM_SCATTER_BLOCKS ? (int64_t)count * wc->size : count;
    const void *in = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    /* the whole vector's result lands in `work` at the leaders (and everywhere for allreduce) */
    void *work_base = NULL;
    char *work = (mode == WM_TO_ALL && sendbuf != MPI_IN_PLACE) ? recvbuf
               : wm_alloc_elements(&l, total, &work_base);
    if ((rc = PMPI_Reduce(in, leader ? work : NULL, (int)total, type, op, 0, wc->local)) != MPI_SUCCESS)
        goto out;
    if (mode == WM_TO_ROOT) {
        int R = wc->cluster_of[root];          /* = the rank of R's leader among the leaders */
        if (leader && (rc = PMPI_Reduce(wc->my_cluster == R ? MPI_IN_PLACE : work, work, (int)total,
                                        type, op, R, wc->leaders)) != MPI_SUCCESS)
            goto out;
        if (leader && wc->my_cluster == wc->cluster_of[root] && me != root)
            rc = PMPI_Send(work, count, type, root, 0, wc->shadow);
        else if (me == root)
            rc = leader ? wm_copy_elements(recvbuf, work, count, type, &l)
                        : PMPI_Recv(recvbuf, count, type, wc->members[wc->my_cluster][0], 0,
                                    wc->shadow, MPI_STATUS_IGNORE);
        goto out;
    }
    if (leader && (rc = PMPI_Allreduce(MPI_IN_PLACE, work, (int)total, type, op, wc->leaders)) != MPI_SUCCESS)
        goto out;
    if ((rc = PMPI_Bcast(work, (int)total, type, 0, wc->local)) != MPI_SUCCESS)
        goto out;
    if (mode == WM_SCATTER_BLOCKS)
        rc = wm_copy_elements(recvbuf, work + (int64_t)me * count * l.extent, count, type, &l);
    else if (work != recvbuf)
        rc = wm_copy_elements(recvbuf, work, count, type, &l);
out:
    free(work_base);
    return rc;
}
