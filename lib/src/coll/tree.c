/* Chains or trees inside a cluster: the shape the broadcast's segments and
 * the reductions' pieces travel through the ranks of one cluster.
 *
 * A chain visits every rank in turn: each rank sends the message once, the
 * least any rank can, but a chunk needs n-1 hops to reach the last of n ranks.
 * Every hop costs the chunk's time at a NIC plus the latency between two
 * ranks L, so with many ranks (n L large against the message's time M/b)
 * the chain is mostly waiting: 2 x 128 ranks, 1 MiB at 10 Gbit/s and
 * 100 us per hop spend 27 ms filling it against 0.8 ms of data (SimGrid,
 * docs/scale.md). A tree of fan-out f reaches them in about log_f n hops;
 * each inner rank sends every chunk f times.
 *
 * Positions: 0 is the tree's root (the rank the data enters by, or the
 * owner a piece is reduced onto), and position t's parent is (t - 1) / f,
 * its children f t + 1 ... f t + f (a heap): with f = 1 the chain 0, 1, 2, ...
 *
 * The model (seconds; b the NIC rate, c the chunk, M the message): a chunk
 * crosses a hop in f c / b + L, the message passes the busiest rank in
 * load(f) M / b; two trees in a row on a path (the data's cluster and the
 * receiving one, or the reduction and the distribution):
 *
 *   T(f) = load(f) M / b + 2 depth(f, n) (f c / b + L)
 *
 * load(f) for the broadcast is computed from its layout: its f segments
 * start their trees ceil((n-1)/f) positions apart (wm_tree_start), so their
 * inner positions barely overlap, and each tree's copy on to the next
 * cluster leaves from a leaf of every tree where one is left over
 * (wm_tree_forwarders); the busiest rank's copies over all f trees: 1 M/b
 * for f = 2 at every n and for f = 3, 4 where the inner positions do not
 * overlap. A fan-out that leaves no such leaf is not taken: the copy across
 * would share a NIC with local ones and get the smaller share (bcast_load).
 * Trees started n/f apart, each sending on from its last position,
 * overlapped (2 x 16 ranks, f = 4: a rank inner in two trees, 1.5 M/b;
 * SimGrid measured 1.6 M/b, 1.39x the bound against the chain's 1.22x). For
 * the reductions, whose pieces each have their own owner at the root (every
 * rank a lane), every position comes round to every rank alike, so the load
 * does not grow with f. Until 2026-12-02 it was (1 + f)/2, which kept f = 2
 * and its deeper trees at every size (SimGrid, 2 sites, 1 MiB allreduce,
 * 100 us a hop, f = 2 / 4 at 128 ranks a site 13.45 / 13.01 ms, at 256
 * 14.16 / 13.23; docs/scale.md, "The reductions' fan-out"). Few lanes
 * (WANMPI_LANES): the lanes' trees keep their inner ranks, load f.
 *
 * The reductions are timed beyond the WAN's delay d (which every fan-out
 * waits alike), with m = M/b for the vector once, passes 2 (an allreduce:
 * partials up, the result down) or 1, fill(f) = depth(f, n) (f c / b + L):
 *
 *   chain:   max(2 fill + m / 2 + 0.9 max(0, m - fill),   2 m + 2 fill - d)
 *   tree:    max(1.6 m + 2 fill,                           2 load m + 2 fill - d)
 *   1 pass:  load m + 2 fill (load 1 for the chain; T(f) above with the
 *            new load, not measured: collbench under SMPI has no reduce)
 *
 * A fit to SimGrid's times with every fan-out forced at 20 points (2 sites,
 * 4-32 nodes, 10-100 Gbit/s NICs, 1-30 ms, 1-64 MiB; docs/scale.md, "The
 * reductions' model"), not a derivation. The second terms are the NICs:
 * every rank carries every piece up and down, 2 m, the passes overlapping
 * where d is short against m; a rotated tree's busiest rank 1.15 of that
 * (16 MiB, 2 x 8-32, 10 ms: 1.13-1.19 x 2 m at every f). The first terms
 * are the passes a WAN delay apart: a chain's ranks meet a piece at their
 * place along it, so their work spreads over the fill and only what
 * exceeds it shows (1 MiB: d + 2 fill + 0.3-0.65 ms; 16 MiB at 2 x 16:
 * 21.0 ms beyond d at 10 and at 30 ms), while a tree's leaves send every
 * piece at once and its pieces come down together, a good part of a
 * second m (0.4-1.1 m measured). The fit chooses within 3.3 % of the best
 * fan-out at all 20 points; the old model was up to 17 % off: it priced the
 * reductions as the broadcast, M twice the vector and load 1.5, a tree 0.5
 * x 2 m dearer than the chain where SimGrid measures about 0.13 x 2 m, and
 * kept the chain for 16 MiB at 2 x 32 ranks (36.3 ms against f = 3's 31.8)
 * and for 4 MiB at 2 x 16 (17.7 against f = 4's 15.6).
 *
 * A tree is taken only where its time is under 0.9 of the chain's (the
 * broadcast), or its time beyond d under 0.95 of the chain's (the
 * reductions). The broadcast's fan-out is at most 4, the reductions' at
 * most 8: where a wider tree saves a level it was 1-4.5 % faster (SimGrid,
 * 2 sites, 10 ms: 1 MiB at 8 nodes a site, f = 3 11.85 -> f = 7 11.74 ms;
 * 16 MiB at 8 nodes of 100 Gbit/s, 1 ms, 3.28 -> 3.14; 1 MiB at 32 nodes
 * 12.49 -> f = 6 12.32, at 256 13.23 -> f = 8 12.96; docs/scale.md), though
 * the model prices the wider trees 7-37 % cheaper than that: a choice, not
 * a forecast.
 *
 * More segments than the fan-out (the broadcast's star: one per non-root
 * rank of the root's cluster) or pieces with owners of their own (the
 * reductions): a chunk's tree has its inner ranks at the ~n/f positions
 * after its start, and chunks arrive (or start) in their order, so
 * consecutive starts side by side made the same ~n/f ranks forward the
 * chunks of a whole stretch of time while the rest waited. Consecutive
 * segments and owners are therefore taken in turn from f blocks of n/f
 * (wm_interleave): 4 sites x 256 ranks, 1 MiB broadcast 13.7 -> 12.7 ms
 * (SimGrid, docs/scale.md, "Consecutive trees apart"). */
