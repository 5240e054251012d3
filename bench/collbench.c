/* collbench: time MPI collectives across message sizes.
 *
 * Usage: collbench [--ops bcast,allreduce,...] [--sizes 1K,64K,1M,...]
 *                  [--iters N] [--warmup N] [--root R] [--budget SECONDS]
 *                  [--start barrier|clock] [--shared-from SIZE]
 * For each operation and size (bytes, or with a K, M or G suffix: powers of 1024),
 * every iteration starts after the MPI library's own barrier (PMPI_Barrier: the
 * same start under every libwanmpi setting, so rooted calls are compared from
 * the same skew); a rank's time is from just after the barrier until its call returns, and the iteration's time is the maximum
 * over ranks (as the OSU benchmarks do). Ranks leave a barrier at different
 * times, across a WAN up to a one-way delay per round apart, and a rank that
 * left early waits for a root that left late: "start_skew_s" is the median
 * of (last rank out - first rank out). --start clock removes it where the
 * ranks share a clock (the simulator's; the testbed's nodes, one kernel:
 * CLOCK_MONOTONIC; checked first: a rank whose clock is not rank 0's stops
 * the job): after the barrier the ranks agree on an instant ahead
 * of all of them and each starts its call then; the time is from that
 * instant ("late_starts": ranks that reached it too late, counted). Rank 0
 * prints one JSON object per (operation, size): {"op", "bytes", "iters",
 * "min_s", "median_s", "max_s", "start_skew_s", "late_starts"}.
 * The first iteration's result is checked exactly (the job fails with status
 * 3 if it is wrong). --budget stops repeating a size once its iterations have
 * taken that long (at least one timed iteration always runs). Under SimGrid
 * SMPI only, --shared-from SIZE gives sizes from SIZE up buffers that every
 * rank shares (SMPI_SHARED_MALLOC: 256 MiB on 16 ranks without 16 x 256 MiB
 * of memory); their results cannot be checked ("checked": false).
 * Operations: bcast, allreduce, reduce, allgather, allgatherv, reduce_scatter_block,
 * reduce_scatter, barrier, alltoall, alltoallv, gather, gatherv, scatter, scatterv, scan, exscan;
 * and ibcast, iallreduce, iallgather, ialltoall: the nonblocking call, then
 * MPI_Wait at once (its time against the blocking call's and the MPI's own
 * nonblocking one: docs/nonblocking.md). Also alltoallw and ialltoallw: the
 * alltoall as MPI_(I)Alltoallw, MPI_INT to every rank at byte displacements.
 * Data are MPI_INT (sizes are rounded down to whole ints; allgather,
 * reduce_scatter_block, alltoall, alltoallv, gather and scatter use
 * size/ranks per rank: the size is a rank's whole receive buffer (the
 * root's whole buffer for gather and scatter), size/ranks bytes from each
 * rank; alltoallv with uniform counts; allgatherv, gatherv, scatterv and
 * reduce_scatter with irregular ones: odd ranks contribute (receive) twice as much as even
 * ones, the size still the whole buffer). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Under SimGrid SMPI (smpicc's mpi.h defines SMPI_SHARED_MALLOC): buffers
 * every rank shares and the simulated clock. Tested once, here: the stand-ins
 * below define SMPI_SHARED_MALLOC too. */
#ifdef SMPI_SHARED_MALLOC
#define UNDER_SMPI 1
#else
#define UNDER_SMPI 0
#define SMPI_SHARED_MALLOC(bytes) NULL
#define SMPI_SHARED_FREE(p) ((void)(p))
#endif

/* The clock every rank shares: simulated time under SimGrid SMPI, else the
 * host's CLOCK_MONOTONIC (the same for every network namespace of one kernel;
 * not MPI_Wtime, which Open MPI counts from each process's own start). */
static double shared_clock(void)
{
#if UNDER_SMPI
    return MPI_Wtime();
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
#endif
}

/* Sleeps (a simulated sleep under SMPI) until the shared clock reads `when`;
 * 0 if it already had. */
static int sleep_until(double when)
{
    double now = shared_clock();
    if (now > when)
        return 0;
    while ((now = shared_clock()) < when) {
        double left = when - now;
        struct timespec ts = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
        nanosleep(&ts, NULL);
    }
    return 1;
}

