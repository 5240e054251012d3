/* collcheck_nb.c: collcheck's nonblocking mode (--nonblocking) and its check
 * of erroneous calls on an active nonblocking collective (--request-errors).
 * Included by collcheck.c, not compiled alone: `make` and `make install`
 * build collcheck from collcheck.c as one translation unit.
 *
 * --nonblocking: the MPI_ side of every case calls the I-variant
 * (MPI_Ibcast, MPI_Iallreduce, ... MPI_Ibarrier) and completes it with a
 * call drawn from the case, the same on every rank that must agree:
 * MPI_Wait; an MPI_Test loop; an MPI_Request_get_status loop, then
 * MPI_Wait; or, among other requests (a point-to-point ring exchange with
 * a checked payload, and sometimes an MPI_REQUEST_NULL), in an order drawn
 * too: MPI_Waitall, an MPI_Testall loop, an MPI_Waitany, MPI_Testany,
 * MPI_Waitsome or MPI_Testsome loop. The ring runs on MPI_COMM_WORLD, or
 * on the case's communicator when a case is run from every root in turn
 * (the groups of a split run a different number of roots). In 3 cases of
 * 8 (never for a barrier), a second nonblocking collective on the same
 * communicator or on a duplicate of it (an MPI_Iallreduce or MPI_Ibcast of
 * 1-16 or 20000-150000 known integers, or an MPI_Ibarrier) starts right
 * after the case's, and the two complete in reverse order. Every
 * communicator first gets one blocking MPI_Allreduce (nb_setup). Checked besides collcheck's usual:
 * a started collective returns a request, every completion call leaves
 * MPI_REQUEST_NULL behind (MPI_Request_get_status does not), an
 * any/some loop returns each request once and then MPI_UNDEFINED, the ring
 * payload and its status, the second collective's result. The PMPI_ side
 * stays the blocking call: the reference.
 *
 * --request-errors: on several communicators (after one blocking
 * MPI_Allreduce each), for an active MPI_Iallreduce and MPI_Ibcast of 1000
 * and of 100000 integers and an MPI_Ibarrier, MPI_Request_free and then
 * MPI_Cancel (and MPI_Cancel alone, on another such request) must
 * fail with error class MPI_ERR_REQUEST (MPI_ERRORS_RETURN on
 * MPI_COMM_WORLD and on the communicator), leave the request as it was, and
 * MPI_Wait must then complete it, not cancelled, with the right result.
 * Both calls are erroneous in the standard, so an MPI may accept them (or
 * crash): this is asserted only with WANMPI_EXPECT_REQUEST_ERRORS=1, else
 * rank 0 prints what the MPI answered.
 */
#include <sched.h>

static const char *coll_impi[NCOLL] = {"MPI_Ibcast", "MPI_Iallreduce", "MPI_Ireduce", "MPI_Iallgather",
                                       "MPI_Ireduce_scatter_block", "MPI_Ibarrier", "MPI_Igather",
                                       "MPI_Iscatter", "MPI_Iallgatherv", "MPI_Igatherv", "MPI_Iscatterv",
                                       "MPI_Iscan", "MPI_Iexscan", "MPI_Ireduce_scatter"};

enum { NB_WAIT, NB_TEST, NB_GETSTATUS, NB_WAITALL, NB_TESTALL, NB_WAITANY, NB_TESTANY, NB_WAITSOME,
       NB_TESTSOME, NB_NMODES };
#define NB_MIXED NB_WAITALL /* this mode and the later ones complete the collective among other requests */
static const char *nb_mode_name[NB_NMODES] = {
    "MPI_Wait", "an MPI_Test loop", "an MPI_Request_get_status loop, then MPI_Wait", "MPI_Waitall",
    "an MPI_Testall loop", "an MPI_Waitany loop", "an MPI_Testany loop", "an MPI_Waitsome loop",
    "an MPI_Testsome loop"};