#include "coll.h"
#include "../common/log.h"
#include "../common/settings.h"

#include <stdlib.h>

#define MAX_AUTO_FAN 4          /* the broadcast's: more children than this, arrivals at once the model does not see */
#define MAX_REDUCTION_FAN 8     /* the reductions': f = 6-8 measured 1-4.5 % faster than f <= 4 (below) */
#define TREE_MARGIN 0.9
#define REDUCTION_MARGIN 0.95
#define ROTATED_LOAD 1.15       /* a reduction's tree of any fan-out, every rank a lane (above) */

int wm_tree_depth(int n, int fan)
{
    if (fan <= 1)
        return n > 1 ? n - 1 : 0;
    int depth = 0;
    for (int64_t last = n - 1; last > 0; last = (last - 1) / fan)
        depth++;
    return depth;
}

int wm_tree_parent(int t, int fan)
{
    return t > 0 ? (t - 1) / fan : -1;
}

int wm_tree_children(int t, int n, int fan, int *first)
{
    int64_t f = (int64_t)fan * t + 1, last = (int64_t)fan * t + fan;
    *first = (int)f;
    if (f >= n)
        return 0;
    return (int)((last < n ? last : n - 1) - f + 1);
}

int wm_interleave(int s, int count, int fan)
{
    if (fan <= 1 || count <= fan)
        return s;
    int block = (count + fan - 1) / fan, blocks = (count + block - 1) / block;
    int last = count - (blocks - 1) * block;    /* the last block's size, 1 .. block */
    if (s < last * blocks)                      /* the rounds every block takes part in */
        return s % blocks * block + s / blocks;
    s -= last * blocks;
    return s % (blocks - 1) * block + last + s / (blocks - 1);
}

