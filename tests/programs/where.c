/* where: every rank reports where it runs, and the job checks a collective.
 *
 * Usage: where [--exit CODE] [--sleep SECONDS] [--bytes N] [--library 1]
 * Prints "rank R of N on HOST" (rank order, from rank 0), checks an allreduce
 * of every rank's number exactly, optionally exchanges N bytes between every
 * pair of ranks (alltoall, verified), then sleeps and exits with CODE from
 * rank 0 (all other ranks exit 0). A wrong result exits with status 3.
 * --library 1: rank 0 first prints "library: " and the first line of
 * MPI_Get_library_version (which MPI runs a program of the standard ABI).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int code = 0, rank, size, len, bad = 0, library = 0;
    double sleep_s = 0;
    long bytes = 0;
    MPI_Init(&argc, &argv);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--exit")) code = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--sleep")) sleep_s = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--bytes")) bytes = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--library")) library = atoi(argv[i + 1]);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char host[MPI_MAX_PROCESSOR_NAME];
    MPI_Get_processor_name(host, &len);
    char *all = malloc((size_t)size * MPI_MAX_PROCESSOR_NAME);
    MPI_Gather(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0,
               MPI_COMM_WORLD);
    long mine = 1000 + rank, sum = 0, expect = 0;
    MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    for (int r = 0; r < size; r++)
        expect += 1000 + r;
    bad |= sum != expect;
    if (bytes > 0) {
        unsigned char *out = malloc((size_t)bytes * size), *in = malloc((size_t)bytes * size);
        for (long i = 0; i < bytes * size; i++)
            out[i] = (unsigned char)(rank * 31 + (i / bytes) * 7 + i);
        MPI_Alltoall(out, (int)bytes, MPI_BYTE, in, (int)bytes, MPI_BYTE, MPI_COMM_WORLD);
        for (long i = 0; i < bytes * size; i++) {
            long from = i / bytes;
            if (in[i] != (unsigned char)(from * 31 + rank * 7 + (i % bytes) + rank * bytes))
                bad = 1;
        }
        free(out);
        free(in);
    }
    int any_bad = 0;
    MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
    if (rank == 0) {
        if (library) {
            char version[MPI_MAX_LIBRARY_VERSION_STRING];
            MPI_Get_library_version(version, &len);
            printf("library: %.*s\n", (int)strcspn(version, "\n"), version);
        }
        for (int r = 0; r < size; r++)
            printf("rank %d of %d on %s\n", r, size, all + (size_t)r * MPI_MAX_PROCESSOR_NAME);
        printf("allreduce %s\n", any_bad ? "WRONG" : "ok");
        fflush(stdout);
    }
    free(all);
    if (sleep_s > 0)
        usleep((useconds_t)(sleep_s * 1e6));
    MPI_Finalize();
    if (any_bad)
        return 3;
    return rank == 0 ? code : 0;
}
