/* Rate-managed MPI_Alltoall and MPI_Alltoallv.
 *
 * Every rank of a cluster sends across the WAN at once, so their sum can
 * exceed the WAN rate B, the bottleneck queue overflows and a lost tail
 * packet costs a retransmission timeout. For the duration of the call each
 * rank's sockets to another cluster c are paced (libwanshim, per socket):
 *
 *   matb   rho_c = B / (n_mine x d x r_c)      the pacing paper's MATB = B/(n d)
 *                                              per node, shared by the r_c
 *                                              sockets this rank sends to c on
 *   auto   rho_c = 0.95 B x (v_me->c / V_cluster->c) / r_c / d: this rank's share of
 *          the WAN by the volumes the call really sends (alltoallv: summed over
 *          the cluster with one allreduce inside it), capped at 0.95 x a receiver's
 *          NIC rate / (ranks sending to it) so the flows into one receiver
 *          fit its switch port; then each destination host on its own at
 *          0.95 B x v_me->host / V_cluster->c / d (pace_hosts), so that all
 *          flows end together however uneven the blocks; and the sockets inside the cluster are paced
 *          to share what the WAN flows leave of a receiver's NIC:
 *          lambda = (0.9 NIC - B (C - 1) / n_mine) / (n_mine - 1), at least
 *          a fair share of the receiver's NIC, 0.95 NIC / (P - 1) (C
 *          clusters, P ranks). Without this the local flows,
 *          with their tiny RTT, fill the receiver's switch port and the WAN
 *          flows lose packets there (measured: design/collectives.md)
 *   off    not paced
 *
 * n_mine: ranks of my cluster that send to c; d: WANMPI_MATB_DIVISOR; r_c:
 * ranks of c this rank sends to; B: the rate between my cluster and c
 * (WANMPI_WAN_RATES, else WANMPI_WAN_RATE; for the local share, the sum over
 * the other clusters replaces B (C - 1)). The rates go back to the process-wide rate
 * when the call returns.
 *
 * Two algorithms (WANMPI_ALLTOALL / WANMPI_ALLTOALLV):
 *   paced      the MPI library's own algorithm, paced (the paper);
 *   scheduled  every receive posted first, then the sends, blocks to other
 *              clusters first (in an order rotated by position, so every
 *              receiver has senders from every cluster at once rather than
 *              all at one), cut into WANMPI_CHUNK pieces so that each is
 *              sent eagerly: no rendezvous round trip across the WAN.
 *
 * Fallbacks to the MPI library: MPI_IN_PLACE, invalid arguments, a one-
 * cluster communicator. */
#include "coll.h"
#include "sched.h"
#include "../common/log.h"
#include "../common/settings.h"
#include "../pacing/rate.h"

#include <stdint.h>
#include <stdlib.h>

/* ---- the rate ---- */

/* Of a receiver's NIC, what all flows into it may take together: the rest
 * is for Ethernet headers and jitter. At the whole NIC, five WAN flows and
 * two local ones into one node of the three-cluster testbed overflowed its
 * switch port (810 segments retransmitted in a 16 MiB all-to-all). */
#define RECEIVER_SHARE 0.95

/* auto: each destination host at its share of B by the volume it gets from
 * this rank, so that every flow of the cluster ends at the same time (a
 * rate per cluster would leave the largest block of an alltoallv last, on
 * an idle link). Hosts of several ranks: their volumes summed, shared by
 * their sockets. `cluster_vol`: bytes the cluster sends to each cluster. */
