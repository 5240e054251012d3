/* Fortran bindings of the completion calls and blocking point-to-point
 * calls, so that a Fortran program's MPI_WAIT advances the nonblocking
 * collectives of ours as a C program's does (coll/progress.c).
 *
 * Measured (nm/objdump of the libraries): Open MPI 4.1's Fortran library
 * calls PMPI_Wait, PMPI_Send & co for mpif.h, the mpi module and mpi_f08
 * (mpi_wait_f08_ calls ompi_wait_f, which is mpi_wait_); MPICH's (Debian's
 * 4.0.2 bindings) calls MPI_Wait & co for mpif.h and the mpi module, but its
 * mpi_f08 calls PMPI_Wait, PMPI_Start, PMPI_Probe ... directly (only the
 * calls with a buffer, mpi_send_f08ts_ & co, go through MPI_Send). Without
 * these bindings such a MPI_WAIT on a request of ours would never return.
 *
 * Each call advances ours and maps the persistent collectives of ours to
 * their round's request (persistent.h), then calls the MPI's own Fortran
 * function of the same name and binding (mpi_wait_ for mpif.h and the mpi
 * module, mpi_wait_f08_ for mpi_f08), found with dlsym(RTLD_NEXT). So the
 * MPI itself reads and writes what differs between MPIs and compilers: the
 * status (MPICH's mpi_f08 status has the C layout, its mpif.h one not),
 * MPI_STATUS_IGNORE and MPI_STATUSES_IGNORE, the LOGICAL flag's .true.
 * (read here only as nonzero: .false. is 0 everywhere), the 1-based indices
 * of MPI_WAITANY/TESTSOME, and MPI_BOTTOM in a point-to-point buffer.
 * A Wait loops over the MPI's Test while anything of ours is outstanding,
 * yielding the CPU between tests; a blocking send or receive becomes the
 * MPI's Isend/Irecv and that loop.
 *
 * MPI_START(ALL), MPI_REQUEST_FREE and MPI_CANCEL only take handles: they
 * call libwanmpi's C MPI_Start & co (coll/progress.c, api_persistent.c),
 * which preloading makes the ones the program's calls reach too. */
#include <dlfcn.h>
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

#include "arguments.h"
#include "names.h"
#include "../coll/nb.h"
#include "../coll/persistent.h"
#include "../common/log.h"

/* ---- the MPI's own Fortran functions, per binding ---- */

typedef void wait_fn(MPI_Fint *, void *, MPI_Fint *);
typedef void test_fn(MPI_Fint *, MPI_Fint *, void *, MPI_Fint *);
typedef void waitall_fn(MPI_Fint *, MPI_Fint *, void *, MPI_Fint *);
typedef void testall_fn(MPI_Fint *, MPI_Fint *, MPI_Fint *, void *, MPI_Fint *);
typedef void waitany_fn(MPI_Fint *, MPI_Fint *, MPI_Fint *, void *, MPI_Fint *);
typedef void testany_fn(MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, void *, MPI_Fint *);
typedef void waitsome_fn(MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, void *, MPI_Fint *);
typedef waitsome_fn testsome_fn;
typedef test_fn request_get_status_fn;
typedef void send_fn(void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *);
typedef send_fn ssend_fn;
typedef void isend_fn(void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *);
typedef isend_fn issend_fn;
typedef isend_fn irecv_fn;
typedef void recv_fn(void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, void *, MPI_Fint *);
typedef void sendrecv_fn(void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, void *, MPI_Fint *, MPI_Fint *,
                         MPI_Fint *, MPI_Fint *, MPI_Fint *, void *, MPI_Fint *);
typedef void probe_fn(MPI_Fint *, MPI_Fint *, MPI_Fint *, void *, MPI_Fint *);
typedef void iprobe_fn(MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, void *, MPI_Fint *);
typedef void mprobe_fn(MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, void *, MPI_Fint *);
typedef void improbe_fn(MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, void *, MPI_Fint *);
typedef void mrecv_fn(void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, void *, MPI_Fint *);
typedef void imrecv_fn(void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *);

