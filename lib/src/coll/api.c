/* The MPI entry points. Each one decides, identically on every rank, which
 * algorithm runs (from the settings, the communicator's clusters and the
 * arguments), runs it and records it; anything the algorithms do not handle
 * goes to the MPI library unchanged (PMPI), and so do invalid arguments, so
 * that the MPI library reports them exactly as it would without us.
 *
 * Fallbacks to the MPI library:
 *   - the communicator lies in one cluster, or is an intercommunicator;
 *   - WANMPI_DISABLE=1, or WANMPI_<COLL>=mpi;
 *   - reductions with a non-commutative operation (MPI fixes the order of
 *     the operands; ours is by cluster), or a predefined operation on a
 *     derived datatype;
 *   - scan and exscan where a cluster's ranks are not one contiguous rank
 *     range (the prefix follows rank order), or a predefined operation on a
 *     derived datatype (any operation's order is kept);
 *   - arguments MPI would reject (negative counts, a root out of range, a
 *     null datatype or operation, MPI_IN_PLACE where it is not allowed,
 *     send and receive sizes that differ);
 *   - all-to-all: MPI_IN_PLACE (the "paced" algorithm then: the MPI
 *     library's own, with the WAN sockets paced), displacements past INT_MAX.
 * Where our algorithms can take a call, the choice among them and the MPI
 * library's is, in this order: an explicitly set WANMPI_<COLL>; the first
 * matching rule of the rules file (WANMPI_RULES, rules.h, docs/tuning.md);
 * the built-in choice, under which messages up to WANMPI_SMALL bytes take the
 * single-lane path, which has the fewest hops. */
#include "coll.h"
#include "entry.h"
#include <limits.h>
#include <stdlib.h>
#include "agree.h"
#include "nb.h"
#include "rules.h"
#include "sched.h"
#include "stats.h"
#include "../common/log.h"
#include "../common/settings.h"
#include "wanmpi_internal.h"
#include "../blast/udp_params.h"
#include "../fence/fence.h"
#include "../../include/wanmpi.h"

/* A nonblocking call (`request` set) takes the communicator's entry only if
 * a blocking call of ours has made its communicators (nb.h: a nonblocking
 * call must not wait for the other ranks), and only where nonblocking calls
 * of ours fit. */
static int enter(enum wm_coll c, MPI_Comm comm, const struct wm_comm **out, enum wm_alg *alg,
                 MPI_Request *request)
{
    const struct wm_settings *s = wm_settings();
    *alg = WM_ALG_MPI;
    *out = NULL;
    if (s->disabled || s->alg[c] == WM_ALG_MPI || comm == MPI_COMM_NULL || (request && !s->nonblocking_ours))
        return MPI_SUCCESS;
    struct wm_comm *wc;
    if (request) {
        if (!(wc = wm_comm_cached(comm)) || !wc->connected || !wm_nb_room(wc))
            return MPI_SUCCESS;
    } else {
        int rc = wm_comm_get(comm, &wc);
        if (rc != MPI_SUCCESS)
            return rc;
    }
    *out = wc;
    if (!wc->flat)
        *alg = s->alg[c];
    return MPI_SUCCESS;
}

/* The size of a type we can send (an uncommitted one goes to the MPI). */
static int type_size(MPI_Datatype type, int *size)
{
    return wm_type_committed(type) && PMPI_Type_size(type, size) == MPI_SUCCESS;
}

static int predefined_op(MPI_Op op)
{
    static const MPI_Op ops[] = { MPI_MAX, MPI_MIN, MPI_SUM, MPI_PROD, MPI_LAND, MPI_BAND, MPI_LOR,
                                  MPI_BOR, MPI_LXOR, MPI_BXOR, MPI_MINLOC, MPI_MAXLOC, MPI_REPLACE,
                                  MPI_NO_OP };
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (op == ops[i])
            return 1;
    return 0;
}

static int named_type(MPI_Datatype type)
{
    int combiner, large;
    return wm_type_combiner(type, &combiner, &large) && combiner == MPI_COMBINER_NAMED;
}

/* A predefined operation on a derived datatype, or on a named one it is not
 * defined for (MPI_BAND on MPI_FLOAT: op_check.c), MPI_REPLACE and
 * MPI_NO_OP (for one-sided calls only) go to the MPI library, which reports
 * what is wrong. */
static int op_fits_type(MPI_Datatype type, MPI_Op op)
{
    if (op == MPI_OP_NULL || op == MPI_REPLACE || op == MPI_NO_OP)
        return 0;
    if (!predefined_op(op))
        return 1;
    return named_type(type) && wm_op_defined(type, op);
}

/* Can the reduction engine take (type, op)? */
static int reducible(MPI_Datatype type, MPI_Op op)
{
    int commutative = 0;
    if (!op_fits_type(type, op) || PMPI_Op_commutative(op, &commutative) != MPI_SUCCESS || !commutative)
        return 0;
    return 1;
}

static enum wm_alg by_size(enum wm_alg alg, double bytes)
{
    return alg == WM_ALG_MULTILANE && bytes <= (double)wm_settings()->small ? WM_ALG_SINGLELANE : alg;
}

/* The built-in choice for gather(v) and scatter(v) (one algorithm each),
 * from the 2x4 testbed at 10 ms, both MPIs, ours / the MPI's own in time
 * (docs/benchmarks.md, "Gather and scatter"): a gather is ours below 2 MiB
 * (64 KiB-1 MiB: 1.03-3.9x faster; 4-16 MiB: 0.83-1.00x), a scatter from
 * 1 MiB (under MPICH 1.37-1.46x faster, under Open MPI 0.77-1.08x; below,
 * Open MPI's own 0.54-1.30x), a gatherv always (its size is the root's
 * alone: 256 KiB-1 MiB 1.05-5.8x, 4-16 MiB 0.71-1.08x), a scatterv never
 * (0.80-1.47x, mostly within 0.94-1.03x: nothing to gain). */