static void pace_hosts(struct wm_pacing *pc, const struct wm_comm *wc, const double *bytes,
                       const double *cluster_vol, const double *scale, double cap_per_byte)
{
    int H = wc->nhosts;
    pc->hosts = malloc((size_t)(H ? H : 1) * sizeof *pc->hosts);
    double *vol = calloc((size_t)(H ? H : 1), sizeof *vol);
    int *socks = calloc((size_t)(H ? H : 1), sizeof *socks), *cl = calloc((size_t)(H ? H : 1), sizeof *cl);
    if (!pc->hosts || !vol || !socks || !cl) {
        free(pc->hosts);
        pc->hosts = NULL;
        free(vol);
        free(socks);
        free(cl);
        return;
    }
    for (int p = 0; p < wc->size; p++) {        /* the volume and sockets to each host, one pass */
        int h = wc->host_of[p];
        if (wc->cluster_of[p] == wc->my_cluster || bytes[p] <= 0 || h < 0)
            continue;
        cl[h] = wc->cluster_of[p];
        vol[h] += bytes[p];
        socks[h]++;
    }
    int n = 0;
    for (int h = 0; h < H; h++) {
        if (!socks[h])
            continue;
        double rho = scale[cl[h]] * vol[h] / cluster_vol[cl[h]] / socks[h];
        if (cap_per_byte > 0 && rho > cap_per_byte * vol[h] / socks[h])
            rho = cap_per_byte * vol[h] / socks[h];
        wm_rate_set_peer(wc->host_address[h], rho < 1000 ? 1000 : (uint64_t)rho);
        pc->hosts[n++] = wc->host_address[h];
    }
    pc->nhosts = n;
    free(vol);
    free(socks);
    free(cl);
}

/* Bytes this rank sends to each cluster, the number of its ranks it sends to,
 * into vol[nclusters], peers[nclusters]. */
static void my_volumes(const struct wm_comm *wc, const double *bytes, double *vol, int *peers)
{
    for (int c = 0; c < wc->nclusters; c++)
        vol[c] = peers[c] = 0;
    for (int p = 0; p < wc->size; p++) {
        if (bytes[p] <= 0)
            continue;
        vol[wc->cluster_of[p]] += bytes[p];
        peers[wc->cluster_of[p]]++;
    }
}

/* What the whole cluster sends to each cluster (cluster_vol) and how many of
 * its ranks send there (senders), from this rank's `vol`: summed over the
 * cluster for alltoallv (`collective_counts`), the same on every rank else. */
static int cluster_volumes(const struct wm_comm *wc, const double *vol, double *cluster_vol,
                           double *senders, int collective_counts)
{
    int nc = wc->nclusters;
    if (!collective_counts) {
        for (int c = 0; c < nc; c++) {
            cluster_vol[c] = vol[c] * wc->cluster_size[wc->my_cluster];
            senders[c] = vol[c] > 0 ? wc->cluster_size[wc->my_cluster] : 0;
        }
        return MPI_SUCCESS;
    }
    double *mine = calloc((size_t)nc * 2, sizeof *mine), *sums = calloc((size_t)nc * 2, sizeof *sums);
    int rc = MPI_ERR_NO_MEM;
    if (mine && sums) {
        for (int c = 0; c < nc; c++) {
            mine[c] = vol[c];
            mine[nc + c] = vol[c] > 0;
        }
        rc = PMPI_Allreduce(mine, sums, 2 * nc, MPI_DOUBLE, MPI_SUM, wc->local);
        for (int c = 0; c < nc && rc == MPI_SUCCESS; c++) {
            cluster_vol[c] = sums[c];
            senders[c] = sums[nc + c];
        }
    }
    free(mine);
    free(sums);
    return rc;
}

/* The rate of this rank's sockets to each other cluster: MATB's equal share,
 * or (auto) its share of B by volume, within a receiver NIC's share. */
static void pace_clusters(struct wm_pacing *pc, const struct wm_comm *wc, const double *vol,
                          const int *peers, const double *cluster_vol, const double *senders, int fan_in)
{
    const struct wm_settings *st = wm_settings();
    for (int c = 0; c < wc->nclusters; c++) {
        if (c == wc->my_cluster || peers[c] == 0 || cluster_vol[c] <= 0)
            continue;
        double rho, b = wm_link_rate(wc, c);
        if (st->alltoall_rate == WM_RATE_MATB) {
            rho = b / (senders[c] * st->matb_divisor * peers[c]);
        } else {
            /* 5 % of B left for ACKs, the other direction's headers and jitter */
            rho = 0.95 * b * (vol[c] / cluster_vol[c]) / peers[c];
            /* a receiver's NIC is shared by every rank sending to it at once */
            double nic = st->nic_rate / 8;
            if (nic > 0 && fan_in > 0 && rho > RECEIVER_SHARE * nic / fan_in)
                rho = RECEIVER_SHARE * nic / fan_in;
            rho /= st->matb_divisor;
        }
        uint64_t r = rho < 1000 ? 1000 : (uint64_t)rho;
        if (wm_rate_set_cluster(wm_cluster_name(wc->cluster_global[c]), r) == 0)
            pc->set = 1;
        wm_debug(1, "alltoall: pace sockets to cluster %s at %llu B/s (%s)",
                 wm_cluster_name(wc->cluster_global[c]), (unsigned long long)r,
                 wm_rate_mode_name(st->alltoall_rate));
    }
}