static const char *nb_call_name[NB_NMODES] = {"MPI_Wait", "MPI_Test", "MPI_Request_get_status", "MPI_Waitall",
                                              "MPI_Testall", "MPI_Waitany", "MPI_Testany", "MPI_Waitsome",
                                              "MPI_Testsome"};
enum { NB2_NONE, NB2_ALLREDUCE, NB2_BCAST, NB2_BARRIER };
static const char *nb2_name[] = {"-", "MPI_Iallreduce", "MPI_Ibcast", "MPI_Ibarrier"};

#define NB_TAG 0x4e42 /* the ring's tag */
#define NB_RING_MAX 3000
#define NB_RING_CANARY 0xa5a5a5a5u

static MPI_Comm nb_dup[NCOMM]; /* a duplicate of each communicator, for the second collective */
static int *nb2_in, *nb2_out;  /* the second collective's buffers */

static struct {
    const ccase *c;
    MPI_Comm comm;
    int root;
    MPI_Request req;   /* the case's request: the I-variant writes it */
    int mode, second, second_dup, second_wait, n2, nring, nullslot;
    uint64_t order;    /* order of the requests in a mixed completion */
    double t_done;     /* when the case's collective was seen complete */
    char call[160];    /* the call that returned an error */
} nb;

/* The duplicates, and one blocking MPI_Allreduce through its MPI_ name on
 * every communicator, as a program would have had: libwanmpi builds a
 * communicator's cluster map in a blocking collective (never in a
 * nonblocking one, which must not wait for other ranks) and sends the
 * nonblocking calls on a communicator without one to the MPI's own. */