#define GATHER_OURS_BELOW   (2.0 * 1048576)
#define SCATTER_OURS_FROM   (1.0 * 1048576)

static enum wm_alg rooted_builtin(enum wm_coll c, enum wm_alg alg, double bytes)
{
    if (c == WM_GATHER && bytes >= GATHER_OURS_BELOW)
        return WM_ALG_MPI;
    if ((c == WM_SCATTER && bytes < SCATTER_OURS_FROM) || c == WM_SCATTERV)
        return WM_ALG_MPI;
    return alg;
}

/* The built-in choice for scan and exscan: the MPI's own. On the 2x4 testbed
 * at 10 ms its scan crosses the WAN once too (MPICH's recursive doubling in
 * one round, Open MPI's linear chain at the one boundary), and ours gained
 * nothing that held: 8 B-4 MiB, both MPIs, the MPI's time / ours 0.71-1.10
 * (one 1.90 that a second run did not repeat); three clusters 0.93-1.21
 * (docs/benchmarks.md, "Scan and exscan"). Ours by WANMPI_SCAN,
 * WANMPI_EXSCAN or a rules file. */
#define SCAN_BUILTIN WM_ALG_MPI

/* What runs, once the arguments have been checked: `alg` is WM_ALG_MPI if
 * only the MPI library can take the call, else the collective's setting. */
static enum wm_alg choose(const struct wm_comm *wc, enum wm_coll c, enum wm_alg alg, double bytes)
{
    int rooted = c == WM_GATHER || c == WM_GATHERV || c == WM_SCATTER || c == WM_SCATTERV;
    int one_alg = rooted || c == WM_SCAN || c == WM_EXSCAN;
    if (alg == WM_ALG_MPI || (one_alg && wm_settings()->alg_set[c]))
        return alg;
    enum wm_alg builtin = c == WM_BARRIER ? alg
                          : rooted          ? rooted_builtin(c, alg, bytes)
                          : one_alg         ? SCAN_BUILTIN
                                            : by_size(alg, bytes);
    if (wm_settings()->alg_set[c])
        return builtin;
    return wm_rules_choose(wc, c, bytes, builtin);
}

/* The choice, and where it is one of ours, the communicator's communicators
 * (made at the first call of ours on it: every rank has made the same
 * choice). Where the MPI cannot make them
 * (out of communicator context ids), the call is the MPI's. */
static enum wm_alg decide(const struct wm_comm *wc, enum wm_coll c, enum wm_alg alg, double bytes)
{
    alg = choose(wc, c, alg, bytes);
    if (alg == WM_ALG_MPI || wc->connected)
        return alg;
    int rc = wm_comm_connect((struct wm_comm *)wc);     /* the entry's cache of communicators */
    if (rc == MPI_SUCCESS)
        return alg;
    static int said;
    if (!said && wc->rank == 0) {
        said = 1;
        char text[MPI_MAX_ERROR_STRING];
        int len = 0;
        PMPI_Error_string(rc, text, &len);
        wm_warn("the MPI could not make the communicators of a communicator of %d ranks (%s): its "
                "collectives go to the MPI library", wc->size, text);
    }
    return WM_ALG_MPI;
}

/* A nonblocking call runs ours only where the blocking call would run a
 * schedule (multi-lane or scheduled); else the MPI's own nonblocking call. */
static enum wm_alg nonblocking(enum wm_alg alg, MPI_Request *request)
{
    alg = !request || alg == WM_ALG_MULTILANE || alg == WM_ALG_SCHEDULED ? alg : WM_ALG_MPI;
    struct wm_persist_call *pc = wm_persist_call;
    if (request && pc && pc->phase == WM_PERSIST_INIT)
        pc->alg = alg;
    else if (request && pc)
        alg = pc->alg;                  /* a start runs what its init chose */
    return alg;
}

__thread struct wm_persist_call *wm_persist_call;

/* The MPI's own nonblocking call put its request in *request: with
 * nonblocking calls of ours on, the engine holds it (nb.h, wm_nb_adopt). */
static int adopt(int rc, MPI_Comm comm, MPI_Request *request)
{
    return wm_nb_adopt_call(rc, comm, request);
}

/* WANMPI_CHECK=all: a nonblocking call, or a persistent init (not its
 * starts: their arguments are the init's), agrees on its arguments first
 * (agree.h); on a difference *request is MPI_REQUEST_NULL. */
static int nb_agree(void)
{
    return wm_settings()->check == WM_CHECK_ALL && !(wm_persist_call && wm_persist_call->phase == WM_PERSIST_START);
}
#define NB_AGREE(call)                                        \
    do {                                                      \
        int agreed_;                                          \
        if (nb_agree() && (agreed_ = (call)) != MPI_SUCCESS) { \
            *request = MPI_REQUEST_NULL;                      \
            return agreed_;                                   \
        }                                                     \
    } while (0)

/* What a collective that is not ours records: its time, or nothing for a
 * nonblocking one (the time is the MPI's, not the call's). */
static void record(enum wm_coll c, enum wm_alg alg, double bytes, double t0, MPI_Request *request)
{
    if (!request)
        wm_stats_call(c, alg, bytes, PMPI_Wtime() - t0);
}