/* auto: each destination host's rate, by its share of the cluster's volume,
 * capped by the receiver NIC's share per byte of a block. */
static void pace_by_host(struct wm_pacing *pc, const struct wm_comm *wc, const double *bytes,
                         const double *vol, const int *peers, const double *cluster_vol, int fan_in)
{
    const struct wm_settings *st = wm_settings();
    double sent = 0, *scale = calloc((size_t)wc->nclusters, sizeof *scale);
    int blocks = 0;
    if (!scale)
        return;
    for (int c = 0; c < wc->nclusters; c++)
        if (c != wc->my_cluster) {
            sent += vol[c];
            blocks += peers[c];
            scale[c] = 0.95 * wm_link_rate(wc, c) / st->matb_divisor;
        }
    double nic = st->nic_rate / 8;
    double cap = nic > 0 && fan_in > 0 && sent > 0 ? RECEIVER_SHARE * nic / fan_in / (sent / blocks) : 0;
    pace_hosts(pc, wc, bytes, cluster_vol, scale, cap);
    free(scale);
}

/* auto: the sockets inside the cluster share what of the NIC the other
 * clusters' traffic leaves, and at least get a fair share of it: every flow
 * into a receiver as much as every other (the WAN flows are capped at a
 * receiver NIC's share per socket, pace_by_host). A receiver's flows are
 * its fan-in (wm_alltoall_pace): P - 1 in a full all-to-all, 2 in a halo
 * exchange. Without the fair share, the
 * sum of wide WAN links (three clusters: two links of twice the NIC's rate)
 * left the local flows a tenth of the NIC: 2.8x slower. */
static void pace_local(struct wm_pacing *pc, const struct wm_comm *wc, int fan_in)
{
    const struct wm_settings *st = wm_settings();
    int n_mine = wc->cluster_size[wc->my_cluster];
    int local_senders = fan_in < n_mine - 1 ? fan_in : n_mine - 1;
    if (local_senders < 1 || st->nic_rate <= 0)
        return;
    double remote_in = 0;
    for (int c = 0; c < wc->nclusters; c++)
        if (c != wc->my_cluster)
            remote_in += wm_link_rate(wc, c) / n_mine;
    double nic = st->nic_rate / 8;
    double left = (0.9 * nic - remote_in) / local_senders, fair = RECEIVER_SHARE * nic / fan_in;
    uint64_t lambda = (uint64_t)(left > fair ? left : fair);
    pc->local_before = wm_rate_local();
    if (wm_rate_set_local(lambda) == 0)
        pc->local_set = 1;
    wm_debug(1, "alltoall: pace sockets inside the cluster at %llu B/s", (unsigned long long)lambda);
}

/* The most ranks any rank of my cluster receives from (`received`: mine),
 * with one allreduce inside the cluster where the counts differ by rank;
 * else every rank receives alike. */
static int most_received(const struct wm_comm *wc, int received, int collective_counts, int *fan_in)
{
    *fan_in = received;
    return collective_counts ? PMPI_Allreduce(&received, fan_in, 1, MPI_INT, MPI_MAX, wc->local) : MPI_SUCCESS;
}

