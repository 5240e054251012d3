/* persistcheck: exact checker for the persistent collectives (MPI-4
 * MPI_<coll>_init; Open MPI 4.1's MPIX_<coll>_init from mpi-ext.h).
 *
 * Usage: persistcheck [--starts N] [--count N]
 *
 * On MPI_COMM_WORLD and on a split of it (uneven halves), for broadcast,
 * allreduce, reduce, reduce_scatter_block, allgather, allgatherv, alltoall
 * and alltoallv, two sets: in each, every other kind of a small count (1-3
 * ints: the MPI's own persistent call under libwanmpi) and the others of
 * --count ints (default 200000: a schedule of libwanmpi's), the other way
 * round in the second set. Every kind is initialized once and started
 * --starts times (default 4) with new input each round, all kinds of a set
 * at once: by MPI_Startall in rounds 0-2 (mod 4), completed by MPI_Waitall,
 * a MPI_Testall loop or a MPI_Waitany loop; in round 3 by one MPI_Start each
 * in an order of the rank's own (MPI-4.1, 6.13: starts need not come in the
 * same order on every rank), completed by MPI_Waitall. Every result is
 * checked exactly against values
 * every rank computes itself, and every request must stay allocated (not
 * MPI_REQUEST_NULL) after each round and become MPI_REQUEST_NULL when
 * freed. With WANMPI_EXPECT_REQUEST_ERRORS=1, MPI_Request_free and MPI_Start
 * of an active persistent allreduce of libwanmpi's (the large one) must
 * fail with MPI_ERR_REQUEST and leave it to complete normally (erroneous in
 * the standard; what the MPI's own does is the MPI's).
 *
 * On success rank 0 prints "persistcheck: N rounds ok"; a mismatch ends the
 * job with MPI_Abort and a message naming the collective, round and element.
 * Bad arguments: exit 2. */
#include <mpi.h>
#if defined(OPEN_MPI) && OMPI_MAJOR_VERSION < 5     /* Open MPI 5: MPI-4 names */
#include <mpi-ext.h>
#define INIT(name) MPIX_##name##_init
#else
#define INIT(name) MPI_##name##_init
#endif
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BCAST, ALLREDUCE, REDUCE, RSB, RS, ALLGATHER, ALLGATHERV, ALLTOALL, ALLTOALLV, NKIND };
static const char *kind_name[NKIND] = {"bcast", "allreduce", "reduce", "reduce_scatter_block", "reduce_scatter",
                                       "allgather",
                                       "allgatherv", "alltoall", "alltoallv"};

static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "persistcheck: FAILED ");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 3);
}

/* the input element i of rank r in round t (small: sums fit an int) */
static int in_val(int r, int t, long i) { return (int)((r * 7 + t * 3 + i * 11) % 1000); }

struct coll {
    int kind, n;                /* n: count per block (per rank) */
    int *send, *recv;
    int *counts, *displs;       /* v-variants and reduce_scatter: n + (r % 3) per rank r */
    MPI_Request req;
};

static int vcount(int n, int r) { return n + r % 3; }

static void setup(struct coll *c, int kind, int n, MPI_Comm comm)
{
    int size, rank;
    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(comm, &rank);
    c->kind = kind;
    c->n = n;
    long total = (long)(n + 2) * size;
    c->send = calloc((size_t)total, sizeof(int));
    c->recv = calloc((size_t)total, sizeof(int));
    c->counts = calloc((size_t)size, sizeof(int));
    c->displs = calloc((size_t)size, sizeof(int));
    if (!c->send || !c->recv || !c->counts || !c->displs)
        fail("out of memory\n");
    for (int r = 0, d = 0; r < size; r++) {
        c->counts[r] = vcount(n, r);
        c->displs[r] = d;
        d += c->counts[r];
    }
    int rc, root = size - 1;
    switch (kind) {
    case BCAST: rc = INIT(Bcast)(c->recv, n, MPI_INT, root, comm, MPI_INFO_NULL, &c->req); break;
    case ALLREDUCE:
        rc = INIT(Allreduce)(c->send, c->recv, n, MPI_INT, MPI_SUM, comm, MPI_INFO_NULL, &c->req);
        break;
    case REDUCE: rc = INIT(Reduce)(c->send, c->recv, n, MPI_INT, MPI_SUM, root, comm, MPI_INFO_NULL, &c->req); break;
    case RSB:
        rc = INIT(Reduce_scatter_block)(c->send, c->recv, n, MPI_INT, MPI_SUM, comm, MPI_INFO_NULL, &c->req);
        break;
    case RS:
        rc = INIT(Reduce_scatter)(c->send, c->recv, c->counts, MPI_INT, MPI_SUM, comm, MPI_INFO_NULL, &c->req);
        break;
    case ALLGATHER:
        rc = INIT(Allgather)(c->send, n, MPI_INT, c->recv, n, MPI_INT, comm, MPI_INFO_NULL, &c->req);
        break;
    case ALLGATHERV:
        rc = INIT(Allgatherv)(c->send, c->counts[rank], MPI_INT, c->recv, c->counts, c->displs, MPI_INT, comm,
                              MPI_INFO_NULL, &c->req);
        break;
    case ALLTOALL:
        rc = INIT(Alltoall)(c->send, n, MPI_INT, c->recv, n, MPI_INT, comm, MPI_INFO_NULL, &c->req);
        break;
    default: {
        /* every pair exchanges n + (receiver % 3) ints: send counts by peer, receive counts by me */
        int *sc = malloc(sizeof(int) * (size_t)size), *sd = malloc(sizeof(int) * (size_t)size);
        int *rcn = malloc(sizeof(int) * (size_t)size), *rd = malloc(sizeof(int) * (size_t)size);
        for (int p = 0, s = 0, d = 0; p < size; p++) {
            sc[p] = vcount(n, p);
            sd[p] = s;
            s += sc[p];
            rcn[p] = vcount(n, rank);
            rd[p] = d;
            d += rcn[p];
        }
        rc = INIT(Alltoallv)(c->send, sc, sd, MPI_INT, c->recv, rcn, rd, MPI_INT, comm, MPI_INFO_NULL, &c->req);
        /* kept for the life of the request, as MPI requires: not freed */
    }
    }
    if (rc != MPI_SUCCESS || c->req == MPI_REQUEST_NULL)
        fail("MPI_%s_init gave %d\n", kind_name[kind], rc);
}