static int bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Request *request)
{
    double t0 = PMPI_Wtime();
    const struct wm_comm *wc;
    enum wm_alg alg;
    int rc = enter(WM_BCAST, comm, &wc, &alg, request), size = 0;
    if (rc != MPI_SUCCESS)
        return rc;
    int typed = type_size(type, &size);       /* also for the statistics of MPI's own calls */
    if (alg != WM_ALG_MPI && (count < 0 || root < 0 || root >= wc->size || !typed))
        alg = WM_ALG_MPI;
    double bytes = (double)count * size;
    alg = nonblocking(decide(wc, WM_BCAST, alg, bytes), request);
    if (alg == WM_ALG_MULTILANE)
        SCHEDULE(rc, wc, comm, request, wm_bcast_multilane, buf, count, type, root);
    else if (alg == WM_ALG_SINGLELANE)
        rc = wm_bcast_singlelane(wc, buf, count, type, root);
    else
        rc = request ? MPI_OWN(PMPI_Ibcast, Bcast, comm, request, buf, count, type, root, comm)
                     : PMPI_Bcast(buf, count, type, root, comm);
    record(WM_BCAST, alg, bytes, t0, request);
    return rc;
}

int wm_bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm)
{
    int rc = wm_agree_bcast(count, type, root, comm);
    return rc != MPI_SUCCESS ? rc : bcast(buf, count, type, root, comm, NULL);
}

int wm_ibcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Request *request)
{
    NB_AGREE(wm_agree_bcast(count, type, root, comm));
    return bcast(buf, count, type, root, comm, request);
}

/* Elements of a reduce-scatter's whole vector (`counts` NULL: `count` per
 * rank), or -1 where MPI would reject the counts or they pass INT_MAX. */
static int64_t scatter_total(const struct wm_comm *wc, int count, const int *counts)
{
    if (!counts)
        return count < 0 || (int64_t)count * wc->size > INT_MAX ? -1 : (int64_t)count * wc->size;
    int64_t total = 0;
    for (int r = 0; r < wc->size; r++) {
        if (counts[r] < 0)
            return -1;
        total += counts[r];
    }
    return total > INT_MAX ? -1 : total;
}

/* Allreduce, reduce, reduce_scatter_block (`count` per rank) and
 * reduce_scatter (`counts`). */
static int reduction(enum wm_coll coll, const void *sendbuf, void *recvbuf, int count, const int *counts,
                     MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm, MPI_Request *request)
{
    double t0 = PMPI_Wtime();
    const struct wm_comm *wc;
    enum wm_alg alg;
    int rc = enter(coll, comm, &wc, &alg, request), size = 0;
    if (rc != MPI_SUCCESS)
        return rc;
    enum wm_reduce_mode mode = coll == WM_ALLREDUCE ? WM_TO_ALL : coll == WM_REDUCE ? WM_TO_ROOT
                                                                                     : WM_SCATTER_BLOCKS;
    int typed = type_size(type, &size);
    int64_t total = count;
    if (mode == WM_SCATTER_BLOCKS)      /* flat: maybe an intercommunicator, whose counts are not ours to read */
        total = wc && !wc->flat ? scatter_total(wc, count, counts) : 0;
    if (alg != WM_ALG_MPI) {
        if (total < 0 || !typed || !reducible(type, op))
            alg = WM_ALG_MPI;
        else if (mode == WM_TO_ROOT && (root < 0 || root >= wc->size ||
                                        (sendbuf == MPI_IN_PLACE && wc->rank != root)))
            alg = WM_ALG_MPI;
    }
    double bytes = total > 0 ? (double)total * size : 0;
    alg = nonblocking(decide(wc, coll, alg, bytes), request);
    if (alg == WM_ALG_MULTILANE)
        SCHEDULE(rc, wc, comm, request, wm_reduce_multilane, sendbuf, recvbuf, count, counts, type, op, mode,
                 root);
    else if (alg == WM_ALG_SINGLELANE)
        rc = wm_reduce_singlelane(wc, sendbuf, recvbuf, count, counts, type, op, mode, root);
    else if (mode == WM_TO_ALL)
        rc = request ? MPI_OWN(PMPI_Iallreduce, Allreduce, comm, request, sendbuf, recvbuf, count, type, op, comm)
                     : PMPI_Allreduce(sendbuf, recvbuf, count, type, op, comm);
    else if (mode == WM_TO_ROOT)
        rc = request ? MPI_OWN(PMPI_Ireduce, Reduce, comm, request, sendbuf, recvbuf, count, type, op, root,
                               comm)
                     : PMPI_Reduce(sendbuf, recvbuf, count, type, op, root, comm);
    else if (coll == WM_REDUCE_SCATTER_BLOCK)
        rc = request ? MPI_OWN(PMPI_Ireduce_scatter_block, Reduce_scatter_block, comm, request, sendbuf,
                               recvbuf, count, type, op, comm)
                     : PMPI_Reduce_scatter_block(sendbuf, recvbuf, count, type, op, comm);
    else
        rc = request ? MPI_OWN(PMPI_Ireduce_scatter, Reduce_scatter, comm, request, sendbuf, recvbuf, counts,
                               type, op, comm)
                     : PMPI_Reduce_scatter(sendbuf, recvbuf, counts, type, op, comm);
    record(coll, alg, bytes, t0, request);
    return rc;
}

int wm_allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm)
{
    int rc = wm_agree_reduction("MPI_Allreduce", count, NULL, type, op, WM_AGREE_NO_ROOT, comm);
    return rc != MPI_SUCCESS ? rc : reduction(WM_ALLREDUCE, sendbuf, recvbuf, count, NULL, type, op, 0, comm, NULL);
}

int wm_reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, int root,
              MPI_Comm comm)
{
    int rc = wm_agree_reduction("MPI_Reduce", count, NULL, type, op, root, comm);
    return rc != MPI_SUCCESS ? rc : reduction(WM_REDUCE, sendbuf, recvbuf, count, NULL, type, op, root, comm, NULL);
}

