/* tiny: MPI_Bcast and MPI_Allreduce of 4 MiB (MPI_INT), results checked exactly;
 * rank 0 prints the simulated time of each (max over ranks). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long bytes = argc > 1 ? atol(argv[1]) : 4L << 20;
    const char *which = argc > 2 ? argv[2] : "both";
    int n = (int)(bytes / sizeof(int)), bad = 0;
    int *buf = malloc(bytes), *out = malloc(bytes);
    double t, dt, mx;
    if (which[0] == 'b' || which[0] == 'c') {   /* both / bcast */
        for (int i = 0; i < n; i++) buf[i] = rank == 0 ? i * 3 + 1 : -1;
        PMPI_Barrier(MPI_COMM_WORLD);
        t = MPI_Wtime();
        MPI_Bcast(buf, n, MPI_INT, 0, MPI_COMM_WORLD);
        dt = MPI_Wtime() - t;
        for (int i = 0; i < n; i++) if (buf[i] != i * 3 + 1) { bad++; break; }
        PMPI_Reduce(&dt, &mx, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank == 0) printf("bcast %ld B: %.6f s\n", bytes, mx);
    }
    if (which[0] == 'b' || which[0] == 'a') {   /* both / allreduce */
        for (int i = 0; i < n; i++) buf[i] = rank + i;
        PMPI_Barrier(MPI_COMM_WORLD);
        t = MPI_Wtime();
        MPI_Allreduce(buf, out, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        dt = MPI_Wtime() - t;
        for (int i = 0; i < n; i++)
            if (out[i] != size * (size - 1) / 2 + size * i) { bad++; break; }
        PMPI_Reduce(&dt, &mx, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank == 0) printf("allreduce %ld B: %.6f s\n", bytes, mx);
    }
    int allbad;
    PMPI_Allreduce(&bad, &allbad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("check: %s (%d ranks wrong)\n", allbad ? "FAILED" : "ok", allbad);
    free(buf); free(out);
    MPI_Finalize();
    return allbad ? 3 : 0;
}