/* The MPI's functions of one binding, each looked up at its first use. */
struct binding {
    const char *suffix;         /* "_": mpif.h and the mpi module; "_f08_": mpi_f08 */
    void *wait, *test, *waitall, *testall, *waitany, *testany, *waitsome, *testsome, *request_get_status;
    void *send, *ssend, *isend, *issend, *recv, *irecv, *sendrecv;
    void *probe, *iprobe, *mprobe, *improbe, *mrecv, *imrecv;
};

static struct binding mpif = { .suffix = "_" }, f08 = { .suffix = "_f08_" };

/* The MPI's function mpi_<call><suffix>, looked up once into *slot. */
static void *resolve(void **slot, const struct binding *b, const char *call)
{
    if (!*slot) {
        char name[64];
        snprintf(name, sizeof name, "mpi_%s%s", call, b->suffix);
        if (!(*slot = dlsym(RTLD_NEXT, name)))
            wm_fatal("the MPI library has no Fortran function %s", name);
    }
    return *slot;
}

#define REAL(b, call) ((call##_fn *)resolve(&(b)->call, b, #call))

/* ---- the requests the MPI sees: a persistent collective of ours stands
 * for its round's request (as in coll/progress.c, with Fortran handles) ---- */

struct view {
    MPI_Fint local_f[8];
    MPI_Request local_c[16];
    void *heap;
    MPI_Fint *f;                /* what the MPI gets */
    MPI_Request *c, *mapped;    /* the user's requests in C, and what they stand for */
};

static MPI_Fint *view_of(struct view *v, int n, MPI_Fint *reqs)
{
    v->heap = NULL;
    if (!wm_persist_any() || n <= 0)
        return reqs;
    v->f = v->local_f;
    v->c = v->local_c;
    if (n > 8) {
        v->heap = malloc((sizeof(MPI_Fint) + 2 * sizeof(MPI_Request)) * (size_t)n);
        if (!v->heap)
            wm_fatal("out of memory (%d requests)", n);
        v->c = v->heap;
        v->f = (MPI_Fint *)(v->c + 2 * n);
    }
    v->mapped = v->c + n;
    for (int i = 0; i < n; i++)
        v->c[i] = MPI_Request_f2c(reqs[i]);
    wm_persist_map(n, v->c, v->mapped);
    int ours = 0;
    for (int i = 0; i < n; i++) {
        ours |= v->mapped[i] != v->c[i];
        v->f[i] = v->mapped[i] != v->c[i] ? MPI_Request_c2f(v->mapped[i]) : reqs[i];
    }
    if (!ours) {
        free(v->heap);
        return reqs;
    }
    return v->f;
}

/* After the MPI's call: ours keep their handle and note their round's
 * request (MPI_REQUEST_NULL once it completed), the others take the MPI's. */
static void view_done(struct view *v, int n, MPI_Fint *reqs, const MPI_Fint *f)
{
    if (f == reqs)
        return;
    for (int i = 0; i < n; i++) {
        if (v->mapped[i] != v->c[i]) {
            v->mapped[i] = MPI_Request_f2c(f[i]);
        } else {
            reqs[i] = f[i];
            v->mapped[i] = v->c[i];
        }
    }
    wm_persist_unmap(n, v->c, v->mapped);
    free(v->heap);
}

/* ---- the completion calls ---- */

/* While anything of ours is outstanding: advance it, then the MPI's `test`
 * (which sets `flag` and rc_), until `flag` or an error; once nothing is
 * outstanding, the MPI's blocking `wait`. Returns the error code. */
#define POLL(flag, test, wait)                                                        \
    do {                                                                              \
        MPI_Fint rc_ = MPI_SUCCESS;                                                   \
        while (wm_nb_pending()) {                                                     \
            MPI_Fint flag = 0;                                                        \
            wm_nb_progress();                                                         \
            test;                                                                     \
            if (rc_ != MPI_SUCCESS || flag)                                           \
                return rc_;                                                           \
            sched_yield();                                                            \
        }                                                                             \
        wait;                                                                         \
        return rc_;                                                                   \
    } while (0)

