/* Gather(v) and Scatter(v), cluster-aware (Gather is Gatherv with equal
 * counts and displacements r * count; Scatter likewise).
 *
 * The ranks of another cluster than the root's are cut into k groups of
 * neighbours (k lanes, WANMPI_LANES, by default 1: one group); the first
 * rank of a group is its lane, the one rank of the group that talks across
 * the WAN. Ranks of the root's cluster talk to the root directly.
 *
 *   Gather                                 Scatter (the mirror)
 *   1. every rank sends its block to its   1. the root sends each block to its
 *      lane (the root, in the root's          rank, or across the WAN to the
 *      cluster)                               rank's lane
 *   2. a lane passes each piece on to      2. a lane passes each piece on to
 *      the root as soon as it arrives         its rank as soon as it arrives
 *
 * One WAN crossing, and the WAN carries every block once. Blocks travel in
 * pieces of WANMPI_CHUNK bytes (at most `cap` per block: bigger pieces for
 * huge blocks), under the MPI's eager limit, so a lane forwards while it
 * receives and no piece waits for a rendezvous round trip across the WAN.
 * Piece q of block b has tag TAG_DATA + q between b and its lane or the
 * root, and TAG_DATA + (b's place in its group) * cap + q between a lane
 * and the root. Blocks travel as bytes of the packed representation (send
 * and receive types may differ, as MPI allows); contiguous types are not
 * packed, and the root's pieces land in (leave from) its buffer in place.
 *
 * The v-variants: only the root knows the counts. A rank of a group sends
 * its lane its block size (gather), or the root sends each lane its group's
 * sizes (scatter), as a small message beside the data: no extra step. */
#include "coll.h"
#include "sched.h"
#include "../common/log.h"
#include "../pacing/rate.h"

#include <stdlib.h>
#include <string.h>

enum { TAG_SIZES = 0, TAG_DATA = 1 };
#define MAX_PIECES 4096         /* per block; fewer if the tags would run out */

struct rooted {
    const struct wm_comm *wc;
    int scatter, root, sizes_known;
    int64_t chunk, cap;
    int64_t *len;               /* [size] bytes of block b, where this rank knows it */
    char **buf;                 /* [size] where block b lies on this rank */
    char **owned;               /* [size] what to free */
    int64_t *group_sizes;       /* scatterv, at a lane: its group's sizes, from the root */
};

static void *room(int64_t bytes)
{
    void *p = malloc((size_t)(bytes > 0 ? bytes : 1));
    if (!p)
        wm_fatal("out of memory: %lld bytes for a gather or scatter", (long long)bytes);
    return p;
}

/* ---- groups, lanes, pieces ---- */

static int lanes_of(const struct wm_comm *wc, int y)
{
    return wc->lanes > 0 ? wm_lanes(wc, y) : 1;
}

/* Index (in its cluster) of the first rank of b's group: its lane. */
static int group_start(const struct wm_comm *wc, int b)
{
    int y = wc->cluster_of[b], n = wc->cluster_size[y], k = lanes_of(wc, y);
    int64_t j = ((int64_t)(wc->index_of[b] + 1) * k - 1) / n;
    return (int)(j * n / k);
}

static int group_end(const struct wm_comm *wc, int b)
{
    int y = wc->cluster_of[b], n = wc->cluster_size[y], k = lanes_of(wc, y);
    int64_t j = ((int64_t)(wc->index_of[b] + 1) * k - 1) / n;
    return (int)((j + 1) * n / k);
}

static int remote(const struct rooted *r, int b)
{
    return r->wc->cluster_of[b] != r->wc->cluster_of[r->root];
}

/* The rank that passes block b to or from the root. */
static int via(const struct rooted *r, int b)
{
    return remote(r, b) ? r->wc->members[r->wc->cluster_of[b]][group_start(r->wc, b)] : b;
}

/* The tag of b's piece 0 between the root and via(b). */
static int wan_tag(const struct rooted *r, int b)
{
    return remote(r, b) ? TAG_DATA + (int)((r->wc->index_of[b] - group_start(r->wc, b)) * r->cap) : TAG_DATA;
}

static int64_t piece_bytes(const struct rooted *r, int64_t len)
{
    int64_t p = (len + r->cap - 1) / r->cap;
    return p > r->chunk ? p : r->chunk;
}

static int64_t pieces(const struct rooted *r, int64_t len)
{
    return (len + piece_bytes(r, len) - 1) / piece_bytes(r, len);
}

static int piece_size(const struct rooted *r, int64_t len, int64_t q)
{
    int64_t p = piece_bytes(r, len), left = len - q * p;
    return (int)(left < p ? left : p);
}

/* Sends (or receives) block b, len bytes at buf, to (from) peer in pieces with
 * tags tag + q; fn after each piece (item: b * cap + q). */
