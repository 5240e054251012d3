/* rulesplit: ranks that read different rules files (docs/tuning.md) still
 * agree, and get exact results.
 *
 * Usage: rulesplit FILE_A FILE_B
 * Before MPI_Init, each rank in the lower half of MPI_COMM_WORLD sets
 * WANMPI_RULES=FILE_A, each in the upper half FILE_B (libwanmpi reads its
 * settings in MPI_Init; the rank and size come from the launcher's
 * environment: OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/SIZE), as a file missing
 * or different on some nodes would. Then it runs broadcasts and allreduces of 8 B to 256 KiB on
 * MPI_COMM_WORLD and checks every result exactly. libwanmpi must notice the
 * difference and give every call to the MPI library (its statistics show it);
 * without that, the halves would run different algorithms and hang.
 * Prints "rulesplit: ok" on rank 0; exits 1 on a wrong result, 2 on bad usage. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

/* Sets WANMPI_RULES from the launcher's rank before MPI starts; 0 if the
 * launcher does not say. */
static int choose_rules(int argc, char **argv)
{
    const char *rank = getenv("OMPI_COMM_WORLD_RANK"), *size = getenv("OMPI_COMM_WORLD_SIZE");
    if (!rank || !size) {
        rank = getenv("PMI_RANK");
        size = getenv("PMI_SIZE");
    }
    if (!rank || !size || argc != 3)
        return 0;
    setenv("WANMPI_RULES", atoi(rank) < atoi(size) / 2 ? argv[1] : argv[2], 1);
    return 1;
}

int main(int argc, char **argv)
{
    int chosen = choose_rules(argc, argv);
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 3) {
        if (rank == 0)
            fprintf(stderr, "usage: rulesplit FILE_A FILE_B\n");
        MPI_Finalize();
        return 2;
    }
    if (!chosen) {
        if (rank == 0)
            fprintf(stderr, "rulesplit: the launcher gave no rank before MPI_Init (OMPI_COMM_WORLD_RANK, PMI_RANK)\n");
        MPI_Finalize();
        return 2;
    }
    int wrong = 0;
    for (long n = 2; n <= (1L << 18); n *= 8) {
        int *a = malloc((size_t)n * sizeof(int)), *b = malloc((size_t)n * sizeof(int));
        for (long i = 0; i < n; i++)
            a[i] = rank == 0 ? (int)(i * 2654435761u) : -1;
        MPI_Bcast(a, (int)n, MPI_INT, 0, MPI_COMM_WORLD);
        for (long i = 0; i < n; i++)
            wrong |= a[i] != (int)(i * 2654435761u);
        for (long i = 0; i < n; i++)
            a[i] = (int)(i % 1000) + rank;
        MPI_Allreduce(a, b, (int)n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        for (long i = 0; i < n; i++)
            wrong |= b[i] != (int)(i % 1000) * size + size * (size - 1) / 2;
        free(a);
        free(b);
    }
    int any = 0;
    PMPI_Allreduce(&wrong, &any, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
    if (rank == 0)
        printf(any ? "rulesplit: wrong results\n" : "rulesplit: ok\n");
    MPI_Finalize();
    return any ? 1 : 0;
}