static MPI_Fint wait_one(struct binding *b, MPI_Fint *request, void *status)
{
    POLL(flag, REAL(b, test)(request, &flag, status, &rc_), REAL(b, wait)(request, status, &rc_));
}

static MPI_Fint waitall(struct binding *b, MPI_Fint *count, MPI_Fint *requests, void *statuses)
{
    POLL(flag, REAL(b, testall)(count, requests, &flag, statuses, &rc_),
         REAL(b, waitall)(count, requests, statuses, &rc_));
}

static MPI_Fint waitany(struct binding *b, MPI_Fint *count, MPI_Fint *requests, MPI_Fint *index, void *status)
{
    POLL(flag, REAL(b, testany)(count, requests, index, &flag, status, &rc_),
         REAL(b, waitany)(count, requests, index, status, &rc_));
}

/* done: some completed, or MPI_UNDEFINED (none active) */
static MPI_Fint waitsome(struct binding *b, MPI_Fint *incount, MPI_Fint *requests, MPI_Fint *outcount,
                         MPI_Fint *indices, void *statuses)
{
    POLL(done, (REAL(b, testsome)(incount, requests, outcount, indices, statuses, &rc_), done = *outcount != 0),
         REAL(b, waitsome)(incount, requests, outcount, indices, statuses, &rc_));
}

/* Each completion call on the mapped requests (a view of n of them). */
#define ON_VIEW(n, requests, call)                                                    \
    do {                                                                              \
        struct view v_;                                                               \
        MPI_Fint *m_ = view_of(&v_, n, requests);                                     \
        MPI_Fint rc_ = call;                                                          \
        view_done(&v_, n, requests, m_);                                              \
        set(ierr, rc_);                                                               \
    } while (0)

/* The MPI's test-like `call(..., &rc)` once on the mapped requests, after
 * advancing ours. */
#define ONCE(n, requests, call, ...)                                                  \
    do {                                                                              \
        struct view v_;                                                               \
        MPI_Fint rc_ = MPI_SUCCESS;                                                   \
        wm_nb_progress();                                                             \
        MPI_Fint *m_ = view_of(&v_, n, requests);                                     \
        REAL(b, call)(__VA_ARGS__, &rc_);                                             \
        view_done(&v_, n, requests, m_);                                              \
        set(ierr, rc_);                                                               \
    } while (0)

static void wait_in(struct binding *b, MPI_Fint *request, void *status, MPI_Fint *ierr)
{
    ON_VIEW(1, request, wait_one(b, m_, status));
}

static void test_in(struct binding *b, MPI_Fint *request, MPI_Fint *flag, void *status, MPI_Fint *ierr)
{
    ONCE(1, request, test, m_, flag, status);
}

static void waitall_in(struct binding *b, MPI_Fint *count, MPI_Fint *requests, void *statuses, MPI_Fint *ierr)
{
    ON_VIEW(*count, requests, waitall(b, count, m_, statuses));
}

static void testall_in(struct binding *b, MPI_Fint *count, MPI_Fint *requests, MPI_Fint *flag, void *statuses,
                       MPI_Fint *ierr)
{
    ONCE(*count, requests, testall, count, m_, flag, statuses);
}

static void waitany_in(struct binding *b, MPI_Fint *count, MPI_Fint *requests, MPI_Fint *index, void *status,
                       MPI_Fint *ierr)
{
    ON_VIEW(*count, requests, waitany(b, count, m_, index, status));
}

static void testany_in(struct binding *b, MPI_Fint *count, MPI_Fint *requests, MPI_Fint *index, MPI_Fint *flag,
                       void *status, MPI_Fint *ierr)
{
    ONCE(*count, requests, testany, count, m_, index, flag, status);
}

static void waitsome_in(struct binding *b, MPI_Fint *incount, MPI_Fint *requests, MPI_Fint *outcount,
                        MPI_Fint *indices, void *statuses, MPI_Fint *ierr)
{
    ON_VIEW(*incount, requests, waitsome(b, incount, m_, outcount, indices, statuses));
}