static void post_block(struct wm_sched *s, const struct rooted *r, int send, int b, char *buf, int64_t len,
                       int peer, int tag, wm_handler fn)
{
    for (int64_t q = 0; q < pieces(r, len); q++) {
        char *at = buf + q * piece_bytes(r, len);
        long item = (long)(b * r->cap + q);
        if (send)
            wm_sched_send(s, at, piece_size(r, len, q), MPI_BYTE, peer, tag + (int)q, fn, (void *)r, item);
        else
            wm_sched_recv(s, at, piece_size(r, len, q), MPI_BYTE, peer, tag + (int)q, fn, (void *)r, item);
    }
}

/* `count` elements of `type` at buf as `bytes` packed bytes at out, or back. */
static int to_bytes(const void *buf, int count, MPI_Datatype type, char *out, int64_t bytes, MPI_Comm comm)
{
    struct wm_layout l;
    int pos = 0, rc = wm_layout(type, count, &l);
    if (rc != MPI_SUCCESS || bytes == 0 || out == (const char *)buf + l.true_lb)
        return rc;
    if (l.contiguous) {
        memcpy(out, (const char *)buf + l.true_lb, (size_t)bytes);
        return MPI_SUCCESS;
    }
    return PMPI_Pack(buf, count, type, out, (int)bytes, &pos, comm);
}

static int from_bytes(const char *in, int64_t bytes, void *buf, int count, MPI_Datatype type, MPI_Comm comm)
{
    struct wm_layout l;
    int pos = 0, rc = wm_layout(type, count, &l);
    if (rc != MPI_SUCCESS || bytes == 0 || in == (const char *)buf + l.true_lb)
        return rc;
    if (l.contiguous) {
        memcpy((char *)buf + l.true_lb, in, (size_t)bytes);
        return MPI_SUCCESS;
    }
    return PMPI_Unpack(in, (int)bytes, &pos, buf, count, type, comm);
}

/* Where my own block's bytes travel from (gather) or arrive (scatter):
 * in the user's buffer if its type is contiguous, else a new one. */
static char *own_bytes(struct rooted *r, void *buf, int count, MPI_Datatype type, int64_t len)
{
    struct wm_layout l;
    if (wm_layout(type, count, &l) == MPI_SUCCESS && l.contiguous)
        return (char *)buf + l.true_lb;
    return r->owned[r->wc->rank] = room(len);
}

/* ---- a lane of another cluster than the root's ---- */

/* A piece of block b reached the lane: on to the root (gather) or to b (scatter). */
static int pass_on(struct wm_sched *s, void *arg, long item)
{
    struct rooted *r = arg;
    int b = (int)(item / r->cap);
    int64_t q = item % r->cap, p = piece_bytes(r, r->len[b]);
    int n = piece_size(r, r->len[b], q);
    if (r->scatter)
        return wm_sched_send(s, r->buf[b] + q * p, n, MPI_BYTE, b, TAG_DATA + (int)q, NULL, NULL, 0);
    return wm_sched_send(s, r->buf[b] + q * p, n, MPI_BYTE, r->root, wan_tag(r, b) + (int)q, NULL, NULL, 0);
}

/* Block b's size is known: receive its pieces (from b, or from the root), pass them on. */
static int expect_block(struct wm_sched *s, struct rooted *r, int b)
{
    r->buf[b] = r->owned[b] = room(r->len[b]);
    if (r->scatter)
        post_block(s, r, 0, b, r->buf[b], r->len[b], r->root, wan_tag(r, b), pass_on);
    else
        post_block(s, r, 0, b, r->buf[b], r->len[b], b, TAG_DATA, pass_on);
    return s->err;
}

static int size_in(struct wm_sched *s, void *arg, long item)
{
    return expect_block(s, arg, (int)item);
}

/* The group's sizes came from the root (scatterv). */
static int sizes_in(struct wm_sched *s, void *arg, long item)
{
    (void)item;
    struct rooted *r = arg;
    const struct wm_comm *wc = r->wc;
    int X = wc->my_cluster, me = wc->rank, first = group_start(wc, me);
    for (int i = first; i < group_end(wc, me); i++) {
        int b = wc->members[X][i];
        r->len[b] = r->group_sizes[i - first];
        if (b != me && expect_block(s, r, b) != MPI_SUCCESS)
            break;
    }
    return s->err;
}