static void nb_setup(void)
{
    for (int k = 0; k < NCOMM; k++)
        MPI_Comm_dup(comms[k], &nb_dup[k]);
    for (int k = 0; k < 2 * NCOMM; k++) {
        MPI_Comm comm = k < NCOMM ? comms[k] : nb_dup[k - NCOMM];
        int one = 1, n = 0, cs, rc = MPI_Allreduce(&one, &n, 1, MPI_INT, MPI_SUM, comm);
        MPI_Comm_size(comm, &cs);
        if (rc != MPI_SUCCESS || n != cs) {
            fprintf(stderr, "collcheck: the first MPI_Allreduce on %s%s returned %d and %d, expected %d\n",
                    k < NCOMM ? "" : "a duplicate of ", comm_name[k % NCOMM], rc, n, cs);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
}

static void nb_teardown(void)
{
    free(nb2_in);
    free(nb2_out);
    for (int k = 0; k < NCOMM; k++)
        MPI_Comm_free(&nb_dup[k]);
}

/* The plan of the MPI_ side of (case, root). A case run from one root
 * draws it from the case alone, so every world rank agrees (the ring
 * spans the world); a case run from every root in turn draws it per root
 * and rings on its own communicator, whose ranks run the same roots. */
static void nb_plan(const ccase *c, MPI_Comm comm, int root)
{
    uint64_t h = mix64(c->bseed ^ 0x6e6f6e626c6f636bULL ^
                       (c->sweep ? ((uint64_t)root + 1) * 0x9e3779b97f4a7c15ULL : 0));
    memset(&nb, 0, sizeof nb);
    nb.c = c;
    nb.comm = comm;
    nb.root = root;
    nb.req = MPI_REQUEST_NULL;
    nb.mode = (int)(h % NB_NMODES);
    int s = (int)((h >> 8) & 7);
    nb.second = c->coll == BARRIER ? NB2_NONE /* it would hide an early exit from the barrier */
              : s < 2 ? NB2_ALLREDUCE : s == 2 ? NB2_BCAST : s == 3 ? NB2_BARRIER : NB2_NONE;
    nb.second_dup = (int)((h >> 11) & 1);
    nb.second_wait = (int)((h >> 12) & 1);
    /* a few integers (the MPI's own in libwanmpi), or enough for a schedule of its own */
    nb.n2 = (h >> 40) & 1 ? 1 + (int)((h >> 41) % 16) : 20000 + (int)((h >> 41) % 130000);
    nb.nring = ((h >> 13) & 7) == 0 ? 0 : 1 + (int)((h >> 16) % NB_RING_MAX);
    nb.nullslot = (int)((h >> 30) & 1);
    nb.order = h >> 32;
}

static void nb_describe(char *out, size_t n)
{
    int mixed = nb.mode >= NB_MIXED;
    char second[160] = "";
    if (nb.second == NB2_BARRIER)
        snprintf(second, sizeof second, ", after a second collective (MPI_Ibarrier on %s) completed first",
                 nb.second_dup ? "a duplicate of the communicator" : "the same communicator");
    else if (nb.second)
        snprintf(second, sizeof second, ", after a second collective (%s of %d MPI_INT on %s) completed first",
                 nb2_name[nb.second], nb.n2, nb.second_dup ? "a duplicate of the communicator" : "the same communicator");
    snprintf(out, n, "; nonblocking: %s completed by %s%s%s%s", coll_impi[nb.c->coll], nb_mode_name[nb.mode],
             mixed ? (nb.c->sweep ? " with a ring exchange on the case's communicator"
                                  : " with a ring exchange on MPI_COMM_WORLD") : "",
             mixed && nb.nullslot ? " and an MPI_REQUEST_NULL" : "", second);
}

static void nb_pause(long *polls)
{
    if (++*polls < 64) sched_yield();
    else usleep(50);
}

/* ---------- the second collective ---------- */

static int nb2_val(int r, int k) { return (nb.c->idx % 1000 + 1) * 1000 + r * 37 + k % 100000; }
static int nb2_count(void) { return nb.n2; }
static MPI_Comm nb2_comm(void) { return nb.second_dup ? nb_dup[nb.c->comm] : nb.comm; }

static int nb2_start(MPI_Request *r2)
{
    MPI_Comm comm = nb2_comm();
    int cr, cs, n = nb2_count();
    MPI_Comm_rank(comm, &cr);
    MPI_Comm_size(comm, &cs);
    int root2 = (nb.root + 1) % cs;
    nb2_in = realloc(nb2_in, sizeof(int) * (size_t)n);
    nb2_out = realloc(nb2_out, sizeof(int) * (size_t)n);
    for (int k = 0; k < n; k++) {
        nb2_in[k] = nb2_val(cr, k);
        nb2_out[k] = nb.second == NB2_BCAST && cr == root2 ? nb2_val(-1, k) : -1;
    }
    if (nb.second == NB2_ALLREDUCE)
        return MPI_Iallreduce(nb2_in, nb2_out, n, MPI_INT, MPI_SUM, comm, r2);
    if (nb.second == NB2_BCAST)
        return MPI_Ibcast(nb2_out, n, MPI_INT, root2, comm, r2);
    return MPI_Ibarrier(comm, r2);
}

static void nb2_check(outcome *o)
{
    MPI_Comm comm = nb2_comm();
    int cs, n = nb2_count();
    MPI_Comm_size(comm, &cs);
    if (nb.second == NB2_BARRIER) return;
    for (int k = 0; k < n && !o->err[0]; k++) {
        int want = nb2_val(-1, k);
        if (nb.second == NB2_ALLREDUCE) /* sum over r of nb2_val(r, k) */
            want = cs * nb2_val(0, k) + 37 * (cs * (cs - 1) / 2);
        if (nb2_out[k] != want)
            snprintf(o->err, sizeof o->err, "the second collective, %s of %d MPI_INT, gave %d at index %d, "
                     "expected %d", nb2_name[nb.second], n, nb2_out[k], k, want);
    }
}

/* ---------- the ring exchange beside a mixed completion ---------- */

static uint32_t nb_ring_val(int from, long i)
{
    return (uint32_t)mix64(nb.c->dseed ^ ((uint64_t)(nb.c->sweep ? nb.root + 1 : 0) << 40) ^
                           ((uint64_t)from << 20) ^ (uint64_t)i);
}

static MPI_Comm nb_ring_comm(void) { return nb.c->sweep ? nb.comm : MPI_COMM_WORLD; }

static void nb_ring_neighbours(int *left, int *right, int *me)
{
    int rr, rs;
    MPI_Comm_rank(nb_ring_comm(), &rr);
    MPI_Comm_size(nb_ring_comm(), &rs);
    *left = (rr + rs - 1) % rs;
    *right = (rr + 1) % rs;
    *me = rr;
}

static void nb_ring_check(outcome *o, const uint32_t *rbuf, const MPI_Status *st)
{
    int left, right, me, got = -1;
    nb_ring_neighbours(&left, &right, &me);
    MPI_Get_count(st, MPI_UINT32_T, &got);
    if (st->MPI_SOURCE != left || st->MPI_TAG != NB_TAG || got != nb.nring) {
        snprintf(o->err, sizeof o->err, "the ring receive's status says source %d, tag %d, count %d; "
                 "expected %d, %d, %d", st->MPI_SOURCE, st->MPI_TAG, got, left, NB_TAG, nb.nring);
        return;
    }
    for (long i = 0; i <= nb.nring; i++) {
        uint32_t want = i < nb.nring ? nb_ring_val(left, i) : NB_RING_CANARY;
        if (rbuf[i] != want) {
            snprintf(o->err, sizeof o->err, "the ring exchange beside the collective received %#x at index "
                     "%ld of %d, expected %#x", rbuf[i], i, nb.nring, want);
            return;
        }
    }
}

/* ---------- completing the case's request ---------- */

static void nb_call(const char *call)
{
    snprintf(nb.call, sizeof nb.call, "%s (completing %s)", call, coll_impi[nb.c->coll]);
}

/* MPI_Wait, an MPI_Test loop, or an MPI_Request_get_status loop then MPI_Wait */
static int nb_single(outcome *o, MPI_Request *req, int mode)
{
    MPI_Status st;
    int rc = MPI_SUCCESS, flag = 0;
    long polls = 0;
    if (mode == NB_WAIT) {
        rc = MPI_Wait(req, &st);
    } else {
        while (rc == MPI_SUCCESS && !flag) {
            rc = mode == NB_TEST ? MPI_Test(req, &flag, &st) : MPI_Request_get_status(*req, &flag, &st);
            if (!flag) nb_pause(&polls);
        }
        if (rc == MPI_SUCCESS && mode == NB_GETSTATUS) {
            if (*req == MPI_REQUEST_NULL) {
                snprintf(o->err, sizeof o->err, "the request is MPI_REQUEST_NULL after MPI_Request_get_status");
                return rc;
            }
            rc = MPI_Wait(req, &st);
            mode = NB_WAIT;
        }
    }
    if (rc != MPI_SUCCESS) nb_call(nb_call_name[mode]);
    else if (*req != MPI_REQUEST_NULL && !o->err[0])
        snprintf(o->err, sizeof o->err, "the request is not MPI_REQUEST_NULL after %s", nb_call_name[mode]);
    return rc;
}

/* the first error in the statuses of an MPI_ERR_IN_STATUS, the collective's first */
static int nb_status_error(int rc, int n, const MPI_Status *st, int coll_slot)
{
    if (rc != MPI_ERR_IN_STATUS) return rc;
    if (st[coll_slot].MPI_ERROR != MPI_SUCCESS && st[coll_slot].MPI_ERROR != MPI_ERR_PENDING)
        return st[coll_slot].MPI_ERROR;
    for (int i = 0; i < n; i++)
        if (st[i].MPI_ERROR != MPI_SUCCESS && st[i].MPI_ERROR != MPI_ERR_PENDING) return st[i].MPI_ERROR;
    return rc;
}

/* one call of an any/some completion; *idx gets the completed indices */
static int nb_any_some(int mode, int n, MPI_Request *reqs, int *outcount, int *idx, MPI_Status *st)
{
    int flag = 1, rc;
    switch (mode) {
    case NB_WAITANY: rc = MPI_Waitany(n, reqs, &idx[0], &st[0]); break;
    case NB_TESTANY: rc = MPI_Testany(n, reqs, &idx[0], &flag, &st[0]); break;
    case NB_WAITSOME: return MPI_Waitsome(n, reqs, outcount, idx, st);
    default: return MPI_Testsome(n, reqs, outcount, idx, st);
    }
    *outcount = !flag ? 0 : idx[0] == MPI_UNDEFINED ? MPI_UNDEFINED : 1;
    return rc;
}

/* complete every request of reqs (some MPI_REQUEST_NULL) with the mode;
 * st[i] gets request i's status */
static int nb_all(outcome *o, int mode, int n, MPI_Request *reqs, MPI_Status *st, int coll_slot)
{
    int rc = MPI_SUCCESS, flag = 0, active = 0, done[4] = {0}, idx[4], outcount;
    MPI_Status got[4];
    long polls = 0;
    for (int i = 0; i < n; i++)
        if (reqs[i] != MPI_REQUEST_NULL) active++;
        else done[i] = 1;
    if (mode == NB_WAITALL) {
        rc = MPI_Waitall(n, reqs, st);
        nb.t_done = now();
    } else if (mode == NB_TESTALL) {
        while (rc == MPI_SUCCESS && !flag) {
            rc = MPI_Testall(n, reqs, &flag, st);
            if (!flag) nb_pause(&polls);
        }
        nb.t_done = now();
    } else {
        while (rc == MPI_SUCCESS && active > 0 && !o->err[0]) {
            rc = nb_any_some(mode, n, reqs, &outcount, idx, got);
            if (rc == MPI_ERR_IN_STATUS) /* Waitsome, Testsome: the statuses say which failed */
                for (int k = 0; k < outcount && k < n; k++)
                    if (idx[k] >= 0 && idx[k] < n) st[idx[k]] = got[k];
            if (rc != MPI_SUCCESS) break;
            if (outcount == 0) { nb_pause(&polls); continue; }
            if (outcount == MPI_UNDEFINED)
                snprintf(o->err, sizeof o->err, "%s found no active request while %d were active",
                         nb_call_name[mode], active);
            for (int k = 0; k < outcount && !o->err[0]; k++) {
                if (idx[k] < 0 || idx[k] >= n || done[idx[k]]) {
                    snprintf(o->err, sizeof o->err, "%s returned index %d (of %d requests), not an active one",
                             nb_call_name[mode], idx[k], n);
                    break;
                }
                if (idx[k] == coll_slot) nb.t_done = now();
                done[idx[k]] = 1;
                st[idx[k]] = got[k];
                active--;
            }
        }
        if (rc == MPI_SUCCESS && !o->err[0]) { /* nothing is active any more */
            rc = nb_any_some(mode, n, reqs, &outcount, idx, got);
            if (rc == MPI_SUCCESS && outcount != MPI_UNDEFINED)
                snprintf(o->err, sizeof o->err, "%s with every request completed gave %d completions, "
                         "not MPI_UNDEFINED", nb_call_name[mode], outcount);
        }
    }
    if (rc != MPI_SUCCESS) {
        nb_call(nb_call_name[mode]);
        return nb_status_error(rc, n, st, coll_slot);
    }
    for (int i = 0; i < n && !o->err[0]; i++)
        if (reqs[i] != MPI_REQUEST_NULL)
            snprintf(o->err, sizeof o->err, "request %d of %d is not MPI_REQUEST_NULL after %s", i, n,
                     nb_call_name[mode]);
    return rc;
}

/* the collective among a ring exchange (and maybe an MPI_REQUEST_NULL), in a drawn order */
static int nb_mixed(outcome *o)
{
    enum { K_COLL, K_RECV, K_SEND, K_NULL };
    int kind[4] = {K_COLL, K_RECV, K_SEND, K_NULL}, n = nb.nullslot ? 4 : 3, slot[4];
    rng_t r = {nb.order};
    for (int i = n - 1; i > 0; i--) {
        int j = (int)rbelow(&r, (uint64_t)i + 1), t = kind[i];
        kind[i] = kind[j];
        kind[j] = t;
    }
    for (int i = 0; i < n; i++) slot[kind[i]] = i;
    int left, right, me;
    nb_ring_neighbours(&left, &right, &me);
    uint32_t *sbuf = malloc(sizeof(uint32_t) * (NB_RING_MAX + 1)), *rbuf = malloc(sizeof(uint32_t) * (NB_RING_MAX + 1));
    for (long i = 0; i <= NB_RING_MAX; i++) {
        sbuf[i] = nb_ring_val(me, i);
        rbuf[i] = NB_RING_CANARY;
    }
    MPI_Request reqs[4] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    MPI_Status st[4];
    memset(st, 0, sizeof st);
    reqs[slot[K_COLL]] = nb.req;
    int rc = MPI_Irecv(rbuf, nb.nring, MPI_UINT32_T, left, NB_TAG, nb_ring_comm(), &reqs[slot[K_RECV]]);
    if (rc == MPI_SUCCESS)
        rc = MPI_Isend(sbuf, nb.nring, MPI_UINT32_T, right, NB_TAG, nb_ring_comm(), &reqs[slot[K_SEND]]);
    if (rc != MPI_SUCCESS) {
        snprintf(nb.call, sizeof nb.call, "MPI_Irecv or MPI_Isend of the ring exchange");
    } else {
        rc = nb_all(o, nb.mode, n, reqs, st, slot[K_COLL]);
        nb.req = reqs[slot[K_COLL]];
        if (rc == MPI_SUCCESS && !o->err[0])
            nb_ring_check(o, rbuf, &st[slot[K_RECV]]);
    }
    free(sbuf);
    free(rbuf);
    return rc;
}

/* The MPI_ side of a case with --nonblocking: rc is what the I-variant
 * returned (it wrote nb.req); start the second collective if planned,
 * complete it, then the case's, as planned. */
static int nb_finish(outcome *o, int rc)
{
    if (rc != MPI_SUCCESS) {
        snprintf(nb.call, sizeof nb.call, "%s", coll_impi[nb.c->coll]);
        return rc;
    }
    if (nb.req == MPI_REQUEST_NULL) {
        snprintf(o->err, sizeof o->err, "%s returned MPI_REQUEST_NULL", coll_impi[nb.c->coll]);
        return rc;
    }
    if (nb.second != NB2_NONE) {
        MPI_Request r2 = MPI_REQUEST_NULL;
        rc = nb2_start(&r2);
        if (rc != MPI_SUCCESS) {
            snprintf(nb.call, sizeof nb.call, "%s (the second collective)", nb2_name[nb.second]);
            return rc;
        }
        rc = nb_single(o, &r2, nb.second_wait ? NB_WAIT : NB_TEST);
        if (rc != MPI_SUCCESS) {
            snprintf(nb.call, sizeof nb.call, "%s (completing the second collective, %s)",
                     nb.second_wait ? "MPI_Wait" : "MPI_Test", nb2_name[nb.second]);
            return rc;
        }
        nb2_check(o);
    }
    if (nb.mode < NB_MIXED) {
        rc = nb_single(o, &nb.req, nb.mode);
        nb.t_done = now();
        return rc;
    }
    return nb_mixed(o);
}

/* the MPI_ side of a case: the blocking call, or with --nonblocking the
 * I-variant (which writes nb.req) completed by nb_finish */
#define MPI_SIDE(blocking, ivariant) (opt.nonblocking ? nb_finish(o, (ivariant)) : (blocking))

/* ---------- --request-errors ---------- */

static void class_name(int rc, char *out, size_t n)
{
    int cls = rc;
    if (rc == MPI_SUCCESS) { snprintf(out, n, "MPI_SUCCESS (accepted)"); return; }
    MPI_Error_class(rc, &cls);
    if (cls == MPI_ERR_REQUEST) { snprintf(out, n, "MPI_ERR_REQUEST"); return; }
    char es[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(cls, es, &len);
    snprintf(out, n, "error class %d (%.100s), not MPI_ERR_REQUEST", cls, es);
}

static const char *req_kind_name[] = {"MPI_Iallreduce", "MPI_Ibcast", "MPI_Ibarrier"};

/* start collective kind (0: MPI_Iallreduce, 1: MPI_Ibcast, 2: MPI_Ibarrier)
 * of n ints on comm; aborts the job if it does not start */
static MPI_Request req_start(int kind, MPI_Comm comm, int *in, int *out, int n, const char *what)
{
    int cr;
    MPI_Comm_rank(comm, &cr);
    for (int i = 0; i < n; i++) {
        in[i] = cr * 1000 + i;
        out[i] = kind == 1 && cr == 0 ? 7 * i + 1 : -1;
    }
    MPI_Request req = MPI_REQUEST_NULL;
    int rc = kind == 0 ? MPI_Iallreduce(in, out, n, MPI_INT, MPI_SUM, comm, &req)
           : kind == 1 ? MPI_Ibcast(out, n, MPI_INT, 0, comm, &req) : MPI_Ibarrier(comm, &req);
    if (rc != MPI_SUCCESS || req == MPI_REQUEST_NULL) {
        fprintf(stderr, "collcheck: FAILED request errors: %s returned %d and %s\n", what, rc,
                req == MPI_REQUEST_NULL ? "MPI_REQUEST_NULL" : "a request");
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return req;
}

/* MPI_Wait on a request whose MPI_Cancel (and MPI_Request_free) failed:
 * it completes, is not cancelled, and holds the right result; returns what
 * MPI_Wait gave, for the report */
static int req_wait(int kind, MPI_Comm comm, MPI_Request *req, const int *out, int n, const char *what,
                    char *wn, size_t nwn)
{
    int cs, cancelled = 0;
    MPI_Comm_size(comm, &cs);
    MPI_Status st;
    int rw = MPI_Wait(req, &st);
    class_name(rw, wn, nwn);
    if (rw != MPI_SUCCESS) return 1;
    MPI_Test_cancelled(&st, &cancelled);
    snprintf(wn, nwn, "MPI_SUCCESS%s", cancelled ? ", cancelled" : "");
    for (int i = 0; i < n && !cancelled && kind < 2; i++) {
        int want = kind == 1 ? 7 * i + 1 : 1000 * (cs * (cs - 1) / 2) + cs * i;
        if (out[i] != want) {
            fail("collcheck: FAILED request errors: %s gave %d at index %d, expected %d (after the rejected "
                 "calls)\n", what, out[i], i, want);
            return 1;
        }
    }
    return cancelled || *req != MPI_REQUEST_NULL;
}

/* Two active collectives of a kind on comm: the first gets MPI_Request_free,
 * then MPI_Cancel, then MPI_Wait (if the free was refused); the second gets
 * MPI_Cancel, then MPI_Wait. The same calls on every rank, whatever the MPI
 * answers: a request the MPI let free keeps its buffers (leaked). */
static void request_error_one(int kind, int n, int k, int expect, char *seen, size_t nseen)
{
    MPI_Comm comm = comms[k];
    int *buf = malloc(sizeof(int) * 4 * (size_t)n); /* in, out of each request */
    char what[200], f[160], c1[160] = "not called", w1[160] = "not called", c2[160], w2[160];
    snprintf(what, sizeof what, "%s of %d MPI_INT on %s", req_kind_name[kind], kind < 2 ? n : 0, comm_name[k]);
    MPI_Request r1 = req_start(kind, comm, buf, buf + n, n, what), saved = r1;
    MPI_Request r2 = req_start(kind, comm, buf + 2 * n, buf + 3 * n, n, what);
    int rf = MPI_Request_free(&r1), rc1 = MPI_SUCCESS, bad1 = 0, cls_f = 0, cls_1 = 0, cls_2 = 0;
    class_name(rf, f, sizeof f);
    if (rf != MPI_SUCCESS) {
        MPI_Error_class(rf, &cls_f);
        if (r1 != saved)
            fail("collcheck: FAILED request errors: a refused MPI_Request_free changed the request of %s\n", what);
        rc1 = MPI_Cancel(&r1);
        class_name(rc1, c1, sizeof c1);
        MPI_Error_class(rc1, &cls_1);
        bad1 = req_wait(kind, comm, &r1, buf + n, n, what, w1, sizeof w1);
    }
    int rc2 = MPI_Cancel(&r2);
    class_name(rc2, c2, sizeof c2);
    MPI_Error_class(rc2, &cls_2);
    int bad2 = req_wait(kind, comm, &r2, buf + 3 * n, n, what, w2, sizeof w2);
    if (expect && (rf == MPI_SUCCESS || cls_f != MPI_ERR_REQUEST || rc1 == MPI_SUCCESS ||
                   cls_1 != MPI_ERR_REQUEST || bad1))
        fail("collcheck: FAILED request errors: %s: MPI_Request_free gave %s, then MPI_Cancel %s, then MPI_Wait "
             "%s; expected MPI_ERR_REQUEST, MPI_ERR_REQUEST, then MPI_SUCCESS, not cancelled, the request "
             "MPI_REQUEST_NULL\n", what, f, c1, w1);
    if (expect && (rc2 == MPI_SUCCESS || cls_2 != MPI_ERR_REQUEST || bad2))
        fail("collcheck: FAILED request errors: %s: MPI_Cancel gave %s, then MPI_Wait %s; expected "
             "MPI_ERR_REQUEST, then MPI_SUCCESS, not cancelled, the request MPI_REQUEST_NULL\n", what, c2, w2);
    if (!seen[0])
        snprintf(seen, nseen, "%s: MPI_Request_free gave %s, then MPI_Cancel %s, then MPI_Wait %s; on "
                 "another, MPI_Cancel gave %s, then MPI_Wait %s", what, f, c1, w1, c2, w2);
    if (rf != MPI_SUCCESS) free(buf);
    PMPI_Barrier(comm);
}

/* --request-errors, before the cases */
static void request_errors(void)
{
    const char *e = getenv("WANMPI_EXPECT_REQUEST_ERRORS");
    int expect = e && !strcmp(e, "1");
    static const int which[] = {CM_WORLD, CM_DUP, CM_UNEVEN, CM_SHUFFLED, CM_PAIRS};
    char seen[1024] = "";
    int checks = 0;
    for (size_t w = 0; w < sizeof which / sizeof *which; w++) {
        PMPI_Comm_set_errhandler(comms[which[w]], MPI_ERRORS_RETURN);
        int one = 1, sum = 0; /* a blocking collective first, so that libwanmpi may run its own (nb_setup) */
        MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, comms[which[w]]);
        for (int kind = 0; kind < 5; kind++, checks++) /* small and large Iallreduce and Ibcast, Ibarrier */
            request_error_one(kind / 2, kind % 2 ? 100000 : 1000, which[w], expect, seen, sizeof seen);
    }
    int bad = failed != 0, nbad = 0, lowest, first;
    PMPI_Allreduce(&bad, &nbad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (nbad) {
        first = bad ? wrank : wsize;
        PMPI_Allreduce(&first, &lowest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (wrank == lowest) {
            fputs(failmsg, stderr);
            fprintf(stderr, "collcheck: %d of %d ranks saw a request error check fail (the report is world "
                    "rank %d's)\n", nbad, wsize, lowest);
            fflush(stderr);
            usleep(200000);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        sleep(30);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (wrank == 0) {
        if (expect)
            printf("collcheck: request errors ok: %d active nonblocking collectives refused MPI_Request_free and "
                   "MPI_Cancel, %d more MPI_Cancel alone, with MPI_ERR_REQUEST, and then completed with the right "
                   "result\n", checks, checks);
        else
            printf("collcheck: request errors not asserted (WANMPI_EXPECT_REQUEST_ERRORS is not 1); rank 0 saw "
                   "%s\n", seen);
        fflush(stdout);
    }
}
