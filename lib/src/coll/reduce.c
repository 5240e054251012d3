/* Allreduce, reduce and reduce-scatter-block: one pipelined engine.
 *
 * Multi-lane (after Rabenseifner, made WAN-aware). The vector is cut into
 * pieces of about one chunk. Every piece p has one owner per cluster (for
 * allreduce and reduce: lane p mod k of the cluster, with trees the lanes in
 * the order wm_interleave takes them, so that consecutive pieces' trees have
 * different inner ranks; for reduce-scatter the rank that receives the block
 * in its own cluster, a lane elsewhere):
 *
 *   1. local reduce: the piece travels a chain through the cluster in ring
 *      order, starting after the owner and ending at it; every rank adds its
 *      own contribution and passes it on, so the owner ends with the
 *      cluster's partial P_X;
 *   2. WAN: owners send P_X to the owners in the clusters that need the
 *      result (allreduce: all of them, an exchange; reduce: the root's
 *      cluster; reduce-scatter: the block's cluster), which combine
 *      F = P_0 op P_1 op ... in cluster order. Allreduce over three or more
 *      clusters is "homed" instead: piece p is combined only in its home
 *      cluster p mod C, whose owner sends F to the other clusters' owners.
 *      An exchange would make every cluster send and receive (C-1) M across
 *      the WAN and every owner send its partial C-1 times; homed, a cluster
 *      sends 2 M (C-1)/C, and every owner sends about 2 (C-1)/C of its
 *      share (the owner of piece p in cluster x is lane (p / C) mod k_x, so
 *      every lane owns pieces of every home alike). It costs one more WAN
 *      delay;
 *   3. local distribution: allreduce: F travels the ring from the owner to
 *      every rank of the cluster; reduce: the owner sends F to the root.
 *
 * Every rank receives its chain traffic from one neighbour only (its
 * predecessor in the ring), so no switch port sees an incast, and every
 * rank sends about 2 M (P-1)/P in total when all ranks are lanes: the lower
 * bound. Pieces move on as soon as their inputs are there, so the stages of
 * different pieces overlap (a pipeline); in the allreduce a rank's sends
 * inside its cluster pass a window (sendq.h, WANMPI_WINDOW), oldest piece
 * first, so the pieces it starts do not queue ahead of the partials and
 * results passing through. The WAN carries each partial once per
 * direction: the minimum. Because every cluster's owner combines the same
 * partials in the same order, every rank ends with the identical result,
 * bit for bit, also for floating point.
 *
 *   piece:        p0     p1     p2 ...
 *   ring (local)  t0-t2  t1-t3  t2-t4
 *   WAN                  t3+d   t4+d         (d: one-way WAN delay)
 *   ring (final)              ..t4+d ...
 *
 * Non-commutative operations are not handled here (api.c sends them to the
 * MPI library, which keeps the canonical order).
 *
 * Single-lane (the grid-MPI baseline and the small-message path): the MPI
 * library's reduce inside each cluster onto one leader, the leaders combine
 * across the WAN, the MPI library's broadcast inside each cluster. */
#include "coll.h"
#include "sched.h"
#include "sendq.h"
#include "../common/log.h"
#include "../common/settings.h"
#include "../pacing/rate.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

struct piece {                  /* what this rank keeps for one piece */
    char *slot;                 /* the partial received from my ring predecessor (first child); the owner's P_X */
    char *extra;                /* a tree's: the partials of my other children */
    int kids_left;              /* partials still to come from my cluster */
    char *partial;              /* owner: [nclusters] partials from the other clusters */
    char *final;                /* owner: F, in the output staging area or its own slot */
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
    int count;                  /* elements per vector (reduce-scatter: the whole vector's) */
    int64_t chunk, pieces;
    /* reduce-scatter: block b (rank b's) starts at element block_first[b]
     * and is cut into pieces first_piece[b] .. first_piece[b + 1] - 1;
     * piece p belongs to block piece_block[p] */
    int64_t *block_first, *first_piece;
    int *piece_block;
    char *out;                  /* where F lands for my outputs, element 0 = out_first */
    int64_t out_first, out_count;
    struct piece *piece;        /* [pieces] */
    size_t slot_bytes;
    int homed;                  /* allreduce over 3+ clusters: piece p combined in cluster p mod C only */
    int fan;                    /* 1: every piece's ring; more: its tree (tree.c) rooted at the owner */
    struct wm_sendq lan;        /* my sends inside my cluster, oldest piece first */
};

#define MAX_KIDS 16             /* the largest fan-out (WANMPI_FAN) */

/* tags: two kinds of message per piece */
#define PARTIAL_TAG(p) ((int)(2 * (p)))
#define FINAL_TAG(p) ((int)(2 * (p) + 1))