int wm_reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype type,
                            MPI_Op op, MPI_Comm comm)
{
    int rc = wm_agree_reduction("MPI_Reduce_scatter_block", recvcount, NULL, type, op, WM_AGREE_NO_ROOT, comm);
    return rc != MPI_SUCCESS ? rc
                             : reduction(WM_REDUCE_SCATTER_BLOCK, sendbuf, recvbuf, recvcount, NULL, type, op, 0, comm,
                                         NULL);
}

int wm_reduce_scatter(const void *sendbuf, void *recvbuf, const int *recvcounts, MPI_Datatype type, MPI_Op op,
                      MPI_Comm comm)
{
    int rc = wm_agree_reduction("MPI_Reduce_scatter", 0, recvcounts, type, op, WM_AGREE_NO_ROOT, comm);
    return rc != MPI_SUCCESS ? rc : reduction(WM_REDUCE_SCATTER, sendbuf, recvbuf, 0, recvcounts, type, op, 0, comm, NULL);
}

int wm_iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                  MPI_Request *request)
{
    NB_AGREE(wm_agree_reduction("MPI_Iallreduce", count, NULL, type, op, WM_AGREE_NO_ROOT, comm));
    return reduction(WM_ALLREDUCE, sendbuf, recvbuf, count, NULL, type, op, 0, comm, request);
}

int wm_ireduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, int root,
               MPI_Comm comm, MPI_Request *request)
{
    NB_AGREE(wm_agree_reduction("MPI_Ireduce", count, NULL, type, op, root, comm));
    return reduction(WM_REDUCE, sendbuf, recvbuf, count, NULL, type, op, root, comm, request);
}

int wm_ireduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype type, MPI_Op op,
                             MPI_Comm comm, MPI_Request *request)
{
    NB_AGREE(wm_agree_reduction("MPI_Ireduce_scatter_block", recvcount, NULL, type, op, WM_AGREE_NO_ROOT, comm));
    return reduction(WM_REDUCE_SCATTER_BLOCK, sendbuf, recvbuf, recvcount, NULL, type, op, 0, comm, request);
}

int wm_ireduce_scatter(const void *sendbuf, void *recvbuf, const int *recvcounts, MPI_Datatype type, MPI_Op op,
                       MPI_Comm comm, MPI_Request *request)
{
    NB_AGREE(wm_agree_reduction("MPI_Ireduce_scatter", 0, recvcounts, type, op, WM_AGREE_NO_ROOT, comm));
    return reduction(WM_REDUCE_SCATTER, sendbuf, recvbuf, 0, recvcounts, type, op, 0, comm, request);
}

/* Runs an allgather(v) whose arguments were checked, on the chosen path. */
static int allgatherv_run(const struct wm_comm *wc, MPI_Comm comm, enum wm_alg alg, const void *sendbuf,
                          int sendcount, MPI_Datatype sendtype, void *recvbuf, const int *recvcounts,
                          const int *displs, MPI_Datatype recvtype, MPI_Request *request)
{
    int rc;
    if (alg == WM_ALG_SINGLELANE)
        return wm_allgatherv_singlelane(wc, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype);
    SCHEDULE(rc, wc, comm, request, wm_allgatherv_multilane, sendbuf, sendcount, sendtype, recvbuf, recvcounts,
             displs, recvtype);
    return rc;
}

/* Whether my send data matches my block, as MPI requires (else MPI's own reports it). */
static int send_matches(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int64_t block_bytes)
{
    int ssize = 0;
    return sendbuf == MPI_IN_PLACE ||
           (sendcount >= 0 && type_size(sendtype, &ssize) && (int64_t)sendcount * ssize == block_bytes);
}

static int allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                     MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
    double t0 = PMPI_Wtime();
    const struct wm_comm *wc;
    enum wm_alg alg;
    int rc = enter(WM_ALLGATHER, comm, &wc, &alg, request), rsize = 0;
    if (rc != MPI_SUCCESS)
        return rc;
    int typed = type_size(recvtype, &rsize);
    if (alg != WM_ALG_MPI &&
        (recvcount < 0 || !typed || !send_matches(sendbuf, sendcount, sendtype, (int64_t)recvcount * rsize)))
        alg = WM_ALG_MPI;
    double bytes = (double)recvcount * rsize * (wc ? wc->size : 1);
    alg = nonblocking(decide(wc, WM_ALLGATHER, alg, bytes), request);
    if (alg == WM_ALG_MULTILANE || alg == WM_ALG_SINGLELANE) {
        int *counts = malloc(2 * sizeof(int) * (size_t)wc->size), *displs = counts + wc->size;
        if (!counts)
            wm_fatal("out of memory for an allgather of %d ranks", wc->size);
        for (int r = 0; r < wc->size; r++) {
            counts[r] = recvcount;
            displs[r] = r * recvcount;
        }
        rc = allgatherv_run(wc, comm, alg, sendbuf, sendcount, sendtype, recvbuf, counts, displs, recvtype,
                            request);
        free(counts);
    } else {
        rc = request ? MPI_OWN(PMPI_Iallgather, Allgather, comm, request, sendbuf, sendcount, sendtype, recvbuf,
                               recvcount, recvtype, comm)
                     : PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    }
    record(WM_ALLGATHER, alg, bytes, t0, request);
    return rc;
}

int wm_allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                 MPI_Datatype recvtype, MPI_Comm comm)
{
    int rc = wm_agree_allgather("MPI_Allgather", sendbuf, sendcount, sendtype, recvcount, NULL, recvtype, comm);
    return rc != MPI_SUCCESS ? rc : allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, NULL);
}