/* fills the input of round t */
static void fill(struct coll *c, int t, MPI_Comm comm)
{
    int size, rank;
    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(comm, &rank);
    long total = (long)(c->n + 2) * size;
    for (long i = 0; i < total; i++) {
        c->send[i] = in_val(rank, t, i);
        c->recv[i] = -1;
    }
    if (c->kind == BCAST && rank == size - 1)
        for (long i = 0; i < c->n; i++)
            c->recv[i] = in_val(rank, t, i);
}

static int sum_over(int size, int t, long i)
{
    int s = 0;
    for (int r = 0; r < size; r++)
        s += in_val(r, t, i);
    return s;
}

static void check(const struct coll *c, int t, MPI_Comm comm, const char *cname)
{
    int size, rank;
    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(comm, &rank);
    long n = c->n, bad = -1;
    int want = 0, got = 0;
#define EXPECT(idx, value)                                                                                  \
    do {                                                                                                    \
        want = (value);                                                                                     \
        got = c->recv[idx];                                                                                 \
        if (got != want) {                                                                                  \
            bad = (idx);                                                                                    \
            goto out;                                                                                       \
        }                                                                                                   \
    } while (0)
    switch (c->kind) {
    case BCAST:
        for (long i = 0; i < n; i++) EXPECT(i, in_val(size - 1, t, i));
        break;
    case ALLREDUCE:
        for (long i = 0; i < n; i++) EXPECT(i, sum_over(size, t, i));
        break;
    case REDUCE:
        if (rank == size - 1)
            for (long i = 0; i < n; i++) EXPECT(i, sum_over(size, t, i));
        break;
    case RSB:
        for (long i = 0; i < n; i++) EXPECT(i, sum_over(size, t, rank * n + i));
        break;
    case RS:
        for (long i = 0; i < c->counts[rank]; i++) EXPECT(i, sum_over(size, t, c->displs[rank] + i));
        break;
    case ALLGATHER:
        for (int r = 0; r < size; r++)
            for (long i = 0; i < n; i++) EXPECT(r * n + i, in_val(r, t, i));
        break;
    case ALLGATHERV:
        for (int r = 0; r < size; r++)
            for (long i = 0; i < c->counts[r]; i++) EXPECT(c->displs[r] + i, in_val(r, t, i));
        break;
    case ALLTOALL:
        for (int r = 0; r < size; r++)
            for (long i = 0; i < n; i++) EXPECT(r * n + i, in_val(r, t, rank * n + i));
        break;
    default:
        for (int r = 0, d = 0; r < size; r++) {
            long off = 0;               /* where rank r's block for me starts in its send buffer */
            for (int p = 0; p < rank; p++)
                off += vcount(c->n, p);
            for (long i = 0; i < vcount(c->n, rank); i++) EXPECT(d + i, in_val(r, t, off + i));
            d += vcount(c->n, rank);
        }
    }
out:
    if (bad >= 0)
        fail("%s of %d ints on %s, round %d, rank %d: element %ld is %d, expected %d\n", kind_name[c->kind], c->n,
             cname, t, rank, bad, got, want);
#undef EXPECT
}

