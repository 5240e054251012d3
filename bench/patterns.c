/* patterns: the communication patterns of three NAS benchmarks, as the
 * pacing paper describes them, for `wanmpi bench pacing`.
 *
 *   patterns is [--bytes N] [--iters I] [--compute-us U]
 *       IS: per iteration, MPI_Alltoall of one count per pair, then
 *       MPI_Alltoallv of about N bytes per pair (default 128 KiB; each pair's
 *       block is 75-125 % of N, varying per iteration, as bucket sizes do).
 *   patterns ft [--bytes N] [--iters I] [--compute-us U]
 *       FT: per iteration, MPI_Alltoall of N bytes per pair (default 1 MiB).
 *   patterns lu [--bytes N] [--iters I] [--compute-us U]
 *       LU: a pipelined wavefront over a 2-row process grid (row 0 = the
 *       first half of the ranks, row 1 = the second: with block placement
 *       every rank has a neighbour across the WAN). Each of I sweeps sends
 *       64 small messages (N bytes, default 1 KiB) south and east, then back.
 *
 * Every received value is checked (each element names its sender, receiver,
 * iteration and index). Timing: PMPI_Barrier, then the iterations, then the
 * slowest rank's time. Rank 0 prints one JSON line:
 *   {"kernel": "is", "ranks": 8, "bytes": 131072, "iters": 10, "seconds": ...,
 *    "per_iter_s": ..., "check": "ok"}
 * A wrong value aborts with a message naming rank, peer and index. */
#include <errno.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;

static uint32_t value(int src, int dst, int iter, long i)
{
    uint32_t x = (uint32_t)src * 2654435761u ^ (uint32_t)dst * 40503u ^ (uint32_t)iter * 977u;
    return x + (uint32_t)i;
}