int wm_iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
    NB_AGREE(wm_agree_allgather("MPI_Iallgather", sendbuf, sendcount, sendtype, recvcount, NULL, recvtype, comm));
    return allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
}

static int allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                      const int *recvcounts, const int *displs, MPI_Datatype recvtype, MPI_Comm comm,
                      MPI_Request *request)
{
    double t0 = PMPI_Wtime();
    const struct wm_comm *wc;
    enum wm_alg alg;
    int rc = enter(WM_ALLGATHERV, comm, &wc, &alg, request), rsize = 0;
    if (rc != MPI_SUCCESS)
        return rc;
    int typed = type_size(recvtype, &rsize);
    double bytes = 0;
    if (alg != WM_ALG_MPI) {        /* every rank sees the same counts: the same choice everywhere */
        int ok = typed && recvcounts && displs;
        for (int r = 0; ok && r < wc->size; r++) {
            ok = recvcounts[r] >= 0 && displs[r] >= 0 && (int64_t)displs[r] * rsize <= INT_MAX;
            bytes += (double)recvcounts[r] * rsize;
        }
        if (!ok || bytes > INT_MAX ||
            !send_matches(sendbuf, sendcount, sendtype, (int64_t)recvcounts[wc->rank] * rsize))
            alg = WM_ALG_MPI;
    }
    alg = nonblocking(decide(wc, WM_ALLGATHERV, alg, bytes), request);
    if (alg == WM_ALG_MULTILANE || alg == WM_ALG_SINGLELANE)
        rc = allgatherv_run(wc, comm, alg, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                            request);
    else if (request)
        rc = MPI_OWN(PMPI_Iallgatherv, Allgatherv, comm, request, sendbuf, sendcount, sendtype, recvbuf,
                     recvcounts, displs, recvtype, comm);
    else
        rc = PMPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm);
    record(WM_ALLGATHERV, alg, bytes, t0, request);
    return rc;
}

int wm_allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int *recvcounts,
                  const int *displs, MPI_Datatype recvtype, MPI_Comm comm)
{
    int rc = wm_agree_allgather("MPI_Allgatherv", sendbuf, sendcount, sendtype, 0, recvcounts, recvtype, comm);
    return rc != MPI_SUCCESS ? rc
                             : allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, NULL);
}

int wm_iallgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                   const int *recvcounts, const int *displs, MPI_Datatype recvtype, MPI_Comm comm,
                   MPI_Request *request)
{
    NB_AGREE(wm_agree_allgather("MPI_Iallgatherv", sendbuf, sendcount, sendtype, 0, recvcounts, recvtype, comm));
    return allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, request);
}

/* Gather(v), scatter(v): each rank checks its own arguments (only the root
 * knows a v-variant's counts); one that MPI would reject goes to the MPI
 * library, which reports it there. `mine`: bytes of this rank's block;
 * `whole` (gather, scatter): the root's whole buffer, the same on every rank. */
static int rooted_enter(enum wm_coll coll, MPI_Comm comm, int root, const struct wm_comm **wc, enum wm_alg *alg)
{
    int rc = enter(coll, comm, wc, alg, NULL);
    if (rc == MPI_SUCCESS && *alg != WM_ALG_MPI && (root < 0 || root >= (*wc)->size))
        *alg = WM_ALG_MPI;
    return rc;
}

/* My block as a non-root rank: count elements of type, not MPI_IN_PLACE; -1 if MPI would reject it. */
static int64_t member_block(const void *buf, int count, MPI_Datatype type)
{
    int size = 0;
    return buf != MPI_IN_PLACE && count >= 0 && type_size(type, &size) ? (int64_t)count * size : -1;
}

/* The root's counts, every one >= 0; -1 if MPI would reject them, else their bytes. */
static double root_counts(const struct wm_comm *wc, const int *counts, const int *displs, MPI_Datatype type,
                          int *size)
{
    double bytes = 0;
    if (!counts || !displs || !type_size(type, size))
        return -1;
    for (int r = 0; r < wc->size; r++) {
        if (counts[r] < 0)
            return -1;
        bytes += (double)counts[r] * *size;
    }
    return bytes;
}

/* Gather and scatter as their v-variants: equal counts at displacements r * count. */
static int *equal_counts(const struct wm_comm *wc, int count)
{
    int *counts = malloc(2 * sizeof(int) * (size_t)wc->size);
    if (!counts)
        wm_fatal("out of memory for a collective of %d ranks", wc->size);
    for (int r = 0; r < wc->size; r++) {
        counts[r] = count;
        counts[wc->size + r] = r * count;
    }
    return counts;
}

/* Gather or scatter: the root's buffer of every block is (whole, wcount,
 * wtype): the receive side of a gather, the send side of a scatter; every
 * rank's own block is the other side. */