int wm_alltoall_pace(struct wm_pacing *pc, const struct wm_comm *wc, const double *bytes, int received,
                     int collective_counts)
{
    const struct wm_settings *st = wm_settings();
    pc->set = pc->local_set = 0;
    pc->hosts = NULL;
    pc->nhosts = 0;
    pc->wc = wc;
    uint64_t b = wm_rate_maxrate();
    /* Only settings shared by every rank decide here: the alltoallv volumes
     * are summed collectively over the cluster, so a rank-local reason (no
     * shim on this rank) must not skip that; it only skips setting rates. */
    if (st->alltoall_rate == WM_RATE_OFF || !b)
        return MPI_SUCCESS;
    int nc = wc->nclusters;
    double *vol = calloc((size_t)nc * 3, sizeof *vol);
    int *peers = calloc((size_t)nc * 2, sizeof *peers);
    if (!vol || !peers) {
        free(vol);
        free(peers);
        return MPI_ERR_NO_MEM;
    }
    my_volumes(wc, bytes, vol, peers);
    double *cluster_vol = vol + nc, *senders = vol + 2 * nc;
    int fan_in, rc = cluster_volumes(wc, vol, cluster_vol, senders, collective_counts);
    if (rc == MPI_SUCCESS)
        rc = most_received(wc, received, collective_counts, &fan_in);
    /* blocks of WANMPI_SMALL bytes or less are a few packets: pacing them
     * would only delay them */
    double largest = 0;
    for (int c = 0; c < nc; c++)
        if (c != wc->my_cluster && peers[c] > 0 && vol[c] / peers[c] > largest)
            largest = vol[c] / peers[c];
    if (rc == MPI_SUCCESS && wm_rate_available() && largest > (double)st->small) {
        pace_clusters(pc, wc, vol, peers, cluster_vol, senders, fan_in);
        if (st->alltoall_rate == WM_RATE_AUTO) {
            pace_by_host(pc, wc, bytes, vol, peers, cluster_vol, fan_in);
            pace_local(pc, wc, fan_in);
        }
    }
    free(vol);
    free(peers);
    return rc;
}

/* Paces for an all-to-all of `counts[p]` (or, counts NULL, `count`)
 * elements of `ssize` bytes to each rank p; `rcounts` (NULL: `count` from
 * each) says from how many ranks this one receives. */
static int pace(struct wm_pacing *pc, const struct wm_comm *wc, const int *counts, int count, int ssize,
                const int *rcounts, int collective_counts)
{
    double *bytes = malloc((size_t)wc->size * sizeof *bytes);
    if (!bytes) {
        pc->set = pc->local_set = 0;
        pc->hosts = NULL;
        pc->nhosts = 0;
        pc->wc = wc;
        return MPI_ERR_NO_MEM;
    }
    for (int p = 0; p < wc->size; p++)
        bytes[p] = (double)(counts ? counts[p] : count) * ssize;
    int rc = wm_alltoall_pace(pc, wc, bytes, wm_received_from(wc, rcounts, count), collective_counts);
    free(bytes);
    return rc;
}

void wm_alltoall_unpace(struct wm_pacing *pc)
{
    for (int h = 0; h < pc->nhosts; h++)
        wm_rate_set_peer(pc->hosts[h], UINT64_MAX);
    free(pc->hosts);
    pc->hosts = NULL;
    pc->nhosts = 0;
    if (pc->local_set)
        wm_rate_set_local(pc->local_before);
    if (!pc->set)
        return;
    for (int c = 0; c < pc->wc->nclusters; c++)
        if (c != pc->wc->my_cluster)
            wm_rate_set_cluster(wm_cluster_name(pc->wc->cluster_global[c]), UINT64_MAX);
}

int wm_received_from(const struct wm_comm *wc, const int *rcounts, int count)
{
    int n = 0;
    for (int p = 0; p < wc->size; p++)
        n += p != wc->rank && (rcounts ? rcounts[p] : count) > 0;
    return n;
}

/* ---- the schedule ---- */

/* Peers in the order this rank sends to them: other clusters first, each
 * cluster's ranks rotated by my position so that receivers are spread. */
static void send_order(const struct wm_comm *wc, int *order)
{
    int n = 0;
    for (int step = 1; step <= wc->nclusters; step++) {
        int c = (wc->my_cluster + step) % wc->nclusters;     /* my own cluster last */
        int m = wc->cluster_size[c];
        for (int j = 0; j < m; j++)
            order[n++] = wc->members[c][(wc->my_index + j) % m];
    }
}

/* Piece k of a block: its elements (the last ones, or none) and where they start. */
static int piece_at(const struct wm_a2a_block *b, int k, char **at)
{
    int64_t off = (int64_t)k * b->piece, left = b->count - off;
    *at = b->buf + (MPI_Aint)off * b->extent;
    return left < b->piece ? (int)left : b->piece;
}

/* A block that ends short, received: piece k came; the next is posted only
 * if this one was full (a short piece is the sender's last) and I expect
 * more. item: k x size + peer. */
