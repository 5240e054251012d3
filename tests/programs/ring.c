/* ring: point-to-point only, no collective calls.
 *
 * Usage: ring [--bytes N]
 * A token goes around the ring of ranks, each adding its rank; then every
 * rank sends N bytes (a pattern of its rank) to its right neighbour and
 * checks what arrives from its left. Rank 0 prints the token and a checksum
 * of all data it received; every rank prints one line in rank order through
 * rank 0. Output is deterministic, so runs with and without libwanmpi can be
 * compared byte for byte. A wrong payload exits with status 3.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    long bytes = 1 << 20;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i + 1 < argc; i += 2)
        if (!strcmp(argv[i], "--bytes"))
            bytes = atol(argv[i + 1]);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    long token = 0;
    if (rank == 0) {
        token = 0;
        MPI_Send(&token, 1, MPI_LONG, right, 0, MPI_COMM_WORLD);
        MPI_Recv(&token, 1, MPI_LONG, left, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(&token, 1, MPI_LONG, left, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        token += rank;
        MPI_Send(&token, 1, MPI_LONG, right, 0, MPI_COMM_WORLD);
    }
    unsigned char *out = malloc((size_t)bytes + 1), *in = malloc((size_t)bytes + 1);
    for (long i = 0; i < bytes; i++)
        out[i] = (unsigned char)(rank * 31 + i);
    MPI_Sendrecv(out, (int)bytes, MPI_BYTE, right, 1, in, (int)bytes, MPI_BYTE, left, 1, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    unsigned long sum = 0;
    int bad = 0;
    for (long i = 0; i < bytes; i++) {
        bad |= in[i] != (unsigned char)(left * 31 + i);
        sum = sum * 31 + in[i];
    }
    char line[128];
    snprintf(line, sizeof line, "rank %d of %d: from %d checksum %lx%s", rank, size, left, sum,
             bad ? " WRONG" : "");
    if (rank == 0) {
        printf("token %ld (expected %ld)\n%s\n", token, (long)size * (size - 1) / 2, line);
        for (int r = 1; r < size; r++) {
            MPI_Recv(line, sizeof line, MPI_CHAR, r, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            printf("%s\n", line);
        }
    } else {
        MPI_Send(line, sizeof line, MPI_CHAR, 0, 2, MPI_COMM_WORLD);
    }
    free(out);
    free(in);
    MPI_Finalize();
    return bad ? 3 : 0;
}