static void bad(const char *kernel, int peer, int iter, long i, uint32_t got, uint32_t want)
{
    fprintf(stderr, "patterns %s: rank %d, from %d, iteration %d, element %ld: got %u, want %u\n", kernel, rank,
            peer, iter, i, got, want);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static void compute(int us)
{
    if (us <= 0)
        return;
    double end = MPI_Wtime() + us * 1e-6;
    volatile double x = 1.0;
    while (MPI_Wtime() < end)
        x = x * 1.0000001 + 1e-9;
}

/* Elements (uint32) from src to dst in iteration `iter`: 75-125 % of `n`. */
static int is_count(int src, int dst, int iter, int n)
{
    uint32_t h = value(src, dst, iter, 0) * 2246822519u;
    return n * 3 / 4 + (int)(h % (uint32_t)(n / 2 + 1));
}

static void kernel_is(long bytes, int iters, int us)
{
    int n = (int)(bytes / 4);
    int *sc = malloc(size * sizeof *sc), *sd = malloc(size * sizeof *sd), *rc = malloc(size * sizeof *rc),
        *rd = malloc(size * sizeof *rd);
    size_t cap = (size_t)(n * 5 / 4 + 2) * size;
    uint32_t *send = malloc(cap * 4), *recv = malloc(cap * 4);
    for (int it = 0; it < iters; it++) {
        compute(us);
        int total = 0;
        for (int p = 0; p < size; p++) {
            sc[p] = is_count(rank, p, it, n);
            sd[p] = total;
            for (long i = 0; i < sc[p]; i++)
                send[total + i] = value(rank, p, it, i);
            total += sc[p];
        }
        MPI_Alltoall(sc, 1, MPI_INT, rc, 1, MPI_INT, MPI_COMM_WORLD);
        total = 0;
        for (int p = 0; p < size; p++) {
            if (rc[p] != is_count(p, rank, it, n))
                bad("is counts", p, it, 0, (uint32_t)rc[p], (uint32_t)is_count(p, rank, it, n));
            rd[p] = total;
            total += rc[p];
        }
        MPI_Alltoallv(send, sc, sd, MPI_UINT32_T, recv, rc, rd, MPI_UINT32_T, MPI_COMM_WORLD);
        for (int p = 0; p < size; p++)
            for (long i = 0; i < rc[p]; i++)
                if (recv[rd[p] + i] != value(p, rank, it, i))
                    bad("is", p, it, i, recv[rd[p] + i], value(p, rank, it, i));
    }
    free(send);
    free(recv);
    free(sc);
    free(sd);
    free(rc);
    free(rd);
}

static void kernel_ft(long bytes, int iters, int us)
{
    long n = bytes / 4;
    uint32_t *send = malloc((size_t)n * size * 4), *recv = malloc((size_t)n * size * 4);
    for (int it = 0; it < iters; it++) {
        compute(us);
        for (int p = 0; p < size; p++)
            for (long i = 0; i < n; i++)
                send[p * n + i] = value(rank, p, it, i);
        MPI_Alltoall(send, (int)n, MPI_UINT32_T, recv, (int)n, MPI_UINT32_T, MPI_COMM_WORLD);
        for (int p = 0; p < size; p++)
            for (long i = 0; i < n; i += 97)
                if (recv[p * n + i] != value(p, rank, it, i))
                    bad("ft", p, it, i, recv[p * n + i], value(p, rank, it, i));
    }
    free(send);
    free(recv);
}

#define LU_STEPS 64

static void lu_exchange(int to, int from, uint32_t *out, uint32_t *in, long n, int it, int step)
{
    /* send `to` (or none), receive `from` (or none), check what came */
    for (long i = 0; i < n; i++)
        out[i] = value(rank, to, it * LU_STEPS + step, i);
    MPI_Request r[2];
    int k = 0;
    if (from >= 0)
        MPI_Irecv(in, (int)n, MPI_UINT32_T, from, step, MPI_COMM_WORLD, &r[k++]);
    if (to >= 0)
        MPI_Isend(out, (int)n, MPI_UINT32_T, to, step, MPI_COMM_WORLD, &r[k++]);
    MPI_Waitall(k, r, MPI_STATUSES_IGNORE);
    if (from >= 0)
        for (long i = 0; i < n; i++)
            if (in[i] != value(from, rank, it * LU_STEPS + step, i))
                bad("lu", from, it, i, in[i], value(from, rank, it * LU_STEPS + step, i));
}

static void kernel_lu(long bytes, int iters, int us)
{
    int cols = size / 2, row = rank / cols, col = rank % cols;
    int north = row ? rank - cols : -1, south = row ? -1 : rank + cols;
    int west = col ? rank - 1 : -1, east = col + 1 < cols ? rank + 1 : -1;
    long n = bytes / 4 > 0 ? bytes / 4 : 1;
    uint32_t *out = malloc(n * 4), *in = malloc(n * 4);
    for (int it = 0; it < iters; it++) {
        for (int step = 0; step < LU_STEPS; step++) {     /* lower sweep: from the north-west */
            lu_exchange(-1, north, out, in, n, it, step);
            lu_exchange(-1, west, out, in, n, it, step);
            compute(us / (2 * LU_STEPS));
            lu_exchange(south, -1, out, in, n, it, step);
            lu_exchange(east, -1, out, in, n, it, step);
        }
        for (int step = 0; step < LU_STEPS; step++) {     /* upper sweep: from the south-east */
            lu_exchange(-1, south, out, in, n, it + iters, step);
            lu_exchange(-1, east, out, in, n, it + iters, step);
            compute(us / (2 * LU_STEPS));
            lu_exchange(north, -1, out, in, n, it + iters, step);
            lu_exchange(west, -1, out, in, n, it + iters, step);
        }
    }
    free(out);
    free(in);
}

/* Every rank sees the same arguments, so every rank gets here: rank 0 says
 * why, then all finalize and exit 2 (MPI_Abort can kill the launcher's stderr
 * forwarding before the message is out). */
static void usage(const char *why, const char *what)
{
    if (rank == 0) {
        fprintf(stderr, "patterns: %s%s\nusage: patterns is|ft|lu [--bytes N (4..1G)] [--iters I (>= 1)]"
                        " [--compute-us U (>= 0)] (lu needs an even number of ranks)\n", why, what);
        fflush(stderr);
    }
    MPI_Finalize();
    exit(2);
}

/* The option's value as a whole decimal number in lo..hi, else usage. */
static long option(const char *name, const char *text, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < lo || v > hi) {
        char why[96];
        snprintf(why, sizeof why, "%s must be an integer in %ld..%ld, got ", name, lo, hi);
        usage(why, text);
    }
    return v;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *kernel = argc > 1 ? argv[1] : "";
    if (strcmp(kernel, "is") && strcmp(kernel, "ft") && strcmp(kernel, "lu"))
        usage("unknown kernel ", kernel);
    if (!strcmp(kernel, "lu") && size % 2)
        usage("lu needs an even number of ranks", "");
    long bytes = !strcmp(kernel, "ft") ? 1L << 20 : !strcmp(kernel, "lu") ? 1024 : 128L << 10;
    int iters = 10, us = 0;
    for (int i = 2; i < argc; i += 2) {
        if (i + 1 == argc)
            usage("option without a value: ", argv[i]);
        if (!strcmp(argv[i], "--bytes"))
            bytes = option("--bytes", argv[i + 1], 4, 1L << 30);
        else if (!strcmp(argv[i], "--iters"))
            iters = (int)option("--iters", argv[i + 1], 1, 1000000000);
        else if (!strcmp(argv[i], "--compute-us"))
            us = (int)option("--compute-us", argv[i + 1], 0, 100000000);
        else
            usage("unknown option ", argv[i]);
    }
    void (*run)(long, int, int) = !strcmp(kernel, "is") ? kernel_is : !strcmp(kernel, "ft") ? kernel_ft : kernel_lu;
    run(bytes, 1, us);                                  /* warm-up: connections, buffers */
    PMPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    run(bytes, iters, us);
    double mine = MPI_Wtime() - t0, slowest = 0;
    PMPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("{\"kernel\": \"%s\", \"ranks\": %d, \"bytes\": %ld, \"iters\": %d, \"seconds\": %.6f, "
               "\"per_iter_s\": %.6f, \"check\": \"ok\"}\n", kernel, size, bytes, iters, slowest,
               slowest / iters);
    MPI_Finalize();
    return 0;
}
