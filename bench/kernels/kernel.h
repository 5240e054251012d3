/* kernel.h: the parts the NAS-like kernels (the .c files in bench/kernels/) share.
 *
 *   <kernel> [--class S|A|B] [--iters I]
 *
 * Options and their checks, usage (every rank finalizes and exits 2), the value()
 * payload scheme of bench/patterns.c (each element names its sender,
 * receiver, message key and index, so every received element is checked),
 * a checked allreduce, and the timed run with its JSON line:
 *   {"kernel": "cg", "class": "S", "ranks": 8, "iters": 25, "seconds": ...,
 *    "per_iter_s": ..., "check": "ok"}
 * Timing: one warm-up iteration, PMPI_Barrier, the iterations, then the
 * slowest rank's time (PMPI_Reduce), so libwanmpi's collectives are not in
 * the clock's start and end. */
#ifndef KERNEL_H
#define KERNEL_H
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;
static const char *kname;
static char kclass = 'S';
static int kiters;
static const char *kusage_extra = "";

/* A value per class: S, A, B. */
#define BY_CLASS(s, a, b) (kclass == 'S' ? (s) : kclass == 'A' ? (a) : (b))

static inline void usage(const char *why)
{
    /* every rank sees the same arguments, so every rank gets here: rank 0
     * says why, then all finalize and exit 2. Not MPI_Abort: it can kill the
     * launcher's stderr forwarding before rank 0's message is out (seen with
     * MPICH's hydra under load: exit 2, empty stderr) */
    if (rank == 0) {
        fprintf(stderr, "%s: %s\nusage: %s [--class S|A|B] [--iters I (1..1000000)]%s\n", kname, why, kname,
                kusage_extra);
        fflush(stderr);
    }
    MPI_Finalize();
    exit(2);
}

/* MPI_Init, then the options; `iters` is the default per class (S, A, B). */
static inline void kernel_init(int *argc, char ***argv, const char *name, int iters_s, int iters_a, int iters_b)
{
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    kname = name;
    int iters = 0;
    char **av = *argv;
    for (int i = 1; i < *argc; i++) {
        if (!strcmp(av[i], "--class") && i + 1 < *argc) {
            const char *c = av[++i];
            if (strlen(c) != 1 || !strchr("SAB", c[0]))
                usage("--class must be S, A or B");
            kclass = c[0];
        } else if (!strcmp(av[i], "--iters") && i + 1 < *argc) {
            char *end;
            long v = strtol(av[++i], &end, 10);
            if (*av[i] == '\0' || *end != '\0' || v < 1 || v > 1000000)
                usage("--iters must be an integer in 1..1000000");
            iters = (int)v;
        } else {
            char why[200];
            snprintf(why, sizeof why, "unknown or incomplete option %.100s", av[i]);
            usage(why);
        }
    }
    kiters = iters ? iters : BY_CLASS(iters_s, iters_a, iters_b);
}

/* Payload: element i of the message `key` from src to dst. */
static inline uint32_t value(int src, int dst, int key, long i)
{
    uint32_t x = (uint32_t)src * 2654435761u ^ (uint32_t)dst * 40503u ^ (uint32_t)key * 977u;
    return x + (uint32_t)i;
}

/* Per-message folds of what this rank sent and received since the last
 * checked allreduce: their global sums must be equal. */
static double ck_sent, ck_recv;

static inline uint32_t fold(const uint32_t *b, long n)
{
    uint32_t s = 0;
    for (long i = 0; i < n; i++)
        s += b[i];
    return s & 0xfffffu;
}

static inline void fill(uint32_t *b, long n, int to, int key)
{
    for (long i = 0; i < n; i++)
        b[i] = value(rank, to, key, i);
    ck_sent += fold(b, n);
}

static inline void check(const char *what, const uint32_t *b, long n, int from, int key)
{
    for (long i = 0; i < n; i++)
        if (b[i] != value(from, rank, key, i)) {
            fprintf(stderr, "%s %s: rank %d, from %d, message %d, element %ld: got %u, want %u\n", kname, what,
                    rank, from, key, i, b[i], value(from, rank, key, i));
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    ck_recv += fold(b, n);
}

/* Send n elements to `to` and receive n from `from` (either may be
 * MPI_PROC_NULL), both checked. */
static inline void exchange(const char *what, int to, int from, uint32_t *out, uint32_t *in, long n, int key,
                     MPI_Comm comm)
{
    if (to != MPI_PROC_NULL)
        fill(out, n, to, key);
    MPI_Sendrecv(out, (int)n, MPI_UINT32_T, to, key & 0x7fff, in, (int)n, MPI_UINT32_T, from, key & 0x7fff, comm,
                 MPI_STATUS_IGNORE);
    if (from != MPI_PROC_NULL)
        check(what, in, n, from, key);
}

/* One MPI_Allreduce (sum, MPI_COMM_WORLD) of {(rank+1)*(key+1), sent
 * folds, received folds, x...}: the first must be size*(size+1)/2*(key+1)
 * and the two folds equal, exactly (integers below 2^53). x has nx values
 * (at most 4), replaced by their global sums. */
static inline void allreduce_checked(const char *what, int key, double *x, int nx)
{
    double in[7] = {(double)(rank + 1) * (key + 1), ck_sent, ck_recv}, out[7];
    for (int i = 0; i < nx; i++)
        in[3 + i] = x[i];
    MPI_Allreduce(in, out, 3 + nx, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double want = (double)size * (size + 1) / 2 * (key + 1);
    if (out[0] != want || out[1] != out[2]) {
        fprintf(stderr, "%s %s: rank %d, reduction %d: sum %.0f (want %.0f), folds sent %.0f, received %.0f\n",
                kname, what, rank, key, out[0], want, out[1], out[2]);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int i = 0; i < nx; i++)
        x[i] = out[3 + i];
    ck_sent = ck_recv = 0;
}

static inline void *xmalloc(size_t n)
{
    void *p = calloc(1, n ? n : 1);
    if (!p) {
        fprintf(stderr, "%s: rank %d: out of memory (%zu bytes)\n", kname, rank, n);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return p;
}

/* Warm-up iteration, then the timed run; rank 0 prints the JSON line. */
static inline int kernel_run(void (*run)(int iters))
{
    run(1);
    PMPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    run(kiters);
    double mine = MPI_Wtime() - t0, slowest = 0;
    PMPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("{\"kernel\": \"%s\", \"class\": \"%c\", \"ranks\": %d, \"iters\": %d, \"seconds\": %.6f, "
               "\"per_iter_s\": %.6f, \"check\": \"ok\"}\n",
               kname, kclass, size, kiters, slowest, slowest / kiters);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
#endif
