/* fence: does MPI_Finalize wait for every rank? (lib/src/fence/fence.c)
 *
 * Usage: fence SECONDS
 * After a barrier, rank 0 sleeps SECONDS before MPI_Finalize; the others call
 * it at once. Every rank then prints
 *   {"rank": R, "finalize_returned_after_s": T}
 * with T measured from the barrier (a monotonic clock: MPI_Wtime is not
 * allowed after MPI_Finalize). With a fence every T >= SECONDS. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    double wait_s = argc > 1 ? atof(argv[1]) : 1.0;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now();
    if (rank == 0)
        usleep((useconds_t)(wait_s * 1e6));
    MPI_Finalize();
    printf("{\"rank\": %d, \"finalize_returned_after_s\": %.3f}\n", rank, now() - t0);
    fflush(stdout);
    return 0;
}