int wm_tree_start(int s, int segments, int n, int fan)
{
    if (n <= 0 || segments <= 0)
        return 0;
    if (fan > 1 && segments == fan)
        return (int)((int64_t)s * ((n - 1 + fan - 1) / fan) % n);
    if (fan > 1 && segments > fan)
        s = wm_interleave(s, segments, fan);
    return segments <= n ? (int)((int64_t)s * n / segments) : s % n;
}

/* The broadcast's `fan` trees over n ranks (started by wm_tree_start), each
 * carrying 1/fan of the message: local[r] counts rank r's copies to its
 * children (in 1/fan messages); with `forwarder`, each tree's copy on to the
 * next cluster leaves from one of its leaves, one that sends nothing inside
 * the cluster where there is one, else the least busy (the last position on
 * ties), counted in across[r], and *shared = 1 where a rank does both.
 * Returns the most copies any rank sends, in messages. */
static double layout(int n, int fan, int *local, int *across, int *forwarder, int *shared)
{
    int most = 0, first;
    for (int r = 0; r < n; r++)
        local[r] = across[r] = 0;
    for (int s = 0; s < fan; s++)
        for (int t = 0, start = wm_tree_start(s, fan, n, fan); t < n; t++)
            local[(start + t) % n] += wm_tree_children(t, n, fan, &first);
    for (int s = 0; forwarder && s < fan; s++) {
        int start = wm_tree_start(s, fan, n, fan), best = -1;
        for (int t = n - 1; t >= 0; t--) {
            int r = (start + t) % n;
            if (wm_tree_children(t, n, fan, &first) > 0)
                continue;
            if (best < 0 || (local[r] > 0) < (local[best] > 0) ||
                ((local[r] > 0) == (local[best] > 0) && local[r] + across[r] < local[best] + across[best]))
                best = r;
        }
        forwarder[s] = best;
        across[best]++;
    }
    for (int r = 0; r < n; r++) {
        if (local[r] > 0 && across[r] > 0)
            *shared = 1;
        if (local[r] + across[r] > most)
            most = local[r] + across[r];
    }
    return (double)most / fan;
}

/* layout() over n > 1 ranks with its counts allocated here. */
static double layout_of(int n, int fan, int *forwarder, int *shared)
{
    int *counts = calloc(2 * (size_t)n, sizeof *counts);
    if (!counts)
        wm_fatal("out of memory (broadcast trees)");
    double most = layout(n, fan, counts, counts + n, forwarder, shared);
    free(counts);
    return most;
}

double wm_tree_forwarders(int n, int fan, int *forwarder)
{
    int shared = 0;
    if (n > 1)
        return layout_of(n, fan, forwarder, &shared);
    for (int s = 0; s < fan; s++)
        forwarder[s] = 0;
    return 1;
}

/* The broadcast's load with fan-out f over n ranks, the copies on to the
 * next cluster if `onward`; 0 where a copy on must leave from a rank that
 * also sends inside the cluster (no leaf of every tree is free): there the
 * long connection shares that rank's NIC with short ones, and TCP (and
 * SimGrid's model of it) gives it the smaller share, so the far cluster's
 * tree starves until the near ones are served (2 x 16 ranks, 16 MiB, f = 3:
 * 1.23x the bound where the layout's load of 1 promised f = 2's 1.13x). */
static double bcast_load(int n, int fan, int onward)
{
    int forwarder[MAX_AUTO_FAN], shared = 0;
    if (n <= 1)
        return 1;
    double most = layout_of(n, fan, onward ? forwarder : NULL, &shared);
    return shared ? 0 : most;
}

