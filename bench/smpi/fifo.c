/* fifo: rank 0 posts N Isends of CHUNK bytes to rank 1 at once; rank 1 reports
 * when the first, middle and last chunks completed (real TCP delivers in order). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, n = argc > 1 ? atoi(argv[1]) : 455, chunk = argc > 2 ? atoi(argv[2]) : 9216;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char *buf = malloc((size_t)n * chunk);
    MPI_Request *r = malloc(n * sizeof *r);
    int peer = argc > 3 ? atoi(argv[3]) : 1;
    double t0 = MPI_Wtime();
    if (rank == 0) {
        for (int i = 0; i < n; i++) MPI_Isend(buf + (size_t)i * chunk, chunk, MPI_BYTE, peer, i, MPI_COMM_WORLD, &r[i]);
        MPI_Waitall(n, r, MPI_STATUSES_IGNORE);
    } else if (rank == peer) {
        for (int i = 0; i < n; i++) MPI_Irecv(buf + (size_t)i * chunk, chunk, MPI_BYTE, 0, i, MPI_COMM_WORLD, &r[i]);
        for (int i = 0; i < n; i++) {
            MPI_Wait(&r[i], MPI_STATUS_IGNORE);
            if (i == 0 || i == n / 2 || i == n - 1) printf("chunk %d done at %.6f s\n", i, MPI_Wtime() - t0);
        }
    }
    MPI_Finalize();
    return 0;
}