/* --start clock needs one clock on every rank. Rank 0 asks each rank in turn
 * for its clock's reading (twice), which one shared clock puts between rank 0's
 * readings before the question and after the answer; rank 0 reports the
 * first rank whose reading is outside (its offset from their midpoint), and
 * every rank returns 0 then, else 1.
 * (The check cannot see an offset smaller than the round trip to that rank.) */
static int clock_is_shared(int rank, int size)
{
    double stray[2] = {0, 0};     /* {rank, offset in seconds} */
    for (int round = 0; round < 2; round++)     /* the first may open connections: checked on the second */
        for (int r = 1; r < size; r++) {
            double before = 0, theirs = 0, after;
            if (rank == 0) {
                before = shared_clock();
                PMPI_Send(&before, 1, MPI_DOUBLE, r, 0, MPI_COMM_WORLD);
                PMPI_Recv(&theirs, 1, MPI_DOUBLE, r, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                after = shared_clock();
                if (round && !stray[0] && (theirs < before || theirs > after))
                    stray[0] = r, stray[1] = theirs - (before + after) / 2;
            } else if (rank == r) {
                PMPI_Recv(&before, 1, MPI_DOUBLE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                theirs = shared_clock();
                PMPI_Send(&theirs, 1, MPI_DOUBLE, 0, 0, MPI_COMM_WORLD);
            }
        }
    PMPI_Bcast(stray, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (stray[0] && rank == 0)
        fprintf(stderr, "collbench: --start clock needs one clock on every rank (the host's CLOCK_MONOTONIC), "
                "but rank %d's differs from rank 0's by %+.3f ms: ranks on different hosts or time namespaces; "
                "use --start barrier\n", (int)stray[0], stray[1] * 1e3);
    return !stray[0];
}

static long parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    long scale = 1;
    if (*end == 'K' || *end == 'k') scale = 1L << 10, end++;
    else if (*end == 'M' || *end == 'm') scale = 1L << 20, end++;
    else if (*end == 'G' || *end == 'g') scale = 1L << 30, end++;
    if (end == s || *end || v < 0)
        return -1;
    return (long)(v * scale);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int usage(int rank, const char *why)
{
    if (rank == 0)
        fprintf(stderr, "collbench: %s\nusage: collbench [--ops LIST] [--sizes LIST] [--iters N] "
                "[--warmup N] [--root R] [--budget SECONDS] [--start barrier|clock] [--shared-from SIZE]\n", why);
    MPI_Finalize();
    return 2;
}

static const char *const OPS[] = {"bcast", "allreduce", "reduce", "allgather", "allgatherv",
                                  "reduce_scatter_block", "reduce_scatter", "barrier", "alltoall", "alltoallv",
                                  "gather", "gatherv", "scatter", "scatterv", "scan", "exscan",
                                  "alltoallw", "ibcast", "iallreduce", "iallgather", "ialltoall", "ialltoallw",
                                  NULL};

/* The nonblocking ops ("i" + a blocking one): MPI_I<op> then MPI_Wait. */
static int nonblocking;
static void wait_for(MPI_Request *req) { MPI_Wait(req, MPI_STATUS_IGNORE); }

static int known_op(const char *op)
{
    for (int i = 0; OPS[i]; i++)
        if (!strcmp(op, OPS[i])) return 1;
    return 0;
}

/* The block rank `from` sends to rank `to`, element i (wraps, never overflows). */
static int pair_value(int from, int to, long i)
{
    return (int)((unsigned)from * 7919u + (unsigned)to * 131u + (unsigned)i);
}

/* MPI_Alltoall (kind 0), or MPI_Alltoallv ('v') with every count `per`, or
 * MPI_Alltoallw ('w') with every count `per` of MPI_INT at byte
 * displacements; on `check`, fills and verifies. Returns 0 if wrong. */
static int run_alltoall(char kind, int *a, int *b, long per, int rank, int size, int check)
{
    if (check)
        for (int to = 0; to < size; to++)
            for (long i = 0; i < per; i++) a[to * per + i] = pair_value(rank, to, i), b[to * per + i] = -1;
    MPI_Request req;
    if (!kind && nonblocking) {
        MPI_Ialltoall(a, (int)per, MPI_INT, b, (int)per, MPI_INT, MPI_COMM_WORLD, &req);
        wait_for(&req);
    } else if (!kind) {
        MPI_Alltoall(a, (int)per, MPI_INT, b, (int)per, MPI_INT, MPI_COMM_WORLD);
    } else if (kind == 'w') {
        int *counts = malloc((size_t)size * sizeof(int)), *displs = malloc((size_t)size * sizeof(int));
        MPI_Datatype *types = malloc((size_t)size * sizeof *types);
        for (int r = 0; r < size; r++)
            counts[r] = (int)per, displs[r] = (int)(r * per * (long)sizeof(int)), types[r] = MPI_INT;
        if (nonblocking) {
            MPI_Ialltoallw(a, counts, displs, types, b, counts, displs, types, MPI_COMM_WORLD, &req);
            wait_for(&req);
        } else {
            MPI_Alltoallw(a, counts, displs, types, b, counts, displs, types, MPI_COMM_WORLD);
        }
        free(counts);
        free(displs);
        free(types);
    } else {
        int *counts = malloc((size_t)size * sizeof(int)), *displs = malloc((size_t)size * sizeof(int));
        for (int r = 0; r < size; r++)
            counts[r] = (int)per, displs[r] = (int)(r * per);
        MPI_Alltoallv(a, counts, displs, MPI_INT, b, counts, displs, MPI_INT, MPI_COMM_WORLD);
        free(counts);
        free(displs);
    }
    if (check)
        for (int from = 0; from < size; from++)
            for (long i = 0; i < per; i++) if (b[from * per + i] != pair_value(from, rank, i)) return 0;
    return 1;
}

/* Irregular blocks of n ints in all: rank r's has (1 + r % 2) parts.
 * Returns counts (size ints) followed by displacements; free it. */
static int *irregular(long n, int size)
{
    long parts = 0;
    for (int r = 0; r < size; r++) parts += 1 + r % 2;
    long part = n / parts;
    int *counts = malloc(sizeof(int) * 2 * (size_t)size), *displs = counts + size;
    for (int r = 0, d = 0; r < size; r++) {
        counts[r] = (int)(part * (1 + r % 2));
        displs[r] = d;
        d += counts[r];
    }
    return counts;
}

/* MPI_Reduce_scatter of n ints in all, the blocks irregular. Returns 0 if wrong. */
static int run_reduce_scatter(int *a, int *b, long n, int rank, int size, int check)
{
    int *counts = irregular(n, size), first = counts[size + rank], ok = 1;
    long total = counts[size + size - 1] + counts[size - 1];
    if (check)
        for (long i = 0; i < total; i++) a[i] = (int)(i % 977) + rank;
    MPI_Reduce_scatter(a, b, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (check)
        for (long i = 0; i < counts[rank]; i++)
            ok &= b[i] == (int)((first + i) % 977) * size + size * (size - 1) / 2;
    free(counts);
    return ok;
}

/* Gather(v) or scatter(v) of n ints in all at `root` (v: irregular blocks).
 * Returns 0 if wrong. */
static int run_rooted(int gather, int v, int *a, int *b, long n, int root, int rank, int size, int check)
{
    int *counts = irregular(n, size), *displs = counts + size, ok = 1;
    if (!v)
        for (int r = 0; r < size; r++) counts[r] = (int)(n / size), displs[r] = (int)(r * (n / size));
    int mine = counts[rank];
    if (check && gather)
        for (long i = 0; i < mine; i++) a[i] = rank * 7919 + (int)i;
    if (check && !gather && rank == root)
        for (int r = 0; r < size; r++)
            for (long i = 0; i < counts[r]; i++) a[displs[r] + i] = r * 7919 + (int)i;
    if (gather && v)
        MPI_Gatherv(a, mine, MPI_INT, b, counts, displs, MPI_INT, root, MPI_COMM_WORLD);
    else if (gather)
        MPI_Gather(a, mine, MPI_INT, b, mine, MPI_INT, root, MPI_COMM_WORLD);
    else if (v)
        MPI_Scatterv(a, counts, displs, MPI_INT, b, mine, MPI_INT, root, MPI_COMM_WORLD);
    else
        MPI_Scatter(a, mine, MPI_INT, b, mine, MPI_INT, root, MPI_COMM_WORLD);
    if (check && gather && rank == root)
        for (int r = 0; r < size; r++)
            for (long i = 0; i < counts[r]; i++) ok &= b[displs[r] + i] == r * 7919 + (int)i;
    if (check && !gather)
        for (long i = 0; i < mine; i++) ok &= b[i] == rank * 7919 + (int)i;
    free(counts);
    return ok;
}

/* Allgatherv of n ints in all: rank r contributes (1 + r % 2) parts. */
static int run_allgatherv(int *a, int *b, long n, int rank, int size, int check)
{
    int *counts = irregular(n, size), *displs = counts + size;
    if (check)
        for (long i = 0; i < counts[rank]; i++) a[i] = rank * 7919 + (int)i;
    MPI_Allgatherv(a, counts[rank], MPI_INT, b, counts, displs, MPI_INT, MPI_COMM_WORLD);
    int ok = 1;
    if (check)
        for (int r = 0; r < size; r++)
            for (long i = 0; i < counts[r]; i++) ok &= b[displs[r] + i] == r * 7919 + (int)i;
    free(counts);
    return ok;
}

/* Runs one call; on `check`, verifies the result. Returns 0 if wrong. */
static int run(const char *op, int *a, int *b, long n, int root, int rank, int size, int check)
{
    long per = n / size;
    MPI_Request req;
    nonblocking = op[0] == 'i';
    op += nonblocking;
    if (!strcmp(op, "bcast")) {
        if (check)
            for (long i = 0; i < n; i++) a[i] = rank == root ? (int)(i * 2654435761u) : -1;
        if (nonblocking) {
            MPI_Ibcast(a, (int)n, MPI_INT, root, MPI_COMM_WORLD, &req);
            wait_for(&req);
        } else {
            MPI_Bcast(a, (int)n, MPI_INT, root, MPI_COMM_WORLD);
        }
        if (check)
            for (long i = 0; i < n; i++) if (a[i] != (int)(i * 2654435761u)) return 0;
    } else if (!strcmp(op, "allreduce") || !strcmp(op, "reduce")) {
        if (check)
            for (long i = 0; i < n; i++) a[i] = (int)(i % 1000) + rank;
        if (op[0] == 'a' && nonblocking) {
            MPI_Iallreduce(a, b, (int)n, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req);
            wait_for(&req);
        } else if (op[0] == 'a')
            MPI_Allreduce(a, b, (int)n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        else
            MPI_Reduce(a, b, (int)n, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD);
        if (check && (op[0] == 'a' || rank == root))
            for (long i = 0; i < n; i++)
                if (b[i] != (int)(i % 1000) * size + size * (size - 1) / 2) return 0;
    } else if (!strcmp(op, "scan") || !strcmp(op, "exscan")) {
        /* the sum over ranks 0..rank (exscan: 0..rank-1; rank 0's undefined) */
        int ex = op[0] == 'e', upto = ex ? rank : rank + 1;
        if (check)
            for (long i = 0; i < n; i++) a[i] = (int)(i % 1000) + rank;
        if (ex)
            MPI_Exscan(a, b, (int)n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        else
            MPI_Scan(a, b, (int)n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        if (check && upto > 0)
            for (long i = 0; i < n; i++)
                if (b[i] != (int)(i % 1000) * upto + upto * (upto - 1) / 2) return 0;
    } else if (!strcmp(op, "allgather")) {
        if (check)
            for (long i = 0; i < per; i++) a[i] = rank * 7919 + (int)i;
        if (nonblocking) {
            MPI_Iallgather(a, (int)per, MPI_INT, b, (int)per, MPI_INT, MPI_COMM_WORLD, &req);
            wait_for(&req);
        } else {
            MPI_Allgather(a, (int)per, MPI_INT, b, (int)per, MPI_INT, MPI_COMM_WORLD);
        }
        if (check)
            for (int r = 0; r < size; r++)
                for (long i = 0; i < per; i++) if (b[r * per + i] != r * 7919 + (int)i) return 0;
    } else if (!strncmp(op, "gather", 6) || !strncmp(op, "scatter", 7)) {
        return run_rooted(op[0] == 'g', op[strlen(op) - 1] == 'v', a, b, n, root, rank, size, check);
    } else if (!strcmp(op, "allgatherv")) {
        return run_allgatherv(a, b, n, rank, size, check);
    } else if (!strcmp(op, "reduce_scatter_block")) {
        if (check)
            for (long i = 0; i < per * size; i++) a[i] = (int)(i % 977) + rank;
        MPI_Reduce_scatter_block(a, b, (int)per, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        if (check)
            for (long i = 0; i < per; i++)
                if (b[i] != (int)((rank * per + i) % 977) * size + size * (size - 1) / 2) return 0;
    } else if (!strcmp(op, "reduce_scatter")) {
        return run_reduce_scatter(a, b, n, rank, size, check);
    } else if (!strncmp(op, "alltoall", 8)) {
        return run_alltoall(op[8], a, b, per, rank, size, check);
    } else {
        MPI_Barrier(MPI_COMM_WORLD);
    }
    return 1;
}

struct options {
    const char *ops, *sizes;
    int iters, warmup, root, clock_start;
    double budget;
    long shared_from;   /* sizes from here up in buffers all ranks share (SMPI); 0: none */
};

/* The command line into `o`; NULL, or what is wrong with it. */
static const char *parse_options(int argc, char **argv, int size, struct options *o)
{
    *o = (struct options){"bcast,allreduce", "1K,64K,1M", 5, 1, 0, 0, 1e9, 0};
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc)
            return "every option needs a value";
        if (!strcmp(argv[i], "--ops")) o->ops = argv[++i];
        else if (!strcmp(argv[i], "--sizes")) o->sizes = argv[++i];
        else if (!strcmp(argv[i], "--iters")) o->iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--warmup")) o->warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--root")) o->root = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--budget")) o->budget = atof(argv[++i]);
        else if (!strcmp(argv[i], "--start") && (!strcmp(argv[i + 1], "barrier") || !strcmp(argv[i + 1], "clock")))
            o->clock_start = !strcmp(argv[++i], "clock");
        else if (!strcmp(argv[i], "--start")) return "--start is barrier or clock";
        else if (!strcmp(argv[i], "--shared-from")) {
            if (!UNDER_SMPI)
                return "--shared-from needs SimGrid SMPI (a collbench built with smpicc)";
            if ((o->shared_from = parse_size(argv[++i])) <= 0)
                return "--shared-from must be a size above 0";
        }
        else return "unknown option";
    }
    if (o->iters < 1 || o->warmup < 0 || o->root < 0 || o->root >= size || o->budget <= 0)
        return "--iters must be >= 1, --warmup >= 0, --root a rank, --budget > 0";
    return NULL;
}

/* The median of n values (sorts them). */
static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct timing {
    double worst;       /* the iteration's time: the slowest rank's */
    double skew;        /* last rank out of the barrier - first */
    int late;           /* ranks that reached the agreed start late (clock start) */
    int ok;             /* this rank's result checked right (or not checked) */
};

/* One iteration of `op`: the MPI's barrier, then either each rank's call at
 * once (its time from there) or, with `clock_start`, every call at an
 * instant agreed ahead on the shared clock (the time from that instant). */
static struct timing timed(const char *op, int *a, int *b, long n, int root, int rank, int size, int check,
                           int clock_start)
{
    struct timing t = {0, 0, 0, 1};
    PMPI_Barrier(MPI_COMM_WORLD);     /* the same start for every algorithm setting */
    double out = shared_clock(), t0 = MPI_Wtime(), start = 0, edges[2] = {out, -out}, far[2];
    int missed = 0;
    if (clock_start) {
        /* an instant ahead of the slowest rank by twice what agreeing took, and
         * 1 ms more (a rank that waits for a core on an oversubscribed host) */
        PMPI_Allreduce(edges, far, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        double agreed = shared_clock(), last;
        PMPI_Allreduce(&agreed, &last, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        start = last + 2 * (last + far[1]) + 1e-3;
        missed = !sleep_until(start);
    }
    t.ok = run(op, a, b, n, root, rank, size, check);
    double mine = clock_start ? shared_clock() - start : MPI_Wtime() - t0;
    PMPI_Allreduce(&mine, &t.worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (!clock_start)
        PMPI_Allreduce(edges, far, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    t.skew = far[0] + far[1];
    PMPI_Allreduce(&missed, &t.late, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    return t;
}

/* A buffer of n + 1 ints, of this rank's own or (`shared`, SMPI) the one
 * every rank shares. */
static int *buffer(int shared, long n)
{
    size_t bytes = (size_t)(n + 1) * sizeof(int);
    int *p = shared ? SMPI_SHARED_MALLOC(bytes) : malloc(bytes);
    if (!p) {
        fprintf(stderr, "collbench: no memory for a buffer of %zu bytes\n", bytes);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

static void release(int shared, int *p)
{
    if (shared)
        SMPI_SHARED_FREE(p);
    else
        free(p);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    struct options o;
    const char *why = parse_options(argc, argv, size, &o);
    if (why)
        return usage(rank, why);
    if (o.clock_start && !UNDER_SMPI && !clock_is_shared(rank, size)) {
        MPI_Finalize();
        return 2;
    }
    const char *ops = o.ops, *sizes = o.sizes;
    int iters = o.iters, warmup = o.warmup, root = o.root, clock_start = o.clock_start;
    double budget = o.budget;
    char *op_list = strdup(ops);
    for (char *op_save, *op = strtok_r(op_list, ",", &op_save); op; op = strtok_r(NULL, ",", &op_save)) {
        if (!known_op(op))
            return usage(rank, "unknown operation in --ops");
        char *size_list = strdup(sizes), *save;
        for (char *s = strtok_r(size_list, ",", &save); s; s = strtok_r(NULL, ",", &save)) {
            long bytes = parse_size(s);
            if (bytes < 0)
                return usage(rank, "bad size in --sizes");
            long n = bytes / (long)sizeof(int);
            if (!strcmp(op, "allgather") || !strcmp(op, "reduce_scatter_block") || !strncmp(op, "alltoall", 8) ||
                !strcmp(op, "gather") || !strcmp(op, "scatter"))
                n = n / size * size;
            int shared = o.shared_from > 0 && bytes >= o.shared_from;
            int *a = buffer(shared, n), *b = buffer(shared, n);
            double *times = malloc((size_t)iters * sizeof(double)), *skews = malloc((size_t)iters * sizeof(double));
            double spent = 0;
            int done = 0, late = 0;
            for (int it = 0; it < warmup + iters; it++) {
                struct timing t = timed(op, a, b, n, root, rank, size, it == 0 && !shared, clock_start);
                if (it == 0) {
                    int all_ok;
                    PMPI_Allreduce(&t.ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
                    if (!all_ok) {
                        if (rank == 0)
                            fprintf(stderr, "collbench: %s of %ld bytes gave a wrong result\n", op, bytes);
                        MPI_Abort(MPI_COMM_WORLD, 3);
                    }
                }
                if (it >= warmup) {
                    skews[done] = t.skew;
                    late += t.late;
                    times[done++] = t.worst;
                    spent += t.worst;
                    int stop = spent >= budget;
                    PMPI_Bcast(&stop, 1, MPI_INT, 0, MPI_COMM_WORLD);
                    if (stop)
                        break;
                }
            }
            if (rank == 0) {
                double skew = median(skews, done);
                qsort(times, (size_t)done, sizeof(double), cmp_double);
                printf("{\"op\": \"%s\", \"bytes\": %ld, \"ranks\": %d, \"iters\": %d, \"min_s\": %.6f, "
                       "\"median_s\": %.6f, \"max_s\": %.6f, \"start\": \"%s\", \"start_skew_s\": %.6f, "
                       "\"late_starts\": %d, \"checked\": %s}\n", op, n * (long)sizeof(int), size, done, times[0],
                       median(times, done), times[done - 1], clock_start ? "clock" : "barrier", skew, late,
                       shared ? "false" : "true");
                fflush(stdout);
            }
            free(skews);
            release(shared, a);
            release(shared, b);
            free(times);
        }
        free(size_list);
    }
    free(op_list);
    MPI_Finalize();
    return 0;
}