/* MPI_Request_free and MPI_Start of an active one: refused, then it completes. */
static void request_errors(struct coll *c, MPI_Comm comm, const char *cname)
{
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    fill(c, 99, comm);
    MPI_Request saved = c->req;
    if (MPI_Start(&c->req) != MPI_SUCCESS)
        fail("MPI_Start of %s on %s\n", kind_name[c->kind], cname);
    int rf = MPI_Request_free(&c->req), rs = MPI_Start(&c->req), cf = -1, cs = -1;
    MPI_Error_class(rf, &cf);
    MPI_Error_class(rs, &cs);
    if (cf != MPI_ERR_REQUEST || cs != MPI_ERR_REQUEST || c->req != saved)
        fail("%s on %s: MPI_Request_free of an active persistent collective gave class %d, MPI_Start %d; "
             "expected MPI_ERR_REQUEST (%d) for both and the request unchanged\n", kind_name[c->kind], cname, cf,
             cs, MPI_ERR_REQUEST);
    if (MPI_Wait(&c->req, MPI_STATUS_IGNORE) != MPI_SUCCESS)
        fail("MPI_Wait after the refused calls\n");
    check(c, 99, comm, cname);
}

/* One MPI_Start per request, in an order that differs between ranks: a
 * rotation by the rank, reversed on odd ranks. */
static void start_in_my_order(MPI_Request *reqs, MPI_Comm comm)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
    for (int i = 0; i < NKIND; i++) {
        int j = (i + rank) % NKIND;
        int kind = rank % 2 ? NKIND - 1 - j : j;
        if (MPI_Start(&reqs[kind]) != MPI_SUCCESS)
            fail("MPI_Start of %s\n", kind_name[kind]);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    long starts = 4, count = 200000;
    for (int i = 1; i < argc; i++) {
        char *end = NULL;
        long *to = !strcmp(argv[i], "--starts") ? &starts : !strcmp(argv[i], "--count") ? &count : NULL;
        if (!to || i + 1 >= argc || (*to = strtol(argv[i + 1], &end, 10), *end) || *to < 1 || *to > (1L << 24)) {
            fprintf(stderr, "persistcheck: bad argument %s (usage: persistcheck [--starts N] [--count N], "
                            "1 <= N <= 16777216)\n", argv[i]);
            MPI_Finalize();
            return 2;
        }
        i++;
    }
    int wrank, wsize;
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    MPI_Comm split;
    MPI_Comm_split(MPI_COMM_WORLD, wrank < (wsize * 3 + 7) / 8, wrank, &split);
    int dummy = 0, sum;
    MPI_Allreduce(&dummy, &sum, 1, MPI_INT, MPI_SUM, split);    /* a blocking call first: libwanmpi's map */
    const char *expect = getenv("WANMPI_EXPECT_REQUEST_ERRORS");
    int rounds = 0;
    MPI_Comm comms[2] = {MPI_COMM_WORLD, split};
    const char *cnames[2] = {"MPI_COMM_WORLD", "split-uneven"};
    for (int k = 0; k < 2; k++)
        for (int z = 0; z < 2; z++) {
            struct coll c[NKIND];
            MPI_Request reqs[NKIND];
            for (int kind = 0; kind < NKIND; kind++) {
                setup(&c[kind], kind, (kind + z) % 2 ? (int)count : 1 + kind % 3, comms[k]);
                reqs[kind] = c[kind].req;
            }
            for (int t = 0; t < starts; t++, rounds++) {
                for (int kind = 0; kind < NKIND; kind++)
                    fill(&c[kind], t, comms[k]);
                if (t % 4 == 3)
                    start_in_my_order(reqs, comms[k]);
                else if (MPI_Startall(NKIND, reqs) != MPI_SUCCESS)
                    fail("MPI_Startall\n");
                if (t % 4 == 0 || t % 4 == 3) {
                    MPI_Waitall(NKIND, reqs, MPI_STATUSES_IGNORE);
                } else if (t % 4 == 1) {
                    int flag = 0;
                    while (!flag)
                        MPI_Testall(NKIND, reqs, &flag, MPI_STATUSES_IGNORE);
                } else {
                    for (int done = 0; done < NKIND; done++) {
                        int idx;
                        MPI_Waitany(NKIND, reqs, &idx, MPI_STATUS_IGNORE);
                        if (idx == MPI_UNDEFINED)
                            fail("MPI_Waitany gave MPI_UNDEFINED with %d active\n", NKIND - done);
                    }
                }
                for (int kind = 0; kind < NKIND; kind++) {
                    if (reqs[kind] != c[kind].req)
                        fail("%s on %s, round %d: the persistent request changed after completion\n",
                             kind_name[kind], cnames[k], t);
                    check(&c[kind], t, comms[k], cnames[k]);
                }
            }
            if (expect && !strcmp(expect, "1"))
                request_errors(&c[ALLREDUCE + z], comms[k], cnames[k]);    /* a large one: allreduce, reduce */
            for (int kind = 0; kind < NKIND; kind++) {
                if (MPI_Request_free(&c[kind].req) != MPI_SUCCESS || c[kind].req != MPI_REQUEST_NULL)
                    fail("MPI_Request_free of an inactive %s\n", kind_name[kind]);
                free(c[kind].send);
                free(c[kind].recv);
                free(c[kind].counts);
                free(c[kind].displs);
            }
        }
    if (wrank == 0)
        printf("persistcheck: %d rounds ok\n", rounds);
    MPI_Comm_free(&split);
    MPI_Finalize();
    return 0;
}