static int next_piece(struct wm_sched *s, void *arg, long item)
{
    const struct wm_a2a_block *b = arg;
    int size = s->wc->size, peer = (int)(item % size), k = (int)(item / size), got = 0;
    char *at;
    PMPI_Get_count(wm_sched_status(s), b->type, &got);
    if (got != b->piece || k >= b->count / b->piece)
        return MPI_SUCCESS;
    int n = piece_at(b, k + 1, &at);
    return wm_sched_recv(s, at, n, b->type, peer, k + 1, next_piece, arg, (long)(k + 1) * size + peer);
}

/* Posts one peer's block as pieces of at most b->piece elements (a block
 * that ends short: the sends, then a short last one, empty if need be; the
 * first receive, next_piece the others). */
static int post_block(struct wm_sched *s, int send, const struct wm_a2a_block *b, int peer)
{
    int rc = MPI_SUCCESS;
    char *at;
    if (b->count == 0)
        return rc;
    if (b->ends_short && !send) {
        int n = piece_at(b, 0, &at);
        return wm_sched_recv(s, at, n, b->type, peer, 0, next_piece, (void *)b, peer);
    }
    int last = b->ends_short ? b->count / b->piece : (b->count - 1) / b->piece;
    for (int k = 0; k <= last && rc == MPI_SUCCESS; k++) {
        int n = piece_at(b, k, &at);
        rc = send ? wm_sched_send(s, at, n, b->type, peer, k, NULL, NULL, 0)
                  : wm_sched_recv(s, at, n, b->type, peer, k, NULL, NULL, 0);
    }
    return rc;
}

int wm_alltoall_blocks(struct wm_sched *s, const struct wm_comm *wc, const struct wm_a2a_block *send,
                       const struct wm_a2a_block *recv)
{
    int *order = malloc((size_t)wc->size * sizeof *order);
    if (!order)
        return wm_sched_fail(s, MPI_ERR_NO_MEM);
    send_order(wc, order);
    int rc = MPI_SUCCESS;
    /* receives first, from the other clusters first: nothing arrives unexpected */
    for (int i = 0; i < wc->size && rc == MPI_SUCCESS; i++)
        rc = post_block(s, 0, &recv[order[i]], order[i]);
    for (int i = 0; i < wc->size && rc == MPI_SUCCESS; i++)
        rc = post_block(s, 1, &send[order[i]], order[i]);
    free(order);
    return wm_sched_fail(s, rc);
}

/* Elements per piece: WANMPI_CHUNK bytes, at most tag_ub pieces per block;
 * whole blocks if the send and receive types cut differently. */
static int piece_elements(const struct wm_comm *wc, int ssize, int rsize, long long max_count)
{
    if (ssize != rsize || ssize <= 0)
        return INT32_MAX;
    long long piece = (long long)(wm_chunk_bytes() / (size_t)ssize);
    if (piece < 1)
        piece = 1;
    long long tags = wc->tag_ub > 0 ? wc->tag_ub : 32767;
    if (max_count / piece >= tags)
        piece = max_count / tags + 1;
    return piece > INT32_MAX ? INT32_MAX : (int)piece;
}

int wm_alltoallv_scheduled(struct wm_sched *s, const struct wm_comm *wc, const void *sendbuf,
                           const int *scounts, const int *sdispls, MPI_Datatype stype, void *recvbuf,
                           const int *rcounts, const int *rdispls, MPI_Datatype rtype)
{
    MPI_Aint lb, sext, rext;
    int ssize, rsize;
    PMPI_Type_get_extent(stype, &lb, &sext);
    PMPI_Type_get_extent(rtype, &lb, &rext);
    PMPI_Type_size(stype, &ssize);
    PMPI_Type_size(rtype, &rsize);
    long long max_count = 0;
    for (int p = 0; p < wc->size; p++) {
        if (scounts[p] > max_count)
            max_count = scounts[p];
        if (rcounts[p] > max_count)
            max_count = rcounts[p];
    }
    int piece = piece_elements(wc, ssize, rsize, max_count);
    struct wm_a2a_block *send = malloc((size_t)wc->size * 2 * sizeof *send), *recv = send + wc->size;
    if (!send)
        return wm_sched_fail(s, MPI_ERR_NO_MEM);
    for (int p = 0; p < wc->size; p++) {
        send[p] = (struct wm_a2a_block){ (char *)sendbuf + (MPI_Aint)sdispls[p] * sext, scounts[p], piece, stype,
                                         sext, 0 };
        recv[p] = (struct wm_a2a_block){ (char *)recvbuf + (MPI_Aint)rdispls[p] * rext, rcounts[p], piece, rtype,
                                         rext, 0 };
    }
    int rc = wm_alltoall_blocks(s, wc, send, recv);
    free(send);
    return rc;
}