/* A lane's part: the others of its group (its own block is posted like any rank's). */
static void lead(struct wm_sched *s, struct rooted *r)
{
    const struct wm_comm *wc = r->wc;
    int X = wc->my_cluster, me = wc->rank, first = group_start(wc, me), last = group_end(wc, me);
    if (r->sizes_known) {
        for (int i = first; i < last; i++)
            if (wc->members[X][i] != me) {
                r->len[wc->members[X][i]] = r->len[me];
                expect_block(s, r, wc->members[X][i]);
            }
    } else if (r->scatter) {
        r->group_sizes = room((int64_t)sizeof(int64_t) * (last - first));
        wm_sched_recv(s, r->group_sizes, last - first, MPI_INT64_T, r->root, TAG_SIZES, sizes_in, r, 0);
    } else {
        for (int i = first; i < last; i++) {
            int b = wc->members[X][i];
            if (b != me)
                wm_sched_recv(s, &r->len[b], 1, MPI_INT64_T, b, TAG_SIZES, size_in, r, b);
        }
    }
}

/* ---- the root ---- */

/* Posts the root's pieces of every other block; for scatterv, each lane's sizes first. */
static void root_posts(struct wm_sched *s, struct rooted *r, int64_t *sizes)
{
    const struct wm_comm *wc = r->wc;
    int64_t *group = sizes;                         /* the next lane's sizes (P slots in all) */
    for (int y = 0; y < wc->nclusters; y++)
        for (int i = 0; i < wc->cluster_size[y]; i++) {
            int b = wc->members[y][i];
            if (r->scatter && !r->sizes_known && remote(r, b) && group_start(wc, b) == i) {
                int n = group_end(wc, b) - i;
                for (int j = 0; j < n; j++)
                    group[j] = r->len[wc->members[y][i + j]];
                wm_sched_send(s, group, n, MPI_INT64_T, b, TAG_SIZES, NULL, NULL, 0);
                group += n;
            }
            if (b != r->root)
                post_block(s, r, r->scatter, b, r->buf[b], r->len[b], via(r, b), wan_tag(r, b), NULL);
        }
}

/* The root: `buf` (counts, displs, type) holds every rank's block. */
static int root_run(struct rooted *r, const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *buf,
                    const int *counts, const int *displs, MPI_Datatype type, void *recvbuf, int recvcount,
                    MPI_Datatype recvtype)
{
    const struct wm_comm *wc = r->wc;
    struct wm_layout l;
    int rc = wm_layout(type, 2, &l), P = wc->size, me = wc->rank;
    if (rc != MPI_SUCCESS)
        return rc;
    int packed = wm_must_pack(&l);
    int64_t *at = room(2 * (int64_t)sizeof(int64_t) * P), *sizes = at + P;
    char *data;
    wm_blocks(P, buf, counts, displs, &l, packed, at, r->len, &data);
    for (int b = 0; b < P; b++)
        r->buf[b] = data + at[b];
    if (r->scatter) {
        if (packed)
            rc = wm_pack_blocks(wc, data, at, r->len, buf, counts, displs, type, &l);
        if (rc == MPI_SUCCESS && recvbuf != MPI_IN_PLACE)
            rc = from_bytes(r->buf[me], r->len[me], recvbuf, recvcount, recvtype, wc->shadow);
    } else {
        rc = wm_own_block(wc, sendbuf, sendcount, sendtype, buf, counts, displs, type, &l, data, at, r->len,
                          packed);
    }
    if (rc == MPI_SUCCESS) {
        struct wm_sched s;
        wm_sched_init(&s, wc, 0);
        root_posts(&s, r, sizes);
        rc = wm_sched_run(&s);
    }
    if (!r->scatter && rc == MPI_SUCCESS && packed)
        rc = wm_unpack_blocks(wc, data, at, r->len, buf, counts, displs, type, &l);
    if (packed)
        free(data);
    free(at);
    return rc;
}

/* ---- every other rank ---- */

/* A gather's blocks converge on the root's NIC (and a lane's): unpaced, the
 * senders' windows overflow its switch port, and a lost tail costs a
 * retransmission timeout (2x4 testbed, 10 ms, 1 MiB: 0.25 s against 0.11 s
 * for Open MPI's own). So every sender's sockets to its receiver are paced
 * to its share of 0.95 of the receiver's NIC, by the blocks it carries (the
 * v-variants: blocks taken as equal; only the root knows their sizes), for
 * the duration of the call. Leaving a lane's WAN socket unpaced (to take up
 * what the short local flows leave once they are done) was worse: 16 MiB
 * 1.9-2.2 s against 1.5 s. Smaller gathers are not paced. */
#define PACED_GATHER_BYTES (256.0 * 1024)

static uint32_t pace_toward(const struct rooted *r, int peer, int64_t len)
{
    const struct wm_comm *wc = r->wc;
    const struct wm_settings *st = wm_settings();
    int me = wc->rank, h = wc->host_of[peer], g = group_end(wc, me) - group_start(wc, me);
    if (r->scatter || st->nic_rate <= 0 || h < 0 || h == wc->host_of[me] || (double)len * wc->size < PACED_GATHER_BYTES
        || !wm_rate_available())
        return 0;
    double share = !remote(r, me) ? 1.0 / (wc->size - 1) : peer == r->root ? (double)g / (wc->size - 1)
                                                                         : 1.0 / (g - 1);
    double rate = 0.95 * st->nic_rate / 8 * share;
    uint32_t a = wc->host_address[h];
    wm_rate_set_peer(a, (uint64_t)(rate < 1000 ? 1000 : rate));
    wm_debug(1, "gather: pace my sockets to rank %d at %.0f B/s", peer, rate);
    return a;
}