static void testsome_in(struct binding *b, MPI_Fint *incount, MPI_Fint *requests, MPI_Fint *outcount,
                        MPI_Fint *indices, void *statuses, MPI_Fint *ierr)
{
    ONCE(*incount, requests, testsome, incount, m_, outcount, indices, statuses);
}

/* The request is an input here: the view is a copy either way. */
static void request_get_status_in(struct binding *b, MPI_Fint *request, MPI_Fint *flag, void *status,
                                  MPI_Fint *ierr)
{
    MPI_Fint r = *request;
    ONCE(1, &r, request_get_status, m_, flag, status);
}

/* ---- blocking point-to-point: the MPI's nonblocking form while ours run ---- */

/* Room for a status of either binding's layout (neither is larger than two C statuses). */
typedef MPI_Status scratch_status[2];

static void send_in(struct binding *b, void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *dest, MPI_Fint *tag,
                    MPI_Fint *comm, MPI_Fint *ierr)
{
    MPI_Fint rc = MPI_SUCCESS, r;
    scratch_status st;
    if (!wm_nb_pending())
        REAL(b, send)(buf, count, type, dest, tag, comm, &rc);
    else if (REAL(b, isend)(buf, count, type, dest, tag, comm, &r, &rc), rc == MPI_SUCCESS)
        rc = wait_one(b, &r, st);
    set(ierr, rc);
}

static void ssend_in(struct binding *b, void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *dest, MPI_Fint *tag,
                     MPI_Fint *comm, MPI_Fint *ierr)
{
    MPI_Fint rc = MPI_SUCCESS, r;
    scratch_status st;
    if (!wm_nb_pending())
        REAL(b, ssend)(buf, count, type, dest, tag, comm, &rc);
    else if (REAL(b, issend)(buf, count, type, dest, tag, comm, &r, &rc), rc == MPI_SUCCESS)
        rc = wait_one(b, &r, st);
    set(ierr, rc);
}

static void recv_in(struct binding *b, void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *source, MPI_Fint *tag,
                    MPI_Fint *comm, void *status, MPI_Fint *ierr)
{
    MPI_Fint rc = MPI_SUCCESS, r;
    if (!wm_nb_pending())
        REAL(b, recv)(buf, count, type, source, tag, comm, status, &rc);
    else if (REAL(b, irecv)(buf, count, type, source, tag, comm, &r, &rc), rc == MPI_SUCCESS)
        rc = wait_one(b, &r, status);
    set(ierr, rc);
}

static void sendrecv_in(struct binding *b, void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, MPI_Fint *dest,
                        MPI_Fint *sendtag, void *recvbuf, MPI_Fint *recvcount, MPI_Fint *recvtype, MPI_Fint *source,
                        MPI_Fint *recvtag, MPI_Fint *comm, void *status, MPI_Fint *ierr)
{
    MPI_Fint rc = MPI_SUCCESS, r[2];
    scratch_status st;
    if (!wm_nb_pending()) {
        REAL(b, sendrecv)(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag,
                          comm, status, &rc);
        set(ierr, rc);
        return;
    }
    REAL(b, irecv)(recvbuf, recvcount, recvtype, source, recvtag, comm, &r[0], &rc);
    if (rc != MPI_SUCCESS) {
        set(ierr, rc);
        return;
    }
    REAL(b, isend)(sendbuf, sendcount, sendtype, dest, sendtag, comm, &r[1], &rc);
    if (rc != MPI_SUCCESS) {
        MPI_Request c = MPI_Request_f2c(r[0]);
        PMPI_Cancel(&c);
        PMPI_Request_free(&c);
        set(ierr, rc);
        return;
    }
    rc = wait_one(b, &r[1], st);
    MPI_Fint rrc = wait_one(b, &r[0], status);
    set(ierr, rc != MPI_SUCCESS ? rc : rrc);
}

static MPI_Fint probe(struct binding *b, MPI_Fint *source, MPI_Fint *tag, MPI_Fint *comm, void *status)
{
    POLL(flag, REAL(b, iprobe)(source, tag, comm, &flag, status, &rc_),
         REAL(b, probe)(source, tag, comm, status, &rc_));
}