static int rooted(enum wm_coll coll, const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    double t0 = PMPI_Wtime();
    const struct wm_comm *wc;
    enum wm_alg alg;
    int gather = coll == WM_GATHER, wcount = gather ? recvcount : sendcount, ocount = gather ? sendcount : recvcount;
    MPI_Datatype wtype = gather ? recvtype : sendtype, otype = gather ? sendtype : recvtype;
    const void *own = gather ? sendbuf : recvbuf;
    int rc = rooted_enter(coll, comm, root, &wc, &alg), wsize = 0;
    if (rc != MPI_SUCCESS)
        return rc;
    int64_t block = -1;
    if (alg != WM_ALG_MPI && wc->rank == root) {
        if (wcount >= 0 && type_size(wtype, &wsize) && send_matches(own, ocount, otype, (int64_t)wcount * wsize))
            block = (int64_t)wcount * wsize;
    } else if (alg != WM_ALG_MPI) {
        block = member_block(own, ocount, otype);
    }
    if (block < 0 || block * wc->size > INT_MAX)
        alg = WM_ALG_MPI;
    double bytes = block > 0 ? (double)block * wc->size : 0;
    alg = decide(wc, coll, alg, bytes);
    int *counts = alg != WM_ALG_MPI && wc->rank == root ? equal_counts(wc, wcount) : NULL;
    int *displs = counts ? counts + wc->size : NULL;
    if (alg == WM_ALG_MPI)
        rc = gather ? PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm)
                    : PMPI_Scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
    else
        rc = gather ? wm_gatherv_run(wc, 1, sendbuf, sendcount, sendtype, recvbuf, counts, displs, recvtype, root)
                    : wm_scatterv_run(wc, 1, sendbuf, counts, displs, sendtype, recvbuf, recvcount, recvtype, root);
    free(counts);
    wm_stats_call(coll, alg, bytes, PMPI_Wtime() - t0);
    return rc;
}

/* Gatherv or scatterv, as `rooted`: the root's (whole, wcounts, displs, wtype). */
static int rooted_v(enum wm_coll coll, const void *sendbuf, const int *sendcounts, int sendcount,
                    MPI_Datatype sendtype, void *recvbuf, const int *recvcounts, int recvcount,
                    const int *displs, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    double t0 = PMPI_Wtime();
    const struct wm_comm *wc;
    enum wm_alg alg;
    int gather = coll == WM_GATHERV, ocount = gather ? sendcount : recvcount;
    const int *wcounts = gather ? recvcounts : sendcounts;
    MPI_Datatype wtype = gather ? recvtype : sendtype, otype = gather ? sendtype : recvtype;
    const void *own = gather ? sendbuf : recvbuf;
    int rc = rooted_enter(coll, comm, root, &wc, &alg), wsize = 0;
    if (rc != MPI_SUCCESS)
        return rc;
    double bytes = 0;
    if (alg != WM_ALG_MPI && wc->rank == root) {
        bytes = root_counts(wc, wcounts, displs, wtype, &wsize);
        if (bytes < 0 || !send_matches(own, ocount, otype, (int64_t)wcounts[root] * wsize))
            alg = WM_ALG_MPI;
    } else if (alg != WM_ALG_MPI) {
        bytes = (double)member_block(own, ocount, otype);
        if (bytes < 0)
            alg = WM_ALG_MPI;
    }
    alg = decide(wc, coll, alg, 0);             /* only the root knows the size: none in the choice */
    if (alg == WM_ALG_MPI)
        rc = gather ? PMPI_Gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm)
                    : PMPI_Scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm);
    else
        rc = gather ? wm_gatherv_run(wc, 0, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root)
                    : wm_scatterv_run(wc, 0, sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype,
                                      root);
    wm_stats_call(coll, alg, bytes > 0 ? bytes : 0, PMPI_Wtime() - t0);
    return rc;
}

int wm_gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
              MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    int rc = wm_agree_rooted("MPI_Gather", 1, sendcount, sendtype, recvcount, NULL, recvtype, root, comm);
    return rc != MPI_SUCCESS ? rc : rooted(WM_GATHER, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
}

int wm_scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
               MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    int rc = wm_agree_rooted("MPI_Scatter", 0, recvcount, recvtype, sendcount, NULL, sendtype, root, comm);
    return rc != MPI_SUCCESS ? rc : rooted(WM_SCATTER, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
}

int wm_gatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int *recvcounts,
               const int *displs, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    int rc = wm_agree_rooted("MPI_Gatherv", 1, sendcount, sendtype, 0, recvcounts, recvtype, root, comm);
    return rc != MPI_SUCCESS ? rc
                             : rooted_v(WM_GATHERV, sendbuf, NULL, sendcount, sendtype, recvbuf, recvcounts, 0, displs,
                                        recvtype, root, comm);
}

int wm_scatterv(const void *sendbuf, const int *sendcounts, const int *displs, MPI_Datatype sendtype,
                void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    int rc = wm_agree_rooted("MPI_Scatterv", 0, recvcount, recvtype, 0, sendcounts, sendtype, root, comm);
    return rc != MPI_SUCCESS ? rc
                             : rooted_v(WM_SCATTERV, sendbuf, sendcounts, 0, sendtype, recvbuf, NULL, recvcount, displs,
                                        recvtype, root, comm);
}

/* Scan or exscan: the cluster chain (scan.c) where each cluster is one
 * contiguous rank range, else the MPI library's own. */
static int scan(enum wm_coll coll, const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op,
                MPI_Comm comm)
{
    double t0 = PMPI_Wtime();
    const struct wm_comm *wc;
    enum wm_alg alg;
    int rc = enter(coll, comm, &wc, &alg, NULL), size = 0, exclusive = coll == WM_EXSCAN;
    if (rc != MPI_SUCCESS)
        return rc;
    int typed = type_size(type, &size);
    if (alg != WM_ALG_MPI && (count < 0 || !typed || !op_fits_type(type, op) || !wm_scan_fits(wc)))
        alg = WM_ALG_MPI;
    double bytes = (double)count * size;
    alg = decide(wc, coll, alg, bytes);
    if (alg != WM_ALG_MPI)
        rc = wm_scan_run(wc, exclusive, sendbuf, recvbuf, count, type, op);
    else if (exclusive)
        rc = PMPI_Exscan(sendbuf, recvbuf, count, type, op, comm);
    else
        rc = PMPI_Scan(sendbuf, recvbuf, count, type, op, comm);
    wm_stats_call(coll, alg, bytes > 0 ? bytes : 0, PMPI_Wtime() - t0);
    return rc;
}