static int scheduled(const struct wm_comm *wc, const void *sendbuf, const int *scounts, const int *sdispls,
                     MPI_Datatype stype, void *recvbuf, const int *rcounts, const int *rdispls,
                     MPI_Datatype rtype)
{
    struct wm_sched s;
    wm_sched_init(&s, wc, 0);
    wm_alltoallv_scheduled(&s, wc, sendbuf, scounts, sdispls, stype, recvbuf, rcounts, rdispls, rtype);
    return wm_sched_run(&s);
}

int wm_alltoall_scheduled(struct wm_sched *s, const struct wm_comm *wc, const void *sendbuf, int scount,
                          MPI_Datatype stype, void *recvbuf, int rcount, MPI_Datatype rtype)
{
    int *v = malloc((size_t)wc->size * 4 * sizeof *v);
    if (!v)
        return wm_sched_fail(s, MPI_ERR_NO_MEM);
    int *sc = v, *sd = v + wc->size, *rcn = v + 2 * wc->size, *rd = v + 3 * wc->size;
    for (int p = 0; p < wc->size; p++) {
        sc[p] = scount;
        sd[p] = p * scount;
        rcn[p] = rcount;
        rd[p] = p * rcount;
    }
    int rc = wm_alltoallv_scheduled(s, wc, sendbuf, sc, sd, stype, recvbuf, rcn, rd, rtype);
    free(v);
    return rc;
}

/* ---- entry points (called from api.c once the arguments are checked) ---- */

int wm_alltoallv_run(const struct wm_comm *wc, enum wm_alg alg, const void *sendbuf, const int *scounts,
                     const int *sdispls, MPI_Datatype stype, void *recvbuf, const int *rcounts,
                     const int *rdispls, MPI_Datatype rtype)
{
    int ssize;
    PMPI_Type_size(stype, &ssize);
    struct wm_pacing pc;
    int rc = pace(&pc, wc, scounts, 0, ssize, rcounts, 1);
    if (rc == MPI_SUCCESS)
        rc = alg == WM_ALG_SCHEDULED
                 ? scheduled(wc, sendbuf, scounts, sdispls, stype, recvbuf, rcounts, rdispls, rtype)
                 : PMPI_Alltoallv(sendbuf, scounts, sdispls, stype, recvbuf, rcounts, rdispls, rtype, wc->user);
    wm_alltoall_unpace(&pc);
    return rc;
}

int wm_alltoall_run(const struct wm_comm *wc, enum wm_alg alg, const void *sendbuf, int scount,
                    MPI_Datatype stype, void *recvbuf, int rcount, MPI_Datatype rtype)
{
    int ssize;
    PMPI_Type_size(stype, &ssize);
    struct wm_pacing pc;
    int rc = pace(&pc, wc, NULL, scount, ssize, NULL, 0);
    if (rc != MPI_SUCCESS || alg != WM_ALG_SCHEDULED) {
        if (rc == MPI_SUCCESS) {
            int saved = -1;
            if (sendbuf != MPI_IN_PLACE)        /* MPICH's scattered cannot work in place */
                wm_own_alltoall_concurrent(&saved);
            rc = PMPI_Alltoall(sendbuf, scount, stype, recvbuf, rcount, rtype, wc->user);
            wm_own_alltoall_restore(saved);
        }
        wm_alltoall_unpace(&pc);
        return rc;
    }
    struct wm_sched s;
    wm_sched_init(&s, wc, 0);
    wm_alltoall_scheduled(&s, wc, sendbuf, scount, stype, recvbuf, rcount, rtype);
    rc = wm_sched_run(&s);
    wm_alltoall_unpace(&pc);
    return rc;
}