static void probe_in(struct binding *b, MPI_Fint *source, MPI_Fint *tag, MPI_Fint *comm, void *status,
                     MPI_Fint *ierr)
{
    set(ierr, probe(b, source, tag, comm, status));
}

static MPI_Fint mprobe(struct binding *b, MPI_Fint *source, MPI_Fint *tag, MPI_Fint *comm, MPI_Fint *message,
                       void *status)
{
    POLL(flag, REAL(b, improbe)(source, tag, comm, &flag, message, status, &rc_),
         REAL(b, mprobe)(source, tag, comm, message, status, &rc_));
}

static void mprobe_in(struct binding *b, MPI_Fint *source, MPI_Fint *tag, MPI_Fint *comm, MPI_Fint *message,
                      void *status, MPI_Fint *ierr)
{
    set(ierr, mprobe(b, source, tag, comm, message, status));
}

static void mrecv_in(struct binding *b, void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *message, void *status,
                     MPI_Fint *ierr)
{
    MPI_Fint rc = MPI_SUCCESS, r;
    if (!wm_nb_pending())
        REAL(b, mrecv)(buf, count, type, message, status, &rc);
    else if (REAL(b, imrecv)(buf, count, type, message, &r, &rc), rc == MPI_SUCCESS)
        rc = wait_one(b, &r, status);
    set(ierr, rc);
}

/* ---- the names: mpi_wait_ (and its manglings) through the MPI's
 * mpi_wait_, mpi_wait_f08_ through its mpi_wait_f08_ ---- */

#define EXPAND(...) __VA_ARGS__
#define BINDINGS(lower, upper, fn, params, args)                                      \
    void lower##_ params { fn(&mpif, EXPAND args); }                                   \
    void lower params { fn(&mpif, EXPAND args); }                                      \
    void lower##__ params { fn(&mpif, EXPAND args); }                                  \
    void upper params { fn(&mpif, EXPAND args); }                                      \
    void lower##_f08_ params { fn(&f08, EXPAND args); }

BINDINGS(mpi_wait, MPI_WAIT, wait_in, (MPI_Fint *request, void *status, MPI_Fint *ierr), (request, status, ierr))
BINDINGS(mpi_test, MPI_TEST, test_in, (MPI_Fint *request, MPI_Fint *flag, void *status, MPI_Fint *ierr),
         (request, flag, status, ierr))
BINDINGS(mpi_waitall, MPI_WAITALL, waitall_in,
         (MPI_Fint *count, MPI_Fint *requests, void *statuses, MPI_Fint *ierr), (count, requests, statuses, ierr))
BINDINGS(mpi_testall, MPI_TESTALL, testall_in,
         (MPI_Fint *count, MPI_Fint *requests, MPI_Fint *flag, void *statuses, MPI_Fint *ierr),
         (count, requests, flag, statuses, ierr))
BINDINGS(mpi_waitany, MPI_WAITANY, waitany_in,
         (MPI_Fint *count, MPI_Fint *requests, MPI_Fint *index, void *status, MPI_Fint *ierr),
         (count, requests, index, status, ierr))
BINDINGS(mpi_testany, MPI_TESTANY, testany_in,
         (MPI_Fint *count, MPI_Fint *requests, MPI_Fint *index, MPI_Fint *flag, void *status, MPI_Fint *ierr),
         (count, requests, index, flag, status, ierr))
BINDINGS(mpi_waitsome, MPI_WAITSOME, waitsome_in,
         (MPI_Fint *incount, MPI_Fint *requests, MPI_Fint *outcount, MPI_Fint *indices, void *statuses,
          MPI_Fint *ierr),
         (incount, requests, outcount, indices, statuses, ierr))
BINDINGS(mpi_testsome, MPI_TESTSOME, testsome_in,
         (MPI_Fint *incount, MPI_Fint *requests, MPI_Fint *outcount, MPI_Fint *indices, void *statuses,
          MPI_Fint *ierr),
         (incount, requests, outcount, indices, statuses, ierr))
