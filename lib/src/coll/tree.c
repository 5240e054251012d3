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
 * load(f) = f for the broadcast: its inner ranks send every chunk f times.
 * Its f segments start their trees at rotated ranks, so each rank is inner
 * in about one, which would make the load 1, but measured it is not
 * (SimGrid, 2 x 16 ranks, 16 MiB, f = 4: 1.6 M/b; with load 1 the model
 * took that tree, 1.39x the bound against the chain's 1.22x). For the
 * reductions, whose pieces each have their own owner at the root, (1 + f)/2
 * (the same case: 1.2 M/b at f = 4, 1.19x against 1.03x), where an
 * allreduce's M is twice its vector (up, then down: counted once, the model
 * took trees at 2 x 8 that lost 3-10 %). A tree is taken only where its time
 * is under 0.9 of the chain's. */
#include "coll.h"
#include "../common/settings.h"

#define MAX_AUTO_FAN 4          /* more children than this: arrivals at once the model does not see */
#define TREE_MARGIN 0.9

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

static double tree_time(double message_s, double chunk_s, double latency_s, int n, int fan, int rotated)
{
    double load = rotated ? (1 + fan) / 2.0 : fan;
    return load * message_s + 2 * wm_tree_depth(n, fan) * (fan * chunk_s + latency_s);
}

int wm_tree_fan(int64_t total, int64_t chunk, int n, int rotated)
{
    const struct wm_settings *st = wm_settings();
    if (st->fan > 0)
        return st->fan;
    if (st->nic_rate <= 0 || n <= 2)
        return 1;
    double m = (double)total * 8.0 / st->nic_rate, c = (double)chunk * 8.0 / st->nic_rate;
    double l = (double)st->lan_latency_us * 1e-6;
    double chain = tree_time(m, c, l, n, 1, rotated), best = TREE_MARGIN * chain;
    int fan = 1;
    for (int f = 2; f <= MAX_AUTO_FAN && f < n; f++) {
        double t = tree_time(m, c, l, n, f, rotated);
        if (t < best) {
            best = t;
            fan = f;
        }
    }
    return fan;
}