/* `buf`: my block (gather: count elements of type to send; scatter: where
 * they arrive), `len` bytes. */
static int member_run(struct rooted *r, void *buf, int count, MPI_Datatype type, int64_t len)
{
    const struct wm_comm *wc = r->wc;
    struct wm_sched s;
    int me = wc->rank, peer = remote(r, me) ? via(r, me) : r->root, rc = MPI_SUCCESS;
    char *mine = own_bytes(r, buf, count, type, len);
    r->len[me] = len;
    if (!r->scatter)
        rc = to_bytes(buf, count, type, mine, len, wc->shadow);
    if (rc != MPI_SUCCESS)
        return rc;
    uint32_t paced = pace_toward(r, peer == me ? r->root : peer, len);
    wm_sched_init(&s, wc, 0);
    if (peer == me) {                               /* a lane of another cluster */
        lead(&s, r);
        post_block(&s, r, !r->scatter, me, mine, len, r->root, wan_tag(r, me), NULL);
    } else {
        if (!r->scatter && !r->sizes_known && remote(r, me))
            wm_sched_send(&s, &r->len[me], 1, MPI_INT64_T, peer, TAG_SIZES, NULL, NULL, 0);
        post_block(&s, r, !r->scatter, me, mine, len, peer, TAG_DATA, NULL);
    }
    rc = wm_sched_run(&s);
    if (paced)
        wm_rate_set_peer(paced, UINT64_MAX);
    if (rc == MPI_SUCCESS && r->scatter)
        rc = from_bytes(mine, len, buf, count, type, wc->shadow);
    return rc;
}

static void set_up(struct rooted *r)
{
    const struct wm_comm *wc = r->wc;
    int P = wc->size, most = 1;
    for (int y = 0; y < wc->nclusters; y++)
        most = wc->cluster_size[y] > most ? wc->cluster_size[y] : most;
    r->chunk = (int64_t)wm_chunk_bytes();
    r->cap = ((int64_t)wc->tag_ub - TAG_DATA) / most;
    r->cap = r->cap < MAX_PIECES ? (r->cap > 0 ? r->cap : 1) : MAX_PIECES;
    r->len = calloc((size_t)P, sizeof *r->len);
    r->buf = calloc((size_t)P, sizeof *r->buf);
    r->owned = calloc((size_t)P, sizeof *r->owned);
    if (!r->len || !r->buf || !r->owned)
        wm_fatal("out of memory for a gather or scatter of %d ranks", P);
}

static int tear_down(struct rooted *r, int rc)
{
    for (int b = 0; b < r->wc->size; b++)
        free(r->owned[b]);
    free(r->owned);
    free(r->buf);
    free(r->len);
    free(r->group_sizes);
    return rc;
}

int wm_gatherv_run(const struct wm_comm *wc, int sizes_known, const void *sendbuf, int sendcount,
                   MPI_Datatype sendtype, void *recvbuf, const int *recvcounts, const int *displs,
                   MPI_Datatype recvtype, int root)
{
    struct rooted r = { .wc = wc, .scatter = 0, .root = root, .sizes_known = sizes_known };
    int rc, size;
    set_up(&r);
    if (wc->rank == root)
        rc = root_run(&r, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, NULL, 0,
                      MPI_DATATYPE_NULL);
    else if ((rc = PMPI_Type_size(sendtype, &size)) == MPI_SUCCESS)
        rc = member_run(&r, (void *)sendbuf, sendcount, sendtype, (int64_t)sendcount * size);
    return tear_down(&r, rc);
}

int wm_scatterv_run(const struct wm_comm *wc, int sizes_known, const void *sendbuf, const int *sendcounts,
                    const int *displs, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                    int root)
{
    struct rooted r = { .wc = wc, .scatter = 1, .root = root, .sizes_known = sizes_known };
    int rc, size;
    set_up(&r);
    if (wc->rank == root)
        rc = root_run(&r, NULL, 0, MPI_DATATYPE_NULL, (void *)sendbuf, sendcounts, displs, sendtype, recvbuf,
                      recvcount, recvtype);
    else if ((rc = PMPI_Type_size(recvtype, &size)) == MPI_SUCCESS)
        rc = member_run(&r, recvbuf, recvcount, recvtype, (int64_t)recvcount * size);
    return tear_down(&r, rc);
}
