/* collbench: time MPI collectives across message sizes.
 *
 * Usage: collbench [--ops bcast,allreduce,...] [--sizes 1K,64K,1M,...]
 *                  [--iters N] [--warmup N] [--root R] [--budget SECONDS]
 * For each operation and size (bytes, or with a K, M or G suffix: powers of 1024),
 * every iteration starts after the MPI library's own barrier (PMPI_Barrier: the
 * same start under every libwanmpi setting, so rooted calls are compared from
 * the same skew); a rank's time is from just after the barrier until its call returns, and the iteration's time is the maximum
 * over ranks (as the OSU benchmarks do). Rank 0 prints one JSON object per
 * (operation, size): {"op", "bytes", "iters", "min_s", "median_s", "max_s"}.
 * The first iteration's result is checked exactly (the job fails with status
 * 3 if it is wrong). --budget stops repeating a size once its iterations have
 * taken that long (at least one timed iteration always runs).
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
                "[--warmup N] [--root R] [--budget SECONDS]\n", why);
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

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *ops = "bcast,allreduce", *sizes = "1K,64K,1M";
    int iters = 5, warmup = 1, root = 0;
    double budget = 1e9;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc)
            return usage(rank, "every option needs a value");
        if (!strcmp(argv[i], "--ops")) ops = argv[++i];
        else if (!strcmp(argv[i], "--sizes")) sizes = argv[++i];
        else if (!strcmp(argv[i], "--iters")) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--warmup")) warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--root")) root = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--budget")) budget = atof(argv[++i]);
        else return usage(rank, "unknown option");
    }
    if (iters < 1 || warmup < 0 || root < 0 || root >= size || budget <= 0)
        return usage(rank, "--iters must be >= 1, --warmup >= 0, --root a rank, --budget > 0");
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
            int *a = malloc((size_t)(n + 1) * sizeof(int)), *b = malloc((size_t)(n + 1) * sizeof(int));
            double *times = malloc((size_t)iters * sizeof(double)), spent = 0;
            int done = 0, ok = 1;
            for (int it = 0; it < warmup + iters; it++) {
                PMPI_Barrier(MPI_COMM_WORLD);     /* the same start for every algorithm setting */
                double t0 = MPI_Wtime();
                ok &= run(op, a, b, n, root, rank, size, it == 0);
                double mine = MPI_Wtime() - t0, worst;
                PMPI_Allreduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
                if (it == 0) {
                    int all_ok;
                    PMPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
                    if (!all_ok) {
                        if (rank == 0)
                            fprintf(stderr, "collbench: %s of %ld bytes gave a wrong result\n", op, bytes);
                        MPI_Abort(MPI_COMM_WORLD, 3);
                    }
                }
                if (it >= warmup) {
                    times[done++] = worst;
                    spent += worst;
                    int stop = spent >= budget;
                    PMPI_Bcast(&stop, 1, MPI_INT, 0, MPI_COMM_WORLD);
                    if (stop)
                        break;
                }
            }
            qsort(times, (size_t)done, sizeof(double), cmp_double);
            if (rank == 0) {
                printf("{\"op\": \"%s\", \"bytes\": %ld, \"ranks\": %d, \"iters\": %d, \"min_s\": %.6f, "
                       "\"median_s\": %.6f, \"max_s\": %.6f}\n", op, n * (long)sizeof(int), size, done,
                       times[0], done % 2 ? times[done / 2] : (times[done / 2 - 1] + times[done / 2]) / 2,
                       times[done - 1]);
                fflush(stdout);
            }
            free(a);
            free(b);
            free(times);
        }
        free(size_list);
    }
    free(op_list);
    MPI_Finalize();
    return 0;
}