int wm_scan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm)
{
    int rc = wm_agree_reduction("MPI_Scan", count, NULL, type, op, WM_AGREE_NO_ROOT, comm);
    return rc != MPI_SUCCESS ? rc : scan(WM_SCAN, sendbuf, recvbuf, count, type, op, comm);
}

int wm_exscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm)
{
    int rc = wm_agree_reduction("MPI_Exscan", count, NULL, type, op, WM_AGREE_NO_ROOT, comm);
    return rc != MPI_SUCCESS ? rc : scan(WM_EXSCAN, sendbuf, recvbuf, count, type, op, comm);
}

/* The MPI's own (a WAN barrier is one round trip either way), held like ours. */
int wm_ibarrier(MPI_Comm comm, MPI_Request *request)
{
    return adopt(PMPI_Ibarrier(comm, request), comm, request);
}

int wm_barrier_call(MPI_Comm comm)
{
    double t0 = PMPI_Wtime();
    const struct wm_comm *wc;
    enum wm_alg alg;
    int rc = enter(WM_BARRIER, comm, &wc, &alg, NULL);
    if (rc != MPI_SUCCESS)
        return rc;
    /* one algorithm: single-lane and multi-lane are the same for a barrier */
    alg = decide(wc, WM_BARRIER, alg, 0);
    rc = alg == WM_ALG_MPI ? PMPI_Barrier(comm) : wm_barrier(wc);
    wm_stats_call(WM_BARRIER, alg, 0, PMPI_Wtime() - t0);
    return rc;
}

/* Would MPI accept these counts? Sizes must agree pairwise only on the
 * receiving side, which we cannot see; MPI checks that itself. */
static int counts_ok(const int *counts, const int *displs, int n)
{
    if (!counts || !displs)
        return 0;
    for (int p = 0; p < n; p++)
        if (counts[p] < 0)
            return 0;
    return 1;
}

static int alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                    MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
    double t0 = PMPI_Wtime();
    const struct wm_comm *wc;
    enum wm_alg alg;
    int rc = enter(WM_ALLTOALL, comm, &wc, &alg, request), ssize = 0, rsize = 0;
    if (rc != MPI_SUCCESS)
        return rc;
    int typed = type_size(recvtype, &rsize);
    if (alg != WM_ALG_MPI) {
        if (recvcount < 0 || !typed || (long long)recvcount * wc->size > INT_MAX)
            alg = WM_ALG_MPI;
        else if (sendbuf != MPI_IN_PLACE &&
                 (sendcount < 0 || !type_size(sendtype, &ssize) ||
                  (long long)sendcount * ssize != (long long)recvcount * rsize ||
                  (long long)sendcount * wc->size > INT_MAX))
            alg = WM_ALG_MPI;
    }
    double bytes = (double)recvcount * rsize * (wc ? wc->size : 1);
    alg = decide(wc, WM_ALLTOALL, alg, bytes);
    if (alg == WM_ALG_SCHEDULED && sendbuf == MPI_IN_PLACE)
        alg = WM_ALG_PACED;         /* the schedule needs a separate send buffer */
    alg = nonblocking(alg, request);
    if (alg == WM_ALG_MPI)
        rc = request ? MPI_OWN(PMPI_Ialltoall, Alltoall, comm, request, sendbuf, sendcount, sendtype, recvbuf,
                               recvcount, recvtype, comm)
                     : PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    else if (request)
        SCHEDULE(rc, wc, comm, request, wm_alltoall_scheduled, sendbuf, sendcount, sendtype, recvbuf, recvcount,
                 recvtype);
    else if (sendbuf == MPI_IN_PLACE)
        rc = wm_alltoall_run(wc, alg, sendbuf, recvcount, recvtype, recvbuf, recvcount, recvtype);
    else
        rc = wm_alltoall_run(wc, alg, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype);
    record(WM_ALLTOALL, alg, bytes, t0, request);
    return rc;
}

int wm_alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                MPI_Datatype recvtype, MPI_Comm comm)
{
    int rc = wm_agree_alltoall("MPI_Alltoall", sendbuf, sendcount, NULL, sendtype, NULL, recvcount, NULL, recvtype, NULL,
                               comm);
    return rc != MPI_SUCCESS ? rc : alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, NULL);
}

int wm_ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                 MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
    NB_AGREE(wm_agree_alltoall("MPI_Ialltoall", sendbuf, sendcount, NULL, sendtype, NULL, recvcount, NULL, recvtype,
                               NULL, comm));
    return alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
}

static int alltoallv(const void *sendbuf, const int *sendcounts, const int *sdispls, MPI_Datatype sendtype,
                     void *recvbuf, const int *recvcounts, const int *rdispls, MPI_Datatype recvtype, MPI_Comm comm,
                     MPI_Request *request)
{
    double t0 = PMPI_Wtime();
    const struct wm_comm *wc;
    enum wm_alg alg;
    int rc = enter(WM_ALLTOALLV, comm, &wc, &alg, request), ssize = 0, rsize = 0;
    if (rc != MPI_SUCCESS)
        return rc;
    if (alg != WM_ALG_MPI) {
        if (!type_size(recvtype, &rsize) || !counts_ok(recvcounts, rdispls, wc->size))
            alg = WM_ALG_MPI;
        else if (sendbuf != MPI_IN_PLACE && (!type_size(sendtype, &ssize) ||
                                             !counts_ok(sendcounts, sdispls, wc->size)))
            alg = WM_ALG_MPI;
    }
    alg = decide(wc, WM_ALLTOALLV, alg, 0);     /* per-rank sizes differ: no size in the choice */
    if (alg == WM_ALG_SCHEDULED && sendbuf == MPI_IN_PLACE)
        alg = WM_ALG_PACED;
    alg = nonblocking(alg, request);
    double bytes = 0;
    if (alg != WM_ALG_MPI)
        for (int p = 0; p < wc->size; p++)
            bytes += (double)recvcounts[p] * rsize;
    if (alg == WM_ALG_MPI && request)
        rc = MPI_OWN(PMPI_Ialltoallv, Alltoallv, comm, request, sendbuf, sendcounts, sdispls, sendtype, recvbuf,
                     recvcounts, rdispls, recvtype, comm);
    else if (alg == WM_ALG_MPI)
        rc = PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype,
                            comm);
    else if (request)
        SCHEDULE(rc, wc, comm, request, wm_alltoallv_scheduled, sendbuf, sendcounts, sdispls, sendtype, recvbuf,
                 recvcounts, rdispls, recvtype);
    else if (sendbuf == MPI_IN_PLACE)
        rc = wm_alltoallv_run(wc, alg, sendbuf, recvcounts, rdispls, recvtype, recvbuf, recvcounts, rdispls,
                              recvtype);
    else
        rc = wm_alltoallv_run(wc, alg, sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                              recvtype);
    record(WM_ALLTOALLV, alg, bytes, t0, request);
    return rc;
}