static double tree_time(double message_s, double chunk_s, double latency_s, int n, int fan, double load)
{
    return load * message_s + 2 * wm_tree_depth(n, fan) * (fan * chunk_s + latency_s);
}

/* A fan-out model's inputs, in seconds at a NIC (least_time fills them in). */
struct fan_model {
    double m, c, l, d;          /* the message, a chunk at a NIC, a hop's latency, the WAN's delay */
    int n, passes;
    const double *load;         /* load[f] for f = 1 .. MAX_AUTO_FAN (0: not a choice) */
};

static double bcast_time(const struct fan_model *fm, int f)
{
    return tree_time(fm->m, fm->c, fm->l, fm->n, f, fm->load[f]);
}

static double reduction_time(const struct fan_model *fm, int f)
{
    double m = fm->m, load = fm->load[f];
    double fill = wm_tree_depth(fm->n, f) * (f * fm->c + fm->l);
    if (fm->passes < 2)
        return tree_time(m, fm->c, fm->l, fm->n, f, load);
    double nics = 2 * load * m + 2 * fill - fm->d;
    double apart = f == 1 ? 2 * fill + m / 2 + 0.9 * (m > fill ? m - fill : 0) : 1.6 * m + 2 * fill;
    return apart > nics ? apart : nics;
}

/* The fan-out whose time time_of(f) is least, a tree only under `margin` of
 * the chain's; WANMPI_FAN, or the chain where the NIC rate is unknown. */
static int least_time(int64_t total, int64_t chunk, int n, int passes, const double *load, int max_fan,
                      double margin, double (*time_of)(const struct fan_model *, int))
{
    const struct wm_settings *st = wm_settings();
    if (st->fan > 0)
        return st->fan;
    if (st->nic_rate <= 0 || n <= 2)
        return 1;
    struct fan_model fm = {
        .m = (double)total * 8.0 / st->nic_rate, .c = (double)chunk * 8.0 / st->nic_rate,
        .l = (double)st->lan_latency_us * 1e-6, .d = st->wan_delay_us > 0 ? (double)st->wan_delay_us * 1e-6 : 0,
        .n = n, .passes = passes, .load = load,
    };
    double best = margin * time_of(&fm, 1);
    int fan = 1;
    for (int f = 2; f <= max_fan && f < n; f++) {
        double t = time_of(&fm, f);
        if (load[f] > 0 && t < best) {
            best = t;
            fan = f;
        }
    }
    return fan;
}

int wm_tree_fan(int64_t bytes, int passes, int64_t chunk, int n, int rotated)
{
    double load[MAX_REDUCTION_FAN + 1];
    for (int f = 1; f <= MAX_REDUCTION_FAN; f++)
        load[f] = rotated && f > 1 ? ROTATED_LOAD : f;
    return least_time(bytes, chunk, n, passes, load, MAX_REDUCTION_FAN, REDUCTION_MARGIN, reduction_time);
}

int wm_bcast_fan(int64_t total, int64_t chunk, int root_others, int widest, int onward)
{
    const struct wm_settings *st = wm_settings();
    int n = root_others + 1 > widest ? root_others + 1 : widest;
    double load[MAX_AUTO_FAN + 1] = { 0, 1 };
    if (st->fan > 0 || st->nic_rate <= 0 || n <= 2)
        return least_time(total, chunk, n, 1, load, MAX_AUTO_FAN, TREE_MARGIN, bcast_time);
    for (int f = 2; f <= MAX_AUTO_FAN; f++) {
        double r = bcast_load(root_others, f, 1), x = bcast_load(widest, f, onward);
        load[f] = r == 0 || x == 0 ? 0 : r > x ? r : x;
    }
    return least_time(total, chunk, n, 1, load, MAX_AUTO_FAN, TREE_MARGIN, bcast_time);
}