BINDINGS(mpi_request_get_status, MPI_REQUEST_GET_STATUS, request_get_status_in,
         (MPI_Fint *request, MPI_Fint *flag, void *status, MPI_Fint *ierr), (request, flag, status, ierr))
BINDINGS(mpi_send, MPI_SEND, send_in,
         (void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *dest, MPI_Fint *tag, MPI_Fint *comm, MPI_Fint *ierr),
         (buf, count, type, dest, tag, comm, ierr))
BINDINGS(mpi_ssend, MPI_SSEND, ssend_in,
         (void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *dest, MPI_Fint *tag, MPI_Fint *comm, MPI_Fint *ierr),
         (buf, count, type, dest, tag, comm, ierr))
BINDINGS(mpi_recv, MPI_RECV, recv_in,
         (void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *source, MPI_Fint *tag, MPI_Fint *comm,
          void *status, MPI_Fint *ierr),
         (buf, count, type, source, tag, comm, status, ierr))
BINDINGS(mpi_sendrecv, MPI_SENDRECV, sendrecv_in,
         (void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, MPI_Fint *dest, MPI_Fint *sendtag, void *recvbuf,
          MPI_Fint *recvcount, MPI_Fint *recvtype, MPI_Fint *source, MPI_Fint *recvtag, MPI_Fint *comm,
          void *status, MPI_Fint *ierr),
         (sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag, comm, status,
          ierr))
BINDINGS(mpi_probe, MPI_PROBE, probe_in,
         (MPI_Fint *source, MPI_Fint *tag, MPI_Fint *comm, void *status, MPI_Fint *ierr),
         (source, tag, comm, status, ierr))
BINDINGS(mpi_mprobe, MPI_MPROBE, mprobe_in,
         (MPI_Fint *source, MPI_Fint *tag, MPI_Fint *comm, MPI_Fint *message, void *status, MPI_Fint *ierr),
         (source, tag, comm, message, status, ierr))
BINDINGS(mpi_mrecv, MPI_MRECV, mrecv_in,
         (void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *message, void *status, MPI_Fint *ierr),
         (buf, count, type, message, status, ierr))

/* ---- handles only: libwanmpi's C calls (coll/progress.c, api_persistent.c) ---- */

void mpi_start_(MPI_Fint *request, MPI_Fint *ierr)
{
    MPI_Request r = MPI_Request_f2c(*request);
    set(ierr, MPI_Start(&r));           /* a persistent request keeps its handle */
}
FORTRAN_NAMES(mpi_start, MPI_START, (MPI_Fint *request, MPI_Fint *ierr), (request, ierr))

void mpi_startall_(MPI_Fint *count, MPI_Fint *requests, MPI_Fint *ierr)
{
    MPI_Request local[16], *r = local;
    int n = *count;
    if (n > 16 && !(r = malloc(sizeof *r * (size_t)n)))
        wm_fatal("out of memory (%d requests)", n);
    for (int i = 0; i < n; i++)
        r[i] = MPI_Request_f2c(requests[i]);
    set(ierr, MPI_Startall(n, r));
    if (r != local)
        free(r);
}
FORTRAN_NAMES(mpi_startall, MPI_STARTALL, (MPI_Fint *count, MPI_Fint *requests, MPI_Fint *ierr),
              (count, requests, ierr))

void mpi_request_free_(MPI_Fint *request, MPI_Fint *ierr)
{
    MPI_Request r = MPI_Request_f2c(*request);
    int rc = MPI_Request_free(&r);
    if (rc == MPI_SUCCESS)
        *request = MPI_Request_c2f(r);
    set(ierr, rc);
}
FORTRAN_NAMES(mpi_request_free, MPI_REQUEST_FREE, (MPI_Fint *request, MPI_Fint *ierr), (request, ierr))

void mpi_cancel_(MPI_Fint *request, MPI_Fint *ierr)
{
    MPI_Request r = MPI_Request_f2c(*request);
    set(ierr, MPI_Cancel(&r));
}
FORTRAN_NAMES(mpi_cancel, MPI_CANCEL, (MPI_Fint *request, MPI_Fint *ierr), (request, ierr))