int wm_alltoallv(const void *sendbuf, const int *sendcounts, const int *sdispls, MPI_Datatype sendtype,
                 void *recvbuf, const int *recvcounts, const int *rdispls, MPI_Datatype recvtype, MPI_Comm comm)
{
    int rc = wm_agree_alltoall("MPI_Alltoallv", sendbuf, 0, sendcounts, sendtype, NULL, 0, recvcounts, recvtype, NULL,
                               comm);
    return rc != MPI_SUCCESS
               ? rc
               : alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, NULL);
}

int wm_ialltoallv(const void *sendbuf, const int *sendcounts, const int *sdispls, MPI_Datatype sendtype,
                  void *recvbuf, const int *recvcounts, const int *rdispls, MPI_Datatype recvtype, MPI_Comm comm,
                  MPI_Request *request)
{
    NB_AGREE(wm_agree_alltoall("MPI_Ialltoallv", sendbuf, 0, sendcounts, sendtype, NULL, 0, recvcounts, recvtype,
                               NULL, comm));
    return alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm,
                     request);
}

int wm_finalize(void)
{
    wm_nb_thread_stop();
    wm_finalize_fence();                /* first: every rank's last messages are in (fence.c) */
    wm_stats_write();
    wm_comm_release_all();
    wm_own_alltoall_finalize();
    wm_udp_finalizing();
    return PMPI_Finalize();
}

/* ---- C bindings ---- */

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm)
{
    return wm_bcast(buf, count, type, root, comm);
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm)
{
    return wm_allreduce(sendbuf, recvbuf, count, type, op, comm);
}

int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, int root,
               MPI_Comm comm)
{
    return wm_reduce(sendbuf, recvbuf, count, type, op, root, comm);
}

int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype type,
                             MPI_Op op, MPI_Comm comm)
{
    return wm_reduce_scatter_block(sendbuf, recvbuf, recvcount, type, op, comm);
}

int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype type, MPI_Op op,
                       MPI_Comm comm)
{
    return wm_reduce_scatter(sendbuf, recvbuf, recvcounts, type, op, comm);
}

int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm)
{
    return wm_allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                   const int displs[], MPI_Datatype recvtype, MPI_Comm comm)
{
    return wm_allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm);
}

int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
               MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    return wm_gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
}

int MPI_Gatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    return wm_gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm);
}

int MPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    return wm_scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
}

int MPI_Scatterv(const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                 void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    return wm_scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm);
}

int MPI_Scan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm)
{
    return wm_scan(sendbuf, recvbuf, count, type, op, comm);
}

int MPI_Exscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm)
{
    return wm_exscan(sendbuf, recvbuf, count, type, op, comm);
}

int MPI_Barrier(MPI_Comm comm)
{
    return wm_barrier_call(comm);
}

int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                 MPI_Datatype recvtype, MPI_Comm comm)
{
    return wm_alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                  void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm)
{
    return wm_alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm);
}

int MPI_Finalize(void)
{
    return wm_finalize();
}

/* ---- public API (include/wanmpi.h) ---- */

int wanmpi_comm_clusters(MPI_Comm comm, int *nclusters, int *my_cluster)
{
    struct wm_comm *wc;
    int rc = wm_comm_get(comm, &wc);
    if (rc != MPI_SUCCESS)
        return rc;
    *nclusters = wc->flat ? 1 : wc->nclusters;
    *my_cluster = wc->flat ? 0 : wc->my_cluster;
    return MPI_SUCCESS;
}

/* ---- for the entry points in files of their own (entry.h) ---- */

int wm_entry_enter(enum wm_coll c, MPI_Comm comm, const struct wm_comm **out, enum wm_alg *alg,
                   MPI_Request *request)
{
    return enter(c, comm, out, alg, request);
}

int wm_entry_nb_agree(void)
{
    return nb_agree();
}

enum wm_alg wm_entry_decide(const struct wm_comm *wc, enum wm_coll c, enum wm_alg alg, double bytes)
{
    return decide(wc, c, alg, bytes);
}

enum wm_alg wm_entry_nonblocking(enum wm_alg alg, MPI_Request *request)
{
    return nonblocking(alg, request);
}

int wm_entry_adopt(int rc, MPI_Comm comm, MPI_Request *request)
{
    return adopt(rc, comm, request);
}

void wm_entry_record(enum wm_coll c, enum wm_alg alg, double bytes, double t0, MPI_Request *request)
{
    record(c, alg, bytes, t0, request);
}
