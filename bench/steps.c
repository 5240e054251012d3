/* steps: an allreduce loop that says when each step ended (`wanmpi bench flap`).
 *
 * Usage: steps [--bytes N] [--seconds S]
 * Every rank adds N bytes of ints (default 1 MiB) with MPI_Allreduce, again
 * and again for S seconds (default 30; rank 0 decides when to stop and
 * tells the others with the step's MPI_Bcast). Every result is checked
 * exactly. Rank 0 prints, per step, {"step": K, "end": T} with T the wall
 * clock (CLOCK_REALTIME, seconds) when the step ended, and at the end
 *   {"bench": "steps", "steps": K, "bytes": N, "check": "ok"}
 * A wrong sum exits with status 3; bad arguments with 2. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double wall(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long bytes = 1L << 20;
    double seconds = 30;
    for (int i = 1; i < argc; i++) {
        char *end = NULL;
        if (i + 1 < argc && !strcmp(argv[i], "--bytes")) bytes = strtol(argv[++i], &end, 10);
        else if (i + 1 < argc && !strcmp(argv[i], "--seconds")) seconds = strtod(argv[++i], &end);
        if (!end || *end || bytes < 4 || bytes > (1L << 30) || seconds <= 0) {
            if (rank == 0)
                fprintf(stderr, "steps: usage: steps [--bytes N (4..1G)] [--seconds S (> 0)]\n");
            MPI_Finalize();
            return 2;
        }
    }
    long n = bytes / 4;
    int *in = malloc(sizeof(int) * (size_t)n), *out = malloc(sizeof(int) * (size_t)n);
    double stop = wall() + seconds;
    int go = 1;
    long k = 0;
    for (; go; k++) {
        for (long i = 0; i < n; i++) in[i] = (int)((i + k) % 1000) + rank;
        MPI_Allreduce(in, out, (int)n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        for (long i = 0; i < n; i++)
            if (out[i] != (int)((i + k) % 1000) * size + size * (size - 1) / 2) {
                fprintf(stderr, "steps: rank %d: step %ld: element %ld is %d\n", rank, k, i, out[i]);
                MPI_Abort(MPI_COMM_WORLD, 3);
            }
        if (rank == 0) {
            go = wall() < stop;
            printf("{\"step\": %ld, \"end\": %.6f}\n", k, wall());
            fflush(stdout);
        }
        MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD);
    }
    if (rank == 0)
        printf("{\"bench\": \"steps\", \"steps\": %ld, \"bytes\": %ld, \"check\": \"ok\"}\n", k, n * 4);
    free(in);
    free(out);
    MPI_Finalize();
    return 0;
}