/* ---- geometry ---- */

static int block_rank(const struct red *r, int64_t p) { return r->piece_block[p]; }

static int64_t piece_offset(const struct red *r, int64_t p)
{
    if (r->mode == WM_SCATTER_BLOCKS) {
        int b = block_rank(r, p);
        return r->block_first[b] + (p - r->first_piece[b]) * r->chunk;
    }
    return p * r->chunk;
}

static int piece_count(const struct red *r, int64_t p)
{
    int64_t end = r->mode == WM_SCATTER_BLOCKS ? r->block_first[block_rank(r, p) + 1] : r->count;
    int64_t left = end - piece_offset(r, p);
    return (int)(left < r->chunk ? left : r->chunk);
}

static int is_home(const struct red *r, int x, int64_t p)
{
    switch (r->mode) {
    case WM_TO_ALL: return !r->homed || x == (int)(p % r->wc->nclusters);
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
    int64_t turn = r->homed ? p / wc->nclusters : p;
    int lanes = wm_lanes(wc, x), lane = (int)(turn % lanes);
    return wm_lane_rank(wc, x, r->fan > 1 ? wm_interleave(lane, lanes, r->fan) : lane);
}

/* Piece p's ways through my cluster: where my partial goes (`up`, -1: I
 * own the piece), where partials come from (`kids`), where F comes from
 * (`from_final`, -1 at the owner) and goes on to (`next`). The ring: a chain
 * from the rank after the owner round to it, F on round the same way from
 * the owner; a tree: partials up the tree to the owner at its root, F down. */
struct ways {
    int up, from_final, nkids, nnext;
    int kids[MAX_KIDS], next[MAX_KIDS];
};

static void ways(const struct red *r, int64_t p, struct ways *w)
{
    const struct wm_comm *wc = r->wc;
    int X = wc->my_cluster, n = wc->cluster_size[X], io = wc->index_of[owner(r, X, p)];
    int t = (wc->my_index - io + n) % n;           /* 0: the owner */
#define AT(pos) (wc->members[X][(io + (pos)) % n])
    w->nkids = w->nnext = 0;
    if (r->fan <= 1) {                              /* ring position j = t - 1 (mod n): the owner is n - 1 */
        int j = (t + n - 1) % n;
        w->up = j == n - 1 ? -1 : AT(j + 2);
        w->from_final = j == n - 1 ? -1 : AT(j);
        if (j > 0)
            w->kids[w->nkids++] = AT(j);
        if (n > 1 && (j == n - 1 || j < n - 2))
            w->next[w->nnext++] = AT(j + 2);
    } else {
        int first, k = wm_tree_children(t, n, r->fan, &first);
        w->up = w->from_final = t == 0 ? -1 : AT(wm_tree_parent(t, r->fan));
        for (int i = 0; i < k; i++)
            w->kids[w->nkids++] = w->next[w->nnext++] = AT(first + i);
    }
#undef AT
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

static const char *in_piece(const struct red *r, int64_t p)
{
    return at(r, r->in, piece_offset(r, p));
}

/* ---- the pipeline ---- */

/* F of piece p (at `final`) on to my successor in the ring or my children. */
static int send_final(struct wm_sched *s, struct red *r, int64_t p, const char *final)
{
    struct ways w;
    ways(r, p, &w);
    for (int i = 0; i < w.nnext; i++)
        wm_sendq_send(s, &r->lan, final, piece_count(r, p), r->type, w.next[i], FINAL_TAG(p), (long)p);
    return s->err;
}

static int try_finish(struct wm_sched *s, struct red *r, int64_t p)
{
    struct piece *pc = &r->piece[p];
    if (!pc->local_done || pc->partials_left > 0)
        return MPI_SUCCESS;
    const struct wm_comm *wc = r->wc;
    int n = piece_count(r, p), rc;
    for (int c = 0; c < wc->nclusters; c++) {
        const char *part = c == wc->my_cluster ? pc->slot : pc->partial + (size_t)c * r->slot_bytes;
        rc = c == 0 ? wm_copy_elements(pc->final, part, n, r->type, &r->l)
                    : PMPI_Reduce_local(part, pc->final, n, r->type, r->op);
        if (rc != MPI_SUCCESS)
            return rc;
    }
    if (r->homed)
        for (int x = 0; x < wc->nclusters; x++)
            if (x != wc->my_cluster)
                wm_sched_send(s, pc->final, n, r->type, owner(r, x, p), FINAL_TAG(p), NULL, NULL, 0);
    if (r->mode == WM_TO_ALL)
        send_final(s, r, p, pc->final);
    else if (r->mode == WM_TO_ROOT && wc->rank != r->root)
        wm_sendq_send(s, &r->lan, pc->final, n, r->type, r->root, FINAL_TAG(p), (long)p);
    return s->err;
}

/* The owner has its cluster's partial: send it to the clusters that need it. */
static int partial_ready(struct wm_sched *s, struct red *r, int64_t p)
{
    const struct wm_comm *wc = r->wc;
    struct piece *pc = &r->piece[p];
    pc->local_done = 1;
    for (int x = 0; x < wc->nclusters; x++)
        if (x != wc->my_cluster && is_home(r, x, p))
            wm_sched_send(s, pc->slot, piece_count(r, p), r->type, owner(r, x, p), PARTIAL_TAG(p),
                          NULL, NULL, 0);
    return is_home(r, wc->my_cluster, p) ? try_finish(s, r, p) : s->err;
}

/* The partials of my ring predecessor or tree children are all here: add
 * theirs and mine, pass the sum on (or, the owner, across the WAN). */
static int on_kid_partial(struct wm_sched *s, void *arg, long p)
{
    struct red *r = arg;
    struct piece *pc = &r->piece[p];
    if (--pc->kids_left > 0)
        return MPI_SUCCESS;
    struct ways w;
    ways(r, p, &w);
    int n = piece_count(r, p), rc = MPI_SUCCESS;
    for (int i = 1; i < w.nkids && rc == MPI_SUCCESS; i++)
        rc = PMPI_Reduce_local(pc->extra + (size_t)(i - 1) * r->slot_bytes, pc->slot, n, r->type, r->op);
    if (rc == MPI_SUCCESS)
        rc = PMPI_Reduce_local(in_piece(r, p), pc->slot, n, r->type, r->op);
    if (rc != MPI_SUCCESS)
        return rc;
    if (w.up < 0)
        return partial_ready(s, r, p);
    return wm_sendq_send(s, &r->lan, pc->slot, n, r->type, w.up, PARTIAL_TAG(p), (long)p);
}

static int on_partial(struct wm_sched *s, void *arg, long p)
{
    struct red *r = arg;
    r->piece[p].partials_left--;
    return try_finish(s, r, p);
}

/* F arrived from the piece's home cluster (homed allreduce, at the owner):
 * start it round my cluster. */
static int on_home_final(struct wm_sched *s, void *arg, long p)
{
    return send_final(s, arg, p, out_piece(arg, p));
}

/* F arrived from my ring predecessor or tree parent: pass it on (allreduce). */
static int on_final(struct wm_sched *s, void *arg, long p)
{
    struct red *r = arg;
    return r->mode == WM_TO_ALL ? send_final(s, r, p, out_piece(r, p)) : MPI_SUCCESS;
}

/* Room for the pieces: a slot for every piece (what my ring predecessor or
 * first tree child sends); a tree's inner rank also one per further child;
 * owners also C partials and F. Returns the slab (to free), its first slot
 * at `*next`. */
static char *allocate_slots(struct red *r, char **next)
{
    const struct wm_comm *wc = r->wc;
    r->slot_bytes = (size_t)(r->l.true_extent + (r->chunk - 1) * r->l.extent);
    r->piece = calloc((size_t)r->pieces, sizeof *r->piece);
    size_t slots = (size_t)r->pieces;
    for (int64_t p = 0; p < r->pieces; p++) {
        struct ways w;
        ways(r, p, &w);
        slots += (w.up < 0 ? (size_t)wc->nclusters + 1 : 0) + (w.nkids > 1 ? (size_t)w.nkids - 1 : 0);
    }
    char *slab = malloc(slots * r->slot_bytes);
    if (!r->piece || !slab)
        wm_fatal("out of memory: %zu slots of %zu bytes for a reduction", slots, r->slot_bytes);
    *next = slab - r->l.true_lb;
    return slab;
}

/* Posts piece p's receives and its first step through my cluster; takes its
 * slots from `*next`. */
static int post_piece(struct wm_sched *s, struct red *r, int64_t p, char **next)
{
    const struct wm_comm *wc = r->wc;
    int X = wc->my_cluster, nX = wc->cluster_size[X], C = wc->nclusters;
    struct piece *pc = &r->piece[p];
    struct ways w;
    ways(r, p, &w);
    int n = piece_count(r, p), is_owner = w.up < 0;
    pc->slot = *next;
    *next += r->slot_bytes;
    if (is_owner) {
        pc->partial = *next;
        *next += (size_t)C * r->slot_bytes;
        pc->final = wants_final(r, p) ? out_piece(r, p) : *next;
        *next += r->slot_bytes;
        if (is_home(r, X, p)) {
            for (int x = 0; x < C; x++)
                if (x != X) {
                    pc->partials_left++;
                    wm_sched_recv(s, pc->partial + (size_t)x * r->slot_bytes, n, r->type, owner(r, x, p),
                                  PARTIAL_TAG(p), on_partial, r, (long)p);
                }
        } else if (r->homed) {
            int home = (int)(p % C);
            wm_sched_recv(s, pc->final, n, r->type, owner(r, home, p), FINAL_TAG(p), on_home_final, r,
                          (long)p);
        }
    } else if (wants_final(r, p)) {
        int from = r->mode == WM_TO_ALL ? w.from_final : owner(r, X, p);
        wm_sched_recv(s, out_piece(r, p), n, r->type, from, FINAL_TAG(p), on_final, r, (long)p);
    }
    if (nX == 1) {                          /* alone in my cluster: my input is the partial */
        int rc = wm_copy_elements(pc->slot, in_piece(r, p), n, r->type, &r->l);
        return rc == MPI_SUCCESS ? partial_ready(s, r, p) : rc;
    }
    if (w.nkids == 0)                       /* head of the ring, leaf of the tree: start it */
        return wm_sendq_send(s, &r->lan, in_piece(r, p), n, r->type, w.up, PARTIAL_TAG(p), (long)p);
    pc->extra = *next;
    *next += (size_t)(w.nkids - 1) * r->slot_bytes;
    pc->kids_left = w.nkids;
    for (int i = 0; i < w.nkids; i++)
        wm_sched_recv(s, i == 0 ? pc->slot : pc->extra + (size_t)(i - 1) * r->slot_bytes, n, r->type, w.kids[i],
                      PARTIAL_TAG(p), on_kid_partial, r, (long)p);
    return MPI_SUCCESS;
}

/* ---- pacing: the ring and the WAN share a receiver's NIC ---- */

struct red_pacing {
    int set;
    uint64_t local_before;
    uint32_t *hosts;            /* hosts paced on their own, to restore */
    int nhosts;
};

/* Smaller allreduces are not paced. 2x4 testbed, 10 ms, 3 runs each, paced /
 * unpaced: 256 KiB 0.065 / 0.062-0.064 s (Open MPI), 1 MiB 0.183-0.189 /
 * 0.194-0.213 s; both MPIs alike. */
#define PACED_ALLREDUCE_BYTES (512.0 * 1024)

/* What crosses the WAN, from the owners of every piece (the same on every
 * rank, no communication): bytes my cluster sends to each cluster
 * (`to_cluster`), this rank sends to each rank (`from_me`), and each rank
 * receives across the WAN in all (`wan_in`). */
static void wan_volumes(const struct red *r, double *to_cluster, double *from_me, double *wan_in)
{
    const struct wm_comm *wc = r->wc;
    int X = wc->my_cluster, C = wc->nclusters;
    for (int64_t p = 0; p < r->pieces; p++) {
        double bytes = (double)piece_count(r, p) * r->l.size;
        int home = (int)(p % C);
        for (int y = 0; y < C; y++)
            for (int x = 0; x < C; x++) {
                /* y's partial to every home but y; a home's result to every other cluster */
                if (x == y || !(is_home(r, x, p) || (r->homed && home == y)))
                    continue;
                int to = owner(r, x, p);
                wan_in[to] += bytes;
                if (y != X)
                    continue;
                to_cluster[x] += bytes;
                if (owner(r, X, p) == wc->rank)
                    from_me[to] += bytes;
            }
    }
}

/* What the paced flows into one receiver may take together, of 0.95 NIC:
 * the ring and the WAN flows are not all at their rate all the time. */
#define OVERCOMMIT 1.15
/* The ring gets this times its share by volume. Three-cluster testbed at a
 * quarter of its rates, 4 MiB, 3 runs each: 1.0: 2.85-2.87 s, 1.05:
 * 2.77-2.81, 1.1: 2.69-2.78, 1.15: 2.86-2.87, 1.2: 3.18-3.19 (the WAN
 * left too little). 2x4 at MTU 9000, 4 MiB: 1.06-1.07x the bound against
 * 1.16-1.17x. At full rates, where the two cores are saturated: 4 MiB the
 * same within the runs' spread, 2x4 at 64 MiB 3 % slower (1.24-1.27x
 * against 1.19-1.23x; docs/benchmarks.md). */
#define RING_FACTOR 1.1

/* The ring's rate in cluster x, B/s: RING_FACTOR times its share of 0.95
 * NIC by volume. A rank receives the ring's 2 (n-1)/n M and the WAN's
 * M (C-1)/n (homed: 2 M (C-1)/(C n)); `*wan_share` gets the WAN's share of
 * the two. */
static double ring_rate(const struct red *r, int x, double nic, double *wan_share)
{
    int n = r->wc->cluster_size[x], C = r->wc->nclusters;
    double ring = 2.0 * (n - 1) / n, wan = (r->homed ? 2.0 * (C - 1) / C : (double)(C - 1)) / n;
    *wan_share = wan / (ring + wan);
    double lambda = RING_FACTOR * 0.95 * nic * ring / (ring + wan);
    return lambda < 0.95 * nic ? lambda : 0.95 * nic;
}

/* My WAN sockets. What all WAN sockets into one receiver may take together:
 * twice their share of its NIC by volume, so that the partials cross while
 * the ring's reduce phase runs and the finals are not left waiting (2x4
 * testbed: WAN at its share by volume 0.86 s, at twice 0.72 s; unpaced
 * 0.75-0.79 s; docs/benchmarks.md), but with the ring at most OVERCOMMIT x
 * 0.95 of the NIC, and alone (a receiver without a ring) at most 0.95. That
 * budget is split among the sockets into the receiver by the bytes they
 * carry; each socket also stays within its share of the link to that
 * cluster by volume, 0.95 B v_socket / V_cluster (WANMPI_WAN_RATES). With
 * two clusters every receiver has one WAN socket, at 0.2 NIC on the 2x4
 * testbed. Over three clusters of unequal size a receiver has up to six
 * (homed: every owner of a cluster talks to several owners of another):
 * a rate per socket let a node of the two-node cluster receive 2.1 x its
 * NIC with its ring, and its link 1.5 x its rate (three-cluster testbed at
 * a quarter of the rates: 350 drops on that link, 0.7 % of all segments
 * retransmitted, 1.35x the bound). */
static void pace_wan_hosts(struct red_pacing *pc, const struct red *r, double nic)
{
    const struct wm_comm *wc = r->wc;
    int C = wc->nclusters, H = wc->nhosts;
    double *to_cluster = calloc((size_t)C, sizeof *to_cluster);
    double *from_me = calloc((size_t)wc->size * 2, sizeof *from_me), *wan_in = from_me + wc->size;
    double *rate = malloc((size_t)(H ? H : 1) * sizeof *rate);
    int *cluster = malloc((size_t)(H ? H : 1) * sizeof *cluster);
    pc->hosts = malloc((size_t)(H ? H : 1) * sizeof *pc->hosts);
    if (!to_cluster || !from_me || !rate || !cluster || !pc->hosts) {
        free(pc->hosts);
        pc->hosts = NULL;
        goto out;
    }
    wan_volumes(r, to_cluster, from_me, wan_in);
    for (int h = 0; h < H; h++)
        rate[h] = -1;
    /* the sockets to a host: the smallest rate any of its ranks allows, one pass */
    for (int q = 0; q < wc->size; q++) {
        int h = wc->host_of[q], x = wc->cluster_of[q];
        if (from_me[q] <= 0 || h < 0)
            continue;
        double wan_share, ring = ring_rate(r, x, nic, &wan_share);
        double budget = 2 * 0.95 * nic * wan_share;
        if (budget > OVERCOMMIT * 0.95 * nic - ring)
            budget = OVERCOMMIT * 0.95 * nic - ring;
        if (budget > 0.95 * nic)
            budget = 0.95 * nic;
        double mine = budget * from_me[q] / wan_in[q];
        double link = 0.95 * wm_link_rate(wc, x) * from_me[q] / to_cluster[x];
        if (link > 0 && link < mine)
            mine = link;
        if (rate[h] < 0)
            cluster[h] = x;
        if (rate[h] < 0 || mine < rate[h])
            rate[h] = mine;
    }
    for (int h = 0; h < H; h++) {
        if (rate[h] < 0)
            continue;
        uint32_t a = wc->host_address[h];
        pc->hosts[pc->nhosts++] = a;
        wm_rate_set_peer(a, (uint64_t)(rate[h] < 1000 ? 1000 : rate[h]));
        if (WM_DEBUG_ON(1)) {
            char host[INET_ADDRSTRLEN];
            inet_ntop(AF_INET, &a, host, sizeof host);
            wm_debug(1, "allreduce: pace my sockets to %s (cluster %s) at %.0f B/s", host,
                     wm_cluster_name(wc->cluster_global[cluster[h]]), rate[h]);
        }
    }
out:
    free(to_cluster);
    free(from_me);
    free(rate);
    free(cluster);
}

/* Allreduce (WANMPI_ALLREDUCE_RATE=auto): a rank receives the ring from its
 * predecessor and the WAN flows at the same time, into one switch port.
 * Unpaced, the ring's window and the WAN's bursts overflow it (2x4 testbed,
 * 4 MiB: 1 % of all segments retransmitted). Paced, the ring socket gets
 * its share of the NIC by volume (ring_rate) and the WAN sockets what
 * pace_wan_hosts gives them. The rates are restored when the call returns. */
static void pace_allreduce(struct red_pacing *pc, const struct red *r)
{
    const struct wm_comm *wc = r->wc;
    const struct wm_settings *st = wm_settings();
    pc->set = 0;
    pc->local_before = 0;
    pc->hosts = NULL;
    pc->nhosts = 0;
    int n = wc->cluster_size[wc->my_cluster], C = wc->nclusters;
    if (st->allreduce_rate != WM_RATE_AUTO || r->mode != WM_TO_ALL || n < 2 || st->nic_rate <= 0 || r->fan > 1
        || (double)r->count * r->l.size < PACED_ALLREDUCE_BYTES || !wm_rate_available())
        return;
    double nic = st->nic_rate / 8, wan_share, lambda = ring_rate(r, wc->my_cluster, nic, &wan_share);
    pc->local_before = wm_rate_local();
    wm_rate_set_local((uint64_t)lambda);
    /* sockets to ranks of unknown address: lambda/(n-1), within an equal share of the link */
    double rho = lambda / (n - 1);
    if (rho > nic / (2.0 * (C - 1)))
        rho = nic / (2.0 * (C - 1));
    for (int x = 0; x < C; x++) {
        if (x == wc->my_cluster)
            continue;
        double wide = 0.95 * wm_link_rate(wc, x) / n;
        wm_rate_set_cluster(wm_cluster_name(wc->cluster_global[x]), (uint64_t)(wide > 0 && wide < rho ? wide : rho));
    }
    pace_wan_hosts(pc, r, nic);
    pc->set = 1;
    wm_debug(1, "allreduce: pace the ring at %.0f B/s", lambda);
}

static void unpace_allreduce(struct red_pacing *pc, const struct wm_comm *wc)
{
    if (!pc->set)
        return;
    for (int h = 0; h < pc->nhosts; h++)
        wm_rate_set_peer(pc->hosts[h], UINT64_MAX);
    free(pc->hosts);
    wm_rate_set_local(pc->local_before);
    for (int x = 0; x < wc->nclusters; x++)
        if (x != wc->my_cluster)
            wm_rate_set_cluster(wm_cluster_name(wc->cluster_global[x]), UINT64_MAX);
}

/* One multi-lane reduction in flight: the engine's state and what its end
 * restores, copies out and frees. */
struct red_run {
    struct red r;
    struct red_pacing pacing;
    char *slab;
    void *out_base;             /* the staging area of an in-place call */
    void *recvbuf;
};

static int reduce_end(void *state, int rc)
{
    struct red_run *run = state;
    struct red *r = &run->r;
    unpace_allreduce(&run->pacing, r->wc);
    wm_sendq_free(&r->lan);
    if (rc == MPI_SUCCESS && run->out_base)
        rc = wm_copy_elements(run->recvbuf, r->out, (int)r->out_count, r->type, &r->l);
    free(run->out_base);
    free(r->block_first);
    free(r->piece_block);
    free(r->piece);
    free(run->slab);
    free(run);
    return rc;
}

/* Reduce-scatter: the blocks and their pieces (struct red). Equal blocks
 * (`counts` NULL: `count` each) are cut alike, in chunks that keep every
 * block's pieces within the tags; irregular ones in chunks of one size for
 * the whole vector, so a small block is one small piece and a large one
 * many. The geometry is the same on every rank (the counts are). */
static void cut_blocks(struct red *r, const int *counts, int count, int64_t chunk_elems)
{
    const struct wm_comm *wc = r->wc;
    int P = wc->size;
    r->block_first = malloc(sizeof(int64_t) * (2 * (size_t)P + 2));
    if (!r->block_first)
        wm_fatal("out of memory for a reduce-scatter of %d ranks", P);
    r->first_piece = r->block_first + P + 1;
    r->block_first[0] = 0;
    for (int b = 0; b < P; b++)
        r->block_first[b + 1] = r->block_first[b] + (counts ? counts[b] : count);
    int64_t total = r->block_first[P], limit = (wc->tag_ub < (1 << 20) ? wc->tag_ub : (1 << 20)) / 2;
    if (!counts)
        wm_pieces(wc, count, chunk_elems, 2 * (int64_t)P, &r->chunk);
    else                            /* a piece per block more at most than the whole vector's */
        for (r->chunk = chunk_elems < 1 ? 1 : chunk_elems; (total + r->chunk - 1) / r->chunk + P > limit && r->chunk < total;)
            r->chunk *= 2;
    r->first_piece[0] = 0;
    for (int b = 0; b < P; b++) {
        int64_t n = r->block_first[b + 1] - r->block_first[b];
        r->first_piece[b + 1] = r->first_piece[b] + (n + r->chunk - 1) / r->chunk;
    }
    r->pieces = r->first_piece[P];
    r->piece_block = malloc(sizeof(int) * (size_t)(r->pieces ? r->pieces : 1));
    if (!r->piece_block)
        wm_fatal("out of memory for a reduce-scatter of %lld pieces", (long long)r->pieces);
    for (int b = 0; b < P; b++)
        for (int64_t p = r->first_piece[b]; p < r->first_piece[b + 1]; p++)
            r->piece_block[p] = b;
}

/* Homed or exchange, for an allreduce of `bytes` over three or more clusters
 * (above): homed saves WAN bytes and owners' sends for one more WAN delay.
 * With b the NIC rate, W the narrowest WAN link, d the one-way delay and n
 * the ranks of the smallest cluster, each path's time is about
 *   exchange  max(2M/b + (C-1) M/(n b), (C-1) M/W) + d
 *   homed     max(2M/b + 2 (C-1) M/(C n b), 2 (C-1) M/(C W)) + 2d
 * Homed unless the exchange's time is under 0.9 of it (the exchange's
 * incast, C-1 partials into every owner at once, is not in the model: on the
 * three-cluster testbed, 256 KiB, a 4 % gain by the model was a 26 % loss;
 * in SMPI, 3 x 8 ranks at 10 Gbit/s, 16 MiB, the model's 18 % was 13 %, and
 * 0.8 lost it), and when the rates or the delay are unknown. */
static int homed_is_faster(const struct wm_comm *wc, int64_t bytes)
{
    int C = wc->nclusters;
    double m, w, d;
    if (C < 3)
        return 0;
    if (!wm_link_times(bytes, &m, &w, &d) || w <= 0)
        return 1;
    int n = wc->cluster_size[0];
    for (int x = 1; x < C; x++)
        if (wc->cluster_size[x] < n)
            n = wc->cluster_size[x];
    double ex_nic = 2 * m + (C - 1) * m / n, ex_wan = (C - 1) * w;
    double ho_nic = 2 * m + 2.0 * (C - 1) * m / (C * n), ho_wan = 2.0 * (C - 1) * w / C;
    double exchange = (ex_nic > ex_wan ? ex_nic : ex_wan) + d, homed = (ho_nic > ho_wan ? ho_nic : ho_wan) + 2 * d;
    return exchange >= 0.9 * homed;
}

int wm_reduce_multilane(struct wm_sched *s, const struct wm_comm *wc, const void *sendbuf, void *recvbuf,
                        int count, const int *counts, MPI_Datatype type, MPI_Op op, enum wm_reduce_mode mode,
                        int root)
{
    struct red_run *run = calloc(1, sizeof *run);
    if (!run)
        wm_fatal("out of memory (reduction)");
    struct red *r = &run->r;
    int64_t total = count;
    if (mode == WM_SCATTER_BLOCKS) {
        total = 0;
        for (int b = 0; b < wc->size; b++)
            total += counts ? counts[b] : count;
    }
    *r = (struct red){ .wc = wc, .mode = mode, .root = root, .type = type, .op = op, .count = (int)total };
    run->recvbuf = recvbuf;
    int rc = wm_layout(type, (int)total, &r->l);
    r->homed = mode == WM_TO_ALL && rc == MPI_SUCCESS && homed_is_faster(wc, total * (int64_t)r->l.size);
    if (mode == WM_TO_ALL && wc->nclusters >= 3 && rc == MPI_SUCCESS)
        wm_debug(2, "allreduce: %lld bytes, %s", (long long)(total * (int64_t)r->l.size),
                 r->homed ? "homed" : "exchange");
    if (rc != MPI_SUCCESS || total == 0 || r->l.size == 0) {
        free(run);
        return wm_sched_fail(s, rc);
    }
    int me = wc->rank;
    int in_place = sendbuf == MPI_IN_PLACE;
    r->in = in_place ? recvbuf : sendbuf;
    /* each cluster's chain fills before the WAN and the final ring run (wm_fill_chunk) */
    int64_t chunk_elems = wm_fill_chunk(total * (int64_t)r->l.size, wc->size, 16) / (int64_t)r->l.size;
    if (mode == WM_SCATTER_BLOCKS)
        cut_blocks(r, counts, count, chunk_elems);
    else
        r->pieces = wm_pieces(wc, total, chunk_elems, 2, &r->chunk);
    int widest = 1;
    for (int x = 0; x < wc->nclusters; x++)
        if (wc->cluster_size[x] > widest)
            widest = wc->cluster_size[x];
    /* every rank owns pieces (a tree root each) unless WANMPI_LANES leaves some
     * out; an allreduce moves the vector through its cluster twice (partials
     * up, the result down) */
    int64_t bytes = total * (int64_t)r->l.size;
    r->fan = wm_tree_fan(bytes, mode == WM_TO_ALL ? 2 : 1, r->chunk * (int64_t)r->l.size, widest,
                         wc->lanes == 0 || wc->lanes >= widest);
    wm_debug(2, "reduction: %lld bytes, fan-out %d", (long long)bytes, r->fan);

    /* where my results go: straight into recvbuf unless the input lives there */
    int has_output = mode == WM_TO_ALL || (mode == WM_TO_ROOT && me == root) || mode == WM_SCATTER_BLOCKS;
    if (has_output) {
        r->out_first = mode == WM_SCATTER_BLOCKS ? r->block_first[me] : 0;
        r->out_count = mode == WM_SCATTER_BLOCKS ? r->block_first[me + 1] - r->block_first[me] : total;
        r->out = in_place ? wm_alloc_elements(&r->l, r->out_count, &run->out_base) : recvbuf;
    }
    char *next;
    run->slab = allocate_slots(r, &next);

    /* An outstanding nonblocking reduction is not paced: the rates are set
     * per call and another call may run meanwhile (docs/nonblocking.md). */
    if (s->tag_base == 0)
        pace_allreduce(&run->pacing, r);
    /* the allreduce's only: reduce 4 MiB on the testbed was 0.97-1.10x as
     * fast with it, in the noise; reduce-scatter not measured apart */
    wm_sendq_init(&r->lan, mode == WM_TO_ALL ? wm_window_pieces(r->chunk * (long long)r->l.size) : 0);
    wm_debug(1, "reduction: window %d pieces of %lld bytes", r->lan.window, (long long)(r->chunk * r->l.size));
    wm_sched_at_end(s, reduce_end, run);
    for (int64_t p = 0; p < r->pieces && s->err == MPI_SUCCESS; p++)
        wm_sched_fail(s, post_piece(s, r, p, &next));
    return s->err;
}

/* ---- single lane ---- */

int wm_reduce_singlelane(const struct wm_comm *wc, const void *sendbuf, void *recvbuf, int count,
                         const int *counts, MPI_Datatype type, MPI_Op op, enum wm_reduce_mode mode, int root)
{
    int me = wc->rank, leader = wc->my_index == 0;
    int64_t total = count, mine_first = 0;      /* reduce-scatter: my block's first element */
    if (mode == WM_SCATTER_BLOCKS) {
        total = 0;
        for (int b = 0; b < wc->size; b++) {
            if (b == me)
                mine_first = total;
            total += counts ? counts[b] : count;
        }
    }
    /* the layout of the whole vector: a type with holes is contiguous for one element only */
    struct wm_layout l;
    int rc = wm_layout(type, (int)total, &l);
    if (rc != MPI_SUCCESS)
        return rc;
    const void *in = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    /* the whole vector's result lands in `work` at the leaders (and everywhere for allreduce) */
    void *work_base = NULL;
    char *work = (mode == WM_TO_ALL && sendbuf != MPI_IN_PLACE) ? recvbuf
               : wm_alloc_elements(&l, total, &work_base);
    if ((rc = PMPI_Reduce(in, leader ? work : NULL, (int)total, type, op, 0, wc->local)) != MPI_SUCCESS)
        goto out;
    if (mode == WM_TO_ROOT) {
        int R = wc->cluster_of[root];
        if (leader && (rc = wm_leaders_reduce(wc, work, (int)total, type, op, &l, R)) != MPI_SUCCESS)
            goto out;
        if (leader && wc->my_cluster == wc->cluster_of[root] && me != root)
            rc = PMPI_Send(work, count, type, root, 0, wc->shadow);
        else if (me == root)
            rc = leader ? wm_copy_elements(recvbuf, work, count, type, &l)
                        : PMPI_Recv(recvbuf, count, type, wc->members[wc->my_cluster][0], 0,
                                    wc->shadow, MPI_STATUS_IGNORE);
        goto out;
    }
    if (leader && (rc = wm_leaders_reduce(wc, work, (int)total, type, op, &l, -1)) != MPI_SUCCESS)
        goto out;
    if ((rc = PMPI_Bcast(work, (int)total, type, 0, wc->local)) != MPI_SUCCESS)
        goto out;
    if (mode == WM_SCATTER_BLOCKS)
        rc = wm_copy_elements(recvbuf, work + mine_first * l.extent, counts ? counts[me] : count, type, &l);
    else if (work != recvbuf)
        rc = wm_copy_elements(recvbuf, work, count, type, &l);
out:
    free(work_base);
    return rc;
}
